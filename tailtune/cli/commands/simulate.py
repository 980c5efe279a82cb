"""`tailtune simulate`: replay a dataset, trace file or generated profile under one scheduling policy.

The command only reads options: the deployment, the policy and the replay live in `simulation`, the
same code the tuner replays with (so a recommendation's policy and params, given here verbatim with its
deployment and seeds, reproduce its figures).

The policy names the deployment kind (`simulation.kinds.kind_of_policy`: the kind listing it, else the first
kind, whose own check names the problem); that kind's `SimulateKind` (its `ModelKind.simulate`) checks what it
reads, replays and prints. Every field of a kind's deployment class has the option of its name here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    import kvsim

    from simulation import CassandraDeployment, MemcachedDeployment, ParamValue, WorkloadSource
    from simulation.kinds import ModelKind

__all__ = [
    "CASSANDRA",
    "MEMCACHED",
    "SimulateKind",
    "Simulation",
    "cassandra_deployment",
    "deployment_default",
    "memcached_deployment",
    "register",
    "simulate_kind",
]

#: Deployment fields of the Cassandra model only: a memcached policy refuses them when given a value other than
#: their default (or `--size-aware-cost`), in this order.
_CASSANDRA_ONLY = (
    "server_speeds", "slow_servers", "slowdown_interval_ms", "write_fraction", "writes_from_op", "client_model",
    "ring", "stall_schedule", "client_rtt_ms", "request_demand_us",
)


@dataclass(frozen=True)
class Simulation:
    """One `tailtune simulate` as a kind's run sees it: the kind, every option of the command by its parameter's
    name (`options`: None where not given), the policy and its `--param`s, the seed, `--json`, and the source
    (`source()` makes it: a run calls it after what it checks before the trace is read)."""

    kind: ModelKind
    options: Mapping[str, Any]
    policy: str
    params: dict[str, ParamValue]
    seed: int
    as_json: bool
    source: Callable[[], WorkloadSource]


@dataclass(frozen=True)
class SimulateKind:
    """`tailtune simulate` for one deployment kind (a kind's `simulate`, `simulation.kinds`): `policy_help()` is
    the kind's part of the `--policy` help (`memcached: batching, chisel`); `run(simulation)` checks the policy,
    its parameters and the kind's options (a BadInputError naming the option), replays and prints the result
    (`--json`: one JSON object on stdout)."""

    policy_help: Callable[[], str]
    run: Callable[[Simulation], None]


def simulate_kind(kind: ModelKind) -> SimulateKind:
    """The `SimulateKind` that `kind.simulate` names."""
    from simulation.kinds import resolve_ref

    found = resolve_ref(kind.simulate)
    if not isinstance(found, SimulateKind):
        raise TypeError(f"deployment kind {kind.name!r}: {kind.simulate} is not a SimulateKind")
    return found


def _field_default(cls: type[Any], name: str) -> Any:
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def deployment_default(name: str, kind: str | None = None) -> Any:
    """The default of field `name` of the `kind` deployment class (default: the first registered kind's), what an
    option left out means."""
    from simulation.kinds import kind_names, model_kind

    return _field_default(model_kind(kind if kind is not None else kind_names()[0]).deployment_class(), name)


def _default(name: str, text: str, kind: str | None = None) -> str:
    """The help of the option of deployment field `name`: `text` and the field's default, read from the
    deployment class (the option itself defaults to None, which leaves the field at that default)."""
    value = deployment_default(name, kind)
    shown = ("on" if value else "off") if isinstance(value, bool) else value
    return f"{text} (default: {shown})."


def _servers_help() -> str:
    c, m = deployment_default("servers"), deployment_default("servers", "memcached")
    return f"Servers (default: {c} for Cassandra, {m} for memcached)."


def _given(cls: type[Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of deployment class `cls` set on the command line: every field has the option of its name (the
    flag `--<name with dashes>`; `use_sizes`: `--sizes/--no-sizes`), None when it was not given."""
    from dataclasses import fields

    out: dict[str, Any] = {}
    for f in fields(cls):
        value = options[f.name]
        if value is not None:
            out[f.name] = (_speeds(value) if f.name == "server_speeds" else _ring(value) if f.name == "ring"
                           else _stall_schedule(value)[0] if f.name == "stall_schedule"
                           else _client_rtt(value) if f.name == "client_rtt_ms" else value)
    return out


def cassandra_deployment(options: Mapping[str, Any]) -> CassandraDeployment:
    """The Cassandra deployment of `simulate`'s parsed options: the given ones, the class's defaults for the rest."""
    from simulation import CassandraDeployment

    given = _given(CassandraDeployment, options)
    if given.get("ring") is not None and ("servers" not in given or "replication" not in given):
        from simulation.cassandra import ring_size

        ring_servers, ring_rf = ring_size(given["ring"], where="--ring")  # the local datacenter's
        given.setdefault("servers", ring_servers)
        given.setdefault("replication", ring_rf)
    dep = CassandraDeployment(**given)
    if dep.stall_schedule is not None:  # checked against the servers here, to name the file's line
        from base.errors import BadInputError
        from simulation.stall_schedule import check_lines

        try:
            dep.server_model()
        except BadInputError as exc:
            _, lines, where = _stall_schedule(options["stall_schedule"])
            raise check_lines(exc, where, lines) from None
    return dep


def memcached_deployment(options: Mapping[str, Any]) -> MemcachedDeployment:
    """The memcached deployment of `simulate`'s parsed options: the given ones, the class's defaults for the rest."""
    from simulation import MemcachedDeployment

    return MemcachedDeployment(**_given(MemcachedDeployment, options))


def _refuse_cassandra_only(options: Mapping[str, Any], policy: str) -> None:
    from base.errors import BadInputError
    from simulation import CassandraDeployment

    given = [n for n in _CASSANDRA_ONLY
             if options[n] is not None and options[n] != _field_default(CassandraDeployment, n)]
    if options["size_aware_cost"]:
        given.append("size_aware_cost")
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise BadInputError.single(
            flag, f"not supported for the memcached policy {policy} (Cassandra model only)", field=given[0]
        )


def _policy_help() -> str:
    """Every kind's part (`SimulateKind.policy_help`), in `KINDS` order."""
    from simulation.kinds import KINDS

    return "; ".join(simulate_kind(k).policy_help() for k in KINDS.values()) + "."


def _cassandra_policy_help() -> str:
    from simulation.policies import REPLICA_POLICY, SELECTOR_POLICIES
    from simulation.registry import cassandra_queue_policies

    return (
        f"Cassandra: {', '.join(cassandra_queue_policies())}; {', '.join(SELECTOR_POLICIES)} (fifo + that "
        f"replica selector; --param queue=NAME for another queue), {REPLICA_POLICY} (--param replica=NAME)"
    )


def _memcached_policy_help() -> str:
    from simulation.memcached import MEMCACHED_POLICIES

    return f"memcached: {', '.join(MEMCACHED_POLICIES)}"


def _replica_help() -> str:
    from simulation.registry import replica_selectors

    names = replica_selectors()
    return ", ".join(f"{n} (default)" if n == "round-robin" else n for n in names) + "."


def _speeds(text: str | None) -> tuple[float, ...] | None:
    from base.errors import BadInputError

    if text is None:
        return None
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise BadInputError.single(
            "--server-speeds", f"{text!r} is not a comma-separated list of numbers", field="server_speeds"
        ) from None


def _ring(text: str | None) -> dict[str, Any] | None:
    """`--ring`: the JSON of a ring, or the path of a file holding it."""
    import json

    from base.errors import BadInputError

    if text is None:
        return None
    where = "--ring"
    try:
        if not text.lstrip().startswith("{"):
            where = text
            text = Path(text).read_text(encoding="utf-8")
        doc = json.loads(text)
    except OSError as exc:
        raise BadInputError.single("--ring", f"cannot read {where}: {exc.strerror or exc}", field="ring") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError.single(where, f"not JSON ({exc})", field="ring") from None
    if not isinstance(doc, dict):
        raise BadInputError.single(where, "a ring is a JSON object", field="ring")
    return doc


def _client_rtt(text: str) -> tuple[float, ...]:
    """`--client-rtt-ms`: the round trip's quantiles in ms (p0, ..., p100), comma-separated, or the path of a file
    holding them (separated by commas, spaces or lines; a JSON list too)."""
    import re

    from base.errors import BadInputError
    from simulation.cassandra import client_rtt

    where, body = "--client-rtt-ms", text
    try:
        is_file = Path(text).is_file()
    except (OSError, ValueError):  # a name the OS refuses (too long, a NUL byte): not a file
        is_file = False
    # a file of them; else a list (numbers, or any text with a comma: each part is checked); else a path
    if is_file or not (re.fullmatch(r"[\s,\[\]0-9eE.+\-]*", text) or "," in text):
        where = text if len(text) <= 200 else text[:200] + "…"
        try:
            body = Path(text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BadInputError.single(
                "--client-rtt-ms", f"cannot read {where}: {getattr(exc, 'strerror', None) or exc}",
                field="client_rtt_ms",
            ) from None
    values: list[float] = []
    for part in re.split(r"[\s,\[\]]+", body):
        if not part:
            continue
        try:
            values.append(float(part))
        except ValueError:
            shown = part if len(part) <= 40 else part[:40] + "…"
            raise BadInputError.single(
                where, f"{shown!r} is not a number of ms (give quantiles p0, ..., p100, comma-separated, "
                "or a file of them)", field="client_rtt_ms",
            ) from None
    return client_rtt(values, where)


def _stall_schedule(text: str) -> tuple[tuple[tuple[int, float, float], ...], list[int], str]:
    """`--stall-schedule`: a CSV file, or the CSV itself (text starting with its header): the stalls, the line of
    each and where they were read."""
    from simulation import stall_schedule

    if text.lstrip().startswith(",".join(stall_schedule.HEADER)):
        return (*stall_schedule.parse_csv(text, "--stall-schedule"), "--stall-schedule")
    return (*stall_schedule.read(text), text)


def _run_memcached(
    source: WorkloadSource, deployment: MemcachedDeployment, policy: str, params: dict[str, ParamValue], seed: int,
    as_json: bool,
) -> None:
    from base.console import err_console, out_console, print_json
    from simulation import memcached

    trace = memcached.prepare(source.load(), source=source.where)
    summary = memcached.replay(trace, deployment, policy, params, seed).to_json()
    if not summary["steady_state"]:
        err_console.print("[yellow]warning:[/] the memcached replay is not in steady state", soft_wrap=True)
    if as_json:
        print_json(summary)
        return
    out_console.print(
        f"[bold]{policy}[/] {summary['params']}: p50 {summary['p50_ms']:.3f} ms, "
        f"p95 {summary['p95_ms']:.3f} ms, p99 {summary['p99_ms']:.3f} ms, "
        f"mean {summary['mean_ms']:.3f} ms ({summary['requests']} requests, {summary['ops']} queries)"
    )


def _warn(res: kvsim.Result) -> None:
    from base.console import err_console

    r = res
    if not r.steady_state:
        err_console.print(
            "[yellow]warning:[/] not in steady state (busiest server offered "
            f"{r.server_load_max:.2f} of its capacity, second-half/first-half mean latency {r.half_ratio:.2f}): "
            "tail percentiles grow with the run length and compare nothing.",
            soft_wrap=True,
        )
    if res.held is not None and res.held.get("unstable"):
        err_console.print(
            f"[yellow]warning:[/] {res.replica} keeps holding more opsets at the clients "
            f"({res.held['at_half']} at the middle arrival, {res.held['at_end']} at the last): "
            "the selector cannot keep up with these open-loop arrivals.",
            soft_wrap=True,
        )


def _print_table(res: kvsim.Result) -> None:
    from rich.table import Table

    from base.console import out_console

    r = res
    t = Table(title=f"{res.policy_label or r.policy} {res.replica_params if res.policy_label else r.params or ''}")
    for col in ("p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "mean ms", "util", "max srv load", "steady"):
        t.add_column(col, justify="right")
    t.add_row(
        *(f"{x:.3f}" for x in (r.p50_ms, r.p95_ms, r.p99_ms, r.p999_ms, r.mean_ms)),
        f"{r.utilization:.2f}", f"{r.server_load_max:.2f}", "yes" if r.steady_state else "NO",
    )
    out_console.print(t)
    out_console.print(f"replica {res.replica} {res.replica_params or ''}".rstrip())
    for name, c in (res.classes or {}).items():
        if c.get("requests"):
            out_console.print(
                f"  {name}: {c['requests']} requests, p50 {c['p50_ms']:.3f} ms, "
                f"p99 {c['p99_ms']:.3f} ms, p99.9 {c['p999_ms']:.3f} ms"
            )
    if res.closed is not None:
        out_console.print(
            f"closed loop: {res.closed['threads']} threads, think {res.closed['think_ms']} ms "
            f"({res.closed['think_dist']}): {res.closed['throughput_rps']:.0f} requests/s"
        )
    if res.writes is not None:
        out_console.print(f"writes: {res.writes['ops']} ops, {res.writes['copies']} replica copies")
    if res.timeouts is not None and res.timeouts["requests"]:
        out_console.print(
            f"timeouts: {res.timeouts['requests']} requests answered with a read timeout, "
            f"{res.timeouts['dropped_reads']} expired reads dropped by their replicas"
        )
    out_console.print(
        f"{r.requests} requests, {r.ops} ops, {r.events} events in {r.sim_wall_s:.3f} s "
        f"({r.events_per_s / 1e6:.1f} M events/s)"
    )


def _coordinator_json(out: dict[str, Any], params: dict[str, ParamValue], policy: str) -> None:
    """`stock`, or another policy given coordinator knobs: `ops` counts the extra (speculative) reads too
    (`workload_ops` = the trace's own); `speculative_retry` in Cassandra's normalised text (unset: `99p` for
    `stock`, `NEVER` for the others)."""
    from simulation.stock import (
        DEFAULT_SPECULATIVE_RETRY,
        PATCHED_SPECULATIVE_RETRY,
        STOCK_POLICY,
        parse_speculative_retry,
    )

    extra = int((out.get("copies") or {}).get("ops", 0))
    out["workload_ops"] = out["ops"]
    out["extra_reads"] = extra
    out["ops"] = out["ops"] + extra
    default = DEFAULT_SPECULATIVE_RETRY if policy == STOCK_POLICY else PATCHED_SPECULATIVE_RETRY
    out["speculative_retry"] = parse_speculative_retry(
        str(params.get("speculative_retry", default)), where="--param"
    ).render()


def _run_cassandra(
    source: WorkloadSource, deployment: CassandraDeployment, policy: str, params: dict[str, ParamValue],
    replica_params: dict[str, ParamValue], seed: int, as_json: bool,
) -> None:
    from base.console import print_json
    from simulation import cassandra, resolve
    from simulation.stock import COORDINATOR_KNOBS

    resolved = resolve(policy, params, replica_params={k: float(v) for k, v in replica_params.items()},
                       where="--param", names_where="--policy")
    trace = cassandra.prepare(source.load(), deployment, source=source.where)
    res = cassandra.replay(trace, deployment, resolved, seed)
    _warn(res)
    if as_json:
        out: dict[str, Any] = res.to_json()
        out["size_aware_cost"] = resolved.size_aware_cost
        if resolved.policy == "stock" or any(k in COORDINATOR_KNOBS for k in params):
            _coordinator_json(out, params, resolved.policy)
        print_json(out)
    else:
        _print_table(res)


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate(
        ctx: typer.Context,
        policy: Annotated[str, typer.Option("--policy", help=_policy_help())],
        dataset: Annotated[str | None, typer.Option("--dataset", help="Dataset id or name.")] = None,
        trace: Annotated[Path | None, typer.Option("--trace", help="Canonical trace (Parquet or CSV).")] = None,
        profile: Annotated[str | None, typer.Option("--profile", help="Generator profile.")] = None,
        requests: Annotated[int | None, typer.Option("--requests", help="Requests to generate.")] = None,
        trace_seed: Annotated[
            int | None, typer.Option("--trace-seed", help="Generator seed of --profile (default: --seed).")
        ] = None,
        param: Annotated[
            list[str] | None,
            typer.Option(
                "--param",
                help="Policy parameter NAME=VALUE (names for replica= and queue=); the stock Cassandra knobs "
                "(speculative_retry=99p, driver=python, ...) on stock and on the patched policies "
                "(docs/stock-cassandra.md).",
            ),
        ] = None,
        servers: Annotated[int | None, typer.Option("--servers", help=_servers_help())] = None,
        slots: Annotated[
            int | None, typer.Option("--slots", help=_default("slots", "Service slots per server"))
        ] = None,
        replication: Annotated[
            int | None, typer.Option("--replication", help=_default("replication", "Replicas of each key"))
        ] = None,
        vnodes: Annotated[
            int | None, typer.Option("--vnodes", help=_default("vnodes", "Tokens per server, ≤1: evenly spaced"))
        ] = None,
        service_rate: Annotated[
            float | None, typer.Option("--service-rate", help=_default("service_rate", "ops/s per slot"))
        ] = None,
        net_latency_us: Annotated[
            float | None,
            typer.Option("--net-latency-us", help=_default("net_latency_us", "One-way network latency, µs")),
        ] = None,
        client_rtt_ms: Annotated[
            str | None,
            typer.Option(
                "--client-rtt-ms",
                help="The client ↔ coordinator round trip as a measured distribution: its quantiles in ms at equally "
                "spaced probabilities (p0, ..., p100), comma-separated, or a file of them; each request meets one "
                "draw in place of two --net-latency-us hops (docs/model.md § Calibration) (default: none).",
            ),
        ] = None,
        clients: Annotated[int | None, typer.Option("--clients", help=_default("clients", "Clients"))] = None,
        load: Annotated[
            float | None, typer.Option("--load", help=_default("load", "Fraction of total service capacity"))
        ] = None,
        ring: Annotated[
            str | None,
            typer.Option(
                "--ring",
                help="The real Cassandra ring: a JSON file, or the JSON itself (nodes' tokens, datacenters and "
                "racks, the keyspace's strategy, the local datacenter; docs/simulator.md § Cluster). Its local "
                "datacenter's nodes are the servers, its local RF the replication (default: none, evenly "
                "spaced tokens).",
            ),
        ] = None,
        seed: Annotated[int, typer.Option("--seed", help="Replay seed (arrivals, demands, choices).")] = 0,
        warmup: Annotated[
            float | None, typer.Option("--warmup", help=_default("warmup", "Fraction of first requests dropped"))
        ] = None,
        use_timestamps: Annotated[
            bool | None,
            typer.Option(
                "--use-timestamps",
                help=_default("use_timestamps", "Trace timestamps scaled to --load instead of Poisson"),
            ),
        ] = None,
        trace_rate: Annotated[
            bool,
            typer.Option("--trace-rate", help="With --use-timestamps: the timestamps as they are (no --load)."),
        ] = False,
        worker_threads: Annotated[
            int | None,
            typer.Option(
                "--worker-threads", help=_default("worker_threads", "memcached: worker threads per server", "memcached")
            ),
        ] = None,
        query_threads: Annotated[
            int | None, typer.Option("--query-threads", help="memcached: client query threads (default: rule).")
        ] = None,
        client_overhead_us: Annotated[
            float | None,
            typer.Option(
                "--client-overhead-us",
                help=_default("client_overhead_us", "memcached: client overhead per query", "memcached"),
            ),
        ] = None,
        setup_us: Annotated[
            float | None,
            typer.Option("--setup-us", help=_default("setup_us", "memcached: per-query setup cost", "memcached")),
        ] = None,
        service_cv: Annotated[
            float | None,
            typer.Option(
                "--service-cv",
                help=_default("service_cv", "memcached: service-time coefficient of variation", "memcached"),
            ),
        ] = None,
        client_cpus: Annotated[
            int | None,
            typer.Option("--client-cpus", help=_default(
                "client_cpus",
                "memcached: CPUs per client process serving the query threads' client work in turn (1: CPython, "
                "the shipped client; 0: unbounded, every query thread in parallel)",
                "memcached",
            )),
        ] = None,
        client_processes: Annotated[
            int | None,
            typer.Option("--client-processes", help=_default(
                "client_processes", "memcached: client processes the requests are dealt to round-robin", "memcached"
            )),
        ] = None,
        client_key_us: Annotated[
            float | None,
            typer.Option("--client-key-us", help=_default(
                "client_key_us", "Client cost per key, µs — Cassandra: the driver's and the coordinator's work on "
                "each partition of a request beyond the first, added to its latency (docs/model.md § Calibration); "
                "memcached: client CPU work per key of a response",
            )),
        ] = None,
        request_demand_us: Annotated[
            float | None,
            typer.Option("--request-demand-us", help=_default(
                "request_demand_us", "Cassandra: the node's work a request costs once beyond its partition reads, "
                "µs of a slot's time, added to the mean demand of its first partition read (docs/model.md "
                "§ Capacity)",
            )),
        ] = None,
        inter_arrival_us: Annotated[
            float | None,
            typer.Option("--inter-arrival-us", help="memcached: Poisson arrivals with this mean gap."),
        ] = None,
        pool: Annotated[
            str | None,
            typer.Option("--pool", help=_default(
                "pool",
                "memcached: replica (every server holds every key) or sharded (keys hashed to servers as "
                "tailtune_client / pymemcache HashClient; needs the trace's keys)",
                "memcached",
            )),
        ] = None,
        server_addresses: Annotated[
            str | None,
            typer.Option("--server-addresses", help="memcached sharded pool: the servers' host:port names the "
                         "client hashes, comma-separated (default 127.0.0.1:11211, 127.0.0.1:11212, …)."),
        ] = None,
        replica: Annotated[
            str | None,
            typer.Option(
                "--replica",
                help="Replica selection (= --param replica=NAME): " + _replica_help(),
            ),
        ] = None,
        replica_param: Annotated[
            list[str] | None, typer.Option("--replica-param", help="Replica selection parameter NAME=VALUE.")
        ] = None,
        use_sizes: Annotated[
            bool | None,
            typer.Option(
                "--sizes/--no-sizes", help=_default("use_sizes", "Demand from value_size when the sizes differ")
            ),
        ] = None,
        demand_dist: Annotated[
            str | None,
            typer.Option("--demand-dist", help=_default("demand_dist", "exponential, deterministic or lognormal")),
        ] = None,
        demand_sigma: Annotated[
            float | None, typer.Option("--demand-sigma", help=_default("demand_sigma", "lognormal shape σ"))
        ] = None,
        t0_us: Annotated[
            float | None, typer.Option("--t0-us", help="Per-op fixed demand (default: 512 KiB = 32× 1 KiB).")
        ] = None,
        bandwidth_mbps: Annotated[
            float | None, typer.Option("--bandwidth-mbps", help="Bytes/µs served per slot (MB/s).")
        ] = None,
        thr_l_bytes: Annotated[
            float | None, typer.Option("--thr-l-bytes", help="Large-value threshold (default: derived).")
        ] = None,
        server_speeds: Annotated[
            str | None,
            typer.Option("--server-speeds", help="Speed factor per server, comma-separated (service = demand/speed)."),
        ] = None,
        slow_servers: Annotated[
            int | None, typer.Option("--slow-servers", help="N servers --slow-factor times slower, spread evenly.")
        ] = None,
        slow_factor: Annotated[
            float | None,
            typer.Option("--slow-factor", help=_default("slow_factor", "Service-time multiplier of --slow-servers")),
        ] = None,
        slowdown_interval_ms: Annotated[
            float | None,
            typer.Option("--slowdown-interval-ms", help="Time-varying slowdowns: a new random subset every interval."),
        ] = None,
        slowdown_fraction: Annotated[
            float | None,
            typer.Option(
                "--slowdown-fraction", help=_default("slowdown_fraction", "Fraction of servers slowed per interval")
            ),
        ] = None,
        slowdown_factor: Annotated[
            float | None,
            typer.Option("--slowdown-factor", help=_default("slowdown_factor", "Service-time multiplier while slowed")),
        ] = None,
        slowdown_duration_ms: Annotated[
            float | None, typer.Option("--slowdown-duration-ms", help="Slowdown length (default: the interval).")
        ] = None,
        stall_rate: Annotated[
            float | None,
            typer.Option("--stall-rate", help="Stop-the-world stalls per second per server (GC pauses; default none)."),
        ] = None,
        stall_ms: Annotated[
            float | None, typer.Option("--stall-ms", help=_default("stall_ms", "Length of each stall, ms"))
        ] = None,
        stall_schedule: Annotated[
            str | None,
            typer.Option(
                "--stall-schedule",
                help="Stalls on a schedule instead of at random: a CSV file (or the CSV itself) with the header "
                "server,start_ms,end_ms, one row per stall, times on the replay's clock (0 = the first request's "
                "arrival with the trace's timestamps; docs/simulator.md § Stalls) (default: none).",
            ),
        ] = None,
        write_fraction: Annotated[
            float | None,
            typer.Option("--write-fraction", help="Each op is a write with this probability (default: reads only)."),
        ] = None,
        writes_from_op: Annotated[
            bool | None,
            typer.Option(
                "--writes-from-op",
                help=_default("writes_from_op", "Writes = the dataset's op column (set, update, ...)"),
            ),
        ] = None,
        client_model: Annotated[
            str | None,
            typer.Option(
                "--client-model", help=_default("client_model", "open (Poisson at --load) or closed (--threads)")
            ),
        ] = None,
        threads: Annotated[
            int | None, typer.Option("--threads", help=_default("threads", "Closed loop: client threads"))
        ] = None,
        think_ms: Annotated[
            float | None, typer.Option("--think-ms", help=_default("think_ms", "Closed loop: mean think time, ms"))
        ] = None,
        think_dist: Annotated[
            str | None,
            typer.Option(
                "--think-dist", help=_default("think_dist", "Closed loop: exponential or fixed think time")
            ),
        ] = None,
        size_aware_cost: Annotated[
            bool,
            typer.Option(
                "--size-aware-cost",
                help="= --param size_aware_cost=1: opset cost = Σ op demand from value sizes (Rein as published).",
            ),
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Replay a workload on the simulated cluster and report latency percentiles."""
        from simulation import WorkloadSource, parse_params
        from simulation.kinds import kind_names, kind_of_policy, model_kind

        def source() -> WorkloadSource:
            return WorkloadSource(
                dataset=dataset, trace=str(trace) if trace is not None else None, profile=profile,
                requests=requests, trace_seed=seed if trace_seed is None else trace_seed,
            )

        params = parse_params(param or [])
        kind = kind_of_policy(policy) or model_kind(kind_names()[0])
        simulate_kind(kind).run(Simulation(kind, ctx.params, policy, params, seed, as_json, source))


def _simulate_memcached(sim: Simulation) -> None:
    """memcached: the policy and its parameters checked before the trace is read; the Cassandra model's options
    refused."""
    from simulation.config_check import check_params

    check_params(sim.kind.name, sim.policy, sim.params)  # before the trace is read
    source = sim.source()
    _refuse_cassandra_only(sim.options, sim.policy)
    _run_memcached(source, memcached_deployment(sim.options), sim.policy, sim.params, sim.seed, sim.as_json)


def _simulate_cassandra(sim: Simulation) -> None:
    """Cassandra: `--replica`, `--size-aware-cost` and `--trace-rate` folded in, the policy, its parameters and
    `--replica-param`s checked before the trace is read."""
    from simulation import parse_params
    from simulation.config_check import check_params

    source = sim.source()
    options, params = sim.options, dict(sim.params)
    if options["replica"] is not None:
        params.setdefault("replica", options["replica"])
    if options["size_aware_cost"]:
        params["size_aware_cost"] = 1.0
    dep = cassandra_deployment(options)
    if options["trace_rate"]:  # the trace's own arrival times: no load scales them
        dep = dataclasses.replace(dep, load=None)
    rparams = parse_params(options["replica_param"] or [], source="--replica-param")
    check_params(sim.kind.name, sim.policy, params, replica_params=rparams)  # before the trace is read
    _run_cassandra(source, dep, sim.policy, params, rparams, sim.seed, sim.as_json)


#: `tailtune simulate` on a Cassandra cluster (the kind's `simulate`, `simulation.kinds`).
CASSANDRA = SimulateKind(policy_help=_cassandra_policy_help, run=_simulate_cassandra)
#: `tailtune simulate` on a memcached pool.
MEMCACHED = SimulateKind(policy_help=_memcached_policy_help, run=_simulate_memcached)
