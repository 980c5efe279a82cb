"""The Python generator: the same plan, config and result as the Java one, on the DataStax Python driver, for
deployments whose `driver` is `python`.

Open loop from the calling thread: request i's queries are sent (`Session.execute_async`, one after the other,
no answer awaited) at start + offset_i / rate_scale (sleeping until `spin_us` before it, spinning the rest), its
latency measured from that intended time to its last query's answer (a request fails when any of its queries
fails: the plan's rule), the lag (actual send - intended) into its own histogram; each query outstanding holds a
permit of `max_in_flight` (a request of more queries holds them all), and a send short of permits waits (lag,
counted in `throttled`). The driver's callbacks record on its event loop's thread; the last of a request's
queries to answer completes it. A page holds 32768 rows (`PAGE_SIZE`): a query's answer is its first page.

One `Cluster`, one execution profile per arm (consistency, request timeout,
`ConstantSpeculativeExecutionPolicy(delay, max_executions - 1)`: the Python driver counts the extra executions),
every profile's load balancing policy a `HostFilterPolicy` that admits only the allow-list's endpoints (a node
outside it is IGNORED: no connection), token-aware over the local datacenter. Statements are prepared per arm and
marked idempotent; the plan's values are bound as the bytes they are. The client's CPU is `time.process_time` (the
driver's threads included), the scheduling thread's `time.thread_time`. With `block_s`, each arm's latencies are
also kept per block (`result.block_of`), at 2 significant digits. A set `stop` event ends the sending at once
(GeneratorFailed "cancelled").
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from base.errors import TailtuneError
from control.egress import Egress
from kinds.cassandra.replay.config import MAX_BLOCK_HISTOGRAMS, ConfigError, Endpoint, GeneratorConfig
from kinds.cassandra.replay.hdr import BLOCK_DIGITS, HIGHEST, Histogram
from kinds.cassandra.replay.plan import Plan
from kinds.cassandra.replay.result import (
    ArmResult,
    GeneratorAborted,
    GeneratorFailed,
    GeneratorResult,
    NodeSeen,
    block_of,
    contacted_outside,
    planned_blocks,
    planned_counts,
)

__all__ = ["PAGE_SIZE", "run_python"]

#: Rows per page (the Java generator's): above any query a plan can bind (an IN list of at most 64 KiB).
PAGE_SIZE = 32768


class _Arm:
    __slots__ = ("blocks", "errors", "kinds", "latency", "ok", "queries", "rows", "sent", "service", "timeouts")

    def __init__(self, blocks: int) -> None:
        self.sent = self.ok = self.errors = self.timeouts = self.queries = self.rows = 0
        self.kinds: dict[str, int] = {}
        self.latency = Histogram()
        self.service = Histogram()
        self.blocks = [Histogram(BLOCK_DIGITS) for _ in range(blocks)]


class _Pass:
    """One run's measurements; `complete` is called from the driver's event loop thread."""

    def __init__(self, arms: int, config: GeneratorConfig, blocks: int = 0) -> None:
        self.arms = [_Arm(blocks) for _ in range(arms)]
        self.lag = Histogram()
        self.lock = threading.Lock()
        self.config = config
        self.completed = 0
        self.failed = 0
        self.abort: str | None = None
        self.sent = 0
        self.queries = 0
        self.throttled = 0
        self.lost = 0

    def complete(self, a: int, block: int, intended: int, sent_at: int, error: BaseException | None,
                 rows: int = 0) -> None:
        from cassandra import OperationTimedOut, ReadTimeout, WriteTimeout

        done = time.perf_counter_ns()
        with self.lock:
            arm = self.arms[a]
            arm.rows += rows
            us = min(max(1, (done - intended) // 1000), HIGHEST)
            arm.latency.record(us)
            if block >= 0:
                arm.blocks[block].record(us)
            arm.service.record(min(max(1, (done - sent_at) // 1000), HIGHEST))
            self.completed += 1
            if error is None:
                arm.ok += 1
            else:
                self.failed += 1
                if isinstance(error, OperationTimedOut | ReadTimeout | WriteTimeout):
                    arm.timeouts += 1
                else:
                    arm.errors += 1
                kind = type(error).__name__
                if kind in arm.kinds or len(arm.kinds) < 16:
                    arm.kinds[kind] = arm.kinds.get(kind, 0) + 1
            c = self.config
            if self.abort is None and self.completed >= c.abort_after and self.failed > c.max_error_fraction * (
                self.completed
            ):
                self.abort = (
                    f"{self.failed} of {self.completed} requests failed or timed out, over the limit of "
                    f"{c.max_error_fraction}"
                )


class _Join:
    """One request's queries in flight: the last one to answer completes the request (`_send_all`)."""

    __slots__ = ("a", "block", "error", "intended", "left", "permits", "rows", "sent_at")

    def __init__(self, a: int, block: int, intended: int, sent_at: int, queries: int, permits: int) -> None:
        self.a, self.block, self.intended, self.sent_at = a, block, intended, sent_at
        self.left, self.permits, self.rows = queries, permits, 0
        self.error: BaseException | None = None


