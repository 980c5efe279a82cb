"""Calibration measures a deployment's inputs on the live system — against the tests' real Cassandra node (network
and service time, client-timed at low load) and real memcached (client overhead) — through the API + worker and
the CLI; the tune then replays the calibrated inputs. A node that does not answer changes nothing."""

from __future__ import annotations

import itertools
import json
import math
import statistics
import time
from typing import Any

import pytest

from control.egress import Egress
from control.model import build_model
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.cassandra.calibration import calibrate_cassandra, per_partition_cost, rtt_quantiles, service_time
from kinds.cassandra.model import LOGNORMAL_MIN_SIGMA
from tests.app_fixtures import Svc, memcached_deployment
from tests.control.conftest import CALIBRATION_KEYSPACE
from tests.servers.cassandra_server import CassandraNode, free_port
from tests.servers.memcached_server import running_memcached

API = "/api/v1"
KS = CALIBRATION_KEYSPACE


def _calibrate_job(svc: Svc, dep_id: int) -> dict[str, Any]:
    r = svc.client.post(f"{API}/deployments/{dep_id}/calibrate", headers=svc.write)
    assert r.status_code == 202, r.text
    Worker(svc.settings, svc.db, "w-calibrate", handlers=default_handlers(), schedule=False).run_once()
    out: dict[str, Any] = svc.client.get(f"{API}/jobs/{r.json()['id']}", headers=svc.read).json()
    return out


def test_service_time_by_deconvolution() -> None:
    import random

    rng = random.Random(7)
    trivial = [0.4 + rng.expovariate(1 / 0.05) for _ in range(4000)]
    # every read costs a trivial request plus exactly 0.3 ms: mean 0.3, no variance of its own
    fixed = service_time([t + 0.3 for t in trivial], trivial)
    assert fixed["mean_ms"] == pytest.approx(0.3, abs=1e-9) and fixed["sigma"] == pytest.approx(0.0, abs=1e-6)
    assert fixed["resolved"] == 1.0
    # plus a lognormal of mean 0.5 ms and cv 1 (σ² = ln 2), drawn independently
    sigma = math.sqrt(math.log(2.0))
    mu = math.log(0.5) - sigma**2 / 2
    reads = [0.4 + rng.expovariate(1 / 0.05) + rng.lognormvariate(mu, sigma) for _ in range(40_000)]
    fit = service_time(reads, trivial)
    assert fit["mean_ms"] == pytest.approx(0.5, rel=0.05) and fit["sigma"] == pytest.approx(sigma, rel=0.15)
    assert abs(fit["error_pct"]) < 15
    # reads no slower than trivial requests: not resolved, stored as the resolution
    flat = service_time(trivial[:2000], trivial[2000:])
    assert flat["resolved"] == 0.0 and 0 < flat["mean_ms"] < 0.01


def test_calibration_alternates_trivial_requests_and_reads_so_a_drifting_machine_cancels_out() -> None:
    """The two kinds are timed in alternation: a machine that slows down while calibrating (here by 2 µs per
    request, 1.2 ms over the calibration) adds the same to both, and the difference of means stays the read's own
    0.3 ms. Timed one kind after the other, the reads would have met a machine 0.6 ms slower than the trivial
    requests did."""
    from control.discovery import timed_rounds

    now = [0.0]
    order: list[str] = []

    def request(kind: str, base_ms: float) -> Any:
        def run() -> None:
            order.append(kind)
            now[0] += (base_ms + 0.002 * len(order)) / 1000.0

        return run

    trivial, reads = timed_rounds([request("trivial", 0.4), request("read", 0.7)], 300, clock=lambda: now[0])
    assert order[:4] == ["trivial", "read", "trivial", "read"] and len(order) == 2 * 305  # 5 warm-up rounds
    assert len(trivial) == len(reads) == 300
    assert service_time(reads, trivial)["mean_ms"] == pytest.approx(0.3, abs=0.005)


def test_the_per_partition_cost_is_the_difference_of_means_over_the_partitions_beyond_the_first() -> None:
    # single-partition reads 0.50, 0.52, 0.54, ... ms; 8-partition reads 0.35 ms slower each, and one 40 ms stall
    single = [0.5 + 0.02 * (i % 5) for i in range(200)]
    multi = [x + 0.35 for x in single] + [40.0]
    cost = per_partition_cost(multi, single, 8)
    assert cost["us"] == pytest.approx(50.0) and cost["slope_us"] == pytest.approx(50.0)  # 350 µs / 7, stall cut
    assert cost["resolved"] == 1.0 and cost["difference_ms"] == pytest.approx(0.35)
    # two partitions: the whole difference is the second partition's
    assert per_partition_cost([x + 0.03 for x in single], single, 2)["us"] == pytest.approx(30.0)
    # no slower, or faster: not resolved, stored as 0 (the raw slope kept)
    for shift in (0.0, -0.07):
        flat = per_partition_cost([x + shift for x in single], single, 8)
        assert flat["us"] == 0.0 and flat["resolved"] == 0.0
        assert flat["slope_us"] == pytest.approx(1000.0 * shift / 7)
    with pytest.raises(ValueError, match="keys is 1"):
        per_partition_cost(single, single, 1)


