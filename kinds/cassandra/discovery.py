"""Discovery of a Cassandra cluster, over CQL (the publisher's connection: `kinds.cassandra.cql`, under the egress
rules):

* the nodes and their tokens (`system.local`, `system.peers_v2`), datacenter and rack → inputs `ring` and
  `servers` (the nodes of the contact point's datacenter; every node for SimpleStrategy, which ignores them);
* the replication of the keyspace of the deployment's tables (`system_schema.keyspaces`) → `replication` (its
  replication_factor, or for NetworkTopologyStrategy the contact point's datacenter's; the per-datacenter map
  stays in the ring);
* each node's `concurrent_reads` (`system_views.settings`) → `slots`, and its snitch settings (a reading);
* each table's options (`system_schema.tables`: the table options' applier, `stock_appliers.TABLE`, today
  `speculative_retry`), which become the deployment's `current_config` (`{"policy": "stock", "params":
  {"speculative_retry": ...}}`) on a stock server whose current config nobody else set;
* the read latencies each node reports per table (`system_views.local_read_latency`,
  `system_views.coordinator_read_latency`). Cassandra 5.0 fills their `*_ms` columns with its microsecond
  histograms multiplied by 1e-6, i.e. seconds, rounded to three decimals: the figures are converted to ms
  (× 1000) and resolve 1 ms at best. Where a table's local p50 reads 0 (a sub-millisecond service time) the
  reading adds `single_key`: `discover_probe_reads` single-partition reads timed client-side one at a time.

Every value read goes through `control.discovery`'s checks (tokens within their partitioner's range, a release
version of short numbers); a value that fails is a permanent `DiscoveryFailed` naming the node and the field.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from base.errors import BadInputError
from control.discovery import checked, integer, refused, shown, timed_rounds
from control.egress import Egress, EgressRefused
from control.kind import Discovered, DiscoveryFailed
from control.model import MODEL_MAX_SLOTS, check_input
from kinds.cassandra.cql import ConnectFailed, CqlTarget, PasswordMissing
from simulation.stock_appliers import SNITCH, TABLE
from simulation.stock_knobs import JAVA_INT_MAX

__all__ = [
    "INTEGER_PARTITIONERS",
    "LATENCY_SECONDS_RELEASES",
    "LATENCY_TABLES",
    "MIN_RELEASE",
    "SETTINGS",
    "TOKEN_RANGES",
    "discover_cassandra",
    "open_session",
    "parse_strategy",
    "partition_key",
    "probe_reader",
    "probe_times",
    "slots_of",
    "statement_reader",
]

KIND = "cassandra"
#: The node settings read from `system_views.settings`: `concurrent_reads` and the snitch's.
SETTINGS = ("concurrent_reads", *SNITCH.settings())
#: reading name → the virtual table it comes from.
LATENCY_TABLES = {"local": "system_views.local_read_latency", "coordinator": "system_views.coordinator_read_latency"}
#: Releases whose latency tables' unit was read in Cassandra's source and checked against client-side timing
#: (tests/control/test_discovery.py): the `*_ms` columns hold seconds (µs × 1e-6) rounded to 3 decimals.
LATENCY_SECONDS_RELEASES = ("5.0",)
#: Partitioners whose tokens are integers.
INTEGER_PARTITIONERS = ("Murmur3Partitioner", "RandomPartitioner")
MIN_RELEASE = (4, 0)
#: Token ranges of the integer partitioners.
TOKEN_RANGES = {"Murmur3Partitioner": (-(2**63), 2**63 - 1), "RandomPartitioner": (0, 2**127)}


def _short_class(name: str) -> str:
    return str(name).rsplit(".", 1)[-1]


def _rf(text: Any, node: str, field_: str) -> int:
    """A replication factor as Cassandra stores it: "3", or "3/1" (3 replicas, 1 transient); 0 (a datacenter
    without replicas) up to the model's most; else `refused`."""
    rf = integer(str(text).split("/", 1)[0], node, field_)
    high = check_input("replication", rf)
    if rf != 0 and high is not None:
        raise refused(node, field_, high)
    return rf


