"""Publishing a stock config to a real single-node Cassandra 5.0: `speculative_retry` set on each table of the
deployment (read back from system_schema.tables), all tables or none, the previous values recorded with the
version, and a rollback that restores them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from control.egress import Egress
from control.grants import password_binding
from control.publishers import CassandraPublisher, PublishRejected
from control.publishers.cassandra import TableOptionsFailed
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, admin_headers, cassandra_deployment
from tests.servers.cassandra_server import CassandraNode

API = "/api/v1"
KS = "tt_shop"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session(cassandra_node: CassandraNode) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    try:
        s = cluster.connect()
        s.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {KS} WITH replication = {{'class': 'SimpleStrategy', "
            "'replication_factor': 1}"
        )
        for t in ("carts", "items", "users"):
            s.execute(f"CREATE TABLE IF NOT EXISTS {KS}.{t} (pk int PRIMARY KEY, v text)")
        yield s
    finally:
        cluster.shutdown()


def _spec(session: Any, table: str) -> str:
    ks, name = table.split(".")
    row = session.execute(
        "SELECT speculative_retry FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s", (ks, name)
    ).one()
    return str(row.speculative_retry)


def _set(session: Any, table: str, text: str) -> None:
    session.execute(f"ALTER TABLE {table} WITH speculative_retry = '{text}'")


def _conn(node: CassandraNode) -> dict[str, Any]:
    return {"contact_points": [node.host], "port": node.port, "keyspace": "tt_stock"}


def _run_jobs(svc: Svc, n: int) -> list[str | None]:
    w = Worker(svc.settings, svc.db, "w-stock", handlers=default_handlers(), schedule=False)
    return [w.run_once() for _ in range(n)]


def test_publish_sets_the_tables_and_rollback_restores_them(
    svc: Svc, cassandra_node: CassandraNode, session: Any
) -> None:
    carts, items = f"{KS}.carts", f"{KS}.items"
    _set(session, carts, "99p")
    _set(session, items, "50ms")  # the operator's own value: a rollback must bring it back
    body = {**cassandra_deployment("shop", cassandra_node.port, "tt_stock"), "tables": [carts, items],
            "driver": "python"}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    assert (dep["server"], dep["driver"], dep["tables"]) == ("stock", "python", [carts, items])
    v1 = {"policy": "fifo", "params": {}}
    v2 = {
        "policy": "stock",
        "params": {
            "speculative_retry": "min(5ms , 99PERCENTILE)",
            "driver.speculative_execution.max_executions": 2,
            "driver.speculative_execution.delay": 3,
        },
    }
    for cfg in (v1, v2):
        r = svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": cfg}, headers=svc.write)
        assert r.status_code == 201, r.text
    assert _run_jobs(svc, 2) == ["succeeded", "succeeded"]
    # Cassandra stores its normalised text; the publisher compared the parsed forms
    assert (_spec(session, carts), _spec(session, items)) == ("MIN(99p,5ms)", "MIN(99p,5ms)")
    # published again: the tables are already set, and the record keeps the values from before the first publish
    r = svc.client.post(f"{API}/configs/{dep['id']}/publish", json={"version": 2}, headers=svc.write)
    assert r.status_code == 202, r.text
    assert _run_jobs(svc, 1) == ["succeeded"]
    got = svc.client.get(f"{API}/configs/{dep['id']}/versions/2", headers=svc.read).json()
    assert got["published"]["cassandra"]["tables"] == {
        carts: {"before": "99p", "after": "MIN(99p,5ms)"},
        items: {"before": "50ms", "after": "MIN(99p,5ms)"},
    }
    assert got["applies_to"] == {"server": "stock", "driver": "python", "tables": [carts, items]}
    # the stored config carries the rendering for the deployment's driver
    target = got["config"]["target"]
    assert target["cql"] == [
        f"ALTER TABLE {carts} WITH speculative_retry = 'MIN(99p,5ms)';",
        f"ALTER TABLE {items} WITH speculative_retry = 'MIN(99p,5ms)';",
    ]
    assert target["driver"]["python"]["speculative_execution"] == {
        "policy": "ConstantSpeculativeExecutionPolicy",
        "delay": 0.003,
        "max_attempts": 1,
    }
    snitch = got["published"]["cassandra"]["snitch"]
    assert snitch["applied_by_tailtune"] is False
    cls = snitch["settings"]["endpoint_snitch"]
    assert snitch["jmx"] == [
        f'org.apache.cassandra.db:type=StorageService updateSnitch("{cls}", true, 100, 600000, 1.0)'
    ]

    # rollback to v1 (which sets no table option): the values in force at v1 come back
    r = svc.client.post(f"{API}/configs/{dep['id']}/rollback", json={"version": 1}, headers=svc.write)
    assert r.status_code == 201, r.text
    v3 = r.json()
    assert v3["config"]["target"]["table_options"] == {
        carts: {"speculative_retry": "99p"},
        items: {"speculative_retry": "50ms"},
    }
    assert _run_jobs(svc, 1) == ["succeeded"]
    assert (_spec(session, carts), _spec(session, items)) == ("99p", "50ms")
    # and rolling back to v2 applies v2 again
    r = svc.client.post(f"{API}/configs/{dep['id']}/rollback", json={"version": 2}, headers=svc.write)
    assert r.status_code == 201 and "table_options" not in r.json()["config"].get("target", {})
    assert _run_jobs(svc, 1) == ["succeeded"]
    assert (_spec(session, carts), _spec(session, items)) == ("MIN(99p,5ms)", "MIN(99p,5ms)")

    # the deployment's tables and driver are part of the diff
    svc.client.patch(f"{API}/deployments/{dep['id']}", json={"tables": [carts]}, headers=svc.write)
    r = svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": v1, "publish": False},
                        headers=svc.write)
    d = svc.client.get(f"{API}/configs/{dep['id']}/diff?from=2&to={r.json()['version']}", headers=svc.read).json()
    assert d["changed"]["applies_to.tables"] == {"from": [carts, items], "to": [carts]}
    assert d["changed"]["policy"] == {"from": "stock", "to": "fifo"}


def test_a_missing_table_fails_the_publish_and_changes_nothing(
    svc: Svc, cassandra_node: CassandraNode, session: Any
) -> None:
    users = f"{KS}.users"
    _set(session, users, "99p")
    body = {**cassandra_deployment("shop-missing", cassandra_node.port, "tt_stock"),
            "tables": [users, f"{KS}.gone"]}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    cfg = {"policy": "stock", "params": {"speculative_retry": "ALWAYS"}}
    r = svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": cfg}, headers=svc.write)
    assert r.status_code == 201, r.text
    assert _run_jobs(svc, 1) == ["failed"]
    assert _spec(session, users) == "99p"
    got = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()
    assert got["publish_status"] == "failed"
    assert got["publish_error"] == (
        f"cassandra: table {KS}.gone does not exist (no row in system_schema.tables); no table was changed"
    )
    jobs = svc.client.get(f"{API}/jobs?deployment_id={dep['id']}", headers=svc.read).json()
    job = svc.client.get(f"{API}/jobs/{jobs[0]['id']}", headers=svc.read).json()
    assert "retrying in" not in job["logs"]  # not a transient failure: never retried
    pub = CassandraPublisher("shop-missing", _conn(cassandra_node), 10.0, tables=[users, f"{KS}.gone"])
    assert pub.read_current() is None  # the current row never moved


def test_a_failing_alter_reverts_the_tables_already_changed(cassandra_node: CassandraNode, session: Any) -> None:
    carts, items = f"{KS}.carts", f"{KS}.items"
    _set(session, carts, "99p")
    _set(session, items, "50ms")
    # system.local exists in system_schema.tables but Cassandra refuses to alter it: the third ALTER fails
    pub = CassandraPublisher("shop-alter", _conn(cassandra_node), 10.0, tables=[carts, items, "system.local"])
    with pytest.raises(TableOptionsFailed) as err:
        pub.publish(1, {"policy": "stock", "params": {"speculative_retry": "20ms"}})
    assert isinstance(err.value, PublishRejected)
    message = str(err.value)
    assert message.startswith("cassandra: speculative_retry of system.local failed: ")
    assert message.endswith(f"; reverted {carts}, {items}")
    assert (_spec(session, carts), _spec(session, items)) == ("99p", "50ms")
    assert pub.read_current() is None


def test_an_equal_value_is_not_altered_and_other_configs_leave_tables_alone(
    cassandra_node: CassandraNode, session: Any
) -> None:
    carts = f"{KS}.carts"
    _set(session, carts, "99p")
    pub = CassandraPublisher("shop-same", _conn(cassandra_node), 10.0, tables=[carts])
    out = pub.publish(1, {"policy": "stock", "params": {"speculative_retry": "99.0PERCENTILE"}})
    assert out.applied is not None and out.applied["tables"] == {carts: {"before": "99p", "after": "99p"}}
    out = pub.publish(2, {"policy": "rein", "params": {}})
    assert out.applied is not None and "tables" not in out.applied
    assert _spec(session, carts) == "99p"


def test_deployment_fields_are_validated(svc: Svc) -> None:
    base = cassandra_deployment("bad", 9042)
    cases: list[tuple[dict[str, object], str]] = [
        ({"tables": ["Shop.Carts"]}, "is not keyspace.table"),
        ({"tables": ["shop"]}, "is not keyspace.table"),
        ({"tables": ["system_schema.tables"]}, "system keyspace"),
        ({"tables": ["a.b", "a.b"]}, "listed twice"),
        ({"server": "patched"}, "server"),
        ({"driver": "go"}, "driver"),
        ({"connection": {"contact_points": ["h"], "username": "u"}}, "username and password_env go together"),
        ({"connection": {"contact_points": ["h"], "password_env": "lower"}}, "password_env"),
    ]
    for extra, needle in cases:
        r = svc.client.post(f"{API}/deployments", json={**base, **extra}, headers=svc.write)
        assert r.status_code == 422 and needle in r.text, (extra, r.text)
    dep = svc.client.post(f"{API}/deployments", json=base, headers=svc.write).json()
    assert (dep["server"], dep["driver"], dep["tables"]) == ("stock", "java4", [])
    r = svc.client.patch(f"{API}/deployments/{dep['id']}", json={"server": "rein-patched", "tables": ["a.b"]},
                         headers=svc.write)
    assert r.status_code == 200 and (r.json()["server"], r.json()["tables"]) == ("rein-patched", ["a.b"])
    r = svc.client.patch(f"{API}/deployments/{dep['id']}", json={"tables": None}, headers=svc.write)
    assert r.status_code == 422
    # a driver knob the deployment's driver lacks is refused with the reason
    cfg = {"policy": "stock", "params": {"driver.shuffle_replicas": 1}}
    r = svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": cfg, "publish": False},
                        headers=svc.write)
    assert r.status_code == 422 and "the Java driver 4 always shuffles replicas" in r.text, r.text


def test_credentials_never_leave_the_worker(
    svc: Svc, cassandra_node: CassandraNode, session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.servers.cassandra_server import free_port

    secret = "pw-Zq81-never-shown"
    monkeypatch.setenv("TAILTUNE_CASSANDRA_PASSWORD_SHOP", secret)
    conn = {"username": "tailtune", "password_env": "TAILTUNE_CASSANDRA_PASSWORD_SHOP"}
    ok_body = {**cassandra_deployment("shop-auth", cassandra_node.port, "tt_stock"), "tables": [f"{KS}.carts"]}
    ok_body["connection"] = {**ok_body["connection"], **conn}  # type: ignore[dict-item]
    down_body = {**cassandra_deployment("shop-auth-down", free_port(), "tt_stock"), "tables": [f"{KS}.carts"]}
    down_body["connection"] = {**down_body["connection"], **conn}  # type: ignore[dict-item]
    svc.settings.job_max_attempts = 1
    texts = []
    deps = []
    for body in (ok_body, down_body):
        r = svc.client.post(f"{API}/deployments", json=body, headers=admin_headers(svc))  # binds the password
        assert r.status_code == 201, r.text
        deps.append(r.json())
        texts.append(r.text)
        cfg = {"policy": "stock", "params": {"speculative_retry": "99p"}}
        r = svc.client.post(f"{API}/configs/{r.json()['id']}/versions", json={"config": cfg}, headers=svc.write)
        texts.append(r.text)
    assert _run_jobs(svc, 2) == ["succeeded", "failed"]
    for dep in deps:
        texts.append(svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).text)
        for job in svc.client.get(f"{API}/jobs?deployment_id={dep['id']}", headers=svc.read).json():
            texts.append(svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).text)
    assert deps[0]["connection"]["password_env"] == "TAILTUNE_CASSANDRA_PASSWORD_SHOP"
    assert all(secret not in t for t in texts)
    monkeypatch.delenv("TAILTUNE_CASSANDRA_PASSWORD_SHOP")
    bound = {**_conn(cassandra_node), **conn}
    pub = CassandraPublisher("shop-auth", bound, 5.0, egress=Egress().bound(password_binding(bound)))
    with pytest.raises(Exception, match="TAILTUNE_CASSANDRA_PASSWORD_SHOP, which is not set"):
        pub.ping()
