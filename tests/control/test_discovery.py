"""Discovery reads a deployment's live system into its model: against the tests' real Cassandra node and real
memcached servers, through the API + worker and through the CLI; failures (a node down, a login refused — by an
attacker-style CQL endpoint, as the test node runs without authentication —, an address outside the allowed
networks) are one clear line and leave the model as it was."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest

from control.discovery import MIN_RELEASE, Discovered, _release, merge_model, parse_strategy
from control.egress import PASSWORD_ENV_PREFIX
from control.model import build_model
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, admin_headers, memcached_deployment
from tests.servers.cassandra_server import CassandraNode, free_port
from tests.servers.fake_cql import FakeCqlServer
from tests.servers.memcached_server import running_memcached

API = "/api/v1"
KS = "disc_ks"
WIDE_ROWS = 20_000
HEAVY_READS = 20


def _worker(svc: Svc) -> Worker:
    return Worker(svc.settings, svc.db, "w-discover", handlers=default_handlers(), schedule=False)


def _create(svc: Svc, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    r = svc.client.post(f"{API}/deployments", json=body, headers=headers or svc.write)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def _get(svc: Svc, dep_id: int) -> dict[str, Any]:
    out: dict[str, Any] = svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json()
    return out


def _discover_job(svc: Svc, dep_id: int, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST .../discover (202 with the queued job), the worker runs it, GET /jobs/{id}."""
    r = svc.client.post(f"{API}/deployments/{dep_id}/discover", json=body, headers=svc.write)
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["kind"], job["status"], job["deployment_id"]) == ("discover", "queued", dep_id)
    _worker(svc).run_once()
    out: dict[str, Any] = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    return out


def _check_input(entry: dict[str, Any], t0: float, t1: float) -> None:
    assert entry["source"] == "discovered" and t0 <= entry["at"] <= t1 and entry["how"], entry


@pytest.fixture(scope="module")
def cql(cassandra_node: CassandraNode) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def _cassandra_body(name: str, node: CassandraNode, tables: list[str]) -> dict[str, Any]:
    return {"name": name, "kind": "cassandra", "topology": {"servers": 1},
            "connection": {"contact_points": [node.host], "port": node.port}, "tables": tables}