def parse_strategy(replication: Mapping[str, Any], where: str = "cassandra") -> dict[str, Any]:
    """`system_schema.keyspaces.replication` as the ring's `strategy`; a factor that is not one is `refused`,
    naming `where` and the field."""
    cls = _short_class(str(replication.get("class", "")))
    if cls == "SimpleStrategy":
        return {"class": cls, "replication_factor": _rf(replication.get("replication_factor", 1), where,
                                                        "replication.replication_factor")}
    if cls == "NetworkTopologyStrategy":
        return {"class": cls, "replication": {str(k): _rf(v, where, f"replication.{shown(str(k))[1:-1]}")
                                              for k, v in sorted(replication.items()) if k != "class"}}
    return {"class": cls}


def _release(text: str, node: str = "cassandra") -> tuple[int, int]:
    parts = []
    for p in str(text).split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isascii() and ch.isdigit())
        if len(digits) > 9:
            raise refused(node, "release_version", f"not a Cassandra release version: {shown(text)}")
        parts.append(int(digits or 0))
    parts += [0, 0]
    return parts[0], parts[1]


def _tokens(values: Iterable[Any], partitioner: str, node: str) -> list[Any]:
    bounds = TOKEN_RANGES.get(partitioner)
    if partitioner not in INTEGER_PARTITIONERS:
        return sorted(str(t) for t in values)
    tokens = sorted(integer(t, node, "tokens") for t in values)
    if bounds is not None and tokens and (tokens[0] < bounds[0] or tokens[-1] > bounds[1]):
        bad = tokens[0] if tokens[0] < bounds[0] else tokens[-1]
        raise refused(node, "tokens", f"{shown(bad)} is outside the {partitioner}'s range "
                                      f"[{bounds[0]}, {bounds[1]}]")
    return tokens


