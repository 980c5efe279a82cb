"""Calibration of a Cassandra cluster: the model inputs discovery cannot read, measured on the live system and
marked `calibrated` (`control.calibration` stores them).

At low load: one request at a time, after `TAILTUNE_CALIBRATE_WARMUP` uncounted rounds — one
trivial request and one read each — in which the node's and the driver's paths for them warm up: on a node just
out of a burst of reads the first few hundred rounds took two to five times as long as the later ones):

* **client** — every request below is timed through the deployment's own driver (`CLIENTS`), its client path
  being part of each round trip: `java4` by the Java driver 4, the live replay's Java generator in its probe mode
  (`kinds.cassandra.replay.generator.probe_java`: the same sandbox, node filter and egress rules as a replay; each
  statement executed synchronously in the same alternating rounds, its latencies in µs), `python` by the Python
  driver's session. The statements and their bound values are the same for both: prepared by the Python driver's
  session, which finds the keys, and for the Java driver serialized by it as the native protocol carries them.
  Each input's `how` names the driver; `readings["client"]` (`{"driver", "how"}`) says which measured.
* **network** — `TAILTUNE_CALIBRATE_READS` trivial round trips, `SELECT release_version FROM system.local` (a local
  system table: no disk, no replica, the smallest server work a CQL request has), prepared — as the reads below and an
  application's reads are: sent as text, each would add the node's parsing of the CQL, which the reads do not pay —,
  timed client-side. The one-way latency is half their median. It includes the driver's and the server's smallest
  per-request cost, so it is an upper bound of the wire's; the simulator adds it twice per replica request. Their
  whole distribution is stored with it, as 101 quantiles p0..p100 (`rtt_quantiles_ms`), and replayed as the client ↔
  coordinator round trip each request meets (one draw per request in place of the two constant client hops:
  docs/model.md § Calibration). The quantiles are of every timed round trip, stalls included: a stall on the client's
  path is part of what a request meets, not a measurement error.
* **service time** — as many single-partition reads of the deployment's first table (`SELECT * ... WHERE <partition
  key> = ? LIMIT 1`, consistency ONE), timed client-side, alternating with the trivial round trips (trivial, read,
  trivial, read, ...: both kinds meet the same machine, so a change of the noise while calibrating — another process,
  a flush, a collection — reaches both alike instead of entering their difference). A read is the trivial request plus
  the node's work on the read, so the service time is found by **deconvolution by moments**: its mean is the reads'
  mean minus the trivial round trips' mean, its variance the reads' variance minus theirs (the two independent), each
  sample without its stalls first (values above p50 + 10 × (p90 − p50): a machine stall is not a service time). The
  latency tables (`system_views.local_read_latency`) resolve 1 ms at best (docs/model.md), so they cannot give
  sub-millisecond service times; the client's clock can, as a difference. **The fit:** a lognormal (the simulator's
  `demand_dist = lognormal`) with that mean and coefficient of variation (σ² = ln(1 + cv²)) — service times are
  right-skewed and the simulator takes a mean and a σ. Its error is stated as the p99 of trivial round trips plus
  fitted service times (a convolution, drawn) against the reads' observed p99 (`fit.error_pct`). A mean the
  difference cannot resolve (≤ 0: the node's work is below the client's noise) is stored as the smallest the
  measurement resolves, with a note. The service rate replayed is 1000 / mean_ms per slot.
* **per-partition client cost** (`client_key`, `{"us": ...}`) — as many reads of `TAILTUNE_CALIBRATE_KEYS`
  (K) distinct existing partitions of the same table at once (`SELECT * ... WHERE <partition key> IN ? PER
  PARTITION LIMIT 1`: one row of each, as the single-partition read reads one; the K keys are the table's first K,
  `SELECT DISTINCT`), consistency ONE, timed client-side in the same rounds (trivial, read, K-partition read, ...),
  so the machine's drift reaches all three kinds alike. A K-partition read costs the driver (K rows to decode) and
  the coordinator (K partitions to handle and merge) more than a one-partition read; the cost per partition beyond
  the first is (mean of the K-partition reads − mean of the single-partition reads) / (K − 1), both without their
  stalls (as above). The simulator adds (keys − 1) × it to each request's latency: a one-partition read is the
  baseline the service time already includes. It assumes the cost linear in the partitions and the same at load.
  A difference the client's noise does not resolve (≤ its standard error) is stored as 0, with a note. A table
  whose partition key has several columns, or that holds fewer than 2 partitions, is not timed so: nothing is
  stored, a note says why (fewer than K partitions but at least 2: K is what there is).
* **uncertainty** — 95 % bootstrap intervals of the one-way network latency (400 resamples of the timed requests),
  of the service time's mean (50 resamples, each a whole deconvolution) and of the per-partition cost (400
  resamples of both kinds), stored with each input (`uncertainty`).

Every connection follows the egress rules (`control.egress`), like discovery's. All measurements happen
first; a failure is a `DiscoveryFailed` naming the node and what to do.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from control.discovery import checked, timed_rounds
from control.egress import Egress
from control.kind import Calibrated, DiscoveryFailed
from kinds.cassandra.discovery import _Cql, open_session, partition_key, probe_statement, statement_reader

__all__ = ["BOOTSTRAP", "CLIENTS", "TRIVIAL", "calibrate_cassandra", "per_partition_cost", "rtt_quantiles",
           "service_time"]

KIND = "cassandra"
BOOTSTRAP = 400
#: The trivial request: a local system table, no disk, no replica — the smallest server work a CQL request has.
TRIVIAL = "SELECT release_version FROM system.local"


def _quantile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def rtt_quantiles(round_trips_ms: Sequence[float]) -> list[float]:
    """The 101 quantiles p0, p1, ..., p100 of the timed round trips (linear between order statistics), every one
    kept: a stall on the client's path is part of what a request meets."""
    return [_quantile(round_trips_ms, i / 100) for i in range(101)]


