"""What a generator reports: per arm its counts and histograms, the generator's lag, rate, CPU and the nodes it saw.

The Java generator prints it as one JSON object (one line on stdout); `parse_result` reads that line as hostile
input — its size capped, every field's type and range checked, each histogram decoded (`hdr.Histogram.decode`)
and its printed summary required to be the decoded histogram's own, the counts required to add up against the
plan, and no connection open to a node outside the allow-list — and refuses anything else with
`GeneratorOutputError`. The Python generator builds the same `GeneratorResult`; `to_json` writes either one as
the Java generator prints it.

```
{"generator": "java-driver-core-4.19.0" | "python-cassandra-driver-<version>",
 "status": "ok" | "aborted", "reason": text (aborted only),
 "arms": [{"name", "planned", "sent", "queries", "rows",  # requests; their queries sent; rows answered
           "ok", "errors", "timeouts", "error_kinds": {exception class: count},
           "latency": H, "service": H,                # in the plan's arm order
           "blocks": [B, ...]}, ...],                  # with block_s: one per block (`planned_blocks`), else []
 "lag": H, "sent", "queries", "throttled", "lost",
 "wall_s", "send_s", "intended_s", "achieved_rate",   # achieved_rate = sent / send_s
 "cpu_s", "cpu_us_per_request",                      # of the measured run (not the warm-up): the process's
 "scheduler_cpu_s", "threads_cpu_s",                  # the scheduling thread's; the Java threads' (the JIT
 "gc_count", "gc_ms",                                 # compiler's and the GC's excluded; Python: = cpu_s)
 "nodes": [{"endpoint": "ip:port", "datacenter", "distance": LOCAL|REMOTE|IGNORED, "open_connections"}],
 "ignored": ["ip:port", ...],                          # nodes the filter set IGNORED
 "settings": {"timer_tick_ms", "rate_scale", "spin_us", "max_in_flight", "warmup_s", "block_s"}}
H = {"unit": "us", "count", "min", "max", "mean", "p50", "p90", "p95", "p99", "p999", "encoded": base64}
B = {"count", "encoded": base64}                      # the block's latencies at 2 significant digits
```

`latency` is measured from the request's intended send time (the plan's offset, scaled) to its completion (its
last query's answer), for every completed request whatever its outcome (a timeout is the application's wait too);
`service` from the actual send. `ok`, `errors`, `timeouts` count requests (a request with a failed query is an
error or a timeout, as the first of its queries to fail); `queries` the queries of the requests sent (a finished
run: the plan's), `rows` the rows their answers held (each query's first page, which holds every row the plan's
queries can ask for). `lag` is actual send - intended send, every request. A block's histogram holds the
`latency` of the arm's requests intended in that block (`block_of`); an arm's blocks add up to its `latency`. A
failed error is a count by exception class name, never its message (which could carry what a server said).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from base.errors import TailtuneError
from kinds.cassandra.replay.config import GeneratorConfig
from kinds.cassandra.replay.hdr import BLOCK_DIGITS, HdrDecodeError, Histogram, encode
from kinds.cassandra.replay.plan import Plan

__all__ = [
    "ArmResult",
    "GeneratorAborted",
    "GeneratorFailed",
    "GeneratorOutputError",
    "GeneratorResult",
    "LagTooHigh",
    "NodeSeen",
    "block_of",
    "contacted_outside",
    "parse_result",
    "planned_blocks",
    "planned_counts",
    "planned_queries",
    "summarize",
]

#: Most bytes of output accepted from the JVM (a result with 64 arms is about 100 KiB).
MAX_OUTPUT: Final = 8 << 20
_DISTANCES: Final = frozenset({"LOCAL", "REMOTE", "IGNORED"})
_KIND: Final = re.compile(r"[A-Za-z0-9_$]{1,100}")
_SUMMARY: Final = ("count", "min", "max", "p50", "p90", "p95", "p99", "p999")
_PERCENTILES: Final = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


class GeneratorOutputError(TailtuneError):
    """The generator printed what is not a result this plan could give: nothing of it is used."""


class GeneratorFailed(TailtuneError):
    """The generator refused its input or could not run (its reason: `kind`, its message)."""

    def __init__(self, kind: str, message: str, *, status: int | None = None) -> None:
        super().__init__(f"the load generator failed ({kind}): {message}")
        self.kind = kind
        self.detail = message
        self.status = status


class GeneratorAborted(TailtuneError):
    """A run stopped because its errors and timeouts passed the config's fraction; `result` is what it measured."""

    def __init__(self, result: GeneratorResult) -> None:
        kinds = "; ".join(
            f"{a.name}: " + ", ".join(f"{k} ×{n}" for k, n in sorted(a.error_kinds.items()))
            for a in result.arms
            if a.error_kinds
        )
        super().__init__(f"the load generator stopped: {result.reason}" + (f" ({kinds})" if kinds else ""))
        self.result = result


