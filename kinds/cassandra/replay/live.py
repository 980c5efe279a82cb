"""Cassandra's live replay driver (`control.replay_trace.ReplayDriver`): twin scratch tables, one per config, read
by the deployment's own driver's generator (`generator.run`) in one request stream.

**Twins.** `speculative_retry` (every table option, `simulation.stock_appliers.TABLE`) is a table's own, and each
table keeps its own threshold from its own latency histogram, so each arm gets a twin table of its own in the
keyspace `tailtune_replay` (created with the replication of the keyspace of the deployment's first table; never the
user's tables): `r_<run>_<i> (k text PRIMARY KEY, v blob)` with the arm's table options in its `CREATE TABLE` (an
option the config leaves unset takes the value the user's table has now). Each twin is loaded with the trace's keys
and a value of each key's size (unknown sizes: the median known one; past `TAILTUNE_REPLAY_MAX_VALUE_BYTES`: cut),
written at consistency ALL so every replica holds it. A fresh twin's latency histogram is not the production
table's (its threshold starts from the warm-up's reads, its SSTables are few and fresh): a note says so beside
the figures. The driver settings (speculative executions, slow-replica avoidance, the Python driver's replica
shuffling) are one execution profile per arm in the one generator. The configs the run returns are the arms' as
they ran (with the twins' table options and the multiget shape sent); for the Java driver its `model_params` carry
the generator's timer tick (`se_tick_ms`, 1 ms): the model replays each arm's hedges on it, not on the tick a
rendered config would set. The dynamic snitch is cluster-wide: arms that differ in it are `alternating` (`modes`):
the engine runs whole periods in ABBA order and the run sets each period's snitch on every node over JMX
(`snitch.py`) before it, read back. What cannot be applied live — a patched server's scheduler — is refused
(`modes`).

**Multigets.** Each trace request is one request of the plan, shaped as its arm's config says the application
queries (`multiget.shape`, `multiget.chunk`; absent: the driver's default, `StockKnob.default_for`), so arms that
differ in shape run concurrently too: `per-partition` sends one `SELECT k, v FROM twin WHERE k = ?` per key;
`in` one `SELECT k, v FROM twin WHERE k IN ?` per chunk of `multiget.chunk` keys in the request's order (0: all
its keys in one), the chunk bound as one serialized `list<text>` (`plan.encode_list`). All of a request's queries
leave at its intended time; its latency runs to the last answer, and it fails when any query fails (`plan`). A
one-key request is one query of either shape. Routing: `k = ?` has a routing key (the server's prepared metadata
names the marker as the partition key), and the token-aware policies of both drivers put that key's replicas
first. `IN ?` has none: the server names no partition-key marker for it, so the Java driver 4.19.0's
`DefaultBoundStatement.getRoutingKey()` returns null (its prepared statement's `getPartitionKeyIndices()` is
empty), `BasicLoadBalancingPolicy.getReplicas` then returns no replica, and `DefaultLoadBalancingPolicy`'s query
plan is the local datacenter's live nodes round robin, without the replica ordering and the slow-replica
avoidance (which act on replicas only); the Python driver's `TokenAwarePolicy` likewise falls back to its child
policy. The coordinator then reads each key of the chunk from its replicas — what the application's own driver
does with its `IN` multigets, and what the model assumes of the `in` shape. Limits: a request of at most 16384
queries, an `IN` chunk that serializes to at most 64 KiB (`plan`); a trace past them is refused before anything
is created.

**The snitch.** Before the first change every node's settings are read and written to the lease (`changed`, no
TTL); after the last period, on a failure or a stop too, every node changed gets them back (read back) and the
lease is deleted (a node that could not be restored fails the run and its lease keeps `changed`). The next run
restores what a dead run's `changed` holds once its lease cells expired (a note says so). After each switch the
period's warm-up is sent before measuring: `SNITCH_WARMUP_UPDATES` update intervals at least, else a note.

**The run.** Per repeat: each node's reads of each twin (`system_views.local_read_latency`, the replica reads, and
`coordinator_read_latency`, the coordinator reads; node-local virtual tables, so each allowed node is asked
itself) before and after; the generator sends the warm-up (the trace's first `warmup_s`, unmeasured) then the
measured run, every request dealt to its arm's twin, open loop. Both virtual tables count one read per partition
(an `IN` query of n keys is n of each), so an arm's extra reads are its replica reads beyond the keys its requests
read (warm-up included): the coordinator's speculative retries and the driver's extra executions (at consistency
LOCAL_ONE a partition read is one replica read); its speculative retries alone are the replica reads beyond the
coordinator reads. A node of RF 1 has no other replica: it cannot speculate, and the notes say so.

**Scratch.** Before creating anything the run writes its lease, `tailtune_replay.runs` (run id, deployment,
start) with a TTL of `TAILTUNE_REPLAY_LEASE_S`, renewed every quarter of it while it runs; the twins are dropped
afterwards, on a failure or a stop too, and the lease deleted. A run that died leaves its lease to expire: the next
replay of any deployment of the cluster drops the twins whose run holds no lease (a note names them). Dropping a
table on a node with `auto_snapshot` on (Cassandra's default) leaves a snapshot of it (`nodetool clearsnapshot`).
"""

from __future__ import annotations

import contextlib
import math
import re
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np

