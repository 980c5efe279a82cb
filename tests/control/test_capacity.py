"""A Cassandra node's capacity, measured by calibration over JMX: the utilization law's fit (hand-worked cases)
and a real node's calibration through the API + worker, whose `capacity` the live replay's `--load` reads."""

from __future__ import annotations

import math
from typing import Any

import pytest

from control.egress import Egress
from kinds.cassandra.capacity import Interval, fit_capacity
from kinds.cassandra.jmx import JmxFailed, JmxSession
from tests.app_fixtures import Svc
from tests.control.conftest import CALIBRATION_KEYSPACE
from tests.servers.cassandra_server import CassandraNode, free_port

API = "/api/v1"
KS = CALIBRATION_KEYSPACE


def _rows(background: float, per_request_s: float, per_read_s: float) -> list[Interval]:
    """Exact intervals of a node whose CPU is the law's (no noise): idle, single-partition and 8-partition phases."""
    out = []
    for phase, rate, k in (("idle", 0, 1), ("single", 300, 1), ("in8", 300, 8), ("single", 600, 1),
                           ("in8", 100, 8), ("idle", 0, 1)):
        for seconds in (2.0, 2.5):
            requests, reads = rate * seconds, rate * k * seconds
            cpu = seconds * background + requests * per_request_s + reads * per_read_s
            out.append(Interval(phase, seconds, cpu, requests, reads))
    return out


def test_the_fit_recovers_a_requests_and_a_partition_reads_cost_and_the_background() -> None:
    # 0.32 of a core of background, 9 µs a request, 45 µs a partition read (the orders of magnitude)
    fit = fit_capacity(_rows(0.32, 9e-6, 45e-6), cores=2)
    assert fit.background_cores == pytest.approx(0.32)
    assert fit.cpu_per_request_us == pytest.approx(9.0)
    assert fit.cpu_per_read_us == pytest.approx(45.0)
    assert fit.cores == 2 and fit.n == 12 and fit.resolved
    # (2 − 0.32) cores over 54 µs a single-partition request: 31,111 requests a second at saturation
    assert fit.requests_per_s == pytest.approx(1.68 / 54e-6)
    for name, value in (("cpu_per_request_us", 9.0), ("cpu_per_read_us", 45.0), ("background_cores", 0.32)):
        lo, hi = fit.intervals[name]
        assert lo == pytest.approx(value) and hi == pytest.approx(value)  # exact rows: every resample agrees


def test_cpu_over_reads_at_one_load_is_not_the_demand() -> None:
    """The naive figure (CPU ÷ reads at one load) holds the background: at 300 single reads a second with 0.32
    cores of background it is 1,121 µs where the law's 54 µs is the request's and its read's."""
    rows = _rows(0.32, 9e-6, 45e-6)
    one = next(r for r in rows if r.phase == "single")
    assert one.cpu_s / one.reads * 1e6 == pytest.approx(0.32 / 300 * 1e6 + 54, rel=1e-9)
    with pytest.raises(ValueError, match="do not separate"):  # single-partition phases only: collinear
        fit_capacity([r for r in rows if r.phase == "single"] + [r for r in rows if r.phase == "single"], cores=2)
    with pytest.raises(ValueError, match="at least 4"):
        fit_capacity(rows[:3], cores=2)
    # a node whose background takes every core has no saturation rate to give
    assert fit_capacity(_rows(2.5, 9e-6, 45e-6), cores=2).requests_per_s is None


def test_the_jmx_session_reads_figures_and_refuses_what_is_not_one(cassandra_node: CassandraNode) -> None:
    with JmxSession(Egress(), cassandra_node.host, cassandra_node.jmx_port) as jmx:
        assert jmx.number("java.lang:type=OperatingSystem", "AvailableProcessors") >= 1
        assert jmx.number("java.lang:type=OperatingSystem", "ProcessCpuTime") > 0
        collectors = jmx.names("java.lang:type=GarbageCollector,*")
        assert any("G1" in n for n in collectors)
        young = next(n for n in collectors if "G1 Young Generation" in n)  # an object name with spaces
        assert jmx.number(young, "CollectionCount") >= 0
        with pytest.raises(JmxFailed, match="not an object name and an attribute"):  # no request of its own
            jmx.number("java.lang:type=Runtime\nupdate-snitch 1 2 0.5", "Uptime")
        with pytest.raises(JmxFailed, match="not a number"):  # an object, not a figure
            jmx.number("java.lang:type=Runtime", "SystemProperties")
        assert jmx.time_ns() > 0  # the session goes on after a refused read
    port = free_port()  # nothing listens there
    with pytest.raises(JmxFailed, match=f"JMX at port {port}"), \
            JmxSession(Egress(), cassandra_node.host, port, timeout_s=20):
        pass