class LagTooHigh(TailtuneError):
    """The generator could not send on time: its latencies are not a comparison of the configs."""


@dataclass(frozen=True)
class ArmResult:
    name: str
    planned: int
    sent: int
    ok: int
    errors: int
    timeouts: int
    error_kinds: Mapping[str, int]
    latency: Histogram
    service: Histogram
    #: The latencies per block of `block_s` (empty without blocks).
    blocks: tuple[Histogram, ...] = ()
    #: The queries of the requests sent, and the rows their answers held.
    queries: int = 0
    rows: int = 0


@dataclass(frozen=True)
class NodeSeen:
    endpoint: str
    datacenter: str
    distance: str
    open_connections: int


@dataclass(frozen=True)
class GeneratorResult:
    generator: str
    status: str
    reason: str | None
    arms: tuple[ArmResult, ...]
    lag: Histogram
    sent: int
    throttled: int
    lost: int
    wall_s: float
    send_s: float
    intended_s: float
    achieved_rate: float
    cpu_s: float
    scheduler_cpu_s: float
    threads_cpu_s: float
    gc_count: int
    gc_ms: int
    nodes: tuple[NodeSeen, ...]
    ignored: tuple[str, ...]
    settings: Mapping[str, float]
    #: The queries of the requests sent.
    queries: int = 0

    @property
    def cpu_us_per_request(self) -> float:
        """The generator process's CPU time (all its threads: the driver's I/O included) per request sent."""
        return self.cpu_s * 1e6 / self.sent if self.sent else 0.0

    def arm(self, name: str) -> ArmResult:
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(name)

    def require_lag(self, limit_p99_us: int) -> None:
        """LagTooHigh when the generator's lag p99 exceeds `limit_p99_us`: then its requests did not leave on
        time and the arms' latencies do not compare the configs (the generator measured itself)."""
        p99 = self.lag.value_at_percentile(99.0)
        if p99 > limit_p99_us:
            raise LagTooHigh(
                f"the load generator sent late: lag p99 {p99} µs over the limit of {limit_p99_us} µs "
                f"({self.generator}, {self.achieved_rate:.0f} requests/s, {self.cpu_us_per_request:.0f} µs of CPU "
                "per request): its latencies are not a comparison",
                hint="replay at a lower rate_scale, or give the generator cores of its own",
            )

    def to_json(self) -> dict[str, Any]:
        def hist(h: Histogram) -> dict[str, Any]:
            return {"unit": "us", **summarize(h), "encoded": encode(h)}

        out: dict[str, Any] = {"generator": self.generator, "status": self.status}
        if self.reason is not None:
            out["reason"] = self.reason
        out["arms"] = [
            {
                "name": a.name,
                "planned": a.planned,
                "sent": a.sent,
                "queries": a.queries,
                "rows": a.rows,
                "ok": a.ok,
                "errors": a.errors,
                "timeouts": a.timeouts,
                "error_kinds": dict(a.error_kinds),
                "latency": hist(a.latency),
                "service": hist(a.service),
                "blocks": [{"count": b.total, "encoded": encode(b)} for b in a.blocks],
            }
            for a in self.arms
        ]
        out["lag"] = hist(self.lag)
        for name in ("sent", "queries", "throttled", "lost", "wall_s", "send_s", "intended_s", "achieved_rate", "cpu_s",
                     "cpu_us_per_request", "scheduler_cpu_s", "threads_cpu_s", "gc_count", "gc_ms"):
            out[name] = getattr(self, name)
        out["nodes"] = [
            {"endpoint": n.endpoint, "datacenter": n.datacenter, "distance": n.distance,
             "open_connections": n.open_connections}
            for n in self.nodes
        ]
        out["ignored"] = list(self.ignored)
        out["settings"] = dict(self.settings)
        return out


