"""Cassandra target: `<keyspace>.deployment_config_versions` (one immutable row per version, keyed by the
deployment's identity) + `<keyspace>.config_current` (keyed by the name nodes query, recording the identity).

Both are created if missing. The identity (`Known.identity`: the deployment's id and its creation nonce) keeps a
deleted deployment's rows apart from a new one of the same name: its version rows are in another partition, and
its current row is fenced — a current row whose identity is not live is replaced whatever its version (and that
identity's version rows deleted); one of another live identity is a conflict. Rows are written with lightweight
transactions: a version row with `INSERT ... IF NOT EXISTS`; the current row with `INSERT ... IF NOT EXISTS`, else
`UPDATE ... IF deployment_uid = ? AND version < ?` — so an older version never overwrites a newer one, whatever
the order of publishers. The whole config is one text column of one row: readers never see half of it. Nodes read
their config with

    SELECT version, config FROM <keyspace>.config_current WHERE deployment = ?;

A config that sets table options (a `stock` config, or params with a table option such as `speculative_retry`;
see `kinds.cassandra.stock`) is also applied live to each table of the deployment, between the
version row and the current row: `ALTER TABLE ks.t WITH option = '...'` (the statement, the read-back query and
the comparison are the table options' applier's, `simulation.stock_appliers.TABLE`), read back from
`system_schema.tables` and compared as parsed forms (Cassandra normalises the text). All tables or none: a
missing table stops the publish before any change; a failed ALTER or read-back reverts the tables already
changed, and the error names the table and why. Each table's value before and after is returned in
`PublishOutcome.applied` under the option's `record` (`"tables"` for `speculative_retry`; recorded with the
version; a rollback restores from it). The snitch settings
are only read (`system_views.settings`), never written: see docs/applying-stock.md.

A stock deployment's tables also get their coordinator read latency read from every node
(`system_views.coordinator_read_latency`) before any table is changed: `PublishOutcome.applied["latency"]`, the
"before" of the verify step (`control.verify`), which reads the same figures again later
(`CassandraPublisher.read_latency`). **Unit:** the table's `*_ms` columns hold seconds on Cassandra 5.0 (read in
its source, and 0.001-0.002 at millisecond client latencies on the tests' 5.0.9). Its latency timers keep
microseconds (`CassandraMetricsRegistry.DEFAULT_TIMER_UNIT = MICROSECONDS`: the reservoir
converts the nanoseconds each read reports), while the virtual table (`TableMetricTables.LatencyTableMetric`)
multiplies them by `NS_TO_MS = 1e-6` as if they were nanoseconds, then rounds to 3 decimals: a p99 of 1.5 ms reads
0.002. The values are recorded raw, with `unit: "s"` and this note; the verify step converts them (× 1000 → ms) and
treats 1 ms as their resolution.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from base.errors import BadInputError
from control.egress import EgressRefused, EgressUnresolved
from control.publishers.base import (
    Head,
    Known,
    PublishConflict,
    Publisher,
    PublishOutcome,
    PublishRejected,
    TargetUnavailable,
    document,
)
from control.redact import redact
from kinds.cassandra.cql import ConnectFailed, CqlTarget, PasswordMissing
from kinds.cassandra.stock import desired_table_options
from simulation.stock_appliers import SNITCH, TABLE

__all__ = [
    "LATENCY_NOTE",
    "LATENCY_TABLE",
    "LATENCY_UNIT",
    "NODE_QUERY",
    "SNITCH_SETTINGS",
    "VERSIONS_TABLE",
    "CassandraPublisher",
    "TableOptionsFailed",
    "apply_table_options",
    "read_coordinator_latency",
    "read_snitch",
    "revert_table_options",
    "schema_cql",
]

NODE_QUERY = "SELECT version, config FROM {ks}.config_current WHERE deployment = ?"
#: The immutable version rows, one partition per deployment identity (id + creation nonce).
VERSIONS_TABLE = "deployment_config_versions"
#: The node settings read (never written) from `system_views.settings` and recorded with the version.
SNITCH_SETTINGS = SNITCH.settings()


#: Where the coordinator read latency per table comes from, the unit its `*_ms` columns really hold, and why.
LATENCY_TABLE = "system_views.coordinator_read_latency"
LATENCY_UNIT = "s"
LATENCY_NOTE = (
    "the *_ms columns hold seconds: Cassandra's latency timers keep microseconds (CassandraMetricsRegistry."
    "DEFAULT_TIMER_UNIT) and TableMetricTables.LatencyTableMetric multiplies them by NS_TO_MS = 1e-6, then rounds "
    "to 3 decimals (a resolution of 1 ms)"
)
_LATENCY_QUERY = f"SELECT * FROM {LATENCY_TABLE} WHERE keyspace_name = %s AND table_name = %s"
_OPTIONS = {k.name: k for k in TABLE.knobs()}


class TableOptionsFailed(PublishRejected):
    """Setting the tables' options failed: names the table and why, and says what was reverted."""