def test_a_real_nodes_capacity_is_calibrated_and_the_replay_can_load_it(
        svc: Svc, cli: Any, cassandra_node: CassandraNode, cql: Any) -> None:
    from jobs.handlers import default_handlers
    from jobs.worker import Worker

    s = svc.settings
    s.calibrate_reads, s.calibrate_warmup, s.calibrate_keys = 50, 10, 4
    s.calibrate_capacity_rates, s.calibrate_capacity_interval_s = [100.0, 200.0], 1.0
    s.calibrate_capacity_intervals, s.calibrate_capacity_warmup_s = 2, 2.0
    body: dict[str, Any] = {
        "name": "cap", "kind": "cassandra", "topology": {"servers": 1},
        "connection": {"contact_points": [cassandra_node.host], "port": cassandra_node.port,
                       "jmx_port": cassandra_node.jmx_port},
        "tables": [f"{KS}.items"]}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert dep.status_code == 201, dep.text
    dep_id = dep.json()["id"]
    r = svc.client.post(f"{API}/deployments/{dep_id}/calibrate", headers=svc.write)
    Worker(s, svc.db, "w-capacity", handlers=default_handlers(), schedule=False).run_once()
    job = svc.client.get(f"{API}/jobs/{r.json()['id']}", headers=svc.read).json()
    assert job["status"] == "succeeded", job["logs"]
    assert "capacity:" in job["logs"]
    assert "capacity" in job["result"], job["logs"]
    capacity = job["result"]["capacity"]
    assert set(capacity) == {"cpu_per_read_us", "cpu_per_request_us", "background_cores", "cores", "requests_per_s"}
    for name, entry in capacity.items():
        assert entry["source"] == "calibrated" and "utilization law" in entry["how"], name
        assert entry["value"] is None or math.isfinite(entry["value"]), name
        if entry["interval"] is not None:
            lo, hi = entry["interval"]
            assert lo <= hi, name
    with JmxSession(Egress(), cassandra_node.host, cassandra_node.jmx_port) as jmx:
        cores = jmx.number("java.lang:type=OperatingSystem", "AvailableProcessors")
        assert capacity["cores"]["value"] == cores
        collectors = [n for n in jmx.names("java.lang:type=GarbageCollector,*") if "Concurrent" not in n]
        since_start = sum(jmx.number(n, "CollectionCount") for n in collectors)
    # the node's GC pauses over the measured span: the stop-the-world collectors' counts, never more than the
    # JVM's pauses since it started, with an exact Poisson interval around the rate
    pauses = job["result"]["inputs"]["pauses"]
    assert pauses["source"] == "calibrated" and "CollectionCount" in pauses["how"]
    assert "Concurrent" not in pauses["how"] and all(n in pauses["how"] for n in collectors)
    p = pauses["value"]
    assert 0 <= p["count"] <= since_start and p["seconds"] >= 12 * 1.0  # 12 intervals of 1 s
    lo, hi = pauses["uncertainty"]["rate_per_s"]
    assert lo <= p["rate_per_s"] <= hi and hi > 0
    assert (p["mean_ms"] is None) == (p["count"] == 0)
    # one node on a loopback address: a host of its own (nothing shared), its JVM's processors
    host = job["result"]["inputs"]["host"]
    assert host["source"] == "calibrated" and "loopback" in host["how"]
    assert host["value"] == {"host_cores": cores, "nodes_per_host": 1}
    # the intervals of every phase are kept, idle ones with no statement of the load
    readings = svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json()["model"]["readings"]
    rows = readings["calibration"]["capacity"]["intervals"]
    assert [r["phase"] for r in rows] == ["idle"] * 2 + ["single@100"] * 2 + ["in4@100"] * 2 + ["single@200"] * 2 \
        + ["in4@200"] * 2 + ["idle-after"] * 2
    in4 = [r for r in rows if r["phase"].startswith("in4")]
    assert all(3.5 * r["requests"] <= r["reads"] <= 4.5 * r["requests"] + 4 for r in in4)  # 4 partitions a request
    # the model input the live replay's --load reads: the calibrated saturation rate
    from control.db import DeploymentRow
    from control.replay import _capacity
    from control.tune_request import deployment_record

    with svc.db.session() as ses:
        row = ses.get(DeploymentRow, dep_id)
        assert row is not None
        record = deployment_record(row)
    assert _capacity(record) == capacity["requests_per_s"]["value"]  # None where the fit gives no saturation
    # the CLI reports the same figures
    out = cli("deployments", "calibrate", "cap", "--json")
    assert out.exit_code == 0, out.stderr
    import json

    assert set(json.loads(out.stdout)["capacity"]) == set(capacity)


def test_without_a_jmx_port_capacity_is_not_calibrated_and_says_why(cassandra_node: CassandraNode, cql: Any) -> None:
    from kinds.cassandra.calibration import calibrate_cassandra

    found = calibrate_cassandra({"contact_points": [cassandra_node.host], "port": cassandra_node.port},
                                [f"{KS}.items"], driver="python", egress=Egress(), timeout_s=10.0, reads=20, warmup=0,
                                keys=4)
    assert "capacity" not in found.inputs
    assert any(n.startswith("capacity not calibrated: the deployment names no connection.jmx_port")
               for n in found.notes)