def _trimmed(xs: Sequence[float]) -> list[float]:
    """`xs` without the stalls: values above p50 + 10 × (p90 − p50) (a lognormal of σ = 1 has 0.002 % of its mass
    there; a 50 ms pause among sub-millisecond requests is far beyond)."""
    p50, p90 = _quantile(xs, 0.5), _quantile(xs, 0.9)
    cut = p50 + 10.0 * (p90 - p50)
    kept = [x for x in xs if x <= cut] if p90 > p50 else list(xs)
    return kept if len(kept) >= 2 else list(xs)


def _difference(more: Sequence[float], less: Sequence[float]) -> tuple[float, float]:
    """The difference of the means of two samples (stalls already cut) and the smallest difference they resolve:
    the sum of the means' standard errors."""
    floor = statistics.stdev(less) / math.sqrt(len(less)) + statistics.stdev(more) / math.sqrt(len(more))
    return statistics.fmean(more) - statistics.fmean(less), floor


def service_time(reads_ms: Sequence[float], trivial_ms: Sequence[float], *, seed: int = 0) -> dict[str, float]:
    """The node's service time of a read by deconvolution by moments (see the module docstring): mean, σ of the
    lognormal with that mean and variance, whether the mean was resolved, and the fit's p99 check."""
    r, t = _trimmed(reads_ms), _trimmed(trivial_ms)
    mean, floor = _difference(r, t)
    var = statistics.variance(r) - statistics.variance(t)
    resolved = mean > floor
    mean = max(mean, floor, 1e-6)
    sigma = math.sqrt(math.log1p(max(var, 0.0) / (mean * mean)))
    rng = random.Random(seed)
    mu = math.log(mean) - sigma * sigma / 2
    drawn = sorted(rng.choice(t) + rng.lognormvariate(mu, sigma) for _ in range(20_000))
    fitted99 = drawn[int(0.99 * len(drawn))]
    observed99 = _quantile(reads_ms, 0.99)
    return {"mean_ms": mean, "sigma": sigma, "resolved": float(resolved), "p99_fitted_ms": fitted99,
            "p99_observed_ms": observed99,
            "error_pct": 100.0 * (fitted99 - observed99) / observed99 if observed99 > 0 else 0.0}


def per_partition_cost(multi_ms: Sequence[float], single_ms: Sequence[float], keys: int) -> dict[str, float]:
    """The client's and the coordinator's cost per partition beyond the first (module docstring): the difference
    of the means of the `keys`-partition reads and the single-partition reads (each without its stalls) over
    keys − 1, in µs (`us`; 0 when the difference is not above its standard error: `resolved` 0), and the raw
    slope (`slope_us`, whatever its sign)."""
    if keys < 2:
        raise ValueError(f"keys is {keys}: the per-partition cost needs reads of at least 2 partitions")
    diff, floor = _difference(_trimmed(multi_ms), _trimmed(single_ms))
    slope = 1000.0 * diff / (keys - 1)
    resolved = diff > floor
    return {"us": slope if resolved else 0.0, "slope_us": slope, "resolved": float(resolved),
            "difference_ms": diff}


