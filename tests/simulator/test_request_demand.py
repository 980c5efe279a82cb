"""A request's own cost in the Cassandra model: `CassandraDeployment.request_demand_us` (`simulate
--request-demand-us`) adds the coordinator's per-request work once to a request's first partition read, and the
calibrated capacity splits into it and the per-partition reads, so multi-partition requests saturate the model
where the utilization law puts the node (docs/model.md § Capacity).

Hand-worked node: cpu_per_request 300 µs, cpu_per_read 50 µs, 2 cores of which 0.5 background → 1.5 free cores;
single-partition capacity 1.5 / 350 µs = 4,285.7 requests/s; at the calibrated 0.07 ms service time that is 0.3
reads in service → 1 slot. The slot reads a partition in 50 / 1.5 = 33.33 µs and each request adds 300 / 1.5 =
200 µs. A 4-partition `IN` request: 4 × 33.33 + 200 = 333.33 µs of the one slot → 3,000 requests/s, which is the
utilization law's 1.5 / (300 + 4 × 50 µs). Charging every partition a whole single-partition request (the model
before the split) gives 4 × 233.33 µs → 1,071 requests/s, 0.36 of it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from base.errors import BadInputError
from control.model import build_model
from simulation import CassandraDeployment
from simulation.cassandra import offered_load, prepare

#: The hand-worked node's capacity (module doc).
_NODE = {"requests_per_s": 1.5 / 350e-6, "cpu_per_request_us": 300.0, "cpu_per_read_us": 50.0, "cores": 2.0,
         "background_cores": 0.5}


def _inputs(capacity: dict[str, float], **more: dict[str, Any]) -> dict[str, Any]:
    """The stored model of a node calibrated with `capacity` (32 discovered slots, 0.07 ms reads), and `more`
    calibrated inputs by name."""
    now = time.time()
    inputs = {
        "slots": {"value": 32, "source": "discovered", "at": now, "how": "concurrent_reads"},
        "service_time": {"value": {"mean_ms": 0.07, "dist": "lognormal", "sigma": 0.5}, "source": "calibrated",
                         "at": now, "how": "deconvolved"},
        "capacity": {"value": capacity, "source": "calibrated", "at": now, "how": "the utilization law over JMX"},
    }
    for name, value in more.items():
        inputs[name] = {"value": value, "source": "calibrated", "at": now, "how": name}
    return {"inputs": inputs}


def _model() -> dict[str, Any]:
    return build_model("cassandra", {"servers": 1, "replication": 1}, {}, _inputs(_NODE), timestamps=True).options


def _trace(tmp_path: Path, rate: float, requests: int = 2000, keys: int = 4) -> Path:
    """`requests` requests of `keys` distinct partitions each, evenly spaced at `rate` a second."""
    p = tmp_path / f"in{keys}-{rate:g}.csv"
    rows = [f"{r},{1000 + r / rate:.9f},k{r}-{i}" for r in range(requests) for i in range(keys)]
    p.write_text("request_id,ts,key\n" + "\n".join(rows) + "\n")
    return p


def _deployment() -> CassandraDeployment:
    """The calibrated model on one node, deterministic demands, 50 µs one way, nothing cut as warm-up."""
    return CassandraDeployment.from_dict({**_model(), "demand_dist": "deterministic", "net_latency_us": 50.0,
                                          "clients": 1, "warmup": 0.0})


def test_the_calibrated_capacity_splits_into_a_partition_read_and_a_request() -> None:
    opts = _model()
    assert opts["slots"] == 1
    assert opts["service_rate"] == pytest.approx(1.5 / 50e-6)  # 30,000 partition reads/s
    assert opts["request_demand_us"] == pytest.approx(200.0)
    # a single-partition request still saturates where the node does: 1 / (33.33 + 200 µs)
    assert 1.0 / (1.0 / opts["service_rate"] + opts["request_demand_us"] * 1e-6) == pytest.approx(1.5 / 350e-6)


def test_four_partition_in_reads_saturate_at_the_utilization_laws_rate(cli: Any, tmp_path: Path) -> None:
    import pyarrow.csv as pacsv

    dep = _deployment()
    saturation = 1.5 / ((300.0 + 4 * 50.0) * 1e-6)  # 3,000 requests/s
    trace = _trace(tmp_path, saturation)
    assert offered_load(prepare(pacsv.read_csv(trace), dep), dep) == pytest.approx(1.0, rel=1e-3)
    args = ["simulate", "--policy", "fifo", *dep.cli_args(), "--json"]
    assert "--request-demand-us" in args
    below = cli(*args, "--trace", str(_trace(tmp_path, 0.9 * saturation)))
    assert below.exit_code == 0, below.stderr
    # no queueing at 90 %: each request is its 333.33 µs of service and the two 50 µs hops
    j = json.loads(below.stdout)
    assert (j["p50_ms"], j["p99_ms"]) == pytest.approx((0.43333, 0.43333), abs=2e-5)
    assert j["utilization"] == pytest.approx(0.9, abs=0.01)
    # at 110 % the queue grows by 10 % of each gap: 2,000 requests leave the last ~60 ms behind
    above = cli(*args, "--trace", str(_trace(tmp_path, 1.1 * saturation)))
    assert above.exit_code == 0, above.stderr
    assert json.loads(above.stdout)["p99_ms"] > 50.0


def test_the_request_demand_is_charged_once_a_request(cli: Any, tmp_path: Path) -> None:
    """Two requests 100 ms apart (no queueing) on one slot of 1 ms reads: 250 µs more on each, whatever its
    partitions."""
    base = ("simulate", "--policy", "fifo", "--servers", "1", "--replication", "1", "--slots", "1", "--clients",
            "1", "--service-rate", "1000", "--demand-dist", "deterministic", "--net-latency-us", "50",
            "--use-timestamps", "--trace-rate", "--warmup", "0", "--json")
    for keys in (1, 4):
        r = cli(*base, "--trace", str(_trace(tmp_path, 10.0, requests=2, keys=keys)), "--request-demand-us", "250")
        assert r.exit_code == 0, r.stderr
        j = json.loads(r.stdout)
        assert (j["p50_ms"], j["p999_ms"]) == pytest.approx((keys + 0.25 + 0.1,) * 2)
        assert j["demand"]["request_us"] == 250.0


def test_the_deployment_records_the_request_demand_and_refuses_a_bad_one(tmp_path: Path) -> None:
    import pyarrow.csv as pacsv

    dep = CassandraDeployment(servers=1, replication=1, request_demand_us=12.5)
    assert dep.as_dict()["request_demand_us"] == 12.5
    assert CassandraDeployment.from_dict(json.loads(json.dumps(dep.as_dict()))) == dep
    assert "request_demand_us" not in CassandraDeployment().as_dict()  # records made without it read the same
    table = pacsv.read_csv(_trace(tmp_path, 10.0, requests=2))
    for bad in (-1.0, float("nan"), 2e6, True):
        with pytest.raises(BadInputError) as exc:
            prepare(table, CassandraDeployment(servers=1, replication=1, request_demand_us=bad))
        assert exc.value.problems[0].field == "request_demand_us", exc.value


def _shared(nodes: int, host_cores: float, *, capacity: dict[str, float] | None = None) -> dict[str, Any]:
    """The hand-worked node's model (module doc) with a calibrated `host` of `nodes` nodes on `host_cores`."""
    stored = _inputs(capacity or _NODE, host={"host_cores": host_cores, "nodes_per_host": nodes})
    m = build_model("cassandra", {"servers": nodes, "replication": 1}, {}, stored, timestamps=True)
    return {"options": m.options, "sources": m.sources, "notes": m.notes, "inputs": m.inputs}