from base.errors import TailtuneError
from control.kind import Target
from control.replay_trace import Arm, ArmMeasure, DriverRun, Progress, ReplayJob, ReplayRefused, ReplayTrace
from kinds.cassandra.cql import CqlTarget
from kinds.cassandra.jmx import JmxFailed, JmxSession
from kinds.cassandra.replay.config import TIMER_TICK_MS, ArmProfile, Endpoint, GeneratorConfig
from kinds.cassandra.replay.generator import GeneratorAborted, GeneratorFailed, GeneratorResult, run
from kinds.cassandra.replay.hdr import Histogram, bucket_table
from kinds.cassandra.replay.plan import MAX_QUERIES, MAX_VALUE_BYTES, Plan, PlanArm, encode_list, encode_value
from kinds.cassandra.replay.snitch import DEFAULT_JMX_PORT, SnitchJmx, SnitchValues
from tuner.fidelity import BlockHistograms

__all__ = ["KEYSPACE", "CassandraReplay", "twin_name"]

#: The scratch keyspace: the only one the live replay writes.
KEYSPACE: Final = "tailtune_replay"
LEASES: Final = "runs"
#: Update intervals of the dynamic snitch the warm-up after a switch should span (its scores are recomputed each
#: interval from the latest reads).
SNITCH_WARMUP_UPDATES: Final = 2
_TWIN: Final = re.compile(r"r_([0-9a-f]{6,32})_([0-9]{1,2})")
_LOCAL: Final = "system_views.local_read_latency"
_COORDINATOR: Final = "system_views.coordinator_read_latency"
TWIN_NOTE: Final = (
    "the twin tables are fresh: their latency histograms (and so a percentile speculative_retry's threshold) start "
    "from this replay's own reads, not from the production table's history, and their data sits in few, new "
    "SSTables"
)


def twin_name(run_id: str, arm: int) -> str:
    return f"r_{run_id}_{arm}"


@dataclass(frozen=True)
class _Cluster:
    session: Any
    cluster: Any
    hosts: list[Any]
    port: int
    local_dc: str
    replication: dict[str, str]
    rf: int
    outside: int = 0


