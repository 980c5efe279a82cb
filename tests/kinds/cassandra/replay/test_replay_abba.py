"""The live replay alternating the dynamic snitch on the test session's real single Cassandra node: two configs that
differ in `dynamic_snitch_badness_threshold` run whole periods in ABBA order (what the driver applied, read back
over JMX, and what the node's own `system_views.settings` shows during the run), the node's settings are restored
afterwards and after a cancel, a crashed run's changed settings are restored by the next run, and a mixed config
runs its table part concurrently and its snitch part alternately. Seconds of replay in blocks of 0.5 s; no timing
is asserted (the lag limit is set out of the way)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from base.settings import get_settings
from control.replay import ReplayRefused, run_replay
from kinds.cassandra.replay.live import KEYSPACE, LEASES
from kinds.cassandra.replay.snitch import SnitchJmx, SnitchValues

pytestmark = pytest.mark.slow

BADNESS = "dynamic_snitch_badness_threshold"


def _badness(session: Any) -> float:
    """The node's badness threshold as its own settings table shows it (CQL: not the replay's JMX path)."""
    row = session.execute("SELECT value FROM system_views.settings WHERE name = %s", (BADNESS,)).one()
    return float(row.value)


@pytest.fixture
def snitch_shop(cassandra_node: Any, tailtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> Iterator[dict[str, Any]]:
    """A user table, a dataset of 900 one-key reads 3 ms apart and the deployment `snitchy` of the node with its
    JMX port (replay_allowed by an admin)."""
    from cassandra.cluster import Cluster

    from control import deployments
    from control.db import database_for
    from control.deployment_spec import DeploymentCreate
    from control.egress import Egress
    from control.tokens import Principal
    from ingest.pipeline import ingest_file

    monkeypatch.setenv("TAILTUNE_REPLAY_WARMUP_S", "1")
    monkeypatch.setenv("TAILTUNE_REPLAY_MAX_LAG_MS", "600000")
    get_settings.cache_clear()
    settings = get_settings()
    ks = f"snitchy_{uuid.uuid4().hex[:8]}"
    cluster = Cluster([cassandra_node.host], port=cassandra_node.port)
    session = cluster.connect()
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {ks}.items (k text PRIMARY KEY, v blob)")
    path = tmp_path / "reads.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(
        f"{i},{i * 0.003:.6f},k{(i * 7) % 100},{50 + i % 200}\n" for i in range(900)))
    dataset = ingest_file(path, settings=settings).id
    body = DeploymentCreate.model_validate({
        "name": "snitchy", "kind": "cassandra", "tables": [f"{ks}.items"], "replay_allowed": True,
        "connection": {"contact_points": [cassandra_node.host], "port": cassandra_node.port,
                       "jmx_port": cassandra_node.jmx_port}})
    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            deployments.create(s, settings, body, Principal("test-admin", "admin"))
    finally:
        db.dispose()
    found = _badness(session)
    try:
        yield {"node": cassandra_node, "dataset": dataset, "session": session, "settings": settings,
               "found": found, "table": f"{ks}.items", "jmx": SnitchJmx(Egress.of(settings), cassandra_node.jmx_port)}
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        cluster.shutdown()
        get_settings.cache_clear()


def _other(found: float, *candidates: float) -> list[float]:
    """Values of the threshold the node does not have now."""
    return [c for c in candidates if abs(c - found) > 1e-9]


def _leases(session: Any) -> list[tuple[str, Any]]:
    return [(str(r.run), r.changed) for r in session.execute(f"SELECT run, changed FROM {KEYSPACE}.{LEASES}")]


def test_two_snitch_configs_alternate_in_abba_order_and_the_node_is_restored(snitch_shop: dict[str, Any]) -> None:
    session, found = snitch_shop["session"], snitch_shop["found"]
    a, b = _other(found, 0.3, 0.7, 0.5)[:2]
    seen: list[float] = []

    def watch(_stage: str, _fraction: float) -> None:
        value = _badness(session)
        if not seen or seen[-1] != value:
            seen.append(value)

    report = run_replay("snitchy", snitch_shop["dataset"],
                        [("A", f"stock:{BADNESS}={a}"), ("B", f"stock:{BADNESS}={b}")],
                        repeats=2, duration_s=1.0, block_s=0.5, settings=snitch_shop["settings"], on_progress=watch)
    doc = report.as_dict()
    assert [(x["name"], x["mode"], x["config"]["params"][BADNESS]) for x in doc["arms"]] == [
        ("A", "alternating", a), ("B", "alternating", b)]
    snitch = doc["cluster"]["snitch"]
    (node,) = snitch["found"]
    assert snitch["found"][node][BADNESS] == pytest.approx(found)
    periods = [(p["arms"], p["switched"], p["nodes"][node][BADNESS]) for p in snitch["periods"]]
    assert periods == [(["A"], True, pytest.approx(a)), (["B"], True, pytest.approx(b)),
                       (["B"], False, pytest.approx(b)), (["A"], True, pytest.approx(a))]
    assert snitch["restored"][node][BADNESS] == pytest.approx(found)
    # each arm ran alone in its periods: every request of a period is its arm's
    assert doc["observed"]["A"]["requests"] > 0 and doc["observed"]["B"]["requests"] > 0
    assert doc["blocks"] == 4  # 2 periods of A × 2 blocks of 0.5 s
    # with connection.jmx_port the speculative retries are the node's own SpeculativeRetries count of each twin
    # (RF 1: none), read over JMX before and after each period
    for name, arm in doc["cluster"]["arms"].items():
        assert arm["speculative_retries_source"] == "the coordinators' SpeculativeRetries (JMX)", name
        assert arm["speculative_retries"] == 0 and doc["cluster"]["nodes"][node][name]["speculative_retries"] == 0
    assert len(doc["comparisons"]) == 3
    for c in doc["comparisons"]:
        assert c["design"] == "alternating" and c["pairs"] == 2 and "ABBA pairs" in c["method"], c
        assert "(A B B A)" in c["method"]
    assert any("cluster-wide settings" in n and BADNESS in n and "A | B | B | A" in n for n in doc["notes"])
    # what the node's own settings table showed during the run is the applied order, and after it what it had
    assert seen[0] == pytest.approx(found)
    allowed = [found, a, b, a, found]
    it = iter(allowed)
    assert all(any(abs(v - w) < 1e-9 for w in it) for v in seen), (seen, allowed)
    assert _badness(session) == pytest.approx(found)
    assert _leases(session) == []


def test_a_cancel_restores_the_snitch(snitch_shop: dict[str, Any]) -> None:
    """Cancelled (on_progress raises) once the node shows the first period's threshold: the node has its own back,
    the lease and the twins are gone."""
    session, found = snitch_shop["session"], snitch_shop["found"]
    a, b = _other(found, 0.3, 0.7, 0.5)[:2]

    class Cancel(Exception):
        pass

    def cancel_once_applied(_stage: str, _fraction: float) -> None:
        if abs(_badness(session) - a) < 1e-9:
            raise Cancel

    with pytest.raises(Cancel):
        run_replay("snitchy", snitch_shop["dataset"], [("A", f"stock:{BADNESS}={a}"), ("B", f"stock:{BADNESS}={b}")],
                   repeats=2, duration_s=1.0, block_s=0.5, settings=snitch_shop["settings"],
                   on_progress=cancel_once_applied)
    assert _badness(session) == pytest.approx(found)
    assert _leases(session) == []
    assert [str(r.table_name) for r in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (KEYSPACE,))] == [LEASES]


def test_a_crashed_runs_changed_settings_are_restored_by_the_next_run(snitch_shop: dict[str, Any]) -> None:
    """A killed run leaves the snitch changed and its lease's `changed` (what it found; no TTL) with its lease
    cells expired: the next replay — here one of table options only — puts the found values back and says so."""
    session, found, jmx = snitch_shop["session"], snitch_shop["found"], snitch_shop["jmx"]
    node = snitch_shop["node"].host
    before = jmx.read(node)
    changed = _other(found, 0.9, 0.8)[0]
    jmx.apply(node, SnitchValues(before.update_ms, before.reset_ms, changed))
    assert _badness(session) == pytest.approx(changed)
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.{LEASES} (run text PRIMARY KEY, deployment text, "
                    "started double, changed text)")
    session.execute(f"ALTER TABLE {KEYSPACE}.{LEASES} ADD IF NOT EXISTS changed text")
    session.execute(f"INSERT INTO {KEYSPACE}.{LEASES} (run, changed) VALUES (%s, %s)",
                    ("deadbeef0003", json.dumps({node: before.as_knobs()})))
    report = run_replay("snitchy", snitch_shop["dataset"],
                        [("NEVER", "stock:speculative_retry=NEVER"), ("ALWAYS", "stock:speculative_retry=ALWAYS")],
                        duration_s=1.0, block_s=0.5, settings=snitch_shop["settings"])
    doc = report.as_dict()
    assert [x["mode"] for x in doc["arms"]] == ["concurrent", "concurrent"]
    assert "snitch" not in doc["cluster"]
    assert any("deadbeef0003" in n and "restored the dynamic-snitch settings" in n for n in doc["notes"])
    assert _badness(session) == pytest.approx(found)
    assert _leases(session) == []


def test_a_mixed_config_runs_its_table_part_concurrently_and_its_snitch_part_alternately(
        snitch_shop: dict[str, Any]) -> None:
    """A and B share a threshold and differ in speculative_retry: they run concurrently in one group's periods;
    C has another threshold: it alternates with them. One pair (--repeats 1): the alternating comparison is
    refused for too few pairs, not an error."""
    session, found = snitch_shop["session"], snitch_shop["found"]
    a, c = _other(found, 0.3, 0.7, 0.5)[:2]
    report = run_replay("snitchy", snitch_shop["dataset"],
                        [("A", f"stock:speculative_retry=NEVER,{BADNESS}={a}"),
                         ("B", f"stock:speculative_retry=99p,{BADNESS}={a}"),
                         ("C", f"stock:speculative_retry=NEVER,{BADNESS}={c}")],
                        duration_s=1.0, block_s=0.5, settings=snitch_shop["settings"])
    doc = report.as_dict()
    assert [(x["name"], x["mode"], x["config"]["params"]["speculative_retry"], x["config"]["params"][BADNESS])
            for x in doc["arms"]] == [("A", "alternating", "NEVER", a), ("B", "alternating", "99p", a),
                                      ("C", "alternating", "NEVER", c)]
    snitch = doc["cluster"]["snitch"]
    (node,) = snitch["found"]
    assert [(p["arms"], p["nodes"][node][BADNESS]) for p in snitch["periods"]] == [
        (["A", "B"], pytest.approx(a)), (["C"], pytest.approx(c))]
    designs = {(x["candidate"], x["design"]) for x in doc["comparisons"]}
    assert designs == {("B", "concurrent"), ("C", "alternating")}
    for x in doc["comparisons"]:
        if x["design"] == "alternating":
            assert x["pairs"] == 1 and "1 ABBA pair" in x["reason"], x
        else:
            assert x["blocks"] == 2 and x["reason"], x  # 2 blocks of 0.5 s: too few, too short
    # A and B shared one stream (their period), C had its period alone
    ra, rb, rc = (doc["observed"][n]["requests"] for n in "ABC")
    assert abs(ra - rb) <= 1 and abs(rc - (ra + rb)) <= 1
    arms = doc["cluster"]["arms"]
    assert arms["C"]["replica_reads"] == arms["C"]["requests_sent"] > 0
    assert _badness(session) == pytest.approx(found)
    assert _leases(session) == []


def test_snitch_configs_need_every_nodes_jmx(snitch_shop: dict[str, Any]) -> None:
    """A JMX port nothing listens on: refused naming the node and the port, nothing left changed."""
    from control import deployments
    from control.db import database_for
    from control.deployment_spec import DeploymentCreate
    from control.tokens import Principal
    from tests.servers.cassandra_server import free_port

    settings, node = snitch_shop["settings"], snitch_shop["node"]
    port = free_port()
    body = DeploymentCreate.model_validate({
        "name": "nojmx", "kind": "cassandra", "tables": [snitch_shop["table"]], "replay_allowed": True,
        "connection": {"contact_points": [node.host], "port": node.port, "jmx_port": port}})
    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            deployments.create(s, settings, body, Principal("test-admin", "admin"))
    finally:
        db.dispose()
    with pytest.raises(ReplayRefused, match=f"node {node.host}: JMX at port {port}"):
        run_replay("nojmx", snitch_shop["dataset"], [("A", f"stock:{BADNESS}=0.3"), ("B", f"stock:{BADNESS}=0.7")],
                   repeats=2, duration_s=1.0, block_s=0.5, settings=settings)
    assert _badness(snitch_shop["session"]) == pytest.approx(snitch_shop["found"])
    assert _leases(snitch_shop["session"]) == []