def summarize(h: Histogram) -> dict[str, Any]:
    """A histogram's printed summary: count, min, max, mean, p50, p90, p95, p99, p999 (µs)."""
    out: dict[str, Any] = {"count": h.total, "min": h.min, "max": h.max, "mean": h.mean}
    for name, p in _PERCENTILES.items():
        out[name] = h.value_at_percentile(p)
    return out


def block_of(offset_us: int, config: GeneratorConfig) -> int:
    """The block of a request intended at `offset_us` of the plan (the Java generator's own arithmetic)."""
    assert config.block_s is not None
    return math.floor(offset_us / config.rate_scale / 1e6 / config.block_s)


def planned_blocks(plan: Plan, config: GeneratorConfig) -> int:
    """Blocks of a run of `plan` under `config`: the last request sent's block and those before it (0 without
    `block_s`)."""
    if config.block_s is None:
        return 0
    n = sum(planned_counts(plan, config))
    return block_of(plan.offsets_us[n - 1], config) + 1 if n else 0


def planned_counts(plan: Plan, config: GeneratorConfig) -> list[int]:
    """Requests per arm a run of `plan` under `config` sends: those intended before `duration_s` (scaled)."""
    out = [0] * len(plan.arms)
    limit = math.inf if config.duration_s is None else config.duration_s
    for offset, a in zip(plan.offsets_us, plan.arm, strict=True):
        if offset / 1e6 / config.rate_scale < limit:
            out[a] += 1
    return out


def planned_queries(plan: Plan, config: GeneratorConfig) -> list[int]:
    """Queries per arm a run of `plan` under `config` sends (those of `planned_counts`' requests)."""
    return plan.query_counts(sum(planned_counts(plan, config)))


# --- reading the JVM's line ----------------------------------------------------------------------------------


def _bad(message: str) -> GeneratorOutputError:
    return GeneratorOutputError(f"the load generator printed an unusable result: {message}")


def _int(obj: Mapping[str, Any], name: str, hi: int) -> int:
    v = obj.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
        raise _bad(f"{name!r} is not an integer from 0 to {hi}")
    return v


def _float(obj: Mapping[str, Any], name: str, hi: float = 1e12) -> float:
    v = obj.get(name)
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or not 0 <= v <= hi:
        raise _bad(f"{name!r} is not a number from 0 to {hi:g}")
    return float(v)


def _text(obj: Mapping[str, Any], name: str, longest: int) -> str:
    v = obj.get(name)
    if not isinstance(v, str) or not 0 < len(v) <= longest or not v.isprintable():
        raise _bad(f"{name!r} is not printable text of at most {longest} characters")
    return v


def _histogram(obj: Mapping[str, Any], name: str) -> Histogram:
    raw = obj.get(name)
    if not isinstance(raw, dict) or raw.get("unit") != "us":
        raise _bad(f"{name!r} is not a histogram in µs")
    try:
        h = Histogram.decode(raw.get("encoded"))  # type: ignore[arg-type]
    except HdrDecodeError as exc:
        raise _bad(f"{name!r}: {exc}") from None
    summary = summarize(h)
    for field in _SUMMARY:
        if raw.get(field) != summary[field] or isinstance(raw.get(field), bool):
            raise _bad(f"{name!r}: its {field} {raw.get(field)!r} is not its histogram's ({summary[field]})")
    mean = raw.get("mean")
    if not isinstance(mean, int | float) or not math.isclose(mean, summary["mean"], rel_tol=1e-9, abs_tol=1e-6):
        raise _bad(f"{name!r}: its mean {mean!r} is not its histogram's")
    return h


def _blocks(obj: Mapping[str, Any], plan_name: str, blocks: int) -> tuple[Histogram, ...]:
    raw = obj.get("blocks", [])
    if not isinstance(raw, list) or len(raw) != blocks:
        raise _bad(f"arm {plan_name}: not {blocks} blocks")
    out = []
    for b, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _bad(f"arm {plan_name}: block {b} is not an object")
        try:
            h = Histogram.decode(item.get("encoded"), BLOCK_DIGITS)  # type: ignore[arg-type]
        except HdrDecodeError as exc:
            raise _bad(f"arm {plan_name}: block {b}: {exc}") from None
        if item.get("count") != h.total or isinstance(item.get("count"), bool):
            raise _bad(f"arm {plan_name}: block {b}'s count is not its histogram's")
        out.append(h)
    return tuple(out)