class CassandraReplay:
    """The live replay of one Cassandra deployment (module doc)."""

    one_key_per_request = False

    def __init__(self, target: Target) -> None:
        self.target = target

    # --- the configs --------------------------------------------------------------------------------------------
    def default_config(self) -> dict[str, Any]:
        return {"policy": "stock", "params": {}}

    def complete(self, arms: Sequence[Arm], trace: ReplayTrace, rate_scale: float, seed: int,
                 notes: list[str]) -> list[Arm]:
        """Whole-number knobs as integers (a SPEC's numbers are read as floats); what a config leaves unset is the
        user's table's (filled in by `run`)."""
        from simulation.stock_knobs import knob

        out = []
        for a in arms:
            params = {}
            for name, value in (a.config.get("params") or {}).items():
                row = knob(name)
                whole = row is not None and row.kind in ("int", "bool") and isinstance(value, float)
                params[name] = int(value) if whole and float(value).is_integer() else value
            out.append(Arm(a.name, a.spec, {**a.config, "params": params}, a.mode))
        return out

    def modes(self, arms: Sequence[Arm]) -> list[str]:
        """Every arm concurrent, every arm `alternating` when they differ in a dynamic-snitch setting (`jmx`:
        applied to every node between whole runs, `snitch.py`), or ReplayRefused naming what cannot differ between
        them or be applied live (module doc)."""
        from simulation.stock_knobs import knob

        if self.target.server != "stock":
            raise ReplayRefused("a Rein-patched server's scheduler is the server's own (cluster-wide, set when it "
                                "starts): the live replay cannot apply it, so it replays stock configs only")
        for a in arms:
            if a.config.get("policy") != "stock":
                raise ReplayRefused(f"arm {a.name}: the policy {a.config.get('policy')!r} needs a patched server; a "
                                    "stock Cassandra deployment replays stock configs")
        names = sorted({k for a in arms for k in (a.config.get("params") or {})})
        alternate = False
        for name in names:
            row = knob(name)
            if row is None or row.applied in ("cql", "driver", "client-code") or name == "driver":
                continue
            unset = None if row.applied == "jmx" else row.default_for(self.target.driver)
            given = {repr((a.config.get("params") or {}).get(name, unset)) for a in arms}
            if len(given) < 2:
                continue
            if row.applied == "jmx":
                alternate = True
                continue
            raise ReplayRefused(f"the configs differ in {name}: it is applied as {row.applied}, which the live "
                                "replay cannot set between runs")
        return ["alternating" if alternate else "concurrent"] * len(arms)

    def cluster_settings(self, arm: Arm) -> dict[str, Any]:
        """The arm's dynamic-snitch settings (`jmx` knobs) it names: applied to every node for its periods (a
        knob it leaves unset keeps the value the nodes had before the first period)."""
        from simulation.stock_knobs import knob

        return {k: v for k, v in sorted((arm.config.get("params") or {}).items())
                if (row := knob(k)) is not None and row.applied == "jmx"}

    def shape(self, config: Mapping[str, Any]) -> tuple[str, int]:
        """The multiget shape and chunk an arm's config sends (module doc): (`in` | `per-partition`, keys per
        query: `in`'s chunk, 0 = all of a request's keys; `per-partition`: 1)."""
        from simulation.stock_knobs import STOCK_KNOBS

        default = {k.name: k.default_for(self.target.driver) for k in STOCK_KNOBS}
        params = config.get("params") or {}
        shape = str(params.get("multiget.shape", default["multiget.shape"]))
        if shape == "per-partition":
            return shape, 1
        return shape, max(0, int(params.get("multiget.chunk", default["multiget.chunk"])))

    def _options(self, config: Mapping[str, Any], current: Mapping[str, str]) -> dict[str, str]:
        """The twin's table options as CQL texts: the config's, else the user's table's own now."""
        from simulation.stock_appliers import TABLE

        params = config.get("params") or {}
        out: dict[str, str] = {}
        for k in TABLE.knobs():
            raw = params.get(k.name, current.get(k.name, k.default))
            out[k.name] = TABLE.text(k, TABLE.parse(k, raw, where=k.name))
        return out

    def _timer(self) -> dict[str, float]:
        """The model's parameter for the generator's timer tick (`se_tick_ms`), for a driver that has one: its
        hedges fire on the generator's tick, not on the one a rendered config would set."""
        from simulation.java_timer import TIMER_DRIVERS
        from simulation.stock import TICK

        return {TICK: float(TIMER_TICK_MS)} if self.target.driver in TIMER_DRIVERS else {}

    def _profile(self, name: str, config: Mapping[str, Any]) -> ArmProfile:
        from simulation.stock_render import stock_driver_settings

        params = {k: v for k, v in (config.get("params") or {}).items() if k.startswith("driver.")}
        s = stock_driver_settings(params, self.target.driver)
        hedge = int(s["max_executions"]) > 1
        delay = float(s["delay_ms"])
        return ArmProfile(
            name,
            consistency="LOCAL_ONE",
            speculative_class="ConstantSpeculativeExecutionPolicy" if hedge else "NoSpeculativeExecutionPolicy",
            speculative_max_executions=int(s["max_executions"]),
            speculative_delay_ms=max(1, round(delay)) if hedge else 0,
            slow_replica_avoidance=bool(s["slow_replica_avoidance"]) if self.target.driver == "java4" else None,
            shuffle_replicas=bool(s["shuffle_replicas"]) if self.target.driver == "python" else None,
        )

    # --- the cluster --------------------------------------------------------------------------------------------
    def _cql(self, job: ReplayJob) -> CqlTarget:
        return CqlTarget(self.target.connection, self.target.egress, job.settings.discover_timeout_s)

    def _connect(self, job: ReplayJob) -> _Cluster:
        if not self.target.tables:
            raise ReplayRefused(f"deployment {self.target.name!r} names no tables: the twin tables copy the "
                                "replication of the keyspace of its first table")
        try:
            cluster, session = self._cql(job).connect(consistency="LOCAL_ONE")
        except TailtuneError as exc:
            raise ReplayRefused(f"cassandra: {exc}") from None
        try:
            user_ks = self.target.tables[0].split(".", 1)[0]
            meta = cluster.metadata.keyspaces.get(user_ks)
            if meta is None:
                raise ReplayRefused(f"keyspace {user_ks!r} of the deployment's table {self.target.tables[0]} is not "
                                    "on the cluster")
            replication = _replication(session, user_ks)
            local = session.execute("SELECT data_center FROM system.local").one()
            local_dc = str(local.data_center)
            every = list(cluster.metadata.all_hosts())
            hosts = [h for h in every if self.target.egress.allows(str(h.address))]
            return _Cluster(session, cluster, hosts, int(self.target.connection.get("port", 9042)), local_dc,
                            replication, _rf(replication, local_dc), len(every) - len(hosts))
        except BaseException:
            cluster.shutdown()
            raise

    # --- the run ------------------------------------------------------------------------------------------------
    def _jmx(self, job: ReplayJob) -> SnitchJmx:
        """The nodes' JMX (`snitch.py`): the login is sent only to a `connection.jmx_port` the deployment names (the
        port its password is bound to, `control.grants.password_binding`)."""
        cql = self._cql(job)
        given = self.target.connection.get("jmx_port")
        if not given:
            return SnitchJmx(self.target.egress, DEFAULT_JMX_PORT)
        return SnitchJmx(self.target.egress, int(given), cql.username, cql.password())

    def _speculations(self, job: ReplayJob, c: _Cluster, twins: Sequence[str],
                      notes: list[str]) -> dict[str, dict[str, int]]:
        """Each reachable node's `SpeculativeRetries` count of each twin (the table's metric over JMX, where the
        deployment names `connection.jmx_port`): {node: {twin: count}}; empty without a JMX port, a node whose JMX
        fails is left out (a note). The coordinators' own count of their speculative retries: exact where the
        replica reads are not (a node outside the egress rules serves replica reads no one counts)."""
        if not self.target.connection.get("jmx_port"):
            return {}
        jmx = self._jmx(job)
        out: dict[str, dict[str, int]] = {}
        for host in c.hosts:
            if host.is_up is False:
                continue
            address = str(host.address)
            try:
                with JmxSession(jmx.egress, address, jmx.port, username=jmx.username, password=jmx.password,
                                timeout_s=30.0) as session:
                    per = {}
                    for twin in twins:
                        ks, name = twin.split(".", 1)
                        found = session.names(f"org.apache.cassandra.metrics:type=Table,keyspace={ks},scope={name},"
                                              "name=SpeculativeRetries")
                        per[twin] = int(session.number(found[0], "Count")) if found else 0
                out[address] = per
            except JmxFailed as exc:
                note = f"speculative retries not read on {address}: {exc}"
                if note not in notes:
                    notes.append(note)
        return out

    def run(self, job: ReplayJob, *, stop: threading.Event, progress: Progress) -> DriverRun:
        """Connect, sweep dead runs' twins and settings, take the lease, create and load the twins, run the periods
        (switching the dynamic snitch between them), drop the twins and restore the snitch whatever happens (module
        doc)."""
        shapes = [self.shape(a.config) for a in job.arms]
        _check_shapes(job.trace, shapes, [a.name for a in job.arms])
        progress("connect", 0.0)
        c = self._connect(job)
        beat: threading.Thread | None = None
        notes: list[str] = [TWIN_NOTE]
        twins = [f"{KEYSPACE}.{twin_name(job.run_id, i)}" for i in range(len(job.arms))]
        lease_stop = threading.Event()
        created: list[str] = []
        alternating = any(job.period(r).cluster for r in range(job.repeats))
        state: _Snitch | None = None
        not_restored: dict[str, str] = {}
        try:
            _ensure_keyspace(c)
            notes.extend(_sweep(c, lambda: self._jmx(job), alternating))
            if alternating:
                _check_whole_cluster(c)
            beat = _lease(c, job, lease_stop)
            if alternating:
                state = _Snitch.take(c, job, self._jmx(job))
            current = _current_options(c.session, self.target.tables[0])
            configs: dict[str, dict[str, Any]] = {}
            for i, arm in enumerate(job.arms):
                options = self._options(arm.config, current)
                shape, chunk = self.shape(arm.config)
                sent_as = {"multiget.shape": shape, **({"multiget.chunk": chunk} if shape == "in" else {})}
                params = {**(arm.config.get("params") or {}), **options, **sent_as}
                if state is not None:
                    params.update(state.as_ran(self.cluster_settings(arm)))
                configs[arm.name] = {"policy": "stock", "params": params}
                _create_twin(c.session, twins[i], options)
                created.append(twins[i])
            if job.warmup_s < 10.0:
                notes.append(f"the warm-up was {job.warmup_s:g} s: under 10 s the twins' speculative-retry "
                             "thresholds may not have been updated twice before measuring")
            if c.outside:
                notes.append(f"{c.outside} node(s) of the cluster are outside the deployment's egress rules: the "
                             "generator does not reach them and their reads are not in the counts")
            if c.rf < 2:
                notes.append(f"the keyspace's replication gives each partition {c.rf} replica in {c.local_dc}: a "
                             "read has no other replica to speculate on, so no speculative retry can happen")
            progress("load", 0.05)
            notes.extend(_load(c.session, twins, job, stop, lambda f: progress("load", 0.05 + 0.2 * f)))
            results, before, after = [], [], []
            for r in range(job.repeats):
                if stop.is_set():
                    raise GeneratorFailed("cancelled", "the run was stopped")
                if state is not None:
                    state.enter(r, job)
                before.append(_counters(c, twins, self._speculations(job, c, twins, notes)))
                progress("replay", 0.25 + 0.7 * r / job.repeats)
                results.append(self._generate(c, job, twins, r, stop, progress))
                after.append(_counters(c, twins, self._speculations(job, c, twins, notes)))
            progress("cleanup", 0.97)
        except GeneratorAborted as exc:
            raise ReplayRefused(f"the replay stopped: {exc.result.reason} (TAILTUNE_REPLAY_MAX_ERROR_FRACTION "
                                f"{job.settings.replay_max_error_fraction:g})") from None
        finally:
            lease_stop.set()
            if state is not None:
                not_restored = state.restore()
            _drop(c.session, created)
            with contextlib.suppress(Exception):
                if not_restored:  # the lease dies, what it changed stays for the next run to restore
                    c.session.execute(f"DELETE deployment, started FROM {KEYSPACE}.{LEASES} WHERE run = %s",
                                      (job.run_id,))
                else:
                    c.session.execute(f"DELETE FROM {KEYSPACE}.{LEASES} WHERE run = %s", (job.run_id,))
            c.cluster.shutdown()
        if beat is not None:
            beat.join(timeout=1.0)
        if not_restored:
            raise ReplayRefused(
                "the dynamic snitch could not be restored on " + "; ".join(f"{a} ({w})" for a, w in
                                                                           not_restored.items())
                + ": the next live replay of the cluster restores it (its lease records what was found)",
                hint="or run updateSnitch by hand with the values in tailtune_replay.runs.changed")
        out = _measured(job, results, before, after, twins, configs, c, notes, self._timer(), shapes)
        if state is not None:
            out.cluster["snitch"] = state.record()
            out = replace(out, notes=(*out.notes, *state.notes))
        return out

    def _generate(self, c: _Cluster, job: ReplayJob, twins: list[str], repeat: int, stop: threading.Event,
                  progress: Progress) -> GeneratorResult:
        shapes = [self.shape(a.config) for a in job.arms]
        arms = tuple(PlanArm(a.name, _statement(t, shape)) for a, t, (shape, _) in zip(job.arms, twins, shapes,
                                                                                         strict=True))
        dealt = job.dealt[repeat]
        trace = job.trace
        plan = Plan.multi(arms, ((int(trace.offsets_us[i]), int(dealt[i]),
                                  _queries(trace.request_keys(i), *shapes[int(dealt[i])]))
                                 for i in range(trace.requests)))
        endpoints = [Endpoint(str(h.address), c.port) for h in c.hosts]
        contact = [e for e in endpoints if e.key()[0] in {str(h.address) for h in c.hosts if h.is_up is not False}]
        s = job.settings
        config = GeneratorConfig(
            contact_points=tuple(contact[:64] or endpoints[:1]),
            allowed=tuple(endpoints),
            local_dc=c.local_dc,
            arms=tuple(self._profile(a.name, a.config) for a in job.arms),
            username=self._cql(job).username,
            rate_scale=job.rate_scale,
            duration_s=job.duration_s,
            block_s=job.block_s,
            warmup_s=job.warmup_s,
            max_in_flight=s.replay_max_in_flight,
            max_error_fraction=s.replay_max_error_fraction,
            abort_after=s.replay_abort_after,
            connect_timeout_ms=int(s.discover_timeout_s * 1000),
            timer_tick_ms=TIMER_TICK_MS,
        )
        password = self._cql(job).password()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = run(self.target.driver, plan, config, egress=self.target.egress, password=password,
                                    stop=stop)
            except BaseException as exc:
                box["error"] = exc

        import time

        thread = threading.Thread(target=work, name="tailtune-replay-generator", daemon=True)
        started = time.monotonic()
        total = job.warmup_s + job.duration_s + 5.0
        thread.start()
        while thread.is_alive():
            thread.join(0.5)
            done = min(1.0, (time.monotonic() - started) / total)
            progress("replay", 0.25 + 0.7 * (repeat + done) / job.repeats)
        if "error" in box:
            raise box["error"]
        result: GeneratorResult = box["result"]
        return result


