"""The deployment is the model: a nightly job replays the deployment's own cluster (its topology, its pool's
servers, the trace's own arrival times) and records every input with its source in `tuned_for` — through the API
and the worker, with the real tuner (the ingest and analysis steps checkpointed on a real dataset)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from control.db import DeploymentRow, JobRow
from control.model import build_model
from ingest.generate import write_trace
from ingest.pipeline import ingest_file
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc

API = "/api/v1"


def _dataset(svc: Svc, tmp_path: Path, profile: str) -> tuple[str, str]:
    """A real dataset of a generated trace (with timestamps) and a summary file under TAILTUNE_HOME."""
    trace = tmp_path / f"{profile}.parquet"
    write_trace(trace, profile, 1500, 3)
    info = ingest_file(trace, settings=svc.settings)
    out = svc.settings.home_dir / "analyses" / f"model-{profile}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"arrivals": {"duration_s": 1.5, "rate_mean": 1000.0}}))
    return info.id, f"analyses/model-{profile}/summary.json"


def _done(name: str, output: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "status": "done", "attempt": 1, "started_at": 0.0, "finished_at": 1.0, "error": None,
            "output": output}


def _nightly(svc: Svc, dep_id: int, dataset: str, summary: str) -> dict[str, Any]:
    """A nightly job through the API whose ingest and analysis are done; the worker runs the tune for real."""
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep_id, "tune": {"trials": 2, "seeds": 1},
                                             "publish": False}, headers=svc.write)
    assert r.status_code == 202, r.text
    job_id = int(r.json()["id"])
    with svc.db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        row.steps = [_done("ingest", {"traces": [1], "datasets": [dataset]}),
                     _done("analyze", {"dataset_id": dataset, "out_dir": summary.rsplit("/", 1)[0],
                                       "summary": summary})]
    w = Worker(svc.settings, svc.db, "w-model", handlers=default_handlers(), schedule=False)
    assert w.run_once() == "succeeded", svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()["logs"]
    job: dict[str, Any] = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    return job


@pytest.mark.slow
def test_a_cassandra_nightly_replays_the_deployments_cluster(svc: Svc, tmp_path: Path) -> None:
    dataset, summary = _dataset(svc, tmp_path, "soundcloud")
    body = {"name": "model-c", "kind": "cassandra",
            "topology": {"servers": 6, "slots": 2, "replication": 2, "service_rate_per_s": 5000.0},
            "connection": {"contact_points": ["127.0.0.1"], "port": 9042}, "server": "rein-patched"}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    assert dep["model"]["declared"] == ["replication", "servers", "service_rate_per_s", "slots"]
    job = _nightly(svc, dep["id"], dataset, summary)
    tuned = job["result"]["recommendation"]["tuned_for"]
    assert (tuned["servers"], tuned["slots"], tuned["replication"], tuned["service_rate"]) == (6, 2, 2, 5000.0)
    assert tuned["use_timestamps"] is True and tuned["load"] is None and tuned["offered_load"] > 0
    assert tuned["model_sources"] == {"servers": "declared", "slots": "declared", "replication": "declared",
                                      "service_time": "declared", "capacity": "declared", "network": "default",
                                      "client_key": "default", "ring": "default", "host": "default",
                                      "pauses": "default", "arrivals": "trace"}
    assert job["result"]["model"]["defaults"] == ["network", "client_key", "ring", "host", "pauses"]
    assert "rests on the simulator's defaults for network, client_key, ring, host, pauses" in job["logs"]
    # the topology changes: the next job's model follows it (the slots left unset fall back to the default)
    r = svc.client.patch(f"{API}/deployments/{dep['id']}",
                         json={"topology": {"servers": 9, "replication": 3, "network_ms": 0.2}}, headers=svc.write)
    assert r.status_code == 200, r.text
    tuned = _nightly(svc, dep["id"], dataset, summary)["result"]["recommendation"]["tuned_for"]
    assert (tuned["servers"], tuned["slots"], tuned["replication"]) == (9, 8, 3)
    assert tuned["net_latency_us"] == pytest.approx(200.0) and tuned["service_rate"] == 3750.0
    assert tuned["model_sources"]["slots"] == "default" and tuned["model_sources"]["network"] == "declared"


@pytest.mark.slow
def test_a_memcached_nightly_replays_the_deployments_servers(svc: Svc, tmp_path: Path) -> None:
    dataset, summary = _dataset(svc, tmp_path, "mice-elephant")
    servers = ["10.1.0.5:11211", "10.1.0.6:11211", "cache-3.example:11311"]
    body = {"name": "model-m", "kind": "memcached", "topology": {"servers": 3},
            "connection": {"servers": servers}, "current_config": {"policy": "batching", "params": {}}}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    tuned = _nightly(svc, dep["id"], dataset, summary)["result"]["recommendation"]["tuned_for"]
    assert tuned["servers"] == 3 and tuned["pool"] == "sharded"
    assert tuned["server_addresses"] == ",".join(servers)
    assert tuned["model_sources"]["servers"] == "declared"
    assert tuned["model_sources"]["worker_threads"] == "default"
    assert tuned["model"]["inputs"]["servers"]["value"] == servers


def test_discovered_and_calibrated_inputs_are_used_and_the_declared_win() -> None:
    now = time.time()
    model = {"operator": ["servers"], "inputs": {  # `operator`: the key's former name, still read
        "slots": {"value": 32, "source": "discovered", "at": now, "how": "system_views.settings concurrent_reads"},
        "replication": {"value": 3, "source": "discovered", "at": now, "how": "system_schema.keyspaces"},
        "service_time": {"value": {"mean_ms": 0.5, "dist": "lognormal", "sigma": 0.8}, "source": "calibrated",
                         "at": now, "how": "local_read_latency"},
        "network": {"value": {"one_way_ms": 0.1}, "source": "calibrated", "at": now, "how": "CQL round trip"},
    }}
    topo = {"servers": 4, "slots": 1, "replication": 1, "service_rate_per_s": None, "network_ms": 0.0}
    m = build_model("cassandra", topo, {}, model, timestamps=False)
    assert (m.options["servers"], m.options["slots"], m.options["replication"]) == (4, 32, 3)
    assert m.options["service_rate"] == pytest.approx(2000.0) and m.options["demand_dist"] == "lognormal"
    assert m.options["net_latency_us"] == pytest.approx(100.0)
    assert m.sources == {"servers": "declared", "slots": "discovered", "replication": "discovered",
                         "service_time": "calibrated", "capacity": "default", "network": "calibrated",
                         "client_key": "default", "ring": "default", "host": "default", "pauses": "default",
                         "arrivals": "default"}
    # the operator's explicit slots win over discovery
    m = build_model("cassandra", {**topo, "slots": 2}, {}, {**model, "operator": ["servers", "slots"]},
                    timestamps=True)
    assert m.options["slots"] == 2 and m.sources["slots"] == "declared" and m.sources["arrivals"] == "trace"
    assert m.options["use_timestamps"] is True and m.options["load"] is None
    # a what-if load replaces the trace's arrivals
    m = build_model("cassandra", topo, {}, model, timestamps=True, load=0.5)
    assert m.options["load"] == 0.5 and "use_timestamps" not in m.options and m.sources["arrivals"] == "declared"


def test_a_calibrated_service_time_without_spread_is_replayed_as_deterministic() -> None:
    """Calibration stores σ 0 when the reads vary no more than the trivial requests; kvsim's lognormal needs
    σ > 0, so such a model could not be replayed at all: it is the lognormal's σ → 0 limit, deterministic."""
    from simulation.cassandra import CassandraDeployment, prepare, replay
    from simulation.policies import resolve
    from simulation.source import WorkloadSource

    now = time.time()
    table = WorkloadSource(profile="soundcloud", requests=200).load()
    for sigma, dist in ((0.0, "deterministic"), (0.5, "lognormal")):
        model = {"declared": [], "inputs": {
            "service_time": {"value": {"mean_ms": 0.5, "dist": "lognormal", "sigma": sigma}, "source": "calibrated",
                             "at": now, "how": "deconvolution"}}}
        m = build_model("cassandra", {}, {}, model, timestamps=False)
        assert m.options["demand_dist"] == dist and m.sources["service_time"] == "calibrated"
        assert any("deterministic" in n for n in m.notes) == (dist == "deterministic")
        dep = CassandraDeployment.from_dict({**m.options, "servers": 4, "replication": 3})
        res = replay(prepare(table, dep), dep, resolve("fifo", {}), 0)
        assert res.requests > 0 and res.p99_ms > 0