def _slope_interval(multi_ms: Sequence[float], single_ms: Sequence[float], keys: int) -> list[float]:
    """95 % bootstrap interval of the per-partition slope (µs): both kinds resampled together."""
    rng = random.Random(2)
    draws = sorted(
        per_partition_cost([rng.choice(multi_ms) for _ in multi_ms], [rng.choice(single_ms) for _ in single_ms],
                           keys)["slope_us"]
        for _ in range(BOOTSTRAP)
    )
    return [draws[int(0.025 * BOOTSTRAP)], draws[int(0.975 * BOOTSTRAP) - 1]]


def multi_statement(cql: _Cql, table: str, keys: int) -> tuple[Any, tuple[Any, ...], int] | str:
    """The read of up to `keys` distinct partitions of `table` at once (`SELECT * ... WHERE <partition key> IN ?
    PER PARTITION LIMIT 1` of its first partitions, prepared, consistency ONE), its bound values and the partitions
    it reads; or why nothing can be read so (a composite partition key, fewer than 2 partitions)."""
    from cassandra import ConsistencyLevel
    from cassandra.metadata import protect_name

    pk = partition_key(cql, table)
    if len(pk) != 1:
        return (f"{table} has a composite partition key ({', '.join(pk)}): its multi-partition reads are not timed"
                if pk else f"{table} has no partition key in system_schema.columns")
    col = protect_name(pk[0])
    values = [row[0] for row in cql.run(f"SELECT DISTINCT {col} FROM {table} LIMIT {int(keys)}")]
    if len(values) < 2:
        return f"{table} holds {len(values)} partition(s): a multi-partition read needs at least 2"
    stmt = cql.session.prepare(f"SELECT * FROM {table} WHERE {col} IN ? PER PARTITION LIMIT 1")
    stmt.consistency_level = ConsistencyLevel.ONE
    return stmt, (values,), len(values)


def multi_reader(cql: _Cql, table: str, keys: int) -> tuple[Callable[[], object] | None, int, str | None]:
    """One read of `multi_statement` as a call, the partitions it reads, and None; or None, 0 and why nothing can
    be read so. The call raises DiscoveryFailed naming the table when a read fails."""
    found = multi_statement(cql, table, keys)
    if isinstance(found, str):
        return None, 0, found
    stmt, args, k = found
    return statement_reader(cql, stmt, args, f"{k}-partition reads of {table}",
                            "check the cluster, or lower TAILTUNE_CALIBRATE_KEYS"), k, None


@dataclass(frozen=True)
class _Timed:
    """One kind of request calibration times: its plan arm's name, the prepared statement and its values, and what
    a failure names and advises."""

    name: str
    statement: Any
    args: tuple[Any, ...]
    what: str
    fix: str


def _python_rounds(cql: _Cql, cluster: Any, timed: Sequence[_Timed], reads: int, warmup: int, *,
                   connection: Mapping[str, Any], egress: Egress, timeout_s: float) -> list[list[float]]:
    """Each kind's round trips (ms) through the Python driver's session, in alternating rounds
    (`control.discovery.timed_rounds`)."""
    calls = [statement_reader(cql, t.statement, t.args, t.what, t.fix) for t in timed]
    return timed_rounds(calls, reads, warmup=warmup)


