"""Cassandra target: `<keyspace>.config_versions` (one immutable row per version) +
`<keyspace>.config_current`.

Both are created if missing. Rows are written with lightweight transactions: a version row with `INSERT ... IF
NOT EXISTS`; the current row with `INSERT ... IF NOT EXISTS`, else `UPDATE ... IF version < ?` — so an older
version never overwrites a newer one, whatever the order of publishers. The whole config is one text column of
one row: readers never see half of it. Nodes read their config with

    SELECT version, config FROM <keyspace>.config_current WHERE deployment = ?;
"""

from __future__ import annotations

import json
from typing import Any

from tailtune.control.publishers.base import (
    Head,
    PublishConflict,
    Publisher,
    PublishOutcome,
    TargetUnavailable,
    document,
)

__all__ = ["NODE_QUERY", "CassandraPublisher", "schema_cql"]

NODE_QUERY = "SELECT version, config FROM {ks}.config_current WHERE deployment = ?"


def schema_cql(keyspace: str, replication_factor: int) -> list[str]:
    return [
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
        f"{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.config_versions (deployment text, version int, config text, "
        "PRIMARY KEY ((deployment), version)) WITH CLUSTERING ORDER BY (version DESC)",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.config_current (deployment text PRIMARY KEY, version int, "
        "config text)",
    ]


class CassandraPublisher(Publisher):
    kind = "cassandra"

    @property
    def keyspace(self) -> str:
        return str(self.connection.get("keyspace", "tailtune"))

    def _connect(self) -> tuple[Any, Any]:
        from cassandra import ConsistencyLevel
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import RoundRobinPolicy

        points = list(self.connection.get("contact_points", []))
        profile = ExecutionProfile(
            load_balancing_policy=RoundRobinPolicy(),
            request_timeout=self.timeout_s,
            consistency_level=ConsistencyLevel.QUORUM,
            serial_consistency_level=ConsistencyLevel.SERIAL,
        )
        cluster = Cluster(
            points,
            port=int(self.connection.get("port", 9042)),
            protocol_version=5,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            connect_timeout=self.timeout_s,
            control_connection_timeout=self.timeout_s,
            executor_threads=1,
        )
        try:
            session = cluster.connect()
        except Exception as exc:
            cluster.shutdown()
            raise TargetUnavailable(f"cassandra {points}: {exc}") from exc
        return cluster, session

    def _transient(self) -> tuple[type[BaseException], ...]:
        from cassandra import DriverException, RequestExecutionException

        return (DriverException, RequestExecutionException, OSError)

    def publish(self, version: int, config: dict[str, Any], *, head: Head | None = None) -> PublishOutcome:
        doc = document(self.deployment, version, config)
        # the current row moves to the newest version known: a republished older version (or a wiped table)
        # gets the newest the control plane published, never the older one
        cur_v, cur_doc = (head[0], document(self.deployment, head[0], head[1])) if head and head[0] > version else (
            version,
            doc,
        )
        cluster, session = self._connect()
        ks = self.keyspace
        try:
            rf = 1 if len(self.connection.get("contact_points", [])) < 3 else 3
            for cql in schema_cql(ks, rf):
                session.execute(cql)

            def lwt(cql: str, args: tuple[Any, ...]) -> Any:
                return session.execute(cql, args).one()

            row = lwt(
                f"INSERT INTO {ks}.config_versions (deployment, version, config) VALUES (%s, %s, %s) "
                "IF NOT EXISTS",
                (self.deployment, version, doc),
            )
            if not row.applied and row.config != doc:
                raise PublishConflict(
                    f"cassandra: {ks}.config_versions holds a different config for "
                    f"{self.deployment} v{version}"
                )
            row = lwt(
                f"INSERT INTO {ks}.config_current (deployment, version, config) VALUES (%s, %s, %s) "
                "IF NOT EXISTS",
                (self.deployment, cur_v, cur_doc),
            )
            if row.applied:
                return PublishOutcome(version, True, cur_v)
            for _ in range(20):
                row = lwt(
                    f"UPDATE {ks}.config_current SET version = %s, config = %s WHERE deployment = %s "
                    "IF version < %s",
                    (cur_v, cur_doc, self.deployment, cur_v),
                )
                if row.applied:
                    return PublishOutcome(version, True, cur_v)
                if row.version is not None and int(row.version) >= cur_v:
                    return PublishOutcome(version, False, int(row.version))
            raise TargetUnavailable("cassandra: config_current kept changing")
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {type(exc).__name__}: {exc}") from exc
        finally:
            cluster.shutdown()

    def read_current(self) -> tuple[int, dict[str, Any]] | None:
        cluster, session = self._connect()
        try:
            stmt = session.prepare(NODE_QUERY.format(ks=self.keyspace))
            row = session.execute(stmt, (self.deployment,)).one()
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {exc}") from exc
        finally:
            cluster.shutdown()
        if row is None:
            return None
        return int(row.version), dict(json.loads(row.config)["config"])

    def ping(self) -> None:
        cluster, session = self._connect()
        try:
            session.execute("SELECT release_version FROM system.local")
        except self._transient() as exc:
            raise TargetUnavailable(f"cassandra: {exc}") from exc
        finally:
            cluster.shutdown()
