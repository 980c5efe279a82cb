"""The per-partition client/coordinator cost of the Cassandra model: `kvsim.Cluster(client_key_us=...)`,
`CassandraDeployment.client_key_us` and `simulate --client-key-us` add (keys − 1) × it to each request's latency;
a bad value is refused naming the field; the memcached meaning of the flag is unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvsim
import pytest

from base.errors import BadInputError
from simulation import CassandraDeployment
from tailtune.cli.commands.simulate import memcached_deployment

# One server, one slot, 1 ms deterministic reads, 50 µs one way, the trace's own times, nothing cut as warm-up.
_BASE = ("simulate", "--policy", "fifo", "--servers", "1", "--replication", "1", "--slots", "1", "--clients", "1",
         "--service-rate", "1000", "--demand-dist", "deterministic", "--net-latency-us", "50", "--use-timestamps",
         "--trace-rate", "--warmup", "0", "--json")


def _trace(tmp_path: Path, keys: int) -> Path:
    """Two requests of `keys` keys each, 100 ms apart (no queueing)."""
    p = tmp_path / f"trace{keys}.csv"
    rows = [f"{r},{1000 + r / 10:.3f},k{r}-{i}" for r in range(2) for i in range(keys)]
    p.write_text("request_id,ts,key\n" + "\n".join(rows) + "\n")
    return p


def test_a_four_key_request_pays_three_times_the_cost(cli: Any, tmp_path: Path) -> None:
    one, four = str(_trace(tmp_path, 1)), str(_trace(tmp_path, 4))
    for trace, service in ((one, 1.0), (four, 4.0)):  # one slot: four keys are read one after the other
        r = cli(*_BASE, "--trace", trace)
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["p50_ms"] == pytest.approx(service + 0.1)
    # 250 µs a partition beyond the first: nothing on a one-key request, 0.75 ms on a four-key one
    for trace, want in ((one, 1.1), (four, 4.1 + 0.75)):
        r = cli(*_BASE, "--trace", trace, "--client-key-us", "250")
        assert r.exit_code == 0, r.stderr
        j = json.loads(r.stdout)
        assert (j["p50_ms"], j["p999_ms"]) == pytest.approx((want, want))
    # with the measured round trip: the draw replaces the two hops, the cost comes on top
    r = cli(*_BASE, "--trace", four, "--client-key-us", "250", "--client-rtt-ms", "2,2")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["p50_ms"] == pytest.approx(4.0 + 2.0 + 0.75)


@pytest.mark.parametrize("value", ["-1", "nan", "2e6"])
def test_a_bad_cost_on_the_command_line_is_one_line_naming_the_field(cli: Any, tmp_path: Path, value: str) -> None:
    r = cli(*_BASE, "--trace", str(_trace(tmp_path, 1)), "--client-key-us", value)
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert "\n" not in err and "client_key_us" in err, err


def test_the_deployment_records_the_cost_and_builds_the_cluster_with_it() -> None:
    dep = CassandraDeployment(servers=1, replication=1, client_key_us=37.5)
    d = dep.as_dict()
    assert d["client_key_us"] == 37.5
    assert CassandraDeployment.from_dict(json.loads(json.dumps(d))) == dep
    assert "client_key_us" not in CassandraDeployment().as_dict()  # records made without it read the same
    args = dep.cli_args()
    assert args[args.index("--client-key-us") + 1] == "37.5"
    assert dep.cluster().client_key_us == 37.5
    for bad in (-1.0, float("nan"), float("inf"), 1e7, "5"):
        with pytest.raises(BadInputError) as exc:
            CassandraDeployment(client_key_us=bad).cluster()  # type: ignore[arg-type]
        assert exc.value.problems[0].field == "client_key_us", exc.value


def test_the_flag_keeps_its_memcached_meaning() -> None:
    from tailtune.cli.commands.simulate import cassandra_deployment
    from tests.cli.test_simulate_options import _parse

    options = _parse("--client-key-us", "3.5")
    assert memcached_deployment(options).client_key_us == 3.5
    assert cassandra_deployment(options).client_key_us == 3.5


def test_kvsim_refuses_a_bad_cost_naming_the_field() -> None:
    for bad in (-1.0, float("nan"), 2e6, "x", True):
        with pytest.raises(kvsim.ParameterError, match="'client_key_us'"):
            kvsim.Cluster(client_key_us=bad)  # type: ignore[arg-type]
    ring = kvsim.Ring.from_dict({"strategy": {"class": "SimpleStrategy", "replication_factor": 1}, "local_dc": "dc1",
                                 "nodes": [{"address": "10.0.0.1", "dc": "dc1", "rack": "r1", "tokens": [0]}]})
    assert kvsim.Cluster.of_ring(ring, client_key_us=2.0).client_key_us == 2.0