def _java_rounds(cql: _Cql, cluster: Any, timed: Sequence[_Timed], reads: int, warmup: int, *,
                 connection: Mapping[str, Any], egress: Egress, timeout_s: float) -> list[list[float]]:
    """Each kind's round trips (ms) through the Java driver 4, in the same alternating rounds: the live replay's
    Java generator in its probe mode (`kinds.cassandra.replay.generator.probe_java`), under the same sandbox and
    node filter (the nodes the egress rules allow), each statement's values serialized by the Python driver as the
    native protocol carries them."""
    from base.errors import TailtuneError
    from kinds.cassandra.replay.generator import (
        ArmProfile,
        Endpoint,
        GeneratorConfig,
        Plan,
        PlanArm,
        probe_java,
    )

    target = cql.target
    port = int(connection.get("port", 9042))
    hosts = [h for h in cluster.metadata.all_hosts() if egress.allows(str(h.address))]
    endpoints = [Endpoint(str(h.address), port) for h in hosts]
    up = [e for e, h in zip(endpoints, hosts, strict=True) if h.is_up is not False]
    local = cql.run("SELECT data_center FROM system.local")
    ms = max(1, int(timeout_s * 1000))
    try:
        plan = Plan.of([PlanArm(t.name, str(t.statement.query_string)) for t in timed],
                       [(0, i, tuple(t.statement.bind(t.args).values)) for i, t in enumerate(timed)])
        config = GeneratorConfig(
            contact_points=tuple(up[:64] or endpoints[:1]), allowed=tuple(endpoints[:4096]),
            local_dc=str(local[0].data_center) if local else "datacenter1",
            arms=tuple(ArmProfile(t.name, consistency="ONE", request_timeout_ms=ms) for t in timed),
            username=target.username, connect_timeout_ms=ms,
        )
        by_arm = probe_java(plan, config, reads, warmup=warmup, egress=egress, password=target.password())
    except TailtuneError as exc:
        raise DiscoveryFailed(
            f"cassandra {', '.join(target.contact_points())}: timing the client path with the Java driver 4 failed "
            f"({target.scrub(str(exc))}): check the cluster answers within TAILTUNE_DISCOVER_TIMEOUT_S "
            f"({timeout_s:g} s) and that the Java load generator is built (scripts/setup.sh)"
        ) from None
    return [by_arm[t.name] for t in timed]


@dataclass(frozen=True)
class _Client:
    """A deployment's driver as calibration times its client path: how the readings name it, and its rounds."""

    label: str
    rounds: Callable[..., list[list[float]]]


def _python_label() -> str:
    import cassandra

    return f"the Python driver (cassandra-driver {cassandra.__version__})"


#: A deployment's `driver` → the driver calibration times the client path with (module docstring).
CLIENTS: dict[str, Callable[[], _Client]] = {
    "java4": lambda: _Client("the Java driver 4 (java-driver-core 4.19.0)", _java_rounds),
    "python": lambda: _Client(_python_label(), _python_rounds),
}


def _interval(values: Sequence[float], stat: Callable[[Sequence[float]], float], seed: int = 0) -> list[float]:
    """95 % bootstrap interval of `stat` over `values`."""
    rng = random.Random(seed)
    n = len(values)
    draws = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(BOOTSTRAP))
    return [draws[int(0.025 * BOOTSTRAP)], draws[int(0.975 * BOOTSTRAP) - 1]]


@dataclass(frozen=True)
class CapacityOptions:
    """The capacity measurement's phases (`kinds.cassandra.capacity`): the loaded phases' rates, each phase's
    intervals and their length, the unmeasured warm-up before them."""

    rates: tuple[float, ...] = (200.0, 400.0)
    interval_s: float = 2.0
    intervals: int = 4
    warmup_s: float = 20.0