def test_nodes_sharing_a_host_share_its_cores() -> None:
    """3 JVMs on 2 cores: each node has 2/3 of a core, 2/3 − 0.5 = 1/6 beyond its background (alone: 1.5). Its
    slot reads a partition in 50 µs / (1/6) = 300 µs and a request adds 300 µs / (1/6) = 1,800 µs: a
    single-partition request saturates a node at (1/6) / 350 µs = 476 a second, a 4-partition one at
    (1/6) / 500 µs = 333."""
    m = _shared(3, 2.0)
    opts = m["options"]
    assert m["sources"]["host"] == "calibrated" and m["inputs"]["host"]["value"]["nodes_per_host"] == 3
    assert opts["slots"] == 1
    assert opts["service_rate"] == pytest.approx((1 / 6) / 50e-6)
    assert opts["request_demand_us"] == pytest.approx(1800.0)
    four = 4.0 / opts["service_rate"] + opts["request_demand_us"] * 1e-6
    assert 1.0 / four == pytest.approx((1 / 6) / 500e-6)
    assert any("3 nodes share a host of 2 cores" in n for n in m["notes"])
    # one node on the host, or a host with a core a node: nothing shared, the node's own cores
    for nodes, cores in ((1, 2.0), (3, 6.0)):
        alone = _shared(nodes, cores)["options"]
        assert alone["service_rate"] == pytest.approx(1.5 / 50e-6), (nodes, cores)
        assert alone["request_demand_us"] == pytest.approx(200.0), (nodes, cores)
    # the fit that does not separate the costs: the single-partition rate scaled by the free cores, 1/6 over 1.5
    unsplit = _shared(3, 2.0, capacity={"requests_per_s": 1.5 / 350e-6, "cpu_per_request_us": -1.0,
                                        "cpu_per_read_us": 50.0, "cores": 2.0, "background_cores": 0.5})
    assert unsplit["options"]["service_rate"] == pytest.approx((1 / 6) / 350e-6)
    # a share that leaves no core beyond the background: the capacity is not applied, and says why
    none = _shared(5, 2.0)  # 0.4 of a core a node, background 0.5
    assert none["sources"]["capacity"] == "default" and none["options"]["slots"] == 32
    assert any("no core is left" in n for n in none["notes"])


def test_without_a_calibrated_host_each_node_has_its_own_cores() -> None:
    m = build_model("cassandra", {"servers": 3}, {}, {"inputs": {}}, timestamps=False)
    assert m.sources["host"] == "default" and "own cores" in m.inputs["host"]["how"]
    bad = {"host": {"value": {"host_cores": "two", "nodes_per_host": 3}, "source": "calibrated", "at": 0.0,
                    "how": "x"}}
    m = build_model("cassandra", {"servers": 3}, {}, {"inputs": bad}, timestamps=False)
    assert m.sources["host"] == "default" and any("is not a number of cores" in n for n in m.notes)


def test_a_shared_host_is_found_from_loopback_addresses_and_the_jvms_processors() -> None:
    from kinds.cassandra.capacity import shared_host

    three = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    host, how = shared_host(three, jvm_cores=2, local=2)
    assert host == {"host_cores": 2, "nodes_per_host": 3} and "share" in how
    # a JVM pinned to a subset of the host's processors: not known to share, each node its own
    assert shared_host(three, jvm_cores=1, local=2)[0] == {"host_cores": 1, "nodes_per_host": 1}
    # separate machines (any address not loopback)
    assert shared_host(["127.0.0.1", "10.0.0.2"], jvm_cores=8, local=8)[0]["nodes_per_host"] == 1
    assert shared_host(["::1"], jvm_cores=4, local=4)[0] == {"host_cores": 4, "nodes_per_host": 1}
