"""Both generators against the test session's real Cassandra node: a small plan over two twin tables (one arm
hedging with speculative executions) comes back counted per arm as planned, measured, and through the allowed
node only; a plan of multigets (IN chunks and per-partition queries) has every query answered, every row there,
and the node executed exactly the plan's queries and read exactly its keys; a version 1 plan still runs; a run
outside its allow-list or its sandbox is refused; errors past the fraction abort it. No timing is asserted: only
what must hold whatever the machine's speed."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from base.jvm_sandbox import sandbox_options
from kinds.cassandra.replay.config import ArmProfile, ConfigError, Endpoint, GeneratorConfig
from kinds.cassandra.replay.generator import GeneratorAborted, GeneratorFailed, run
from kinds.cassandra.replay.plan import Plan, PlanArm, encode_list, encode_value, write_plan

pytestmark = pytest.mark.slow

DRIVERS = ["java4", "python"]


@pytest.fixture(scope="module")
def keyspace(cassandra_node: Any) -> Iterator[tuple[Any, str, str]]:
    """(node, keyspace, local datacenter): twin tables `a` and `b` of text keys, `n` of int keys; dropped after."""
    from cassandra.cluster import Cluster

    ks = f"gen_{uuid.uuid4().hex[:8]}"
    cluster = Cluster([cassandra_node.host], port=cassandra_node.port)
    session = cluster.connect()
    try:
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', "
                        "'replication_factor': 1}")
        for t in ("a", "b"):
            session.execute(f"CREATE TABLE {ks}.{t} (k text PRIMARY KEY, v blob)")
            insert = session.prepare(f"INSERT INTO {ks}.{t} (k, v) VALUES (?, ?)")
            for i in range(40):
                session.execute(insert, (f"k{i}", bytes(64)))
        session.execute(f"CREATE TABLE {ks}.n (k int PRIMARY KEY, v blob)")
        dc = session.execute("SELECT data_center FROM system.local").one().data_center
        yield cassandra_node, ks, dc
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        cluster.shutdown()


def _plan(ks: str, n: int = 300) -> Plan:
    arms = (PlanArm("base", f"SELECT v FROM {ks}.a WHERE k = ?"), PlanArm("hedge", f"SELECT v FROM {ks}.b WHERE k = ?"))
    # arms dealt in blocks of 10 in one stream, as the live replay deals them; some keys absent (k40..k49)
    return Plan.of(arms, [(i * 1000, (i // 10) % 2, [encode_value("text", f"k{i % 50}")]) for i in range(n)])


def _config(node: Any, dc: str, ks: str, driver: str) -> GeneratorConfig:
    ep = Endpoint(node.host, node.port)
    java = driver == "java4"
    hedge = ArmProfile("hedge", speculative_class="ConstantSpeculativeExecutionPolicy", speculative_max_executions=2,
                       speculative_delay_ms=2, slow_replica_avoidance=java)
    base = ArmProfile("base", consistency="ONE", slow_replica_avoidance=False, request_timeout_ms=60_000)
    # requests may wait long on a loaded box: a timeout here would be the machine's, not the generator's
    hedge = replace(hedge, request_timeout_ms=60_000)
    return GeneratorConfig((ep,), (ep,), dc, (base, hedge), keyspace=ks, timer_tick_ms=1, warmup_s=0.05)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_plan_runs_through_the_real_driver(keyspace, driver):
    node, ks, dc = keyspace
    plan = _plan(ks)
    result = run(driver, plan, _config(node, dc, ks, driver))
    assert result.status == "ok" and result.generator.startswith("java" if driver == "java4" else "python")
    assert [a.planned for a in result.arms] == plan.counts() == [150, 150]
    for arm in result.arms:
        assert arm.sent == arm.ok == arm.planned and arm.errors == arm.timeouts == 0
        assert arm.latency.total == arm.service.total == arm.planned
        assert arm.latency.min >= 1  # from the intended start: never zero
        # each request's service time (from its actual send) is at most its latency (from its intended send)
        for p in (50.0, 99.0, 100.0):
            assert arm.service.value_at_percentile(p) <= arm.latency.value_at_percentile(p)
    assert result.lag.total == result.sent == len(plan)
    assert result.cpu_s > 0 and result.cpu_us_per_request > 0 and result.achieved_rate > 0
    assert result.settings["timer_tick_ms"] == 1
    assert [(n.endpoint, n.distance) for n in result.nodes if n.open_connections] == [
        (f"{node.host}:{node.port}", "LOCAL")
    ]
    assert result.ignored == ()


def _multigets(ks: str, n: int = 240) -> tuple[Plan, list[int], list[int]]:
    """Arm base: `IN ?` chunks of 3 keys of table a; arm hedge: one `k = ?` query per key of table b. Request i
    reads 1 + i % 7 distinct keys of k0..k49 (k40..k49 absent), dealt in blocks of 10. Returns the plan and each
    request's count of keys, and of keys present."""
    arms = (PlanArm("base", f"SELECT k, v FROM {ks}.a WHERE k IN ?"),
            PlanArm("hedge", f"SELECT k, v FROM {ks}.b WHERE k = ?"))
    requests, read, present = [], [], []
    for i in range(n):
        keys = [f"k{(i * 7 + j * 11) % 50}" for j in range(1 + i % 7)]
        a = (i // 10) % 2
        queries = ([[encode_list("text", keys[j : j + 3])] for j in range(0, len(keys), 3)] if a == 0
                   else [[encode_value("text", k)] for k in keys])
        requests.append((i * 1000, a, queries))
        read.append(len(keys))
        present.append(sum(1 for k in keys if int(k[1:]) < 40))
    return Plan.multi(arms, requests), read, present


def _node_counts(session: Any, ks: str) -> dict[str, int]:
    """The node's prepared statements executed, and its coordinator reads of tables a and b."""
    out = {"executed": int(next(r.value for r in session.execute("SELECT name, value FROM system_views.cql_metrics")
                                if r.name == "prepared_statements_executed"))}
    for t in ("a", "b"):
        row = session.execute("SELECT count FROM system_views.coordinator_read_latency WHERE keyspace_name = %s "
                              "AND table_name = %s", (ks, t)).one()
        out[t] = int(row.count) if row is not None else 0
    return out


@pytest.mark.parametrize("driver", DRIVERS)
def test_multigets_run_as_in_chunks_and_per_partition_queries(keyspace, driver):
    """Every request's queries are sent and answered, its rows all there (the absent keys' missing); the node
    executed exactly the plan's queries (warm-up included) and its coordinator read exactly the plan's keys of each
    table. `IN ?` has no routing key (the server names no partition-key marker for it), `k = ?` has one."""
    from cassandra.cluster import Cluster

    node, ks, dc = keyspace
    plan, keys_of, present = _multigets(ks)
    config = _config(node, dc, ks, driver)
    plain = replace(config.arms[1], speculative_class="NoSpeculativeExecutionPolicy", speculative_max_executions=1,
                    speculative_delay_ms=0, slow_replica_avoidance=False)
    config = replace(config, arms=(config.arms[0], plain), warmup_s=0.03)  # exact counts: no hedging
    warm = sum(1 for o in plan.offsets_us if o / 1e6 < config.warmup_s)
    cluster = Cluster([node.host], port=node.port)
    session = cluster.connect()
    try:
        assert not session.prepare(f"SELECT k, v FROM {ks}.a WHERE k IN ?").routing_key_indexes
        assert session.prepare(f"SELECT k, v FROM {ks}.b WHERE k = ?").routing_key_indexes == [0]
        before = _node_counts(session, ks)
        result = run(driver, plan, config)
        after = _node_counts(session, ks)
    finally:
        cluster.shutdown()
    assert result.status == "ok"
    per_arm_present = [0, 0]
    for i, a in enumerate(plan.arm):
        per_arm_present[a] += present[i]
    for a, arm in enumerate(result.arms):
        assert arm.sent == arm.ok == arm.planned == plan.counts()[a] and arm.errors == arm.timeouts == 0
        assert arm.queries == plan.query_counts()[a] and arm.latency.total == arm.planned
        assert arm.rows == per_arm_present[a]
    assert result.queries == sum(plan.query_counts()) > len(plan)
    sent = sum(plan.query_counts()) + sum(plan.query_counts(warm))
    assert after["executed"] - before["executed"] == sent
    for a, table in enumerate(("a", "b")):
        read = sum(k for i, k in enumerate(keys_of) if plan.arm[i] == a)
        read_warm = sum(k for i, k in enumerate(keys_of[:warm]) if plan.arm[i] == a)
        assert after[table] - before[table] == read + read_warm, table


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_multiget_with_one_failing_query_fails_as_one_request(keyspace, driver):
    """Arm base's requests are three queries of table n (int keys), the middle one binding three bytes the node
    refuses: each request is one error, its three queries all sent; arm hedge's are untouched."""
    node, ks, dc = keyspace
    arms = (PlanArm("base", f"SELECT k, v FROM {ks}.n WHERE k = ?"),
            PlanArm("hedge", f"SELECT k, v FROM {ks}.a WHERE k = ?"))
    bad: list[list[bytes | None]] = [[encode_value("int", 1)], [b"abc"], [encode_value("int", 2)]]
    good: list[list[bytes | None]] = [[b"k1"], [b"k2"]]
    plan = Plan.multi(arms, [(i * 1000, i % 2, bad if i % 2 == 0 else good) for i in range(40)])
    config = replace(_config(node, dc, ks, driver), max_error_fraction=1.0, warmup_s=0)
    result = run(driver, plan, config)
    base, hedge = result.arm("base"), result.arm("hedge")
    assert (base.sent, base.queries, base.errors, base.ok, base.timeouts) == (20, 60, 20, 0, 0)
    assert (hedge.sent, hedge.queries, hedge.ok, hedge.errors, hedge.rows) == (20, 40, 20, 0, 40)
    assert base.latency.total == 20 and sum(base.error_kinds.values()) == 20


def test_the_java_generator_still_runs_a_version_1_plan(keyspace, tmp_path):
    node, ks, dc = keyspace
    config = _config(node, dc, ks, "java4").to_json()
    plan = _plan(ks, 60)
    h = json.dumps({"format": "tailtune-replay-plan", "version": 1, "requests": len(plan),
                    "arms": [{"name": a.name, "statement": a.statement} for a in plan.arms]}).encode()
    raw = [b"TTPLAN1\n", len(h).to_bytes(4, "big"), h]
    for offset, a, qs in zip(plan.offsets_us, plan.arm, plan.queries, strict=True):
        (values,) = qs
        raw.append(offset.to_bytes(8, "big") + a.to_bytes(2, "big") + len(values).to_bytes(2, "big"))
        raw.extend(len(v).to_bytes(4, "big") + v for v in values if v is not None)
    (tmp_path / "v1.bin").write_bytes(b"".join(raw))
    from kinds.cassandra.replay.jvm import build

    classes, lib = build()
    (tmp_path / "config.json").write_text(json.dumps(config))
    r = subprocess.run(["java", *sandbox_options([(node.host, node.port)]), "-cp", f"{classes}:{lib}/*", "Generator",
                        str(tmp_path / "v1.bin"), str(tmp_path / "config.json")], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-500:]
    out = json.loads(r.stdout)
    assert [(a["sent"], a["ok"], a["queries"]) for a in out["arms"]] == [(30, 30, 30), (30, 30, 30)]


@pytest.mark.parametrize("driver", DRIVERS)
def test_per_block_histograms_hold_each_blocks_requests(keyspace, driver):
    """With block_s each arm's latencies come back per block of intended send time as well: block b holds the
    arm's requests intended in [b, b + 1) × block_s, and the blocks add up to the arm's latency."""
    node, ks, dc = keyspace
    plan = _plan(ks)  # 300 requests 1 ms apart: blocks of 0.1 s hold 100 each (50 per arm)
    result = run(driver, plan, replace(_config(node, dc, ks, driver), block_s=0.1))
    for arm in result.arms:
        assert [b.total for b in arm.blocks] == [50, 50, 50]
        assert sum(b.total for b in arm.blocks) == arm.latency.total
    assert result.settings["block_s"] == 0.1


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_allow_list_without_the_node_refuses_the_run(keyspace, driver):
    node, ks, dc = keyspace
    config = _config(node, dc, ks, driver)
    with pytest.raises(ConfigError, match="not in the allow-list"):
        run(driver, _plan(ks), replace(config, allowed=(Endpoint("127.0.0.2", node.port),)))


def _java(tmp_path: Path, plan: Plan, config: dict[str, Any], sandbox: list[str]) -> tuple[int, dict[str, Any]]:
    from kinds.cassandra.replay.jvm import build

    classes, lib = build()
    write_plan(plan, tmp_path / "plan.bin")
    (tmp_path / "config.json").write_text(json.dumps(config))
    r = subprocess.run(["java", *sandbox, "-cp", f"{classes}:{lib}/*", "Generator", str(tmp_path / "plan.bin"),
                        str(tmp_path / "config.json")], capture_output=True, text=True, timeout=300, check=False)
    return r.returncode, json.loads(r.stdout)


def test_the_java_generator_itself_refuses_a_contact_point_outside_its_allow_list(keyspace, tmp_path):
    node, ks, dc = keyspace
    doc = _config(node, dc, ks, "java4").to_json()
    doc["allowed"] = [{"address": "127.0.0.2", "port": node.port}]
    status, out = _java(tmp_path, _plan(ks), doc, sandbox_options([(node.host, node.port)]))
    assert (status, out["error"]) == (2, "bad_input") and "not in the allow-list" in out["message"]


def test_the_sandbox_is_the_second_wall(keyspace, tmp_path):
    """The JVM granted no endpoint cannot reach the node, whatever its config's allow-list says."""
    node, ks, dc = keyspace
    status, out = _java(tmp_path, _plan(ks), _config(node, dc, ks, "java4").to_json(), sandbox_options([]))
    assert (status, out["error"]) == (4, "connect")


@pytest.mark.parametrize("driver", DRIVERS)
def test_errors_past_the_fraction_abort_the_run(keyspace, driver):
    node, ks, dc = keyspace
    arms = (PlanArm("base", f"SELECT v FROM {ks}.n WHERE k = ?"), PlanArm("hedge", f"SELECT v FROM {ks}.a WHERE k = ?"))
    # three bytes for an int: the node refuses every one of arm base's requests
    plan = Plan.of(arms, [(i * 1000, i % 2, [b"abc" if i % 2 == 0 else b"k1"]) for i in range(2000)])
    config = replace(_config(node, dc, ks, driver), max_error_fraction=0.1, abort_after=20, warmup_s=0)
    with pytest.raises(GeneratorAborted) as caught:
        run(driver, plan, config)
    result = caught.value.result
    assert result.status == "aborted" and "over the limit of 0.1" in (result.reason or "")
    assert result.arm("base").errors > 0 and result.arm("base").ok == 0 and result.arm("hedge").errors == 0
    assert sum(result.arm("base").error_kinds.values()) == result.arm("base").errors


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_statement_the_node_cannot_prepare_fails_cleanly(keyspace, driver):
    node, ks, dc = keyspace
    arms = (PlanArm("base", f"SELECT v FROM {ks}.missing WHERE k = ?"), PlanArm("hedge", f"SELECT v FROM {ks}.a"))
    with pytest.raises(GeneratorFailed, match="prepare"):
        run(driver, Plan.of(arms, [(0, 0, [b"k"])]), _config(node, dc, ks, driver))


@pytest.mark.parametrize("driver", DRIVERS)
def test_no_password_in_the_output(keyspace, driver):
    """A login's password goes to the driver (the JVM's environment, never a file or an argument) and into no
    result (the test node asks for no login: the run succeeds either way)."""
    node, ks, dc = keyspace
    secret = f"pw-{uuid.uuid4().hex}"
    config = replace(_config(node, dc, ks, driver), username="replayer")
    result = run(driver, _plan(ks, 40), config, password=secret)
    assert secret not in json.dumps(result.to_json()) and secret not in json.dumps(config.to_json())


def _executions(session: Any, ks: str, table: str) -> int:
    rows = session.execute("SELECT count FROM system_views.local_read_latency WHERE keyspace_name = %s AND "
                           "table_name = %s", (ks, table))
    return sum(int(r.count) for r in rows)


def test_the_probe_times_each_statement_its_rounds_after_its_warm_up(keyspace):
    """Probe mode: every arm's statement executed warm-up + rounds times (the node counts them), each timed one
    returned as a positive latency."""
    from cassandra.cluster import Cluster

    from kinds.cassandra.replay.generator import probe_java

    node, ks, dc = keyspace
    arms = (PlanArm("base", f"SELECT v FROM {ks}.a WHERE k = ?"),
            PlanArm("hedge", f"SELECT v FROM {ks}.b WHERE k IN ?"))
    plan = Plan.of(arms, [(0, 0, [encode_value("text", "k1")]), (0, 1, [encode_list("text", ["k1", "k2", "k3"])])])
    cluster = Cluster([node.host], port=node.port)
    session = cluster.connect()
    try:
        before = _executions(session, ks, "a"), _executions(session, ks, "b")
        out = probe_java(plan, _config(node, dc, ks, "java4"), 30, warmup=7)
        after = _executions(session, ks, "a"), _executions(session, ks, "b")
    finally:
        cluster.shutdown()
    assert set(out) == {"base", "hedge"} and all(len(v) == 30 and min(v) > 0 for v in out.values())
    assert (after[0] - before[0], after[1] - before[1]) == (37, 37 * 3)


def test_the_probe_runs_in_the_same_sandbox_and_fails_cleanly(keyspace):
    import ipaddress

    from control.egress import Egress, EgressRefused
    from kinds.cassandra.replay.generator import probe_java

    node, ks, dc = keyspace
    arms = (PlanArm("base", f"SELECT v FROM {ks}.missing WHERE k = ?"), PlanArm("hedge", f"SELECT v FROM {ks}.a"))
    plan = Plan.of(arms, [(0, 0, [b"k"]), (0, 1, [])])
    with pytest.raises(GeneratorFailed, match="prepare"):
        probe_java(plan, _config(node, dc, ks, "java4"), 5)
    # egress rules that do not allow the node's network: no JVM is started towards it
    with pytest.raises(EgressRefused, match="outside the networks"):
        probe_java(_plan(ks, 20), _config(node, dc, ks, "java4"), 5,
                   egress=Egress(networks=(ipaddress.ip_network("10.0.0.0/8"),)))