def test_the_round_trip_quantiles_keep_every_round_trip_stalls_included() -> None:
    trips = [0.8 + 0.001 * (i % 97) for i in range(999)] + [50.0]  # one 50 ms stall among 1000
    q = rtt_quantiles(trips)
    assert len(q) == 101 and all(a <= b for a, b in itertools.pairwise(q))
    assert (q[0], q[100]) == (min(trips), 50.0) and q[50] == pytest.approx(statistics.median(trips))
    # the stall stays in the distribution a replay draws from (the service time's deconvolution cuts it)
    assert q[99] < 1.0 < q[100]


@pytest.mark.slow
def test_calibrate_a_real_cassandra_node(svc: Svc, cli: Any, cassandra_node: CassandraNode, cql: Any) -> None:

    svc.settings.calibrate_reads, svc.settings.calibrate_warmup, svc.settings.calibrate_keys = 100, 20, 4

    def reads_of_items() -> int:
        rows = cql.execute("SELECT count FROM system_views.local_read_latency WHERE keyspace_name = %s AND "
                           "table_name = 'items'", (KS,))
        return sum(int(r.count) for r in rows)

    before = reads_of_items()
    body: dict[str, Any] = {"name": "calib", "kind": "cassandra", "topology": {"servers": 1},
            "connection": {"contact_points": [cassandra_node.host], "port": cassandra_node.port},
            "tables": [f"{KS}.items"]}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    t0 = time.time()
    job = _calibrate_job(svc, dep["id"])
    assert job["status"] == "succeeded", job["logs"]
    # the uncounted warm-up rounds (TAILTUNE_CALIBRATE_WARMUP) and the timed ones: one single-partition read and
    # one read of TAILTUNE_CALIBRATE_KEYS partitions each
    assert reads_of_items() - before == (20 + 100) * (1 + 4)
    inputs = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()["model"]["inputs"]
    net, st = inputs["network"], inputs["service_time"]
    for entry in (net, st):
        assert entry["source"] == "calibrated" and t0 <= entry["at"] <= time.time() and entry["how"]
    # the trivial request was sent prepared, as the reads are (no CQL parsing in the baseline the reads lack)
    prepared = {r.query_string for r in cql.execute("SELECT query_string FROM system.prepared_statements")}
    assert "SELECT release_version FROM system.local" in prepared
    # the one-way latency stored lies inside its own interval (a later timing of the client's would compare two
    # moments of a shared machine: no test of a figure against another moment's)
    one_way = net["value"]["one_way_ms"]
    assert one_way > 0 and net["uncertainty"]["one_way_ms"][0] <= one_way <= net["uncertainty"]["one_way_ms"][1]
    # the trivial round trips' distribution, p0..p100, its median twice the one-way latency
    q = net["value"]["rtt_quantiles_ms"]
    assert len(q) == 101 and all(a <= b for a, b in itertools.pairwise(q)) and q[0] > 0
    assert q[50] == pytest.approx(2 * one_way)
    v = st["value"]
    assert v["dist"] == "lognormal" and 0 <= v["sigma"] < 5 and v["mean_ms"] > 0
    lo, hi = st["uncertainty"]["mean_ms"]
    assert lo <= hi and "p99_fitted_ms" in st["fit"]
    # the 4-partition reads, timed in the same rounds: the per-partition cost with its interval
    key = inputs["client_key"]
    assert key["source"] == "calibrated" and key["keys"] == 4 and "4-partition reads" in key["how"]
    assert key["value"]["us"] >= 0
    klo, khi = key["uncertainty"]["us"]
    assert klo <= khi and (key["value"]["us"] == 0 or klo <= key["value"]["us"] <= khi)
    calibration = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()["model"]["readings"][
        "calibration"]
    assert calibration["multi_key"]["reads"] == 100 and calibration["multi_key"]["keys"] == 4
    # the tune replays the calibrated inputs (the operator set servers only)
    m = build_model("cassandra", dep["topology"], dep["connection"],
                    svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()["model"],
                    timestamps=False)
    assert m.sources["service_time"] == "calibrated" and m.sources["network"] == "calibrated"
    assert m.options["service_rate"] == pytest.approx(1000.0 / v["mean_ms"])
    assert m.options["net_latency_us"] == pytest.approx(1000.0 * one_way)
    assert m.options["client_rtt_ms"] == tuple(q)  # replayed as each request's client round trip
    assert m.sources["client_key"] == "calibrated"
    assert m.options.get("client_key_us", 0.0) == key["value"]["us"]
    # a lognormal, or its σ → 0 limit when the reads vary no more than the trivial requests (kvsim needs σ > 0)
    assert m.options["demand_dist"] == ("lognormal" if v["sigma"] >= LOGNORMAL_MIN_SIGMA else "deterministic")
    # the CLI measures the same way
    r = cli("deployments", "calibrate", "calib", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["inputs"]) == {"network", "service_time", "client_key"}
    # the deployment's driver is java4 (the default): the Java driver 4 measured its client path
    assert out["client"]["driver"] == "java4" and "Java driver 4" in out["client"]["how"]
    # a composite partition key, a table of one partition: no per-partition cost, a note why
    cql.execute(f"CREATE TABLE IF NOT EXISTS {KS}.pairs (a text, b text, v blob, PRIMARY KEY ((a, b)))")
    cql.execute(f"CREATE TABLE IF NOT EXISTS {KS}.single (k text PRIMARY KEY, v blob)")
    for i in range(3):
        cql.execute(f"INSERT INTO {KS}.pairs (a, b, v) VALUES (%s, 'x', 0x00)", (f"a{i}",))
    cql.execute(f"INSERT INTO {KS}.single (k, v) VALUES ('only', 0x00)")
    for table, says in (("pairs", "composite partition key (a, b)"), ("single", "holds 1 partition(s)")):
        found = calibrate_cassandra(body["connection"], [f"{KS}.{table}"], driver="python",
                                    egress=Egress.of(svc.settings),
                                    timeout_s=10.0, reads=20, warmup=0, keys=4)
        assert "client_key" not in found.inputs and "service_time" in found.inputs
        assert any(n.startswith("per-partition client cost not calibrated") and says in n for n in found.notes), \
            found.notes