def calibrate_cassandra(
    connection: Mapping[str, Any], tables: Sequence[str], *, driver: str, egress: Egress, timeout_s: float,
    reads: int, warmup: int = 1000, keys: int = 8, capacity: CapacityOptions | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Calibrated:
    """Measure the network and the service time of a Cassandra cluster through the client path of `driver` (the
    deployment's: `java4` or `python`), and where the connection names a JMX port its contact node's capacity, the
    host its nodes share and the node's GC pauses (`kinds.cassandra.capacity`, `kinds.cassandra.pauses`); raises
    DiscoveryFailed naming the node and what to do."""
    if driver not in CLIENTS:
        raise DiscoveryFailed(f"cassandra: calibration has no client for driver {driver!r} (one of "
                              f"{', '.join(CLIENTS)})", permanent=True)
    found = _calibrate(connection, tables, client=CLIENTS[driver](), driver=driver, egress=egress,
                       timeout_s=timeout_s, reads=reads, warmup=warmup, keys=keys, log=log)
    if connection.get("jmx_port") is None:
        found.notes.append("capacity not calibrated: the deployment names no connection.jmx_port (the node's CPU is "
                           "read over JMX)")
    elif not tables:
        found.notes.append("capacity not calibrated: the deployment names no table to read")
    else:
        _capacity(found, connection, tables[0], egress, timeout_s, capacity or CapacityOptions(), keys, log)
    return found


def _calibrate(
    connection: Mapping[str, Any], tables: Sequence[str], *, client: _Client, driver: str, egress: Egress,
    timeout_s: float, reads: int, warmup: int, keys: int, log: Callable[[str], None],
) -> Calibrated:
    found = Calibrated(KIND, time.time())
    target, cluster, session = open_session(connection, egress, timeout_s)
    try:
        cql = _Cql(target, session)

        cql.run(TRIVIAL)  # once as text: a failure is the one line naming the node
        timed = [_Timed("trivial", cql.session.prepare(TRIVIAL), (), "trivial requests",
                        f"check the cluster answers within TAILTUNE_DISCOVER_TIMEOUT_S ({timeout_s:g} s)")]
        why: str | None = "the deployment names no table to read (set its tables)"
        multi_why: str | None = why
        k = 0
        if tables:
            read = probe_statement(cql, tables[0])
            if isinstance(read, str):
                why = multi_why = read
            else:
                why = None
                timed.append(_Timed("read", *read, f"single-key reads of {tables[0]}", "check the cluster"))
                multi = multi_statement(cql, tables[0], keys)
                if isinstance(multi, str):
                    multi_why = multi
                else:
                    multi_why, (stmt, args, k) = None, multi
                    timed.append(_Timed("multi", stmt, args, f"{k}-partition reads of {tables[0]}",
                                        "check the cluster, or lower TAILTUNE_CALIBRATE_KEYS"))
        log(f"timing the client path with {client.label}")
        # the trivial requests and the reads alternate, so all kinds meet the same machine (module docstring)
        trivial, *rest = client.rounds(cql, cluster, timed, reads, warmup, connection=connection, egress=egress,
                                       timeout_s=timeout_s)
        service = rest[0] if rest else []
        multi_times = rest[1] if len(rest) > 1 else []
    finally:
        cluster.shutdown()
    found.readings["client"] = {"driver": driver, "how": client.label}
    by = f"timed client-side by {client.label}"
    rtt = statistics.median(trivial)
    found.readings["trivial_round_trip"] = {"reads": len(trivial), "p50_ms": rtt,
                                            "p99_ms": _quantile(trivial, 0.99)}
    where = f"cassandra {', '.join(target.contact_points())}: calibration"
    found.put("network", {"one_way_ms": checked("network_ms", rtt / 2, where, "network.one_way_ms"),
                          "rtt_quantiles_ms": rtt_quantiles(trivial)},
              f"half the median of {len(trivial)} trivial round trips (SELECT release_version FROM system.local, "
              f"prepared, one at a time) {by}: an upper bound of the wire's; their quantiles p0..p100 (stalls kept) "
              "are the client round trip each replayed request draws",
              uncertainty={"one_way_ms": [v / 2 for v in _interval(trivial, statistics.median)]})
    log(f"network: one way {rtt / 2:.3f} ms (median trivial round trip {rtt:.3f} ms over {len(trivial)})")
    if why is not None:
        found.notes.append(f"service time not calibrated: {why}")
        return found
    fit = service_time(service, trivial)
    mean_ms = fit["mean_ms"]
    checked("service_rate_per_s", 1000.0 / mean_ms if mean_ms > 0 else math.inf, where, "service_time.mean_ms")
    found.readings["single_key"] = {"table": tables[0], "reads": len(service), "p50_ms": statistics.median(service),
                                    "p99_ms": _quantile(service, 0.99)}
    if not fit["resolved"]:
        found.notes.append(f"the reads of {tables[0]} cost no more than a trivial request within the client's noise: "
                           f"the service time is stored as the smallest this measurement resolves "
                           f"({fit['mean_ms']:.4f} ms)")
    rng = random.Random(1)
    boot = sorted(service_time([rng.choice(service) for _ in service], [rng.choice(trivial) for _ in trivial],
                               seed=i)["mean_ms"] for i in range(BOOTSTRAP // 8))
    found.put(
        "service_time",
        {"mean_ms": fit["mean_ms"], "dist": "lognormal", "sigma": fit["sigma"]},
        f"{len(service)} single-partition reads of {tables[0]} and {len(trivial)} trivial round trips (one at a time) "
        f"{by}: the difference of their means and variances (stalls cut), a lognormal with them",
        uncertainty={"mean_ms": [boot[int(0.025 * len(boot))], boot[min(len(boot) - 1, int(0.975 * len(boot)))]]},
        fit={k: fit[k] for k in ("p99_fitted_ms", "p99_observed_ms", "error_pct")},
    )
    log(f"service time: mean {fit['mean_ms']:.4f} ms, σ {fit['sigma']:.2f} (lognormal; trivial + fitted p99 "
        f"{fit['p99_fitted_ms']:.3f} ms against {fit['p99_observed_ms']:.3f} ms observed)")
    if multi_why is not None:
        found.notes.append(f"per-partition client cost not calibrated: {multi_why}")
        return found
    cost = per_partition_cost(multi_times, service, k)
    found.readings["multi_key"] = {"table": tables[0], "keys": k, "reads": len(multi_times),
                                   "p50_ms": statistics.median(multi_times), "p99_ms": _quantile(multi_times, 0.99)}
    if not cost["resolved"]:
        found.notes.append(f"the {k}-partition reads of {tables[0]} cost no more than the single-partition reads "
                           f"within the client's noise (slope {cost['slope_us']:.2f} µs a partition): the "
                           "per-partition client cost is stored as 0")
    found.put(
        "client_key", {"us": cost["us"]},
        f"{len(multi_times)} {k}-partition reads of {tables[0]} (IN, one row a partition) and as many "
        f"single-partition reads, alternating (one at a time) {by}: the difference of their means (stalls cut) "
        f"over {k - 1}, the cost of each partition of a request beyond the first",
        uncertainty={"us": _slope_interval(multi_times, service, k)}, keys=k,
    )
    log(f"per-partition client cost: {cost['us']:.2f} µs ({k}-partition reads p50 "
        f"{found.readings['multi_key']['p50_ms']:.3f} ms against one partition's "
        f"{found.readings['single_key']['p50_ms']:.3f} ms)")
    return found


def _capacity(found: Calibrated, connection: Mapping[str, Any], table: str, egress: Egress, timeout_s: float,
              opts: CapacityOptions, keys: int, log: Callable[[str], None]) -> None:
    """The contact node's capacity (`kinds.cassandra.capacity`) into `found` (`capacity` input and figures)."""
    from cassandra import ConsistencyLevel
    from cassandra.metadata import protect_name

    from kinds.cassandra import capacity as cap
    from kinds.cassandra.jmx import JmxFailed, JmxSession
    from kinds.cassandra.pauses import gc_counters

    target, cluster, session = open_session(connection, egress, timeout_s)
    try:
        cql = _Cql(target, session)
        address = target.contact_points()[0]
        pk = partition_key(cql, table)
        if len(pk) != 1:
            found.notes.append(f"capacity not calibrated: {table} has {'a composite' if pk else 'no'} partition key")
            return
        col = protect_name(pk[0])
        values = [row[0] for row in cql.run(f"SELECT DISTINCT {col} FROM {table} LIMIT {int(keys)}")]
        if len(values) < 2:
            found.notes.append(f"capacity not calibrated: {table} holds {len(values)} partition(s); the IN reads "
                               "need at least 2")
            return
        one = session.prepare(f"SELECT * FROM {table} WHERE {col} = ? LIMIT 1")
        many = session.prepare(f"SELECT * FROM {table} WHERE {col} IN ? PER PARTITION LIMIT 1")
        for stmt in (one, many):
            stmt.consistency_level = ConsistencyLevel.ONE
        in_flight = [0]
        dropped = [0]
        limit = 256

        def sender(stmt: Any, bound: tuple[Any, ...]) -> Callable[[], object]:
            def done(_: object) -> None:
                in_flight[0] -= 1

            def send() -> object:
                if in_flight[0] >= limit:  # the node is not keeping up: not a reading of its cost
                    dropped[0] += 1
                    return None
                in_flight[0] += 1
                future = session.execute_async(stmt, bound)
                future.add_callbacks(done, done)
                return future
            return send

        addresses = [str(h.address) for h in cluster.metadata.all_hosts()]
        single = sender(one, (values[0],))
        multi = sender(many, (values,))
        keyspace, name = table.split(".", 1)
        top = max(opts.rates)
        phases: list[tuple[str, Callable[[], object] | None, float]] = [("idle", None, 0.0)]
        for rate in sorted(opts.rates):
            phases += [(f"single@{rate:g}", single, rate), (f"in{len(values)}@{rate:g}", multi, rate)]
        phases.append(("idle-after", None, 0.0))
        password = target.password()
        login = target.username if password is not None else None
        try:
            with JmxSession(egress, address, int(connection["jmx_port"]), username=login,
                            password=password if login else None, timeout_s=timeout_s,
                            scrub=target.scrub) as jmx:
                cores = int(jmx.number("java.lang:type=OperatingSystem", "AvailableProcessors"))
                if opts.warmup_s > 0:
                    log(f"capacity: warming up {opts.warmup_s:g} s of single-partition reads at {top:g}/s")
                    cap.measure(jmx, keyspace, name, [("warm-up", single, top)], opts.warmup_s, 1)
                gc_before, gc_t0 = gc_counters(jmx), time.monotonic()
                rows = cap.measure(jmx, keyspace, name, phases, opts.interval_s, opts.intervals, log=log)
                gc_after, gc_span = gc_counters(jmx), time.monotonic() - gc_t0
        except JmxFailed as exc:
            found.notes.append(f"capacity not calibrated: {exc}")
            return
    finally:
        cluster.shutdown()
    _pauses(found, address, gc_before, gc_after, gc_span, log)
    host, host_how = cap.shared_host(addresses, cores, cap.local_cpus())
    found.put("host", host, host_how)
    log(f"host: {host['nodes_per_host']} node(s) on {host['host_cores']} core(s)")
    try:
        fit = cap.fit_capacity(rows, cores)
    except ValueError as exc:
        found.notes.append(f"capacity not calibrated: {exc}")
        return
    how = (f"node {address} over JMX: {fit.n} intervals of {opts.interval_s:g} s — idle, single-partition and "
           f"{len(values)}-partition IN reads of {table} at {', '.join(f'{r:g}' for r in sorted(opts.rates))}/s — "
           "the utilization law's least-squares fit, 95 % bootstrap intervals over the intervals")
    figures = cap.as_inputs(fit, how)
    found.readings["capacity"] = {"node": address, "figures": figures, "intervals": [vars(r) for r in rows],
                                  "dropped": dropped[0]}
    found.put("capacity", {k: v["value"] for k, v in figures.items()}, how,
              uncertainty={k: v["interval"] for k, v in figures.items() if v["interval"] is not None})
    if dropped[0]:
        found.notes.append(f"capacity: {dropped[0]} reads were not sent, {limit} being in flight (the node or this "
                           "client fell behind): the loaded intervals' rates are what was sent")
    if not fit.resolved:
        found.notes.append("capacity: the CPU a request or a partition read adds is not resolved (its interval "
                           "reaches 0): the node's noise is larger than the load's cost at these rates (a longer or "
                           "more loaded measurement narrows it)")
    saturation = fit.requests_per_s
    log(f"capacity: {fit.cpu_per_request_us:.1f} µs a request, {fit.cpu_per_read_us:.1f} µs a partition read, "
        f"background {fit.background_cores:.2f} of {fit.cores} cores: "
        + (f"{saturation:,.0f} single-partition requests/s at saturation" if saturation is not None else
           "no saturation rate (the fit gives no positive cost or no free core)"))


def _pauses(found: Calibrated, address: str, before: Mapping[str, tuple[float, float]],
            after: Mapping[str, tuple[float, float]], seconds: float, log: Callable[[str], None]) -> None:
    """The contact node's GC pauses over the capacity measurement's span (`kinds.cassandra.pauses`) into `found`
    (`pauses` input)."""
    from kinds.cassandra.pauses import pauses_between

    try:
        p = pauses_between(before, after, seconds)
    except ValueError as exc:
        found.notes.append(f"pauses not calibrated: {exc}")
        return
    if not p.collectors:
        found.notes.append(f"pauses not calibrated: node {address} reports no stop-the-world garbage collector")
        return
    value, uncertainty = p.as_input()
    found.put("pauses", value,
              f"node {address} over JMX: CollectionCount and CollectionTime of {', '.join(p.collectors)} across "
              f"the capacity measurement's {seconds:.1f} s: {p.count} pause(s), {p.total_ms:g} ms in all; the rate "
              "a second of unpaused time with its exact Poisson 95 % interval, the mean pause",
              uncertainty=uncertainty)
    log(f"pauses: {p.count} in {seconds:.1f} s ({p.rate_per_s:.3g}/s"
        + (f", mean {p.mean_ms:.3g} ms)" if p.mean_ms is not None else ")"))
