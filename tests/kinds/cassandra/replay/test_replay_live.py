"""`tailtune replay` against the test session's real single Cassandra node (RF 1): NEVER, ALWAYS and 99p run
concurrently on twin tables, the replay says a single RF-1 node cannot speculate, the twins are gone afterwards and
the user's table is untouched; a dead run's twins are swept by the next run; a deployment without replay_allowed is
refused before anything is sent; arms that differ only in their multiget's shape or chunk run concurrently, each
request sent as its arm's IN chunks or per-partition queries. Seconds of replay in blocks of 0.5 s: the comparisons
are refused (too few, too short blocks) as tuner.fidelity refuses them. No timing is asserted (the lag limit is set
out of the way: a loaded test machine lags)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from base.settings import Settings, get_settings
from control.replay import LagTooHigh, run_replay
from kinds.cassandra.replay.live import KEYSPACE

pytestmark = pytest.mark.slow


def _session(node: Any) -> tuple[Any, Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([node.host], port=node.port)
    return cluster, cluster.connect()


def _deployment(settings: Settings, name: str, node: Any, table: str, *, allowed: bool, driver: str = "java4"
                ) -> None:
    from control import deployments
    from control.db import database_for
    from control.deployment_spec import DeploymentCreate
    from control.tokens import Principal

    body = DeploymentCreate.model_validate({"name": name, "kind": "cassandra", "tables": [table],
                                            "replay_allowed": allowed, "driver": driver,
                                            "connection": {"contact_points": [node.host], "port": node.port}})
    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            deployments.create(s, settings, body, Principal("test-admin", "admin"))
    finally:
        db.dispose()


@pytest.fixture
def shop(cassandra_node: Any, tailtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[dict[str, Any]]:
    """The user's keyspace and table (speculative_retry 50p, 5 rows), a dataset of 900 one-key reads 3 ms apart, one
    of 600 multigets 4 ms apart (request i: 1 + i % 6 distinct keys), and deployments of the node: `shop`
    (replay_allowed by an admin), `closed` (not allowed), `pyshop` (the Python driver)."""
    from ingest.pipeline import ingest_file

    monkeypatch.setenv("TAILTUNE_REPLAY_WARMUP_S", "1")
    monkeypatch.setenv("TAILTUNE_REPLAY_MAX_LAG_MS", "600000")
    get_settings.cache_clear()
    settings = get_settings()
    ks = f"shop_{uuid.uuid4().hex[:8]}"
    cluster, session = _session(cassandra_node)
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {ks}.items (k text PRIMARY KEY, v blob) WITH speculative_retry = '50p'")
    for i in range(5):
        session.execute(f"INSERT INTO {ks}.items (k, v) VALUES (%s, %s)", (f"k{i}", bytes([i]) * 8))
    path = tmp_path / "reads.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(
        f"{i},{i * 0.003:.6f},k{(i * 7) % 100},{50 + i % 200}\n" for i in range(900)))
    dataset = ingest_file(path, settings=settings).id
    path = tmp_path / "multigets.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(
        f"{i},{i * 0.004:.6f},k{(i * 13 + j * 17) % 100},{60 + j}\n" for i in range(600) for j in range(1 + i % 6)))
    multigets = ingest_file(path, settings=settings).id
    _deployment(settings, "shop", cassandra_node, f"{ks}.items", allowed=True)
    _deployment(settings, "closed", cassandra_node, f"{ks}.items", allowed=False)
    _deployment(settings, "pyshop", cassandra_node, f"{ks}.items", allowed=True, driver="python")
    try:
        yield {"node": cassandra_node, "ks": ks, "dataset": dataset, "multigets": multigets, "session": session,
               "settings": settings}
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        cluster.shutdown()
        get_settings.cache_clear()


def _scratch_tables(session: Any) -> list[str]:
    return sorted(str(r.table_name) for r in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (KEYSPACE,)))


def _user_table(session: Any, ks: str) -> tuple[str, list[tuple[str, bytes]]]:
    option = session.execute("SELECT speculative_retry FROM system_schema.tables WHERE keyspace_name = %s AND "
                             "table_name = 'items'", (ks,)).one().speculative_retry
    return str(option), sorted((r.k, bytes(r.v)) for r in session.execute(f"SELECT k, v FROM {ks}.items"))


def test_never_always_and_99p_run_concurrently_on_twin_tables(shop: dict[str, Any], cli: Any) -> None:
    session, ks = shop["session"], shop["ks"]
    before = _user_table(session, ks)
    r = cli("replay", "--deployment", "shop", "--dataset", shop["dataset"],
            "--config", "NEVER=stock:speculative_retry=NEVER", "--config", "ALWAYS=stock:speculative_retry=ALWAYS",
            "--config", "P99=stock:speculative_retry=99p", "--duration", "2.5", "--block-s", "0.5", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(a["name"], a["mode"], a["config"]["params"]["speculative_retry"]) for a in doc["arms"]] == [
        ("NEVER", "concurrent", "NEVER"), ("ALWAYS", "concurrent", "ALWAYS"), ("P99", "concurrent", "99p")]
    assert doc["kind"] == "cassandra" and doc["blocks"] == 5 and doc["block_s"] == 0.5
    assert doc["generator"]["driver"].startswith("java-driver-core") and doc["generator"]["lag_ok"] is True
    assert set(doc["generator"]["lag_ms"]) == {"p50", "p99", "max"}
    # every arm got its share of one stream, each request read once (RF 1: nothing to speculate on)
    requests = [doc["observed"][a]["requests"] for a in ("NEVER", "ALWAYS", "P99")]
    assert max(requests) - min(requests) <= 1 and sum(requests) > 700
    assert all(doc["observed"][a]["errors"] == doc["observed"][a]["timeouts"] == 0 for a in doc["observed"])
    for name, arm in doc["cluster"]["arms"].items():
        assert arm["replica_reads"] == arm["requests_sent"] and arm["speculative_retries"] == 0, name
        assert arm["twin"].startswith(f"{KEYSPACE}.r_")
    assert doc["cluster"]["rf"] == 1
    assert any("no speculative retry can happen" in n for n in doc["notes"])
    assert any("twin tables are fresh" in n for n in doc["notes"])
    # the model replays the arms' hedges on the Java generator's 1 ms timer tick
    assert "model: every arm replayed as the generator ran it (se_tick_ms = 1)" in doc["notes"]
    assert set(doc["predicted"]) == {"NEVER", "ALWAYS", "P99"}
    assert len(doc["comparisons"]) == 6 and all(c["reason"] for c in doc["comparisons"])  # 5 blocks of 0.5 s
    assert doc["fidelity"]["replays"] == 1 and doc["interference"]["flagged"] is False
    # the CLI's report is kept among the deployment's fidelity records, as a replay job's is
    from control.db import database_for
    from control.deployments import get_by_name
    from control.fidelity_store import list_records

    with database_for(shop["settings"].resolved_database_url).session() as s:
        rows = list_records(s, get_by_name(s, "shop").id, limit=10, offset=0)
        assert [(r.source, r.report["at"]) for r in rows][:1] == [("cli", doc["at"])]
    # the twins are gone, the user's table is as it was
    assert _scratch_tables(session) == ["runs"]
    assert _user_table(session, ks) == before


def test_a_dead_runs_twins_are_swept_and_current_is_the_users_table(shop: dict[str, Any]) -> None:
    """Twins whose run holds no lease (a replay that crashed) are dropped by the next run, which names them; `current`
    replays the user's table's own speculative_retry. With a lag limit nothing can meet, the report comes back
    with the refusal, and the twins are gone all the same."""
    session, settings = shop["session"], shop["settings"]
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"CREATE TABLE {KEYSPACE}.r_deadbeef0001_0 (k text PRIMARY KEY, v blob)")
    settings.replay_max_lag_ms = 1e-6
    with pytest.raises(LagTooHigh, match="sent late") as caught:
        run_replay("shop", shop["dataset"], [("CUR", "current"), ("NEVER", "stock:speculative_retry=NEVER")],
                   duration_s=1.0, block_s=0.5, settings=settings)
    doc = caught.value.report.as_dict()
    assert doc["generator"]["lag_ok"] is False
    assert doc["arms"][0]["config"] == {"policy": "stock", "params": {"speculative_retry": "50p",
                                                                       "multiget.shape": "in", "multiget.chunk": 0}}
    assert any("r_deadbeef0001_0" in n and "did not finish" in n for n in doc["notes"])
    assert _scratch_tables(session) == ["runs"]


def test_a_deployment_without_replay_allowed_is_refused(shop: dict[str, Any], cli: Any) -> None:
    r = cli("replay", "--deployment", "closed", "--dataset", shop["dataset"], "--config", "A=current",
            "--config", "B=stock:speculative_retry=NEVER", "--json")
    assert r.exit_code == 2 and "does not allow the live replay" in r.stderr and r.stdout == ""


def test_a_python_driver_deployment_replays_on_the_python_driver_with_a_profile_per_arm(shop: dict[str, Any]
                                                                                       ) -> None:
    """The deployment's own driver runs the generator; a driver setting is the arm's execution profile (here the
    second arm hedges with a second execution after 1 ms), the table option its twin's."""
    hedge = "stock:speculative_retry=NEVER,driver.speculative_execution.max_executions=2," \
            "driver.speculative_execution.delay=1"
    report = run_replay("pyshop", shop["dataset"], [("PLAIN", "stock:speculative_retry=NEVER"), ("HEDGE", hedge)],
                        duration_s=1.5, block_s=0.5, settings=shop["settings"])
    doc = report.as_dict()
    assert doc["generator"]["driver"].startswith("python-cassandra-driver")
    assert not any("se_tick_ms" in n for n in doc["notes"])  # the Python driver has no wheel timer
    assert doc["arms"][1]["config"]["params"]["driver.speculative_execution.max_executions"] == 2
    plain, hedged = doc["cluster"]["arms"]["PLAIN"], doc["cluster"]["arms"]["HEDGE"]
    assert plain["driver_extra_executions"] == 0 and hedged["driver_extra_executions"] >= 0
    assert all(doc["observed"][a]["errors"] == 0 for a in ("PLAIN", "HEDGE"))
    assert _scratch_tables(shop["session"]) == ["runs"]