def test_the_client_path_is_timed_with_the_deployments_own_driver(cassandra_node: CassandraNode, cql: Any) -> None:
    """A java4 deployment's trivial requests and reads are timed through the Java driver 4 (the live replay's
    generator in its probe mode), a python deployment's through the Python driver: each input says which, and
    the node served every warm-up and timed read of each (one single-partition and one 4-partition read a
    round)."""

    def reads_of_items() -> int:
        rows = cql.execute("SELECT count FROM system_views.local_read_latency WHERE keyspace_name = %s AND "
                           "table_name = 'items'", (KS,))
        return sum(int(r.count) for r in rows)

    connection = {"contact_points": [cassandra_node.host], "port": cassandra_node.port}
    for driver, says in (("java4", "the Java driver 4 (java-driver-core 4.19.0)"), ("python", "the Python driver")):
        before = reads_of_items()
        found = calibrate_cassandra(connection, [f"{KS}.items"], driver=driver, egress=Egress(), timeout_s=10.0,
                                    reads=60, warmup=10, keys=4)
        assert reads_of_items() - before == (10 + 60) * (1 + 4)
        assert found.readings["client"]["driver"] == driver and found.readings["client"]["how"].startswith(says)
        for name in ("network", "service_time", "client_key"):
            assert f"timed client-side by {says}" in found.inputs[name]["how"], (name, found.inputs[name]["how"])
        net = found.inputs["network"]["value"]
        q = net["rtt_quantiles_ms"]
        assert len(q) == 101 and q[0] > 0 and all(a <= b for a, b in itertools.pairwise(q))
        assert q[50] == pytest.approx(2 * net["one_way_ms"])
        assert found.readings["single_key"]["reads"] == found.readings["multi_key"]["reads"] == 60
        assert found.inputs["service_time"]["value"]["mean_ms"] > 0


def test_a_driver_calibration_has_no_client_for_is_refused() -> None:
    from control.kind import DiscoveryFailed

    with pytest.raises(DiscoveryFailed, match="no client for driver 'java3'"):
        calibrate_cassandra({"contact_points": ["127.0.0.1"], "port": free_port()}, [], driver="java3",
                            egress=Egress(), timeout_s=1.0, reads=20)


def test_calibration_of_a_node_down_changes_nothing(svc: Svc, cli: Any) -> None:
    body = {"name": "calib-down", "kind": "cassandra", "topology": {"servers": 1},
            "connection": {"contact_points": ["127.0.0.1"], "port": free_port()}, "tables": ["a.b"]}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    svc.settings.discover_timeout_s = 1.0
    r = cli("deployments", "calibrate", "calib-down")
    assert r.exit_code != 0 and len(r.stderr.strip().splitlines()) == 1 and "127.0.0.1" in r.stderr, r.stderr
    assert svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()["model"] == dep["model"]


@pytest.mark.slow
def test_calibrate_real_memcached(svc: Svc) -> None:
    svc.settings.discover_profile_reps = 5
    with running_memcached(threads=2) as mc:
        dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("calib-mc", [mc.address]),
                              headers=svc.write).json()
        job = _calibrate_job(svc, dep["id"])
        assert job["status"] == "succeeded", job["logs"]
    entry = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()["model"]["inputs"][
        "client_overhead"]
    assert entry["source"] == "calibrated" and entry["value"]["us"] > 0