@pytest.mark.slow
def test_discover_a_real_cassandra_node(svc: Svc, cli: Any, cassandra_node: CassandraNode, cql: Any) -> None:
    from cassandra.concurrent import execute_concurrent, execute_concurrent_with_args
    from cassandra.query import BatchStatement, BatchType

    cql.execute(f"CREATE KEYSPACE IF NOT EXISTS {KS} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    cql.execute(f"CREATE TABLE IF NOT EXISTS {KS}.small (pk int PRIMARY KEY, v text)")
    cql.execute(f"CREATE TABLE IF NOT EXISTS {KS}.wide (pk int, c int, v text, PRIMARY KEY (pk, c))")
    cql.execute(f"ALTER TABLE {KS}.small WITH speculative_retry = '42ms'")
    cql.execute(f"ALTER TABLE {KS}.wide WITH speculative_retry = 'MIN(95p,30ms)'")
    small = cql.prepare(f"INSERT INTO {KS}.small (pk, v) VALUES (?, ?)")
    execute_concurrent_with_args(cql, small, [(i, "x") for i in range(10)])
    wide = cql.prepare(f"INSERT INTO {KS}.wide (pk, c, v) VALUES (0, ?, 'x')")
    batches = []
    for start in range(0, WIDE_ROWS, 100):
        b = BatchStatement(batch_type=BatchType.UNLOGGED)
        for c in range(start, start + 100):
            b.add(wide, (c,))
        batches.append((b, None))
    assert all(ok for ok, _ in execute_concurrent(cql, batches, concurrency=8))
    # reads whose server time is milliseconds (a filtered read of the 20,000-row partition), timed client-side
    heavy = cql.prepare(f"SELECT c FROM {KS}.wide WHERE pk = 0 AND v = 'y' ALLOW FILTERING")
    client_ms = []
    for _ in range(HEAVY_READS):
        t = time.perf_counter()
        assert list(cql.execute(heavy)) == []
        client_ms.append((time.perf_counter() - t) * 1000.0)

    tables = [f"{KS}.small", f"{KS}.wide"]
    dep = _create(svc, _cassandra_body("disc-cass", cassandra_node, tables))
    assert dep["current_config"] is None
    t0 = time.time()
    job = _discover_job(svc, dep["id"])
    t1 = time.time()
    assert job["status"] == "succeeded", job["error"]
    got = _get(svc, dep["id"])
    model = got["model"]
    assert model["declared"] == ["servers"]  # as the deployment was created: kept
    inputs = model["inputs"]
    assert job["result"]["inputs"] == inputs

    # the inputs, each against what the node itself says
    for name in ("servers", "slots", "replication", "ring"):
        _check_input(inputs[name], t0, t1)
    local = cql.execute("SELECT tokens, data_center, rack, partitioner FROM system.local").one()
    reads = cql.execute("SELECT value FROM system_views.settings WHERE name = 'concurrent_reads'").one().value
    assert inputs["servers"]["value"] == 1
    assert inputs["slots"]["value"] == int(reads)
    assert inputs["replication"]["value"] == 1
    ring = inputs["ring"]["value"]
    assert ring["partitioner"] == local.partitioner and ring["local_dc"] == local.data_center
    assert ring["strategy"] == {"class": "SimpleStrategy", "replication_factor": 1}
    assert ring["nodes"] == [{"address": cassandra_node.host, "dc": local.data_center, "rack": local.rack,
                              "tokens": sorted(int(t) for t in local.tokens)}]
    readings = model["readings"]
    assert readings["settings"]["concurrent_reads"] == reads
    assert readings["settings"]["snitch"]["endpoint_snitch"] == "SimpleSnitch"

    # the tables' speculative_retry, as Cassandra shows them; the stock config they amount to
    shown = {t: cql.execute("SELECT speculative_retry FROM system_schema.tables WHERE keyspace_name = %s AND "
                            "table_name = %s", tuple(t.split("."))).one().speculative_retry for t in tables}
    assert readings["tables"] == {t: {"speculative_retry": v} for t, v in shown.items()}
    assert shown == {f"{KS}.small": "42ms", f"{KS}.wide": "MIN(95p,30ms)"}
    expected = {"policy": "stock", "params": {"speculative_retry": "42ms"},
                "target": {"table_options": {f"{KS}.small": {"speculative_retry": "42ms"},
                                             f"{KS}.wide": {"speculative_retry": "MIN(95p,30ms)"}}}}
    assert got["current_config"] == expected and job["result"]["current_config"] == expected

    # the latencies: the unit checked against the client's own timing of the same reads
    latency = readings["latency"]
    assert latency["unit"] == "ms" and latency["resolution_ms"] == 1.0
    wide_co = latency["tables"][f"{KS}.wide"]["coordinator"]
    assert wide_co["count"] == HEAVY_READS  # exactly the reads timed above
    raw = latency["tables"][f"{KS}.wide"]["raw"][cassandra_node.host]["coordinator"]
    assert wide_co["p50_ms"] == pytest.approx(raw["p50th_ms"] * 1000.0)
    # the node's own time of a read lies inside the client's: read as the column's label says (ms) it would be
    # a thousand times too small; read as seconds (× 1000 → ms) it is a large part of the client's time
    lo, hi = 0.1 * statistics.median(client_ms), 1.25 * max(client_ms) + latency["resolution_ms"]
    assert lo <= wide_co["p50_ms"] <= hi, (wide_co, sorted(client_ms))
    assert raw["p50th_ms"] < lo, "the column's label (ms) is not its unit"
    small_entry = latency["tables"][f"{KS}.small"]
    assert small_entry["local"]["count"] == 0 and small_entry["local"]["p50_ms"] == 0.0
    probe = small_entry["single_key"]  # sub-millisecond: the tables cannot tell, the client times single reads
    assert probe["reads"] == svc.settings.discover_probe_reads and 0 < probe["p50_ms"] <= probe["p99_ms"]
    assert "client-side" in probe["how"]

    # the model a tune replays: the operator's servers, the discovered slots and replication
    built = build_model("cassandra", got["topology"], got["connection"], model, timestamps=False)
    assert built.sources["servers"] == "declared" and built.sources["slots"] == "discovered"
    assert built.options["slots"] == int(reads) and built.options["replication"] == 1

    # the CLI: the same discovery, as JSON; an operator's current_config is never replaced
    r = svc.client.patch(f"{API}/deployments/{dep['id']}",
                         json={"current_config": {"policy": "stock", "params": {"speculative_retry": "99p"}}},
                         headers=svc.write)
    assert r.status_code == 200, r.text
    r = cli("deployments", "discover", "disc-cass", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["inputs"]["slots"]["value"] == int(reads) and out["current_config"] is None
    assert any("current_config kept" in n for n in out["notes"])
    again = _get(svc, dep["id"])
    assert again["current_config"] == {"policy": "stock", "params": {"speculative_retry": "99p"}}
    assert again["model"]["inputs"]["slots"]["at"] > inputs["slots"]["at"]


def test_a_refused_login_is_one_line_and_changes_nothing(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "disc-pw-3f9a"
    monkeypatch.setenv(f"{PASSWORD_ENV_PREFIX}DISC", secret)
    with FakeCqlServer(reject=True) as fake:
        body = {"name": "disc-login", "kind": "cassandra", "topology": {"servers": 3},
                "connection": {"contact_points": ["127.0.0.1"], "port": fake.port, "username": "tailtune",
                               "password_env": f"{PASSWORD_ENV_PREFIX}DISC"}, "tables": ["shop.carts"]}
        dep = _create(svc, body, admin_headers(svc))  # the admin binds the password variable
        before = _get(svc, dep["id"])
        job = _discover_job(svc, dep["id"])
        assert secret.encode() in fake.received()  # it was a real login attempt
    assert job["status"] == "failed" and job["attempts"] == 1  # not retried: the password is wrong
    assert f"cassandra 127.0.0.1:{fake.port}: login as 'tailtune' refused" in job["error"], job["error"]
    assert f"{PASSWORD_ENV_PREFIX}DISC" in job["error"] and "\n" not in job["error"].strip()
    text = json.dumps(job)
    assert secret not in text
    after = _get(svc, dep["id"])
    assert (after["model"], after["current_config"]) == (before["model"], before["current_config"])


def test_a_node_down_is_one_line_and_changes_nothing(svc: Svc, cli: Any) -> None:
    port = free_port()
    body = {"name": "disc-down", "kind": "cassandra", "topology": {"servers": 3},
            "connection": {"contact_points": ["127.0.0.1"], "port": port}, "tables": ["shop.carts"]}
    dep = _create(svc, body)
    # a model found earlier stays as it was
    with svc.db.session() as s:
        from control.db import DeploymentRow

        row = s.get(DeploymentRow, dep["id"])
        assert row is not None
        row.model = {**row.model, "inputs": {"slots": {"value": 16, "source": "discovered", "at": 1.0, "how": "x"}}}
    before = _get(svc, dep["id"])
    r = cli("deployments", "discover", "disc-down")
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cassandra 127.0.0.1:{port}: connection refused" in lines[0], r.stderr
    assert "connection.contact_points" in lines[0]
    assert _get(svc, dep["id"])["model"] == before["model"]


def test_discovery_connects_only_inside_the_allowed_networks(svc: Svc, cli: Any) -> None:
    svc.settings.connect_networks = ["10.0.0.0/8"]  # the API's and the worker's settings (the CLI's too)
    with FakeCqlServer() as fake:
        body = {"name": "disc-net", "kind": "cassandra", "topology": {"servers": 3},
                "connection": {"contact_points": ["localhost"], "port": fake.port}}
        dep = _create(svc, body)  # a host name passes the API; the worker resolves and refuses it
        job = _discover_job(svc, dep["id"])
        assert job["status"] == "failed" and "outside the networks the worker may connect to" in job["error"]
        assert job["attempts"] == 1 and fake.connections == 0
    with running_memcached(threads=1) as mc:
        _create(svc, memcached_deployment("disc-net-mc", [f"localhost:{mc.port}"]))
        before = int(_stats(mc.host, mc.port)[b"total_connections"])
        r = cli("deployments", "discover", "disc-net-mc")
        assert r.exit_code == 1 and "outside the networks the worker may connect to" in r.stderr, r.stderr
        assert int(_stats(mc.host, mc.port)[b"total_connections"]) == before + 1  # this look, no other


def _stats(host: str, port: int) -> dict[bytes, Any]:
    from pymemcache.client.base import Client

    client = Client((host, port))
    try:
        out: dict[bytes, Any] = client.stats()
        return out
    finally:
        client.close()


def test_discover_real_memcached(svc: Svc, cli: Any) -> None:
    from pymemcache.client.base import Client

    with running_memcached(threads=3) as mc:
        address = f"{mc.host}:{mc.port}"
        dep = _create(svc, memcached_deployment("disc-mc", [address]))
        probe = Client((mc.host, mc.port))
        probe.set("app:key", b"app value")
        items, total = int(probe.stats()[b"curr_items"]), int(probe.stats()[b"total_items"])
        t0 = time.time()
        job = _discover_job(svc, dep["id"], {"profile_servers": True})
        t1 = time.time()
        assert job["status"] == "succeeded", job["error"]
        stats = probe.stats()
        # the profiler wrote its scratch keys (200 of them) and removed every one; the application's key stays
        assert int(stats[b"total_items"]) >= total + 200 and int(stats[b"curr_items"]) == items
        assert probe.get("app:key") == b"app value"
        got = _get(svc, dep["id"])
        inputs = got["model"]["inputs"]
        assert inputs["worker_threads"]["value"] == 3  # memcached -t 3
        _check_input(inputs["worker_threads"], t0, t1)
        _check_input(inputs["client_overhead"], t0, t1)
        assert inputs["client_overhead"]["value"]["us"] > 0
        server = got["model"]["readings"]["servers"][address]
        assert server["item_size_max"] == 1024 * 1024 and server["threads"] == 3
        assert got["model"]["readings"]["profile"]["keys_removed"] is True
        built = build_model("memcached", got["topology"], got["connection"], got["model"], timestamps=False)
        assert built.sources["worker_threads"] == "discovered" and built.options["worker_threads"] == 3
        assert built.options["client_overhead_us"] == inputs["client_overhead"]["value"]["us"]
        assert got["current_config"] == {"policy": "batching", "params": {}}  # memcached: left alone

        # the CLI without --profile-servers writes nothing and keeps the profiled overhead
        written = int(probe.stats()[b"total_items"])
        r = cli("deployments", "discover", "disc-mc", "--json")
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["inputs"]["worker_threads"]["value"] == 3
        assert int(probe.stats()[b"total_items"]) == written
        assert _get(svc, dep["id"])["model"]["inputs"]["client_overhead"] == inputs["client_overhead"]
        probe.close()
    # the server gone: one line naming it; the model unchanged
    before = _get(svc, dep["id"])["model"]
    r = cli("deployments", "discover", "disc-mc")
    assert r.exit_code == 1 and f"memcached {address}: connection refused" in r.stderr, r.stderr
    assert _get(svc, dep["id"])["model"] == before


def test_the_route_checks_its_input_and_its_token(svc: Svc) -> None:
    dep = _create(svc, memcached_deployment("disc-route", ["127.0.0.1:11211"]))
    url = f"{API}/deployments/{dep['id']}/discover"
    assert svc.client.post(f"{API}/deployments/999/discover", headers=svc.write).status_code == 404
    r = svc.client.post(url, json={"profile_servers": "yes"}, headers=svc.write)
    assert r.status_code == 422 and "profile_servers" in r.text, r.text
    r = svc.client.post(url, json={"profile": True}, headers=svc.write)
    assert r.status_code == 422 and "profile" in r.text, r.text
    assert svc.client.post(url, headers=svc.read).status_code in (401, 403)
    jobs = svc.client.get(f"{API}/jobs?deployment_id={dep['id']}", headers=svc.read).json()
    assert jobs == []  # nothing was queued


def test_strategies_and_the_merge_rules() -> None:
    assert _release("3.11.4") < MIN_RELEASE <= _release("4.0.13") < _release("5.0.9")
    assert parse_strategy({"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"}) == {
        "class": "SimpleStrategy", "replication_factor": 3}
    assert parse_strategy({"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc2": "2",
                           "dc1": "3/1"}) == {"class": "NetworkTopologyStrategy", "replication": {"dc1": 3, "dc2": 2}}
    old = {"declared": ["servers"],
           "inputs": {"service_time": {"value": {"mean_ms": 1.0}, "source": "calibrated", "at": 1.0, "how": "c"},
                      "client_overhead": {"value": {"us": 5.0}, "source": "calibrated", "at": 1.0, "how": "c"},
                      "ring": {"value": {"nodes": []}, "source": "discovered", "at": 1.0, "how": "old"}},
           "readings": {"calibration": {"x": 1}, "tables": {"old": {}}}}
    found = Discovered("cassandra", 2.0, missing=["ring"], readings={"tables": {"ks.t": {}}})
    found.put("slots", 8, "system_views.settings")
    found.put("client_overhead", {"us": 9.0}, "profile")
    merged = merge_model(old, found)
    assert merged["declared"] == ["servers"]
    assert merged["inputs"]["slots"]["value"] == 8
    assert merged["inputs"]["client_overhead"]["source"] == "calibrated"  # calibration wins
    assert merged["inputs"]["service_time"] == old["inputs"]["service_time"]  # type: ignore[index]
    assert "ring" not in merged["inputs"]  # looked for, not found: the stale value goes
    assert merged["readings"] == {"calibration": {"x": 1}, "tables": {"ks.t": {}}}