def _statement(twin: str, shape: str) -> str:
    """An arm's statement: one key (`per-partition`), or a chunk of keys as one `IN ?` list (`in`)."""
    return f"SELECT k, v FROM {twin} WHERE k " + ("= ?" if shape == "per-partition" else "IN ?")


def _chunks(keys: Sequence[str], shape: str, chunk: int) -> list[Sequence[str]]:
    """A request's keys as its queries' keys: one each (`per-partition`), else chunks of `chunk` (0: one)."""
    if shape == "per-partition":
        return [(k,) for k in keys]
    n = chunk or max(1, len(keys))
    return [keys[i : i + n] for i in range(0, len(keys), n)]


def _queries(keys: Sequence[str], shape: str, chunk: int) -> list[tuple[bytes | None, ...]]:
    """A request's queries' bound values (module doc)."""
    if shape == "per-partition":
        return [(encode_value("text", k),) for k in keys]
    return [(encode_list("text", part),) for part in _chunks(keys, shape, chunk)]


def _query_count(keys: int, shape: str, chunk: int) -> int:
    return keys if shape == "per-partition" or keys == 0 else -(-keys // (chunk or keys))


def _check_shapes(trace: ReplayTrace, shapes: Sequence[tuple[str, int]], names: Sequence[str]) -> None:
    """ReplayRefused, before anything is created, when a request would break the plan's limits under any arm's
    shape (any request may be dealt to any arm)."""
    per = np.diff(trace.key_offsets)
    for name, (shape, chunk) in zip(names, shapes, strict=True):
        most = int(per.max()) if per.size else 0
        queries = _query_count(most, shape, chunk)
        if queries > MAX_QUERIES:
            raise ReplayRefused(f"arm {name}: a request of the trace reads {most} keys, {queries} {shape} queries: "
                                f"over the plan's {MAX_QUERIES} queries per request",
                                hint="a larger multiget.chunk (fewer IN queries)")
        if shape != "in":
            continue
        for i in range(trace.requests):
            for part in _chunks(trace.request_keys(i), shape, chunk):
                size = 4 + sum(4 + len(k.encode()) for k in part)
                if size > MAX_VALUE_BYTES:
                    raise ReplayRefused(f"arm {name}: request {i}'s IN list of {len(part)} keys serializes to "
                                        f"{size:,} bytes, over the plan's {MAX_VALUE_BYTES:,} per value",
                                        hint="a smaller multiget.chunk")


def _replication(session: Any, keyspace: str) -> dict[str, str]:
    row = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                          (keyspace,)).one()
    return {str(k): str(v) for k, v in dict(row.replication).items()}


