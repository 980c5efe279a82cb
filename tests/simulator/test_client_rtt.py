"""The client ↔ coordinator round trip as a measured distribution: `kvsim.Cluster(client_rtt_us=...)`,
`CassandraDeployment.client_rtt_ms` and `simulate --client-rtt-ms` replace the two constant client hops by one
draw per request; bad quantiles are refused naming the field, in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvsim
import numpy as np
import pytest

from base.errors import BadInputError
from simulation import CassandraDeployment
from tests.simulator.hand_cases import simulate_args, two_requests

_BASE = simulate_args(1)
_trace = two_requests


def test_the_round_trip_replaces_the_two_hops_in_the_reported_latency(cli: Any, tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    plain = cli(*_BASE, "--trace", trace)
    assert plain.exit_code == 0, plain.stderr
    assert json.loads(plain.stdout)["p999_ms"] == pytest.approx(1.1)
    # a single point: 1 ms of service + exactly 2.5 ms of round trip, for every request
    r = cli(*_BASE, "--trace", trace, "--client-rtt-ms", "2.5,2.5")
    assert r.exit_code == 0, r.stderr
    j = json.loads(r.stdout)
    assert (j["mean_ms"], j["p999_ms"]) == pytest.approx((3.5, 3.5))
    # the same from a file (one quantile a line)
    f = tmp_path / "rtt.txt"
    f.write_text("2.5\n2.5\n")
    r = cli(*_BASE, "--trace", trace, "--client-rtt-ms", str(f))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["p999_ms"] == pytest.approx(3.5)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("3,2", "value 1 (2) is below value 0 (3)"),
        ("2", "1 value(s): need at least 2 quantiles"),
        ("1,nan", "value 1 is nan"),
        ("1,x", "'x' is not a number of ms"),
    ],
)
def test_bad_quantiles_on_the_command_line_are_one_line_naming_the_field(
    cli: Any, tmp_path: Path, value: str, says: str
) -> None:
    r = cli(*_BASE, "--trace", str(_trace(tmp_path)), "--client-rtt-ms", value)
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert "\n" not in err, err
    assert "field 'client_rtt_ms'" in err and says in err, err


def test_the_deployment_records_the_quantiles_and_builds_the_cluster_with_them() -> None:
    dep = CassandraDeployment(servers=1, replication=1, client_rtt_ms=(0.5, 0.8, 4.0))
    d = dep.as_dict()
    assert d["client_rtt_ms"] == [0.5, 0.8, 4.0]
    assert CassandraDeployment.from_dict(json.loads(json.dumps(d))) == dep
    assert "client_rtt_ms" not in CassandraDeployment().as_dict()
    assert dep.cli_args()[dep.cli_args().index("--client-rtt-ms") + 1] == "0.5,0.8,4.0"
    assert dep.cluster().client_rtt_us == (500.0, 800.0, 4000.0)
    for bad in ([1.0], [2.0, 1.0], [0.5, float("nan")], "0.5,1"):
        with pytest.raises(BadInputError) as exc:
            CassandraDeployment.from_dict({"client_rtt_ms": bad})
        assert exc.value.problems[0].field == "client_rtt_ms", exc.value
        with pytest.raises(BadInputError) as exc:
            CassandraDeployment(client_rtt_ms=bad).cluster()  # type: ignore[arg-type]
        assert exc.value.problems[0].field == "client_rtt_ms", exc.value


def test_kvsim_refuses_bad_quantiles_naming_the_field() -> None:
    for bad in ([1.0], [], [2.0, 1.0], [1.0, float("nan")], [-1.0, 1.0], "ab"):
        with pytest.raises(kvsim.ParameterError, match="'client_rtt_us'"):
            kvsim.Cluster(client_rtt_us=bad)  # type: ignore[arg-type]


def test_every_policy_meets_the_same_draws() -> None:
    """One seed, two policies, a cluster at low load with deterministic demands: each request's latency moves by
    the same draw under both (common random numbers), and a wide distribution spreads p99 away from p50."""
    q = (*tuple(float(x) for x in np.linspace(500.0, 900.0, 100)), 5000.0)
    base = kvsim.Cluster(servers=4, slots=2, replication=2, service_rate=2000.0, net_latency_us=100.0, clients=2)
    spread = kvsim.Cluster(servers=4, slots=2, replication=2, service_rate=2000.0, net_latency_us=100.0, clients=2,
                           client_rtt_us=q)
    offsets = np.arange(2001)
    keys = np.arange(2000)
    moved = []
    for policy in ("fifo", "rein"):
        a = kvsim.replay(kvsim.Workload(base, offsets, keys=keys, load=0.05, seed=3, demand_dist="deterministic"),
                         kvsim.ReplayConfig(policy=policy, seed=3, warmup=0.0))
        b = kvsim.replay(kvsim.Workload(spread, offsets, keys=keys, load=0.05, seed=3, demand_dist="deterministic"),
                         kvsim.ReplayConfig(policy=policy, seed=3, warmup=0.0))
        moved.append(np.round((b.latency_ms - a.latency_ms) * 1e6).astype(np.int64))
        assert b.p99_ms - b.p50_ms > 0.1 + a.p99_ms - a.p50_ms
    assert np.array_equal(moved[0], moved[1])
    # each move is a draw less the two 100 µs hops: within [500, 5000] µs − 200 µs
    assert moved[0].min() >= 300_000 and moved[0].max() <= 4_800_000