def test_the_calibrated_round_trip_quantiles_reach_kvsim_and_spread_the_replay() -> None:
    """Calibration stores the trivial round trips' quantiles with the one-way latency; the model replays them as
    each request's client round trip: with a service time that has no spread (deterministic) the replay's p99 is
    then the round trip's tail, not the p50."""
    import numpy as np
    import pyarrow as pa

    from simulation.cassandra import CassandraDeployment, prepare, replay
    from simulation.policies import resolve

    now = time.time()
    # p0..p100 of a round trip of about 0.9 ms with a tail to 5 ms from p95 up
    rtt = [0.7 + 0.004 * i for i in range(95)] + [1.5, 2.0, 3.0, 4.0, 4.7, 6.0]
    model = {"declared": [], "inputs": {
        "service_time": {"value": {"mean_ms": 0.3, "dist": "lognormal", "sigma": 0.0}, "source": "calibrated",
                         "at": now, "how": "deconvolution"},
        "network": {"value": {"one_way_ms": 0.43, "rtt_quantiles_ms": rtt}, "source": "calibrated", "at": now,
                    "how": "trivial round trips"}}}
    m = build_model("cassandra", {}, {}, model, timestamps=False)
    assert m.options["client_rtt_ms"] == tuple(rtt) and m.options["net_latency_us"] == pytest.approx(430.0)
    assert m.inputs["network"]["value"]["rtt_quantiles_ms"] == rtt and m.sources["network"] == "calibrated"
    dep = CassandraDeployment.from_dict({**m.options, "servers": 1, "replication": 1, "load": 0.02})
    assert dep.cluster().client_rtt_us == pytest.approx([x * 1000.0 for x in rtt])
    # single-key requests at 2 % load: no queueing, every read 0.3 ms
    table = pa.table({"request_id": np.arange(4000), "key": [f"k{i}" for i in range(4000)]})
    spread = replay(prepare(table, dep), dep, resolve("fifo", {}), 0)
    flat_dep = CassandraDeployment.from_dict({**m.options, "servers": 1, "replication": 1, "load": 0.02,
                                              "client_rtt_ms": None})
    flat = replay(prepare(table, flat_dep), flat_dep, resolve("fifo", {}), 0)
    # the constant hops: p99 = p50 = 0.3 + 2 × 0.43 ms; the round trip: 0.3 ms + its own p50 and p99
    assert flat.p50_ms == pytest.approx(1.16) and flat.p99_ms == pytest.approx(1.16)
    assert spread.p50_ms == pytest.approx(0.3 + rtt[50], abs=0.02)
    assert spread.p99_ms == pytest.approx(0.3 + rtt[99], rel=0.15)