def _rf(replication: Mapping[str, str], local_dc: str) -> int:
    cls = replication.get("class", "")
    raw = replication.get("replication_factor") if cls.endswith("SimpleStrategy") else replication.get(local_dc)
    try:
        return int(str(raw).split("/")[0])
    except (TypeError, ValueError):
        return 1


def _cql_map(m: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in m.items() if re.fullmatch(r"[A-Za-z0-9_.:/-]+", f"{k}{v}")) + "}"


def _ensure_keyspace(c: _Cluster) -> None:
    """The scratch keyspace with the user keyspace's replication (altered to it when it differs), and the lease
    table."""
    s = c.session
    wanted = _cql_map(c.replication)
    s.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = {wanted}")
    if _replication(s, KEYSPACE) != c.replication:
        s.execute(f"ALTER KEYSPACE {KEYSPACE} WITH replication = {wanted}")
    s.execute(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.{LEASES} (run text PRIMARY KEY, deployment text, "
              "started double, changed text)")
    s.execute(f"ALTER TABLE {KEYSPACE}.{LEASES} ADD IF NOT EXISTS changed text")


def _sweep(c: _Cluster, jmx: Callable[[], SnitchJmx], strict: bool) -> list[str]:
    """Put back the dynamic-snitch settings dead runs left changed (their lease's `changed`, which has no TTL) and
    drop the twins of runs holding no lease; notes saying what. `strict` (this run alternates the snitch itself):
    ReplayRefused when a dead run's settings cannot be restored, or a live run is alternating them now."""
    import json

    s = c.session
    rows = list(s.execute(f"SELECT run, deployment, started, changed FROM {KEYSPACE}.{LEASES}"))
    live = {str(r.run) for r in rows if r.started is not None}
    notes: list[str] = []
    for r in rows:
        if not r.changed:
            continue
        if r.started is not None:
            if strict:
                raise ReplayRefused(f"another live replay (run {r.run}, deployment {r.deployment}) is alternating "
                                    "the cluster's dynamic snitch now: one at a time")
            notes.append(f"another live replay (run {r.run}) alternated the cluster's dynamic snitch during this one")
            continue
        try:
            found = {str(a): SnitchValues.of(v) for a, v in dict(json.loads(r.changed)).items()}
            client = jmx()
            back = {a: client.apply(a, v).as_knobs() for a, v in found.items()}
        except (TailtuneError, ValueError, TypeError) as exc:
            why = (f"the dynamic-snitch settings a replay that did not finish (run {r.run}) changed could not be "
                   f"restored: {exc}")
            if strict:
                raise ReplayRefused(why) from None
            notes.append(why + " (the next replay tries again)")
            continue
        s.execute(f"DELETE FROM {KEYSPACE}.{LEASES} WHERE run = %s", (r.run,))
        notes.append(f"restored the dynamic-snitch settings a replay that did not finish (run {r.run}) left "
                     f"changed: {back}")
    tables = [str(r.table_name) for r in s.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (KEYSPACE,))]
    dead = [t for t in tables if (m := _TWIN.fullmatch(t)) is not None and m.group(1) not in live]
    _drop(s, [f"{KEYSPACE}.{t}" for t in dead])
    if dead:
        notes.append(f"dropped {len(dead)} twin table(s) a replay that did not finish left behind: {', '.join(dead)}")
    return notes