def _arm(obj: Any, plan_name: str, planned: int, blocks: int = 0, queries: int = 0) -> ArmResult:
    if not isinstance(obj, dict):
        raise _bad("an arm is not an object")
    if obj.get("name") != plan_name:
        raise _bad(f"arm {obj.get('name')!r} where the plan has {plan_name!r}")
    got_planned = _int(obj, "planned", planned)
    if got_planned != planned:
        raise _bad(f"arm {plan_name}: planned {got_planned}, the plan gives it {planned}")
    sent = _int(obj, "sent", planned)
    sent_queries = _int(obj, "queries", queries)
    if sent_queries < sent:
        raise _bad(f"arm {plan_name}: {sent_queries} queries for {sent} requests")
    rows = _int(obj, "rows", 1 << 50)
    ok, errors, timeouts = (_int(obj, k, sent) for k in ("ok", "errors", "timeouts"))
    if ok + errors + timeouts > sent:
        raise _bad(f"arm {plan_name}: more outcomes than requests sent")
    kinds_raw = obj.get("error_kinds")
    if not isinstance(kinds_raw, dict) or len(kinds_raw) > 16:
        raise _bad(f"arm {plan_name}: error_kinds is not a map of at most 16 exception names")
    kinds: dict[str, int] = {}
    for k in kinds_raw:
        if not isinstance(k, str) or not _KIND.fullmatch(k):
            raise _bad(f"arm {plan_name}: an error kind that is not an exception class name")
        kinds[k] = _int(kinds_raw, k, errors + timeouts)
    latency = _histogram(obj, "latency")
    service = _histogram(obj, "service")
    if latency.total != ok + errors + timeouts or service.total != latency.total:
        raise _bad(f"arm {plan_name}: its histograms count {latency.total}, its outcomes {ok + errors + timeouts}")
    per_block = _blocks(obj, plan_name, blocks)
    if per_block and sum(h.total for h in per_block) != latency.total:
        raise _bad(f"arm {plan_name}: its blocks count {sum(h.total for h in per_block)}, its latency "
                   f"{latency.total}")
    return ArmResult(plan_name, planned, sent, ok, errors, timeouts, kinds, latency, service, per_block,
                     sent_queries, rows)


def _node(obj: Any) -> NodeSeen:
    if not isinstance(obj, dict):
        raise _bad("a node is not an object")
    distance = obj.get("distance")
    if distance not in _DISTANCES:
        raise _bad(f"a node's distance {distance!r}")
    return NodeSeen(_text(obj, "endpoint", 64), _text(obj, "datacenter", 256), str(distance),
                    _int(obj, "open_connections", 1 << 20))


def _endpoint_key(text: str) -> tuple[str, int] | None:
    import ipaddress

    host, _, port = text.rpartition(":")
    try:
        return str(ipaddress.ip_address(host.strip("[]"))), int(port)
    except ValueError:
        return None


def contacted_outside(nodes: tuple[NodeSeen, ...], config: GeneratorConfig) -> list[str]:
    """The endpoints of `nodes` with connections open that the config's allow-list does not hold."""
    allowed = config.allowed_keys()
    return [n.endpoint for n in nodes if n.open_connections and _endpoint_key(n.endpoint) not in allowed]