def test_the_calibrated_per_partition_cost_reaches_kvsim() -> None:
    """Calibration stores the per-partition client cost (`client_key`, µs); the model replays it: a four-key
    request takes three times it longer than the engine says, a one-key request nothing more."""
    import pyarrow as pa

    from base.errors import BadInputError
    from simulation.cassandra import CassandraDeployment, prepare, replay
    from simulation.policies import resolve

    now = time.time()
    model: dict[str, Any] = {"declared": [], "inputs": {
        "service_time": {"value": {"mean_ms": 0.3, "dist": "lognormal", "sigma": 0.0}, "source": "calibrated",
                         "at": now, "how": "deconvolution"},
        "client_key": {"value": {"us": 80.0}, "source": "calibrated", "at": now, "how": "IN reads",
                       "uncertainty": {"us": [70.0, 90.0]}}}}
    m = build_model("cassandra", {}, {}, model, timestamps=False)
    assert m.options["client_key_us"] == 80.0 and m.sources["client_key"] == "calibrated"
    assert m.inputs["client_key"]["uncertainty"] == {"us": [70.0, 90.0]}
    dep = CassandraDeployment.from_dict({**m.options, "servers": 1, "replication": 1, "load": 0.01, "slots": 8})
    assert dep.cluster().client_key_us == 80.0
    # requests of one key, then of four (parallel on 8 slots): at 1 % load no queueing, every read 0.3 ms
    flat = {**m.options, "servers": 1, "replication": 1, "load": 0.01, "slots": 8}
    del flat["client_key_us"]
    for keys, extra in ((1, 0.0), (4, 0.24)):
        table = pa.table({"request_id": [i // keys for i in range(400 * keys)],
                          "key": [f"k{i}" for i in range(400 * keys)]})
        plain = CassandraDeployment.from_dict(flat)
        a = replay(prepare(table, plain), plain, resolve("fifo", {}), 0)
        b = replay(prepare(table, dep), dep, resolve("fifo", {}), 0)
        assert b.p50_ms == pytest.approx(a.p50_ms + extra, abs=1e-6), keys
    # without a calibration: the default, no per-partition cost
    m = build_model("cassandra", {}, {}, {"declared": [], "inputs": {}}, timestamps=False)
    assert "client_key_us" not in m.options and m.sources["client_key"] == "default"
    # a bad stored value is refused naming the field
    bad = {"declared": [], "inputs": {"client_key": {**model["inputs"]["client_key"], "value": {"us": -3.0}}}}
    with pytest.raises(BadInputError) as exc:
        build_model("cassandra", {}, {}, bad, timestamps=False)
    assert exc.value.problems[0].field == "client_key_us"


@pytest.mark.parametrize("bad", [[2.0, 1.0], [float("nan"), 1.0], [0.9], "0.9"])
def test_bad_calibrated_round_trip_quantiles_are_refused_naming_the_field(bad: object) -> None:
    from base.errors import BadInputError

    model = {"declared": [], "inputs": {
        "network": {"value": {"one_way_ms": 0.43, "rtt_quantiles_ms": bad}, "source": "calibrated",
                    "at": time.time(), "how": "trivial round trips"}}}
    with pytest.raises(BadInputError) as exc:
        build_model("cassandra", {}, {}, model, timestamps=False)
    assert exc.value.problems[0].field == "client_rtt_ms" and "calibrated network" in str(exc.value)


def test_a_discovered_ring_is_replayed_when_it_fits_the_model() -> None:
    from simulation.cassandra import CassandraDeployment
    from tests.simulator.test_ring import NTS_RING

    now = time.time()

    def model(ring: Any, servers: int = 6) -> dict[str, Any]:
        return {"declared": [], "inputs": {
            "servers": {"value": servers, "source": "discovered", "at": now, "how": "system.peers"},
            "replication": {"value": 3, "source": "discovered", "at": now, "how": "system_schema.keyspaces"},
            "ring": {"value": ring, "source": "discovered", "at": now, "how": "system.local / system.peers tokens"},
        }}

    topo = {"servers": None, "slots": None, "replication": None}
    m = build_model("cassandra", topo, {}, model(NTS_RING), timestamps=False)
    assert m.options["ring"] == NTS_RING and m.sources["ring"] == "discovered" and not m.notes
    CassandraDeployment.from_dict(m.options).cluster()  # the evaluator's deployment replays it as it is
    # the model's servers are not the ring's local datacenter's: evenly spaced tokens, and a note saying why
    m = build_model("cassandra", topo, {}, model(NTS_RING, servers=12), timestamps=False)
    assert "ring" not in m.options and m.sources["ring"] == "default"
    assert "6 nodes and RF 3 in its local datacenter but the model 12 servers" in m.notes[0]
    # an invalid ring is not replayed (the tune still runs), and the note names the field at fault
    bad = {**NTS_RING, "local_dc": "dc9"}
    m = build_model("cassandra", topo, {}, model(bad), timestamps=False)
    assert "ring" not in m.options and "ring.local_dc" in m.notes[0]


def test_a_deployment_row_without_model_keeps_its_topology_as_the_operators(svc: Svc) -> None:
    body = {"name": "model-legacy", "kind": "cassandra", "topology": {"servers": 5},
            "connection": {"contact_points": ["127.0.0.1"]}}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    assert dep["model"]["declared"] == ["servers"]  # slots, replication left to the model's other sources
    with svc.db.session() as s:
        row = s.get(DeploymentRow, dep["id"])
        assert row is not None
        row.model = {}
    legacy = {"servers": 5, "slots": 1, "replication": 1}  # what rows stored before only the given fields were kept
    m = build_model("cassandra", legacy, dep["connection"], {}, timestamps=False)
    assert m.sources["slots"] == "declared" and m.options["slots"] == 1  # unknown: every stored field is declared


def test_a_model_too_large_to_store_is_refused() -> None:
    from control.model import ModelTooLarge, check_model_size

    nodes = [{"address": f"10.0.{i // 250}.{i % 250}", "tokens": list(range(16))} for i in range(2000)]
    model = {"inputs": {"ring": {"value": {"nodes": nodes}, "source": "discovered"}}}
    check_model_size(model, 8 * 1024**2)
    with pytest.raises(ModelTooLarge, match="TAILTUNE_MODEL_MAX_BYTES"):
        check_model_size(model, 100_000)


@pytest.mark.slow
def test_a_nightly_result_carries_the_held_out_verdict_and_paths_relative_to_home(svc: Svc, tmp_path: Path) -> None:
    """`result.recommendation` has the verdict's reason and its held-out confirmation, and names the held-out
    sample and the reproduce inputs relative to TAILTUNE_HOME (no server path in the answer)."""
    dataset, summary = _dataset(svc, tmp_path, "soundcloud")
    body = {"name": "model-verdict", "kind": "cassandra", "topology": {"servers": 6, "replication": 2},
            "connection": {"contact_points": ["127.0.0.1"], "port": 9042}}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    job = _nightly(svc, dep["id"], dataset, summary)
    rec = job["result"]["recommendation"]
    tune = next(s["output"] for s in job["steps"] if s["name"] == "tune")
    assert rec["reason"] and rec["reason"] == tune["reason"]
    assert "confirmation" in rec and rec["confirmation"] == tune["confirmation"]
    assert rec["p_value"] == tune["p_value"] and rec["improvement_pct"] == tune["improvement_pct"]
    home = str(svc.settings.home_dir.resolve())
    assert home not in json.dumps(job["result"]) and home not in json.dumps(job["steps"])
    trace = rec["tuned_for"]["source"].get("trace")
    if trace is not None:  # the held-out split's earlier part: a sample under TAILTUNE_HOME
        assert not trace.startswith("/") and (svc.settings.home_dir / trace).is_file()
    assert rec["reproduce"] and all(home not in cmd for cmd in rec["reproduce"])


def test_registration_needs_no_topology_and_the_answer_says_what_is_a_default(svc: Svc) -> None:
    body = {"name": "bare-c", "kind": "cassandra", "connection": {"contact_points": ["127.0.0.1"]}}
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    dep = r.json()
    assert dep["sources"]["topology.servers"] == "default" and "topology.slots" in dep["defaults"]
    assert dep["sources"]["server"] == "default" and "driver" in dep["defaults"]
    assert dep["topology"]["slots"] == 8  # the value a tune replays, marked a default (not slots 1 "as said")
    with svc.db.session() as s:
        row = s.get(DeploymentRow, dep["id"])
        assert row is not None and row.topology == {}
        row.model = {**row.model, "inputs": {"servers": {"value": 3, "source": "discovered", "at": 1.0, "how": "x"},
                                             "replication": {"value": 3, "source": "discovered", "at": 1.0,
                                                             "how": "x"}}}
    dep = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()
    assert (dep["topology"]["servers"], dep["topology"]["replication"]) == (3, 3)
    assert dep["sources"]["topology.servers"] == "discovered" and "topology.servers" not in dep["defaults"]
    body = {"name": "given-c", "kind": "cassandra", "topology": {"servers": 4, "slots": 2},
            "connection": {"contact_points": ["127.0.0.1"]}, "driver": "java4"}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    assert dep["sources"]["topology.slots"] == "declared" and dep["sources"]["driver"] == "declared"
    assert dep["sources"]["topology.replication"] == "default"


def test_a_memcached_answer_has_no_cassandra_fields(svc: Svc) -> None:
    body = {"name": "bare-m", "kind": "memcached", "connection": {"servers": ["10.1.0.5:11211", "10.1.0.6:11211"]}}
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    for dep in (r.json(), svc.client.get(f"{API}/deployments/{r.json()['id']}", headers=svc.read).json()):
        assert not {"server", "driver", "tables"} & set(dep)
        assert dep["topology"] == {"servers": 2} and dep["sources"] == {"topology.servers": "declared"}


def _capacity(requests_per_s: float | None) -> dict[str, Any]:
    return {"value": {"requests_per_s": requests_per_s, "cpu_per_read_us": 40.0, "cpu_per_request_us": 14.0,
                      "cores": 2.0, "background_cores": 0.32},
            "source": "calibrated", "at": time.time(), "how": "the utilization law over JMX"}


def test_a_calibrated_capacity_makes_the_servers_saturate_where_the_node_does() -> None:
    """An idle model (32 slots of 0.07 ms: 457,000 reads/s a node) and a node that saturates at 31,111
    single-partition requests/s (1.68 free cores over 14 + 40 µs): the model keeps the service time and holds the
    reads in service at a full node, 31,111 × 0.07 ms = 2.18 → 2 slots, each reading a partition at 1.68 / 40 µs
    / 2 = 21,000/s, and each request adds 2 × 14 / 1.68 = 16.67 µs of a slot's time once."""
    now = time.time()
    inputs = {
        "slots": {"value": 32, "source": "discovered", "at": now, "how": "concurrent_reads"},
        "service_time": {"value": {"mean_ms": 0.07, "dist": "lognormal", "sigma": 0.5}, "source": "calibrated",
                         "at": now, "how": "deconvolved"},
    }
    topo = {"servers": 3}
    idle = build_model("cassandra", topo, {}, {"inputs": inputs}, timestamps=False)
    assert idle.options["slots"] * idle.options["service_rate"] == pytest.approx(32 / 0.07e-3)
    rate = 1.68 / 54e-6
    m = build_model("cassandra", topo, {}, {"inputs": {**inputs, "capacity": _capacity(rate)}}, timestamps=False)
    assert m.options["slots"] == 2 and m.options["service_rate"] == pytest.approx(21_000.0)
    assert m.options["request_demand_us"] == pytest.approx(2 * 14.0 / 1.68)
    one = 1.0 / m.options["service_rate"] + m.options["request_demand_us"] * 1e-6  # a single-partition request
    assert m.options["slots"] / one == pytest.approx(rate)  # the node's saturation
    assert m.sources["capacity"] == "calibrated" and m.sources["slots"] == "discovered"
    assert any("sets the servers: 2 slots" in n for n in m.notes)
    # a node whose reads take longer inside it than its CPU: more reads in service at once, never over its slots
    slow = {**inputs, "service_time": {**inputs["service_time"], "value": {"mean_ms": 5.0, "dist": "lognormal",
                                                                           "sigma": 0.5}}}
    m = build_model("cassandra", topo, {}, {"inputs": {**slow, "capacity": _capacity(rate)}}, timestamps=False)
    assert m.options["slots"] == 32 and m.options["service_rate"] == pytest.approx(1.68 / 40e-6 / 32)
    # a fit that does not separate the two costs (a negative slope): every partition read a whole request
    split = _capacity(rate)
    split["value"]["cpu_per_request_us"] = -3.0
    m = build_model("cassandra", topo, {}, {"inputs": {**inputs, "capacity": split}}, timestamps=False)
    assert m.options["slots"] == 2 and m.options["service_rate"] == pytest.approx(rate / 2)
    assert "request_demand_us" not in m.options and any("does not separate" in n for n in m.notes)
    # no saturation rate measured: the servers as before, the capacity a default
    m = build_model("cassandra", topo, {}, {"inputs": {**inputs, "capacity": _capacity(None)}}, timestamps=False)
    assert m.options["slots"] == 32 and m.sources["capacity"] == "default"
    # the operator's declared slots stay the operator's
    m = build_model("cassandra", {**topo, "slots": 4}, {}, {"operator": ["servers", "slots"],
                                                             "inputs": {**inputs, "capacity": _capacity(rate)}},
                    timestamps=False)
    assert m.options["slots"] == 4 and m.sources["capacity"] == "declared"
    assert any("not applied" in n for n in m.notes)