def _fmt_node(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


class _Cql:
    """One discovery's session: every query through `run`, which turns the driver's errors into one line naming
    the node and what to do."""

    def __init__(self, target: CqlTarget, session: Any) -> None:
        self.target = target
        self.session = session

    def run(self, cql: str, args: Sequence[Any] | None = None, *, host: Any = None, node: str = "") -> list[Any]:
        from cassandra import DriverException, InvalidRequest, Unauthorized
        from cassandra.protocol import ErrorMessage, SyntaxException

        where = node or "the cluster"
        what = cql.split(" FROM ", 1)[-1].split(" ", 1)[0] if " FROM " in cql else cql.split(" ", 1)[0]
        try:
            return list(self.session.execute(cql, args, host=host))
        except Unauthorized as exc:
            user = self.target.username or "(anonymous)"
            raise DiscoveryFailed(
                f"cassandra node {where}: role {user!r} may not read {what} ({self.target.scrub(str(exc))}): "
                f"grant it SELECT on {what}, or discover as a role that may",
                permanent=True,
            ) from None
        except (InvalidRequest, SyntaxException) as exc:
            raise DiscoveryFailed(
                f"cassandra node {where}: {what} cannot be read on this version ({self.target.scrub(str(exc))}): "
                "discovery needs Cassandra 4.0 or newer",
                permanent=True,
            ) from None
        except (DriverException, ErrorMessage, OSError) as exc:
            raise DiscoveryFailed(
                f"cassandra node {where}: reading {what} failed ({type(exc).__name__}: "
                f"{self.target.scrub(str(exc))}): check the node is up and answers within "
                f"TAILTUNE_DISCOVER_TIMEOUT_S ({self.target.timeout_s:g} s)"
            ) from None


def open_session(connection: Mapping[str, Any], egress: Egress, timeout_s: float) -> tuple[CqlTarget, Any, Any]:
    """(target, cluster, session) at consistency ONE for reading a live cluster — the caller shuts the cluster
    down; raises DiscoveryFailed with the one line that names the node and what to do."""
    target = CqlTarget(connection, egress, timeout_s)
    try:
        cluster, session = target.connect(consistency="ONE")
    except EgressRefused as exc:
        raise DiscoveryFailed(f"cassandra: {exc}", permanent=exc.permanent) from None
    except PasswordMissing as exc:
        raise DiscoveryFailed(
            f"cassandra: {exc}: set it in the environment of the process that connects (the worker, or this shell)",
            permanent=True,
        ) from None
    except ConnectFailed as exc:
        raise _connect_problem(target, exc) from None
    return target, cluster, session


def _connect_problem(target: CqlTarget, exc: ConnectFailed) -> DiscoveryFailed:
    """The one line for a session that could not be opened: the first contact point's own error, classified."""
    from cassandra import AuthenticationFailed, OperationTimedOut

    if not exc.errors:
        return DiscoveryFailed(f"{exc}: check connection.contact_points and connection.port")
    node, err = next(iter(exc.errors.items()))
    text = target.scrub(str(err))
    env = target.connection.get("password_env")
    if isinstance(err, AuthenticationFailed):
        user = target.username
        if user is None:
            return DiscoveryFailed(
                f"cassandra {node}: the node requires a login ({text}): set connection.username and "
                "connection.password_env (the variable holding the password in the worker's environment)",
                permanent=True,
            )
        return DiscoveryFailed(
            f"cassandra {node}: login as {user!r} refused — wrong password or no such role ({text}): check "
            f"connection.username and the password in {env}",
            permanent=True,
        )
    lowered = text.lower()
    if "protocol" in lowered and "version" in lowered:
        return DiscoveryFailed(
            f"cassandra {node}: the node does not speak CQL native protocol v5 ({text}): discovery needs "
            "Cassandra 4.0 or newer",
            permanent=True,
        )
    if isinstance(err, ConnectionRefusedError) or "refused" in lowered:
        return DiscoveryFailed(
            f"cassandra {node}: connection refused — no node listens there: start the node, or fix "
            "connection.contact_points / connection.port"
        )
    if isinstance(err, OperationTimedOut | TimeoutError) or "timed out" in lowered:
        login = f" or did not finish the login as {target.username!r}" if target.username else ""
        return DiscoveryFailed(
            f"cassandra {node}: no answer within {target.timeout_s:g} s (the node is down or unreachable{login}): "
            "check the node, the network and the credentials, or raise TAILTUNE_DISCOVER_TIMEOUT_S"
        )
    return DiscoveryFailed(f"cassandra {node}: {type(err).__name__}: {text}: check the node and connection")


def _row(r: Any) -> dict[str, Any]:
    return dict(r._asdict()) if hasattr(r, "_asdict") else dict(r)


def _latency(raw: Mapping[str, Any], scale: float | None) -> dict[str, Any]:
    """One virtual-table row as figures: count, p50/p99/max in ms (None when the unit is not known for this
    release) and per_second (the five-minute rate)."""
    def pick(*names: str) -> float | None:
        for n in names:
            if raw.get(n) is not None:
                return float(raw[n])
        return None

    out: dict[str, Any] = {"count": int(raw.get("count") or 0)}
    for key, names in (("p50_ms", ("p50th_ms", "50th_ms")), ("p99_ms", ("p99th_ms", "99th_ms")),
                       ("max_ms", ("max_ms",))):
        value = pick(*names)
        out[key] = None if value is None or scale is None else round(value * scale, 6)
    out["per_second"] = pick("per_second")
    return out


def _combine(per_node: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A table's figures over its nodes: counts and rates added, percentiles the worst node's."""
    rows = list(per_node.values())
    if not rows:
        return {}
    out: dict[str, Any] = {"count": sum(int(r.get("count") or 0) for r in rows)}
    for key in ("p50_ms", "p99_ms", "max_ms"):
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = max(values) if values else None
    rates = [float(r["per_second"]) for r in rows if r.get("per_second") is not None]
    out["per_second"] = sum(rates) if rates else None
    return out


def partition_key(cql: _Cql, table: str) -> list[str]:
    """The partition key columns of `table` (`keyspace.name`), in order, from `system_schema.columns`."""
    ks, name = table.split(".", 1)
    cols = cql.run(
        "SELECT column_name, kind, position FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
        (ks, name),
    )
    return [str(r.column_name) for r in sorted(cols, key=lambda r: int(r.position)) if r.kind == "partition_key"]


def statement_reader(cql: _Cql, stmt: Any, args: Any, what: str, fix: str) -> Callable[[], object]:
    """`stmt` with `args` as a call that raises DiscoveryFailed naming `what` was being timed and `fix` (the driver's
    error scrubbed of the target's secrets)."""

    def read() -> object:
        try:
            return cql.session.execute(stmt, args)
        except Exception as exc:
            raise DiscoveryFailed(
                f"cassandra: timing {what} failed ({type(exc).__name__}: {cql.target.scrub(str(exc))}): {fix}"
            ) from None

    return read


def probe_statement(cql: _Cql, table: str) -> tuple[Any, tuple[Any, ...]] | str:
    """The single-partition read of `table` (`SELECT * ... WHERE <partition key> = ? LIMIT 1` of its first
    partition, prepared, consistency ONE) and its bound key; or why nothing can be read."""
    from cassandra import ConsistencyLevel
    from cassandra.metadata import protect_name

    keys = partition_key(cql, table)
    if not keys:
        return f"{table} has no partition key in system_schema.columns"
    quoted = ", ".join(protect_name(k) for k in keys)
    first = cql.run(f"SELECT {quoted} FROM {table} LIMIT 1")
    if not first:
        return f"{table} holds no row to read"
    where = " AND ".join(f"{protect_name(k)} = ?" for k in keys)
    stmt = cql.session.prepare(f"SELECT * FROM {table} WHERE {where} LIMIT 1")
    stmt.consistency_level = ConsistencyLevel.ONE
    return stmt, tuple(first[0])


def probe_reader(cql: _Cql, table: str) -> tuple[Callable[[], object] | None, str | None]:
    """One single-partition read of `table` (`probe_statement`) as a call, and None; or None and why nothing can be
    read. The call raises DiscoveryFailed naming the table when a read fails."""
    found = probe_statement(cql, table)
    if isinstance(found, str):
        return None, found
    stmt, key = found
    return statement_reader(cql, stmt, key, f"single-key reads of {table}",
                            "check the cluster, or set TAILTUNE_DISCOVER_PROBE_READS=0"), None


def probe_times(cql: _Cql, table: str, reads: int) -> tuple[list[float], str | None]:
    """Client-side times (ms) of `reads` single-partition reads of `table`, one at a time (after five uncounted
    warm-up reads), and None; or [] and why nothing could be read."""
    read, why = probe_reader(cql, table)
    if read is None:
        return [], why
    return timed_rounds([read], reads)[0], None


def _probe(cql: _Cql, table: str, reads: int) -> dict[str, Any]:
    """Time `reads` single-partition reads of `table`, one at a time, client-side (an upper bound of the
    service time: it includes the network and the driver)."""
    times, why = probe_times(cql, table, reads)
    if why is not None:
        return {"reads": 0, "how": why}
    times.sort()
    return {
        "reads": len(times),
        "p50_ms": round(statistics.median(times), 4),
        "p99_ms": round(times[min(len(times) - 1, int(0.99 * len(times)))], 4),
        "mean_ms": round(statistics.fmean(times), 4),
        "how": f"client-side timing of {len(times)} single-partition reads of {table} (SELECT * ... LIMIT 1 of one "
        "partition, consistency ONE), one at a time: the round trip, network and driver included — an upper "
        "bound of the node's service time, which the latency tables cannot resolve below 1 ms",
    }


def _stock_config(tables: Mapping[str, Mapping[str, str]], notes: list[str]) -> dict[str, Any] | None:
    """The stock config the tables' options amount to: each option's most common value in params; when the
    tables differ in an option, each table's value of it in target.table_options."""
    from simulation.config_check import TABLE_OPTIONS
    from simulation.stock_appliers import TABLE

    rows = {k.name: k for k in TABLE.knobs()}
    try:
        rendered = {t: {n: TABLE.text(rows[n], TABLE.read(rows[n], v, where=f"{n} of {t}")) for n, v in opts.items()}
                    for t, opts in tables.items()}
    except BadInputError as exc:
        notes.append(f"current_config not derived: {exc.problems[0].problem}")
        return None
    if not rendered:
        return None
    params: dict[str, Any] = {}
    explicit: dict[str, dict[str, str]] = {t: {} for t in rendered}
    for name in rows:
        values = {t: opts[name] for t, opts in rendered.items()}
        params[name] = Counter(values.values()).most_common(1)[0][0]
        if len(set(values.values())) > 1:
            for t, v in values.items():
                explicit[t][name] = v
    config: dict[str, Any] = {"policy": "stock", "params": params}
    if any(explicit.values()):
        config["target"] = {TABLE_OPTIONS: {t: opts for t, opts in explicit.items() if opts}}
    return config


def discover_cassandra(
    connection: Mapping[str, Any],
    tables: Sequence[str],
    *,
    egress: Egress,
    timeout_s: float,
    probe_reads: int = 0,
    server: str = "stock",
    log: Callable[[str], None] = lambda _: None,
) -> Discovered:
    """Read a Cassandra cluster (see the module's docstring); raises DiscoveryFailed."""
    found = Discovered(KIND, time.time())
    target, cluster, session = open_session(connection, egress, timeout_s)
    try:
        _read_cassandra(_Cql(target, session), cluster, target, found, tables, probe_reads, server, log)
    finally:
        cluster.shutdown()
    return found


def _read_cassandra(
    cql: _Cql,
    cluster: Any,
    target: CqlTarget,
    found: Discovered,
    tables: Sequence[str],
    probe_reads: int,
    server: str,
    log: Callable[[str], None],
) -> None:
    egress = target.egress
    hosts = sorted(cluster.metadata.all_hosts(), key=lambda h: (str(h.address), int(h.endpoint.port)))
    points = target.contact_points()
    contact = next((h for p in points for h in hosts if str(h.address) == p), hosts[0] if hosts else None)
    if contact is None:
        raise DiscoveryFailed(f"cassandra {points}: the driver found no node: check connection.contact_points")
    contact_name = _fmt_node(str(contact.address), int(contact.endpoint.port))

    # --- the ring, as the contact node knows it -------------------------------------------------------------
    local = cql.run(
        "SELECT broadcast_address, rpc_address, host_id, data_center, rack, tokens, partitioner, release_version "
        "FROM system.local", host=contact, node=contact_name,
    )
    if not local:
        raise DiscoveryFailed(f"cassandra node {contact_name}: system.local is empty: is the node still starting?")
    me = local[0]
    release = str(me.release_version)
    if _release(release, f"cassandra node {contact_name}") < MIN_RELEASE:
        raise DiscoveryFailed(
            f"cassandra node {contact_name} runs Cassandra {release}: discovery needs 4.0 or newer "
            "(system.peers_v2, system_views)",
            permanent=True,
        )
    partitioner = str(me.partitioner)
    short = _short_class(partitioner)
    integers = short in INTEGER_PARTITIONERS
    peers = cql.run(
        "SELECT peer, peer_port, native_address, native_port, host_id, data_center, rack, tokens, release_version "
        "FROM system.peers_v2", host=contact, node=contact_name,
    )
    local_dc = str(me.data_center)
    nodes: list[dict[str, Any]] = [
        {"address": str(me.broadcast_address or me.rpc_address), "native_address": str(me.rpc_address),
         "dc": local_dc, "rack": str(me.rack), "host_id": str(me.host_id), "release_version": release,
         "tokens": _tokens(me.tokens or (), short, f"cassandra node {contact_name} (system.local)")}
    ]
    for p in peers:
        peer = f"cassandra node {contact_name} (system.peers_v2 row of {shown(str(p.peer))[1:-1]})"
        _release(str(p.release_version), peer)
        nodes.append({"address": str(p.peer), "native_address": str(p.native_address or p.peer),
                      "dc": str(p.data_center), "rack": str(p.rack), "host_id": str(p.host_id),
                      "release_version": str(p.release_version), "tokens": _tokens(p.tokens or (), short, peer)})
    nodes.sort(key=lambda n: (n["dc"], n["address"]))
    log(f"cassandra {release}: {len(nodes)} node(s) ({', '.join(sorted({n['dc'] for n in nodes}))}), "
        f"contact {contact_name} in {local_dc}")

    # --- the keyspaces and tables of the deployment ----------------------------------------------------------
    keyspaces: dict[str, dict[str, Any]] = {}
    for ks in dict.fromkeys(t.split(".", 1)[0] for t in tables):
        rows = cql.run("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,),
                       host=contact, node=contact_name)
        if not rows:
            raise DiscoveryFailed(
                f"cassandra: keyspace {ks} (of the deployment's tables) does not exist: fix the deployment's tables "
                "(tailtune deployments set NAME --table keyspace.table)", permanent=True,
            )
        keyspaces[ks] = {"replication": {str(k): str(v) for k, v in dict(rows[0].replication).items()},
                         "strategy": parse_strategy(dict(rows[0].replication),
                                                    f"cassandra node {contact_name}: keyspace {ks}")}
    options: dict[str, dict[str, str]] = {}
    for table in tables:
        ks, name = table.split(".", 1)
        rows = cql.run(TABLE.select(TABLE.names()), (ks, name), host=contact, node=contact_name)
        if not rows:
            raise DiscoveryFailed(
                f"cassandra: table {table} does not exist (no row in system_schema.tables): fix the deployment's "
                "tables (tailtune deployments set NAME --table keyspace.table)", permanent=True,
            )
        options[table] = {n: str(getattr(rows[0], n)) for n in TABLE.names()}

    # --- every node's settings and latencies -----------------------------------------------------------------
    settings_by_node: dict[str, dict[str, Any]] = {}
    latency_raw: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in tables}
    for h in hosts:
        name = _fmt_node(str(h.address), int(h.endpoint.port))
        where = f"{name} ({h.datacenter}/{h.rack})"
        if egress.networks and not egress.allows(str(h.address)):
            raise DiscoveryFailed(
                f"cassandra node {where} is outside the networks the worker may connect to: have the operator add "
                "its network to TAILTUNE_CONNECT_NETWORKS", permanent=True,
            )
        if h.is_up is False:
            raise DiscoveryFailed(
                f"cassandra node {where} is down (the driver cannot reach it): bring it up, or remove it from the "
                "ring (nodetool removenode), then discover again"
            )
        rows = cql.run(
            "SELECT name, value FROM system_views.settings WHERE name IN ("
            + ", ".join(f"'{s}'" for s in SETTINGS) + ")", host=h, node=where,
        )
        settings_by_node[str(h.address)] = {str(r.name): r.value for r in rows}
        for table in tables:
            ks, tname = table.split(".", 1)
            per: dict[str, Any] = {}
            for kind, vt in LATENCY_TABLES.items():
                got = cql.run(f"SELECT * FROM {vt} WHERE keyspace_name = %s AND table_name = %s", (ks, tname),
                              host=h, node=where)
                per[kind] = _row(got[0]) if got else {}
            latency_raw[table][str(h.address)] = per

    # --- readings ------------------------------------------------------------------------------------------
    verified = any(release.startswith(v + ".") or release == v for v in LATENCY_SECONDS_RELEASES)
    scale = 1000.0 if verified else None
    how_latency = (
        f"system_views.local_read_latency and coordinator_read_latency of every node (Cassandra {release}): their "
        "*_ms columns hold the node's microsecond histograms × 1e-6 — seconds — rounded to 3 decimals; shown here "
        "× 1000 in ms, so they resolve 1 ms at best and a sub-millisecond figure reads 0; the percentiles are the "
        "upper bounds of the histogram's buckets (about 20% apart); per_second is the five-minute rate. Per table: "
        "counts and rates added over the nodes, percentiles the worst node's"
        if verified else
        f"system_views.local_read_latency and coordinator_read_latency (Cassandra {release}): the unit of their "
        f"*_ms columns is verified for Cassandra {', '.join(LATENCY_SECONDS_RELEASES)} only, so only counts and "
        "rates are shown; `raw` holds the columns as read"
    )
    latency_tables: dict[str, Any] = {}
    for table, per_node in latency_raw.items():
        by_kind = {kind: {addr: _latency(v[kind], scale) for addr, v in per_node.items()} for kind in LATENCY_TABLES}
        entry: dict[str, Any] = {kind: _combine(by_kind[kind]) for kind in LATENCY_TABLES}
        entry["nodes"] = {addr: {kind: by_kind[kind][addr] for kind in LATENCY_TABLES} for addr in per_node}
        entry["raw"] = {addr: {kind: {k: v for k, v in row.items() if k not in ("keyspace_name", "table_name")}
                               for kind, row in v.items()} for addr, v in per_node.items()}
        local_p50 = entry["local"].get("p50_ms")
        if probe_reads > 0 and (local_p50 is None or local_p50 <= 1.0):
            entry["single_key"] = _probe(cql, table, probe_reads)
        latency_tables[table] = entry
    found.readings["latency"] = {"unit": "ms" if verified else None, "resolution_ms": 1.0 if verified else None,
                                 "how": how_latency, "tables": latency_tables}
    found.readings["tables"] = options
    contact_settings = settings_by_node.get(str(contact.address), {})
    snitch = {k: v for k, v in contact_settings.items() if k != "concurrent_reads"}
    found.readings["settings"] = {
        "concurrent_reads": contact_settings.get("concurrent_reads"),
        "snitch": snitch,
        "nodes": settings_by_node,
        "how": "system_views.settings of every node (concurrent_reads and the snitch settings), read only",
    }
    found.readings["nodes"] = nodes
    found.readings["keyspaces"] = keyspaces
    found.readings["release_version"] = release
    found.readings["local_dc"] = local_dc

    # --- inputs --------------------------------------------------------------------------------------------
    strategy = keyspaces[tables[0].split(".", 1)[0]]["strategy"] if tables else None
    in_dc = [n for n in nodes if n["dc"] == local_dc]
    ring_where = f"cassandra node {contact_name}: system.local + system.peers_v2"
    if strategy is not None and strategy["class"] == "SimpleStrategy":
        servers = checked("servers", len(nodes), ring_where)
        found.put("servers", servers, "system.local + system.peers_v2: every node of the ring (SimpleStrategy "
                  "places replicas on the next nodes clockwise, whatever their datacenter)")
    else:
        servers = checked("servers", len(in_dc), ring_where)
        found.put("servers", servers, f"system.local + system.peers_v2: the nodes of datacenter {local_dc}, the "
                  "contact point's (reads stay in the local datacenter)")
    reads = contact_settings.get("concurrent_reads")
    if reads is not None:
        where = f"cassandra node {contact_name}: system_views.settings"
        slots, how, note = slots_of(reads, where, contact_name)
        found.put("slots", slots, how)
        if note:
            found.notes.append(note)
        others = {a: s.get("concurrent_reads") for a, s in settings_by_node.items()
                  if str(s.get("concurrent_reads")) != str(reads)}
        if others:
            found.notes.append(f"concurrent_reads differs between nodes: {contact_name} has {reads}, "
                               + ", ".join(f"{a} {v}" for a, v in sorted(others.items())))
    else:
        found.missing.append("slots")
        found.notes.append("concurrent_reads not found in system_views.settings")
    if strategy is None:
        found.missing += ["replication", "ring"]
        found.notes.append("the deployment names no table, so no keyspace's replication was read: name its tables "
                           "(tailtune deployments set NAME --table keyspace.table) and discover again")
    else:
        ks0 = tables[0].split(".", 1)[0]
        rf = (strategy.get("replication_factor") if strategy["class"] == "SimpleStrategy"
              else (strategy.get("replication") or {}).get(local_dc))
        if isinstance(rf, int) and rf >= 1:
            checked("replication", rf, f"cassandra node {contact_name}: keyspace {ks0}")
            how = (f"system_schema.keyspaces replication of {ks0} (SimpleStrategy replication_factor)"
                   if strategy["class"] == "SimpleStrategy"
                   else f"system_schema.keyspaces replication of {ks0} (NetworkTopologyStrategy, datacenter "
                        f"{local_dc})")
            found.put("replication", rf, how)
        else:
            found.missing.append("replication")
            found.notes.append(f"keyspace {ks0} ({strategy['class']}) has no replication factor for datacenter "
                               f"{local_dc}")
        others_ks = {k: v["strategy"] for k, v in keyspaces.items() if v["strategy"] != strategy}
        if others_ks:
            found.notes.append(f"the deployment's tables span keyspaces of different replication: {ks0} is modelled; "
                               + ", ".join(f"{k} {v}" for k, v in sorted(others_ks.items())))
        if integers and strategy["class"] in ("SimpleStrategy", "NetworkTopologyStrategy"):
            ring = {"partitioner": partitioner, "strategy": strategy, "local_dc": local_dc,
                    "nodes": [{k: n[k] for k in ("address", "dc", "rack", "tokens")} for n in nodes]}
            found.put("ring", ring, f"system.local + system.peers_v2 tokens, data_center, rack; "
                      f"system_schema.keyspaces replication of {ks0}")
        else:
            found.missing.append("ring")
            found.notes.append(f"the ring is not modelled: partitioner {_short_class(partitioner)} / strategy "
                               f"{strategy['class']} (integer tokens and SimpleStrategy or NetworkTopologyStrategy "
                               "are)")
    if server == "stock" and options:
        found.current_config = _stock_config(options, found.notes)


def slots_of(reads: Any, where: str, contact_name: str) -> tuple[int, str, str | None]:
    """The model's `slots` from a node's `concurrent_reads` (a text or an integer as `system_views.settings` gives
    it): (slots, how it was found, a note or None). A value over the model's `MODEL_MAX_SLOTS` — a real setting on
    large nodes — is modelled as that many, said in the note; what no Java int holds, or under 1, is refused
    (`DiscoveryFailed` naming the node and the field)."""
    value = integer(reads, where, "concurrent_reads")
    how = f"system_views.settings concurrent_reads of {contact_name}"
    if value > JAVA_INT_MAX:
        raise refused(where, "concurrent_reads", f"{shown(value)} is more than a Java int holds")
    note = None
    if value > MODEL_MAX_SLOTS:
        note = (f"concurrent_reads {value} of {contact_name} is more than the model's {MODEL_MAX_SLOTS} service "
                f"slots a server: modelled as {MODEL_MAX_SLOTS} (the model's servers serve at most "
                f"{MODEL_MAX_SLOTS} reads at once)")
        how += f", {value} modelled as {MODEL_MAX_SLOTS}"
        value = MODEL_MAX_SLOTS
    return checked("slots", value, where, "concurrent_reads"), how, note