def parse_result(raw: bytes, plan: Plan, config: GeneratorConfig) -> GeneratorResult:
    """The result in the generator's stdout `raw` for `plan` run under `config` (see the module doc).
    GeneratorFailed when it printed its refusal or failure; GeneratorOutputError for anything not a result."""
    if len(raw) > MAX_OUTPUT:
        raise _bad(f"more than {MAX_OUTPUT} bytes")
    lines = raw.strip().splitlines()
    if len(lines) != 1:
        raise _bad(f"{len(lines)} lines, not one")
    try:
        obj = json.loads(lines[0])
    except (ValueError, RecursionError):
        raise _bad("not JSON") from None
    if not isinstance(obj, dict):
        raise _bad("not a JSON object")
    if "error" in obj:
        kind = obj.get("error")
        message = obj.get("message")
        if not isinstance(kind, str) or not isinstance(message, str):
            raise _bad("a failure without its kind and message")
        clean = "".join(ch if ch.isprintable() else "?" for ch in message[:1000])
        raise GeneratorFailed(kind[:40] if kind.isprintable() else "?", clean)
    status = obj.get("status")
    if status not in ("ok", "aborted"):
        raise _bad(f"status {status!r}")
    reason = _text(obj, "reason", 500) if status == "aborted" else None
    arms_raw = obj.get("arms")
    if not isinstance(arms_raw, list) or len(arms_raw) != len(plan.arms):
        raise _bad(f"not {len(plan.arms)} arms")
    planned = planned_counts(plan, config)
    queries = plan.query_counts(sum(planned))
    blocks = planned_blocks(plan, config)
    arms = tuple(_arm(a, p.name, n, blocks, q)
                 for a, p, n, q in zip(arms_raw, plan.arms, planned, queries, strict=True))
    sent = _int(obj, "sent", len(plan))
    if sent != sum(a.sent for a in arms):
        raise _bad("its total sent is not its arms' sum")
    sent_queries = _int(obj, "queries", sum(queries))
    if sent_queries != sum(a.queries for a in arms):
        raise _bad("its total queries is not its arms' sum")
    lost = _int(obj, "lost", sent)
    if status == "ok":
        if sent != sum(planned):
            raise _bad(f"a finished run sent {sent} of {sum(planned)} requests")
        if [a.queries for a in arms] != queries:
            raise _bad(f"a finished run sent {[a.queries for a in arms]} queries per arm, the plan {queries}")
        done = sum(a.ok + a.errors + a.timeouts for a in arms)
        if done + lost != sent:
            raise _bad(f"{done} outcomes and {lost} lost of {sent} requests sent")
    lag = _histogram(obj, "lag")
    if lag.total != sent:
        raise _bad(f"the lag histogram counts {lag.total} of {sent} requests sent")
    nodes_raw = obj.get("nodes")
    ignored_raw = obj.get("ignored")
    if not isinstance(nodes_raw, list) or len(nodes_raw) > 4096:
        raise _bad("nodes is not a list of at most 4096")
    if not isinstance(ignored_raw, list) or len(ignored_raw) > 4096:
        raise _bad("ignored is not a list of at most 4096")
    nodes = tuple(_node(n) for n in nodes_raw)
    ignored = tuple(_text({"e": e}, "e", 64) for e in ignored_raw)
    outside = contacted_outside(nodes, config)
    if outside:
        raise _bad(f"it holds connections to {', '.join(outside)}, outside the allow-list")
    settings_raw = obj.get("settings")
    if not isinstance(settings_raw, dict) or len(settings_raw) > 32:
        raise _bad("settings is not a small object")
    settings = {str(k)[:40]: _float(settings_raw, k, 1e7) for k in settings_raw}
    cpu_s = _float(obj, "cpu_s")
    per_request = _float(obj, "cpu_us_per_request")
    if not math.isclose(per_request, cpu_s * 1e6 / sent if sent else 0.0, rel_tol=1e-6, abs_tol=1e-6):
        raise _bad("its CPU per request is not its CPU time over its requests")
    if settings.get("timer_tick_ms") != config.timer_tick_ms:
        raise _bad(f"it ran with a timer tick of {settings.get('timer_tick_ms')} ms, not {config.timer_tick_ms}")
    return GeneratorResult(
        generator=_text(obj, "generator", 64),
        status=str(status),
        reason=reason,
        arms=arms,
        lag=lag,
        sent=sent,
        throttled=_int(obj, "throttled", sent),
        lost=lost,
        wall_s=_float(obj, "wall_s"),
        send_s=_float(obj, "send_s"),
        intended_s=_float(obj, "intended_s"),
        achieved_rate=_float(obj, "achieved_rate"),
        cpu_s=cpu_s,
        scheduler_cpu_s=_float(obj, "scheduler_cpu_s"),
        threads_cpu_s=_float(obj, "threads_cpu_s"),
        gc_count=_int(obj, "gc_count", 1 << 40),
        gc_ms=_int(obj, "gc_ms", 1 << 40),
        nodes=nodes,
        ignored=ignored,
        settings=settings,
        queries=sent_queries,
    )