def _read_options(session: Any, table: str, names: Sequence[str]) -> dict[str, str] | None:
    """The options `names` of `table` as `system_schema.tables` shows them (None: no such table)."""
    ks, name = table.split(".", 1)
    row = session.execute(TABLE.select(names), (ks, name)).one()
    return None if row is None else {n: str(getattr(row, n)) for n in names}


def _differs(shown: Mapping[str, str] | None, want: Mapping[str, Any]) -> str | None:
    """The first option of `want` that `shown` (read back) does not show (None: every one is as wanted)."""
    for name, value in want.items():
        if shown is None or not TABLE.same(_OPTIONS[name], shown.get(name), value):
            return name
    return None


def revert_table_options(session: Any, before: dict[str, dict[str, str]]) -> dict[str, str]:
    """Put each table's options back to their `before` texts; returns the tables that could not be reverted,
    with why."""
    failed: dict[str, str] = {}
    for table, texts in before.items():
        try:
            session.execute(TABLE.alter(table, texts))
            back = _read_options(session, table, list(texts))
            want = {n: TABLE.parse(_OPTIONS[n], text, where=n) for n, text in texts.items()}
            wrong = _differs(back, want)
            if wrong is not None:
                shown = None if back is None else back[wrong]
                failed[table] = f"reads back {shown!r} after the revert to {texts[wrong]!r}"
        except Exception as exc:
            failed[table] = f"{type(exc).__name__}: {redact(str(exc))}"
    return failed


def apply_table_options(
    session: Any, desired: dict[str, dict[str, Any]]
) -> tuple[dict[str, dict[str, dict[str, str]]], dict[str, dict[str, str]]]:
    """All tables or none: every table must exist (checked before any change); each table whose parsed options
    differ from the desired ones gets `ALTER TABLE ... WITH option = '...'` and is read back from
    system_schema.tables, where the parsed forms must be equal (Cassandra normalises the text). On the first
    failure the tables already changed are reverted and TableOptionsFailed (not retried) or TargetUnavailable
    (retried: the cluster did not answer) names the table and why.

    Returns ({record: {table: {"before": text, "after": text}}} — each option under its row's `record` —,
    {changed table: {option: before text}})."""
    from cassandra import DriverException, RequestExecutionException

    before: dict[str, dict[str, str]] = {}
    missing: list[str] = []
    for table, want in desired.items():
        shown = _read_options(session, table, list(want))
        if shown is None:
            missing.append(table)
        else:
            before[table] = shown
    if missing:
        what = f"table {missing[0]} does not" if len(missing) == 1 else f"tables {', '.join(missing)} do not"
        raise TableOptionsFailed(
            f"cassandra: {what} exist (no row in system_schema.tables); no table was changed"
        )
    record: dict[str, dict[str, dict[str, str]]] = {}
    changed: dict[str, dict[str, str]] = {}

    def keep(table: str, name: str, after: str) -> None:
        record.setdefault(_OPTIONS[name].record, {})[table] = {"before": before[table][name], "after": after}

    for table, want in desired.items():
        alter = {n: v for n, v in want.items() if not TABLE.same(_OPTIONS[n], before[table][n], v)}
        for name in want:
            if name not in alter:
                keep(table, name, before[table][name])
        if not alter:
            continue
        texts = {n: TABLE.text(_OPTIONS[n], v) for n, v in alter.items()}
        transient = False
        changed[table] = {n: before[table][n] for n in alter}  # an ALTER that timed out may still apply
        back: dict[str, str] | None = None
        try:
            session.execute(TABLE.alter(table, texts))
            back = _read_options(session, table, list(alter))
            wrong = _differs(back, alter)
            why = None if wrong is None else (
                f"system_schema.tables shows {None if back is None else back[wrong]!r} after setting "
                f"{texts[wrong]!r}"
            )
        except (RequestExecutionException, OSError) as exc:
            transient, why = True, f"{type(exc).__name__}: {redact(str(exc))}"
        except DriverException as exc:
            why = f"{type(exc).__name__}: {redact(str(exc))}"
            transient = type(exc).__name__ in ("OperationTimedOut", "NoHostAvailable")
            if not transient:  # refused by Cassandra: the table was not changed
                del changed[table]
        if why is None:
            for name in alter:
                keep(table, name, (back or {}).get(name) or texts[name])
            continue
        not_reverted = revert_table_options(session, changed)
        reverted = [t for t in changed if t not in not_reverted]
        tail = (
            f"; reverted {', '.join(reverted)}" if reverted else "; no other table had been changed"
        ) + (
            "; could not revert " + ", ".join(f"{t} ({w})" for t, w in not_reverted.items()) if not_reverted else ""
        )
        message = f"cassandra: {', '.join(alter)} of {table} failed: {why}{tail}"
        if transient:
            raise TargetUnavailable(message)
        raise TableOptionsFailed(message)
    return record, changed