def test_arms_that_differ_only_in_their_multiget_shape_run_concurrently(shop: dict[str, Any]) -> None:
    """All keys in one IN, IN chunks of 2 keys, one query per key: three arms of one stream on twin tables. Each
    request is sent as its arm's queries; the node read every key of every request once (RF 1), whatever the
    shape; every key's row came back; the model replays the same multigets."""
    settings = shop["settings"]
    arms = [("ALL", "stock:multiget.chunk=0"), ("TWO", "stock:multiget.chunk=2"),
            ("PP", "stock:multiget.shape=per-partition")]
    report = run_replay("shop", shop["multigets"], arms, duration_s=2.0, block_s=0.5, settings=settings)
    doc = report.as_dict()
    assert [(a["name"], a["mode"]) for a in doc["arms"]] == [("ALL", "concurrent"), ("TWO", "concurrent"),
                                                            ("PP", "concurrent")]
    params = [a["config"]["params"] for a in doc["arms"]]
    assert [(p["multiget.shape"], p.get("multiget.chunk")) for p in params] == [("in", 0), ("in", 2),
                                                                                ("per-partition", None)]
    cluster = doc["cluster"]["arms"]
    assert [cluster[a]["shape"] for a in ("ALL", "TWO", "PP")] == ["in", "in", "per-partition"]
    # request i reads 1 + i % 6 keys; 2 s measured (i < 500) after a warm-up of the first 1 s (i < 250)
    keys = sum(1 + i % 6 for i in range(500)) + sum(1 + i % 6 for i in range(250))
    assert sum(a["keys_read"] for a in cluster.values()) == keys
    assert sum(a["requests_sent"] for a in cluster.values()) == 750
    for name, a in cluster.items():
        # RF 1: each key is one coordinator read and one replica read, whatever the shape
        assert a["coordinator_reads"] == a["replica_reads"] == a["keys_read"], name
        assert a["extra_reads"] == a["driver_extra_executions"] == 0, name
    assert cluster["ALL"]["queries_sent"] == cluster["ALL"]["requests_sent"]
    assert cluster["TWO"]["requests_sent"] < cluster["TWO"]["queries_sent"] < cluster["TWO"]["keys_read"]
    assert cluster["PP"]["queries_sent"] == cluster["PP"]["keys_read"]
    measured = [doc["observed"][a]["requests"] for a in ("ALL", "TWO", "PP")]
    assert sum(measured) == 500 and max(measured) - min(measured) <= 1
    assert all(doc["observed"][a]["errors"] == doc["observed"][a]["timeouts"] == 0 for a in doc["observed"])
    assert not any("rows of the" in n or "replayed as a read of its own" in n for n in doc["notes"])
    assert set(doc["predicted"]) == {"ALL", "TWO", "PP"}
    assert _scratch_tables(shop["session"]) == ["runs"]