def _wait_until(deadline: int, spin_ns: int) -> None:
    while True:
        left = deadline - time.perf_counter_ns()
        if left <= 0:
            return
        if left > spin_ns:
            time.sleep((left - spin_ns) / 1e9)


def _send_all(session: Any, plan: Plan, config: GeneratorConfig,
              bound: list[Callable[[tuple[bytes | None, ...]], Any]], end: int,
              profiles: list[str], blocks: int = 0, stop: threading.Event | None = None
              ) -> tuple[_Pass, int, int, int]:
    """Requests [0, end) open loop from now: (pass, start ns, last send ns, end ns)."""
    run = _Pass(len(plan.arms), config, blocks)
    slots = threading.BoundedSemaphore(config.max_in_flight)
    spin_ns = config.spin_us * 1000
    ns_per_us = 1000.0 / config.rate_scale
    offsets, which, queries = plan.offsets_us, plan.arm, plan.queries
    lag = run.lag
    joins = threading.Lock()

    def answered(join: _Join, rows: int, error: BaseException | None) -> None:
        with joins:
            join.left -= 1
            join.rows += rows
            if error is not None and join.error is None:
                join.error = error
            last = join.left == 0
        if last:
            # recorded before the permits return: the end of a pass waits for every permit, then reads the records
            run.complete(join.a, join.block, join.intended, join.sent_at, join.error, join.rows)
            slots.release(join.permits)

    def finish(rows: Any, join: _Join) -> None:
        answered(join, len(rows) if isinstance(rows, list) else 0, None)

    def fail(error: BaseException, join: _Join) -> None:
        answered(join, 0, error)

    start = time.perf_counter_ns()
    for i in range(end):
        intended = start + int(offsets[i] * ns_per_us)
        _wait_until(intended, spin_ns)
        if run.abort is not None:
            break
        if stop is not None and stop.is_set():
            raise GeneratorFailed("cancelled", "the run was stopped")
        qs = queries[i]
        permits = min(len(qs), config.max_in_flight)
        taken = 0
        while taken < permits and slots.acquire(blocking=False):
            taken += 1
        if taken < permits:
            run.throttled += 1
            for _ in range(permits - taken):
                slots.acquire()
        sent_at = time.perf_counter_ns()
        with run.lock:
            lag.record(min(max(0, sent_at - intended) // 1000, HIGHEST))
        a = which[i]
        block = block_of(offsets[i], config) if blocks else -1
        run.arms[a].sent += 1
        run.arms[a].queries += len(qs)
        run.sent += 1
        run.queries += len(qs)
        join = _Join(a, block, intended, sent_at, len(qs), permits)
        bind = bound[a]
        for values in qs:
            try:
                future = session.execute_async(bind(values), execution_profile=profiles[a])
            except Exception as exc:
                fail(exc, join)
                continue
            future.add_callbacks(finish, fail, callback_args=(join,), errback_args=(join,))
    last_send = time.perf_counter_ns()
    waits = max(p.request_timeout_ms * p.speculative_max_executions for p in config.arms) / 1e3 + 10.0
    deadline = time.monotonic() + waits
    taken = 0
    while taken < config.max_in_flight and slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
        taken += 1
    run.lost = config.max_in_flight - taken
    return run, start, last_send, time.perf_counter_ns()


def _cluster(config: GeneratorConfig, password: str | None, ignored: set[str]) -> Any:
    from cassandra import ConsistencyLevel
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.connection import DefaultEndPoint
    from cassandra.policies import (
        ConstantSpeculativeExecutionPolicy,
        DCAwareRoundRobinPolicy,
        HostFilterPolicy,
        IdentityTranslator,
        TokenAwarePolicy,
    )

    allowed = config.allowed_keys()

    def admit(host: Any) -> bool:
        ep = host.endpoint
        try:
            key: tuple[str, int] | None = Endpoint(str(ep.address), int(ep.port)).key()
        except (ValueError, TypeError, AttributeError):
            key = None
        if key in allowed:
            return True
        ignored.add(f"{getattr(ep, 'address', '?')}:{getattr(ep, 'port', '?')}")
        return False

    def lbp(shuffle: bool | None = None) -> Any:
        extra = {} if shuffle is None else {"shuffle_replicas": shuffle}
        return HostFilterPolicy(TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=config.local_dc), **extra), admit)

    profiles = {EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=lbp())}
    for arm in config.arms:
        spec = None
        if arm.hedges:
            extra = arm.speculative_max_executions - 1
            spec = ConstantSpeculativeExecutionPolicy(arm.speculative_delay_ms / 1e3, extra)
        profiles[arm.name] = ExecutionProfile(
            load_balancing_policy=lbp(arm.shuffle_replicas),
            consistency_level=ConsistencyLevel.name_to_value[arm.consistency],
            request_timeout=arm.request_timeout_ms / 1e3,
            speculative_execution_policy=spec,
        )
    auth = PlainTextAuthProvider(config.username, password or "") if config.username is not None else None
    return Cluster(
        contact_points=[DefaultEndPoint(e.key()[0], e.port) for e in config.contact_points],
        port=config.contact_points[0].port,
        execution_profiles=profiles,
        address_translator=IdentityTranslator(),
        auth_provider=auth,
        connect_timeout=config.connect_timeout_ms / 1e3,
        control_connection_timeout=config.connect_timeout_ms / 1e3,
    )