def read_snitch(session: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The node's snitch settings from `system_views.settings` (read only; {} when the node has no such
    table) and, when `config`'s rendering has the JMX operation, that operation with this cluster's
    `endpoint_snitch` class in place of the renderer's `<endpoint_snitch>`. Nothing is applied."""
    try:
        rows = session.execute("SELECT name, value FROM system_views.settings")
    except Exception:
        return {}
    found = {str(r.name): r.value for r in rows if str(r.name) in SNITCH_SETTINGS}
    if not found:
        return {}
    out: dict[str, Any] = {"settings": found, "applied_by_tailtune": False}
    target = (config or {}).get("target")
    jmx = target.get("jmx") if isinstance(target, dict) else None
    snitch = found.get("endpoint_snitch")
    if isinstance(jmx, list) and snitch:
        out["jmx"] = [str(op).replace("<endpoint_snitch>", str(snitch)) for op in jmx]
    return out


def read_coordinator_latency(
    cluster: Any, session: Any, tables: list[str], allows: Any = lambda _address: True
) -> dict[str, Any]:
    """Each node's coordinator read latency of each table, raw, from `system_views.coordinator_read_latency`
    (a node-local virtual table, so every node the egress rules allow is asked itself):
    `{"at", "source", "unit", "note", "nodes": {address: {"ks.t": {"count", "p50th_ms", "p99th_ms", "max_ms",
    "per_second"}}}}` — column names as the node has them (5.0 says `p50th_ms`, older versions `50th_ms`), values
    in seconds (see LATENCY_NOTE). A node that fails to answer is listed under `errors`; {} when no node has the
    table (a Cassandra without virtual tables). Read only."""
    nodes: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for host in list(cluster.metadata.all_hosts()):
        address = str(host.address)
        if host.is_up is False or not allows(address):
            continue
        per_table: dict[str, Any] = {}
        try:
            for table in tables:
                ks, name = table.split(".", 1)
                rows = session.execute(_LATENCY_QUERY, (ks, name), host=host)
                row = rows.one()
                if row is not None:
                    per_table[table] = {
                        str(k): v for k, v in zip(rows.column_names, row, strict=True)
                        if k not in ("keyspace_name", "table_name")
                    }
        except Exception as exc:
            errors[address] = f"{type(exc).__name__}: {redact(str(exc))}"
            continue
        if per_table:
            nodes[address] = per_table
    if not nodes and not errors:
        return {}
    out: dict[str, Any] = {"at": time.time(), "source": LATENCY_TABLE, "unit": LATENCY_UNIT, "note": LATENCY_NOTE,
                           "nodes": nodes}
    if errors:
        out["errors"] = errors
    return out