def _check_whole_cluster(c: _Cluster) -> None:
    """A cluster-wide setting must reach every node: ReplayRefused naming those it cannot."""
    down = [str(h.address) for h in c.hosts if h.is_up is False]
    if c.outside or down:
        what = (f"{c.outside} node(s) are outside the deployment's egress rules" if c.outside else
                f"node(s) {', '.join(down)} are down")
        raise ReplayRefused(f"the configs differ in the dynamic snitch, which the live replay sets on every node: "
                            f"{what}")


class _Snitch:
    """The dynamic snitch across one run's periods: what every node had before the first (`found`, written to
    the lease before any change), what each period applied (read back), and its restoration."""

    def __init__(self, c: _Cluster, job: ReplayJob, jmx: SnitchJmx, found: dict[str, SnitchValues]) -> None:
        self.c, self.job, self.jmx, self.found = c, job, jmx, found
        self.applied = dict(found)
        self.touched: list[str] = []
        self.periods: list[dict[str, Any]] = []
        self.restored: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []

    @classmethod
    def take(cls, c: _Cluster, job: ReplayJob, jmx: SnitchJmx) -> _Snitch:
        import json

        try:
            found = {str(h.address): jmx.read(str(h.address)) for h in c.hosts}
        except TailtuneError as exc:
            raise ReplayRefused(f"the dynamic snitch: {exc}") from None
        c.session.execute(f"UPDATE {KEYSPACE}.{LEASES} SET changed = %s WHERE run = %s",
                          (json.dumps({a: v.as_knobs() for a, v in found.items()}), job.run_id))
        return cls(c, job, jmx, found)

    def as_ran(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """An arm's snitch knobs as its periods run them (unset ones: the first node's found value)."""
        first = next(iter(self.found.values()))
        return SnitchValues.of(settings, first).as_knobs()

    def enter(self, r: int, job: ReplayJob) -> None:
        """Apply period r's settings on every node where they are not what runs (read back)."""
        period = job.period(r)
        nodes: dict[str, Any] = {}
        switched = False
        for address, found in self.found.items():
            want = SnitchValues.of(period.cluster, found)
            if not want.same(self.applied[address]):
                switched = True
                if address not in self.touched:
                    self.touched.append(address)
                try:
                    self.applied[address] = self.jmx.apply(address, want)
                except TailtuneError as exc:
                    raise ReplayRefused(f"the dynamic snitch of period {r}: {exc}") from None
            nodes[address] = self.applied[address].as_knobs()
        update_s = max(v.update_ms for v in self.applied.values()) / 1000.0
        if switched and job.warmup_s < SNITCH_WARMUP_UPDATES * update_s and not self.notes:
            self.notes.append(f"the warm-up after a switch of the dynamic snitch was {job.warmup_s:g} s: under "
                              f"{SNITCH_WARMUP_UPDATES} of its update intervals ({update_s:g} s), its scores may not "
                              "have been recomputed from the new period's reads before measuring")
        self.periods.append({"period": r, "group": period.group,
                             "arms": [job.arms[i].name for i in period.arms], "switched": switched,
                             "nodes": nodes})

    def restore(self) -> dict[str, str]:
        """Every node changed back to what it had (read back); {node: why} where that failed."""
        failed: dict[str, str] = {}
        for address in self.touched:
            try:
                self.restored[address] = self.jmx.apply(address, self.found[address]).as_knobs()
            except Exception as exc:
                failed[address] = str(exc)
        return failed

    def record(self) -> dict[str, Any]:
        return {"source": "JMX: StorageService.updateSnitch, DynamicEndpointSnitch (read back)",
                "found": {a: v.as_knobs() for a, v in self.found.items()}, "periods": self.periods,
                "restored": self.restored}


def _lease(c: _Cluster, job: ReplayJob, stop: threading.Event) -> threading.Thread:
    """Write the run's lease and renew it every quarter of its TTL until `stop` (module doc)."""
    import time

    ttl = int(job.settings.replay_lease_s)
    insert = (f"INSERT INTO {KEYSPACE}.{LEASES} (run, deployment, started) VALUES (%s, %s, %s) USING TTL {ttl}")
    args = (job.run_id, job.deployment, time.time())
    c.session.execute(insert, args)

    def renew() -> None:
        while not stop.wait(ttl / 4):
            with contextlib.suppress(Exception):
                c.session.execute(insert, args)

    beat = threading.Thread(target=renew, name="tailtune-replay-lease", daemon=True)
    beat.start()
    return beat


def _current_options(session: Any, table: str) -> dict[str, str]:
    """The user's table's table options now (`system_schema.tables`), as text."""
    from simulation.stock_appliers import TABLE

    names = TABLE.names()
    ks, name = table.split(".", 1)
    row = session.execute(TABLE.select(names), (ks, name)).one()
    if row is None:
        return {}
    return {n: str(getattr(row, n)) for n in names if getattr(row, n, None) is not None}


def _create_twin(session: Any, table: str, options: Mapping[str, str]) -> None:
    from simulation.stock_appliers import TABLE

    rows = {k.name: k for k in TABLE.knobs()}
    sets = " AND ".join(f"{n} = {TABLE.literal(rows[n], t)}" for n, t in options.items())
    session.execute(f"CREATE TABLE {table} (k text PRIMARY KEY, v blob)" + (f" WITH {sets}" if sets else ""))


def _drop(session: Any, tables: Sequence[str]) -> None:
    for t in tables:
        with contextlib.suppress(Exception):
            session.execute(f"DROP TABLE IF EXISTS {t}")


def _load(session: Any, twins: Sequence[str], job: ReplayJob, stop: threading.Event,
          progress: Any) -> list[str]:
    """Every distinct key of the trace into every twin, a value of its size, at consistency ALL."""
    from cassandra import ConsistencyLevel
    from cassandra.concurrent import execute_concurrent_with_args

    s = job.settings
    sizes: dict[str, int] = {}
    for k, v in zip(job.trace.keys, job.trace.value_sizes.tolist(), strict=True):
        if v >= 0 or k not in sizes:
            sizes[k] = int(v)
    if len(sizes) > s.replay_max_keys:
        raise ReplayRefused(f"the replay reads {len(sizes):,} distinct keys: over TAILTUNE_REPLAY_MAX_KEYS "
                            f"({s.replay_max_keys:,})")
    known = [v for v in sizes.values() if v >= 0]
    median = int(statistics.median(known)) if known else 100
    notes = [] if len(known) == len(sizes) else [f"{len(sizes) - len(known)} keys without a value size were "
                                                 f"loaded with the median size, {median} bytes"]
    cut = sum(1 for v in sizes.values() if v > s.replay_max_value_bytes)
    if cut:
        notes.append(f"{cut} values larger than TAILTUNE_REPLAY_MAX_VALUE_BYTES ({s.replay_max_value_bytes} bytes) "
                     "were written at that size")
    rows = [(k, bytes(min(v if v >= 0 else median, s.replay_max_value_bytes))) for k, v in sizes.items()]
    step = 2000
    total = len(rows) * len(twins)
    done = 0
    for twin in twins:
        insert = session.prepare(f"INSERT INTO {twin} (k, v) VALUES (?, ?)")
        insert.consistency_level = ConsistencyLevel.ALL
        for start in range(0, len(rows), step):
            if stop.is_set():
                raise GeneratorFailed("cancelled", "the run was stopped")
            chunk = rows[start : start + step]
            for ok, res in execute_concurrent_with_args(session, insert, chunk, concurrency=64,
                                                        raise_on_first_error=False):
                if not ok:
                    raise ReplayRefused(f"loading {twin} failed at consistency ALL ({type(res).__name__}): every "
                                        "replica must take the twins' data")
            done += len(chunk)
            progress(done / total)
    return notes


def _counters(c: _Cluster, twins: Sequence[str],
              speculations: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, dict[str, int]]]:
    """Each allowed node's replica and coordinator reads of each twin, and its speculative retries where they were
    read over JMX (`speculations`): {node: {twin: {"local", "coordinator"[, "speculative"]}}} (a node that does
    not answer is left out)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for host in c.hosts:
        if host.is_up is False:
            continue
        per: dict[str, dict[str, int]] = {}
        try:
            for twin in twins:
                ks, name = twin.split(".", 1)
                counts = {}
                for key, source in (("local", _LOCAL), ("coordinator", _COORDINATOR)):
                    row = c.session.execute(f"SELECT count FROM {source} WHERE keyspace_name = %s AND "
                                            "table_name = %s", (ks, name), host=host).one()
                    counts[key] = int(row.count) if row is not None and row.count is not None else 0
                spec = speculations.get(str(host.address), {})
                if twin in spec:
                    counts["speculative"] = int(spec[twin])
                per[twin] = counts
        except Exception:
            continue
        out[str(host.address)] = per
    return out


def _lag_ms(results: Sequence[GeneratorResult]) -> dict[str, float]:
    lag = Histogram()
    for r in results:
        lag.add(r.lag)
    return {"p50": lag.value_at_percentile(50) / 1e3, "p99": lag.value_at_percentile(99) / 1e3,
            "max": lag.max / 1e3}


def _measured(job: ReplayJob, results: Sequence[GeneratorResult], before: Sequence[Mapping[str, Any]],
              after: Sequence[Mapping[str, Any]], twins: Sequence[str], configs: dict[str, dict[str, Any]],
              c: _Cluster, notes: list[str], model_params: dict[str, float], shapes: Sequence[tuple[str, int]]
              ) -> DriverRun:
    n = len(job.arms)
    blocks = job.blocks
    rows = [[h for r in results for h in r.arms[a].blocks[:blocks]] for a in range(n)]
    upper, counts = bucket_table(rows)
    warm = job.trace.sent_before(job.warmup_s, job.rate_scale)
    per_request = np.diff(job.trace.key_offsets)
    cluster: dict[str, Any] = {"source": f"{_LOCAL}, {_COORDINATOR}", "replication": c.replication, "rf": c.rf,
                               "nodes": {}, "arms": {}}
    measures = []
    for a, arm in enumerate(job.arms):
        twin = twins[a]
        local = coord = 0
        counted: int | None = 0
        for b, e in zip(before, after, strict=True):
            for node, per in e.items():
                if node in b and twin in per and twin in b[node]:
                    d_local = per[twin]["local"] - b[node][twin]["local"]
                    d_coord = per[twin]["coordinator"] - b[node][twin]["coordinator"]
                    local += d_local
                    coord += d_coord
                    node_arms = cluster["nodes"].setdefault(node, {})
                    got = node_arms.setdefault(arm.name, {"replica_reads": 0, "coordinator_reads": 0})
                    got["replica_reads"] += d_local
                    got["coordinator_reads"] += d_coord
                    if "speculative" in per[twin] and "speculative" in b[node][twin]:
                        d_spec = per[twin]["speculative"] - b[node][twin]["speculative"]
                        got["speculative_retries"] = got.get("speculative_retries", 0) + d_spec
                        if counted is not None:
                            counted += d_spec
                    else:
                        counted = None
        if not any("speculative" in per.get(twin, {}) for e in after for per in e.values()):
            counted = None
        sent = sum(r.arms[a].sent for r in results)
        sent_all = sent + sum(int(np.count_nonzero(job.dealt[r][:warm] == a)) for r in range(len(results)))
        shape, chunk = shapes[a]
        queries = sum(r.arms[a].queries for r in results)
        keys = rows_keys = 0
        for r, res in enumerate(results):
            mine = job.dealt[r] == a
            warm_keys = per_request[:warm][mine[:warm]]
            measured_keys = per_request[: res.sent][mine[: res.sent]]
            queries += sum(_query_count(int(k), shape, chunk) for k in warm_keys)
            keys += int(warm_keys.sum()) + int(measured_keys.sum())
            rows_keys += int(measured_keys.sum())
        answered = sum(r.arms[a].rows for r in results)
        # The coordinators' own count where it was read (JMX), else replica reads beyond coordinator reads — which
        # under-counts when a node outside the egress rules serves replica reads no one counts.
        spec = counted if counted is not None else max(0, local - coord)
        extra = max(0, min(local, local - keys), min(local, spec))
        cluster["arms"][arm.name] = {"twin": twin, "shape": shape, **({"chunk": chunk} if shape == "in" else {}),
                                     "requests_sent": sent_all, "queries_sent": queries, "keys_read": keys,
                                     "rows_answered": answered, "replica_reads": local, "coordinator_reads": coord,
                                     "speculative_retries": spec,
                                     "speculative_retries_source": ("the coordinators' SpeculativeRetries (JMX)"
                                                                    if counted is not None else
                                                                    "replica reads beyond coordinator reads"),
                                     "driver_extra_executions": max(0, coord - keys), "extra_reads": extra}
        failed = sum(r.arms[a].errors + r.arms[a].timeouts for r in results)
        if answered != rows_keys and not failed:
            notes.append(f"arm {arm.name}: its answers held {answered} rows of the {rows_keys} keys its measured "
                         "requests read (every key is in its twin)")
        hist = BlockHistograms(np.asarray(upper or [1.0], dtype=np.float64),
                               np.asarray(counts[a] if upper else np.zeros((len(rows[a]), 1)), dtype=np.int64),
                               job.block_s)
        measures.append(ArmMeasure(arm.name, hist, sent, sum(r.arms[a].errors for r in results),
                                   sum(r.arms[a].timeouts for r in results), 0, local, extra))
    sent_total = sum(r.sent for r in results)
    intended = sum(r.intended_s for r in results)
    send = sum(r.send_s for r in results)
    cpu = sum(r.cpu_s for r in results)
    if not math.isfinite(intended) or intended <= 0:
        intended = 0.0
    return DriverRun(
        generator=results[0].generator if results else "?",
        arms=tuple(measures),
        intended_per_s=sent_total / intended if intended > 0 else 0.0,
        achieved_per_s=sent_total / send if send > 0 else 0.0,
        cpu_us_per_request=cpu * 1e6 / sent_total if sent_total else 0.0,
        lag_ms=_lag_ms(results),
        configs=configs,
        cluster=cluster,
        notes=tuple(notes),
        model_params=model_params,
    )