def _binders(session: Any, plan: Plan, config: GeneratorConfig, end: int
             ) -> list[Callable[[tuple[bytes | None, ...]], Any]]:
    from cassandra.query import BoundStatement

    out: list[Callable[[tuple[bytes | None, ...]], Any]] = []
    for a, arm in enumerate(plan.arms):
        prepared = session.prepare(arm.statement)
        prepared.is_idempotent = True
        markers = len(prepared.column_metadata or ())
        for i in range(end):
            if plan.arm[i] != a:
                continue
            for values in plan.queries[i]:
                if len(values) != markers:
                    raise GeneratorFailed(
                        "bad_input",
                        f"plan request {i} gives {len(values)} values to arm {arm.name}'s statement, which "
                        f"takes {markers}",
                    )

        def bind(values: tuple[bytes | None, ...], prepared: Any = prepared) -> Any:
            bs = BoundStatement(prepared)
            bs.values = list(values)
            return bs

        out.append(bind)
    return out


def _distance_name(d: int) -> str:
    return {0: "LOCAL", 1: "REMOTE"}.get(d, "IGNORED")


def run_python(
    plan: Plan, config: GeneratorConfig, *, egress: Egress | None = None, password: str | None = None,
    stop: threading.Event | None = None,
) -> GeneratorResult:
    """Run `plan` under `config` on the Python driver (see the module doc). Raises as `jvm.run_java` does."""
    import cassandra

    config.check()
    plan.check()
    if [a.name for a in plan.arms] != [a.name for a in config.arms]:
        raise GeneratorFailed("bad_input", "the plan's arms and the config's are not the same names in one order")
    for arm in config.arms:
        if arm.slow_replica_avoidance:
            raise ConfigError(
                f"generator config: arm {arm.name!r}: the Python driver has no slow replica avoidance (a Java "
                "driver 4 setting)"
            )
    if egress is None:
        from base.settings import get_settings

        egress = Egress.of(get_settings())
    for e in config.allowed:
        if not egress.allows(e.key()[0]):
            raise ConfigError(f"generator config: {egress.host_problem(e.key()[0])}")
    planned = planned_counts(plan, config)
    end = sum(planned)
    blocks = planned_blocks(plan, config)
    if blocks * len(plan.arms) > MAX_BLOCK_HISTOGRAMS:
        raise ConfigError(f"generator config: {blocks} blocks of {len(plan.arms)} arms: more than "
                          f"{MAX_BLOCK_HISTOGRAMS} block histograms (longer blocks, or fewer arms)")
    warm = 0
    while warm < end and plan.offsets_us[warm] / 1e6 / config.rate_scale < config.warmup_s:
        warm += 1
    ignored: set[str] = set()
    cluster = _cluster(config, password, ignored)
    try:
        try:
            session = cluster.connect(config.keyspace)
        except Exception as exc:
            text = str(exc).replace(password, "***") if password else str(exc)
            raise GeneratorFailed("connect", f"{type(exc).__name__}: {text[:1000]}") from None
        session.default_fetch_size = PAGE_SIZE
        try:
            bound = _binders(session, plan, config, end)
        except GeneratorFailed:
            raise
        except Exception as exc:
            raise GeneratorFailed("prepare", f"{type(exc).__name__}: {str(exc)[:1000]}") from None
        profiles = [a.name for a in config.arms]
        if warm:
            _send_all(session, plan, config, bound, warm, profiles, stop=stop)
        gc_count0 = sum(s["collections"] for s in gc.get_stats())
        gc_time = [0.0]
        gc_start = [0.0]

        def on_gc(phase: str, _info: dict[str, int]) -> None:
            if phase == "start":
                gc_start[0] = time.perf_counter()
            else:
                gc_time[0] += time.perf_counter() - gc_start[0]

        gc.callbacks.append(on_gc)
        cpu0, sched0 = time.process_time(), time.thread_time()
        try:
            run, start, last_send, ended = _send_all(session, plan, config, bound, end, profiles, blocks, stop)
        finally:
            gc.callbacks.remove(on_gc)
        cpu, sched = time.process_time() - cpu0, time.thread_time() - sched0
        gc_count = sum(s["collections"] for s in gc.get_stats()) - gc_count0
        pools = session.get_pool_state()
        nodes = tuple(
            NodeSeen(
                f"{h.endpoint.address}:{h.endpoint.port}",
                str(h.datacenter),
                _distance_name(cluster.profile_manager.distance(h)),
                int(pools.get(h, {}).get("open_count", 0)),
            )
            for h in cluster.metadata.all_hosts()
        )
    finally:
        cluster.shutdown()
    with run.lock:
        arms = tuple(
            ArmResult(p.name, planned[a], s.sent, s.ok, s.errors, s.timeouts, dict(s.kinds), s.latency, s.service,
                      tuple(s.blocks), s.queries, s.rows)
            for a, (p, s) in enumerate(zip(plan.arms, run.arms, strict=True))
        )
    sending = (last_send - start) / 1e9
    result = GeneratorResult(
        generator=f"python-cassandra-driver-{cassandra.__version__}",
        status="ok" if run.abort is None else "aborted",
        reason=run.abort,
        arms=arms,
        lag=run.lag,
        sent=run.sent,
        queries=run.queries,
        throttled=run.throttled,
        lost=run.lost,
        wall_s=(ended - start) / 1e9,
        send_s=sending,
        intended_s=plan.offsets_us[end - 1] / 1e6 / config.rate_scale if end else 0.0,
        achieved_rate=run.sent / sending if sending > 0 else 0.0,
        cpu_s=cpu,
        scheduler_cpu_s=sched,
        threads_cpu_s=cpu,
        gc_count=gc_count,
        gc_ms=round(gc_time[0] * 1e3),
        nodes=nodes,
        ignored=tuple(sorted(ignored)),
        settings={
            "timer_tick_ms": float(config.timer_tick_ms),
            "rate_scale": config.rate_scale,
            "spin_us": float(config.spin_us),
            "max_in_flight": float(config.max_in_flight),
            "warmup_s": config.warmup_s,
            "block_s": config.block_s or 0.0,
        },
    )
    outside = contacted_outside(nodes, config)
    if outside:
        raise TailtuneError(f"the Python driver holds connections to {', '.join(outside)}, outside the allow-list")
    if result.status == "aborted":
        raise GeneratorAborted(result)
    return result