def schema_cql(keyspace: str, replication_factor: int) -> list[str]:
    return [
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
        f"{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{VERSIONS_TABLE} (deployment_uid text, version int, "
        "deployment text, config text, PRIMARY KEY ((deployment_uid), version)) WITH CLUSTERING ORDER BY "
        "(version DESC)",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.config_current (deployment text PRIMARY KEY, version int, "
        "config text, deployment_uid text)",
        # a current table made before rows carried the identity
        f"ALTER TABLE {keyspace}.config_current ADD IF NOT EXISTS deployment_uid text",
    ]


class CassandraPublisher(Publisher):
    kind = "cassandra"

    @property
    def keyspace(self) -> str:
        return str(self.connection.get("keyspace", "tailtune"))

    def _target(self) -> CqlTarget:
        """The cluster as the worker reaches it (kinds.cassandra.cql: egress rules, password, scrubbing)."""
        return CqlTarget(self.connection, self.egress, self.timeout_s)

    def _scrub(self, text: str) -> str:
        """`text` without credentials: redact()'s patterns and the password itself, wherever it appears."""
        return self._target().scrub(text)

    def _connect(self) -> tuple[Any, Any]:
        try:
            return self._target().connect()
        except EgressUnresolved as exc:  # it may resolve later: worth retrying
            raise TargetUnavailable(f"cassandra: {exc}") from None
        except EgressRefused as exc:
            raise PublishRejected(f"cassandra: {exc}") from None
        except PasswordMissing as exc:
            raise TargetUnavailable(f"cassandra: {exc}") from None
        except ConnectFailed as exc:
            raise TargetUnavailable(str(exc)) from None

    def _transient(self) -> tuple[type[BaseException], ...]:
        from cassandra import DriverException, RequestExecutionException

        return (DriverException, RequestExecutionException, OSError)

    def publish(
        self, version: int, config: dict[str, Any], *, head: Head | None = None, known: Known | None = None
    ) -> PublishOutcome:
        """Write the version row (immutable, under the deployment's identity), apply the effective config's table
        options (all tables or none), then move the current row forward; when the current row cannot be written
        the tables are reverted. `known` gives the identity and the live ones (without it the identity is the
        name's and no other identity's current row is taken over)."""
        doc = document(self.deployment, version, config)
        uid = self._identity(known)
        live = known.live_identities if known is not None else frozenset()
        # the current row moves to the newest version known: a republished older version (or a wiped table)
        # gets the newest the control plane published, never the older one
        cur_v, cur_doc, cur_config = (
            (head[0], document(self.deployment, head[0], head[1]), head[1])
            if head and head[0] > version
            else (version, doc, config)
        )
        desired = self._desired(cur_config)
        cluster, session = self._connect()
        ks = self.keyspace
        changed: dict[str, dict[str, str]] = {}
        try:
            rf = 1 if len(self.connection.get("contact_points", [])) < 3 else 3
            for cql in schema_cql(ks, rf):
                session.execute(cql)

            def lwt(cql: str, args: tuple[Any, ...]) -> Any:
                return session.execute(cql, args).one()

            row = lwt(
                f"INSERT INTO {ks}.{VERSIONS_TABLE} (deployment_uid, version, deployment, config) "
                "VALUES (%s, %s, %s, %s) IF NOT EXISTS",
                (uid, version, self.deployment, doc),
            )
            if not row.applied and row.config != doc:
                raise PublishConflict(
                    f"cassandra: {ks}.{VERSIONS_TABLE} holds a different config for "
                    f"{self.deployment} v{version} (deployment {uid})"
                )
            applied: dict[str, Any] = {}
            latency = self._latency(cluster, session)
            if latency:
                applied["latency"] = latency
            if desired:
                records, changed = apply_table_options(session, desired)
                applied.update(records)
            snitch = read_snitch(session, cur_config)
            if snitch:
                applied["snitch"] = snitch
            try:
                outcome, fenced = self._move_current(session, lwt, ks, version, cur_v, cur_doc, uid, live)
            except BaseException:
                if changed:
                    revert_table_options(session, changed)
                raise
            if fenced is not None:
                applied["replaced_deleted_deployment"] = fenced
            return PublishOutcome(outcome.version, outcome.advanced, outcome.current_version, applied or None)
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {type(exc).__name__}: {self._scrub(str(exc))}") from None
        finally:
            cluster.shutdown()

    def _identity(self, known: Known | None) -> str:
        """What the rows are keyed by: the deployment's identity (id + nonce), else one made from the name."""
        return known.identity if known is not None and known.identity else f"name:{self.deployment}"

    def _latency(self, cluster: Any, session: Any) -> dict[str, Any]:
        """The tables' coordinator read latency on every allowed node (stock deployments with tables; else {})."""
        if self.server != "stock" or not self.tables:
            return {}
        out = read_coordinator_latency(cluster, session, self.tables, self.egress.allows)
        if out.get("errors"):
            out["errors"] = {node: self._scrub(why) for node, why in out["errors"].items()}
        return out

    def read_latency(self) -> dict[str, Any]:
        """The tables' coordinator read latency now (what the verify step compares with the publish's snapshot),
        through the same connection rules as a publish: the egress rules' addresses, the password variable they
        allow. {} for a deployment without tables or a patched server; TargetUnavailable when the cluster does
        not answer."""
        if self.server != "stock" or not self.tables:
            return {}
        cluster, session = self._connect()
        try:
            return self._latency(cluster, session)
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {type(exc).__name__}: {self._scrub(str(exc))}") from None
        finally:
            cluster.shutdown()

    def _desired(self, config: dict[str, Any]) -> dict[str, dict[str, Any]]:
        try:
            return desired_table_options(config, self.tables)
        except BadInputError as exc:
            raise PublishRejected(f"cassandra: {exc}") from None

    def _move_current(
        self, session: Any, lwt: Any, ks: str, version: int, cur_v: int, cur_doc: str, uid: str,
        live: frozenset[str],
    ) -> tuple[PublishOutcome, dict[str, Any] | None]:
        """Move the current row (keyed by the name nodes query) forward to `cur_v` under `uid`. A row of another
        identity that is not live (a deleted deployment of the same name, or one written before rows carried the
        identity) is fenced: replaced whatever its version, and that identity's version rows are deleted.
        Returns the outcome and, when a row was fenced, what it held."""
        row = lwt(
            f"INSERT INTO {ks}.config_current (deployment, deployment_uid, version, config) "
            "VALUES (%s, %s, %s, %s) IF NOT EXISTS",
            (self.deployment, uid, cur_v, cur_doc),
        )
        if row.applied:
            return PublishOutcome(version, True, cur_v), None
        for _ in range(20):
            held_uid, held_v = getattr(row, "deployment_uid", None), getattr(row, "version", None)
            if held_uid == uid:
                row = lwt(
                    f"UPDATE {ks}.config_current SET version = %s, config = %s WHERE deployment = %s "
                    "IF deployment_uid = %s AND version < %s",
                    (cur_v, cur_doc, self.deployment, uid, cur_v),
                )
                if row.applied:
                    return PublishOutcome(version, True, cur_v), None
                if row.deployment_uid == uid and row.version is not None and int(row.version) >= cur_v:
                    return PublishOutcome(version, False, int(row.version)), None
                continue
            if held_uid is not None and held_uid in live:
                raise PublishConflict(
                    f"cassandra: {ks}.config_current for {self.deployment} holds version {held_v} of live "
                    f"deployment {held_uid}, not of {uid}"
                )
            row = lwt(
                f"UPDATE {ks}.config_current SET deployment_uid = %s, version = %s, config = %s "
                "WHERE deployment = %s IF deployment_uid = %s",
                (uid, cur_v, cur_doc, self.deployment, held_uid),
            )
            if row.applied:
                if held_uid is not None:
                    session.execute(f"DELETE FROM {ks}.{VERSIONS_TABLE} WHERE deployment_uid = %s", (held_uid,))
                return PublishOutcome(version, True, cur_v), {"deployment_uid": held_uid, "version": held_v}
            row = session.execute(
                f"SELECT deployment_uid, version FROM {ks}.config_current WHERE deployment = %s", (self.deployment,)
            ).one()
            if row is None:  # deleted meanwhile
                return self._move_current(session, lwt, ks, version, cur_v, cur_doc, uid, live)
        raise TargetUnavailable("cassandra: config_current kept changing")

    def read_current(self) -> tuple[int, dict[str, Any]] | None:
        cluster, session = self._connect()
        try:
            stmt = session.prepare(NODE_QUERY.format(ks=self.keyspace))
            row = session.execute(stmt, (self.deployment,)).one()
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {self._scrub(str(exc))}") from None
        finally:
            cluster.shutdown()
        if row is None:
            return None
        return int(row.version), dict(json.loads(row.config)["config"])

    reference_request = "SELECT release_version FROM system.local"

    def round_trips(self, probes: int) -> list[float]:
        """`SELECT release_version FROM system.local` round trips on one connection (the node the driver picks
        for each: the coordinator answers it from its own tables)."""
        cluster, session = self._connect()
        out: list[float] = []
        try:
            for _ in range(probes):
                start = time.perf_counter()
                session.execute(self.reference_request)
                out.append((time.perf_counter() - start) * 1e6)
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {type(exc).__name__}: {self._scrub(str(exc))}") from None
        finally:
            cluster.shutdown()
        return out

    def ping(self) -> None:
        cluster, session = self._connect()
        try:
            session.execute("SELECT release_version FROM system.local")
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {self._scrub(str(exc))}") from None
        finally:
            cluster.shutdown()
