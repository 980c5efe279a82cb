"""Stalls on an explicit schedule: `simulate --stall-schedule FILE` (CSV `server,start_ms,end_ms`) reaches the
engine on the replay's clock (0 = the trace's first arrival), bad rows are refused in one line naming the file,
the line and the field, and the deployment records the schedule and gives it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from base.errors import BadInputError
from simulation import CassandraDeployment
from simulation.stall_schedule import parse_csv, render
from tests.simulator.hand_cases import simulate_args, two_requests

_BASE = simulate_args(2)
_trace = two_requests


def _schedule(tmp_path: Path, text: str, name: str = "stalls.csv") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_a_read_arriving_inside_a_scheduled_stall_waits_for_its_end(cli: Any, tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    plain = cli(*_BASE, "--trace", str(trace))
    assert plain.exit_code == 0, plain.stderr
    j = json.loads(plain.stdout)
    assert (j["mean_ms"], j["p999_ms"]) == pytest.approx((1.1, 1.1))
    # Both servers stopped over [5 ms, 20 ms): the first read (0 → 1.1 ms) is untouched; the second reaches its
    # server at 10.05 ms, is served from 20 ms to 21 ms, answered at 21.05 ms → 11.05 ms. (Two latencies a ≤ b
    # from the mean (a + b) / 2 and the interpolated p99.9 a + 0.999 (b − a).)
    sched = _schedule(tmp_path, "server,start_ms,end_ms\n1,5,20\n0,5,20\n")
    r = cli(*_BASE, "--trace", str(trace), "--stall-schedule", sched)
    assert r.exit_code == 0, r.stderr
    j = json.loads(r.stdout)
    assert (j["mean_ms"], j["p999_ms"]) == pytest.approx(((1.1 + 11.05) / 2, 1.1 + 0.999 * 9.95))
    info = j["servers"]["stall_schedule"]
    assert (info["intervals"], info["servers"], info["stalled_ms"]) == (2, [0, 1], 30.0)
    # Capacity over the arrivals' span [0, 10 ms): each server stalled 5 ms of it.
    assert j["servers"]["capacity_factor"] == pytest.approx(0.5)
    # The CSV itself works as the file does; a stall that ends before the read arrives does nothing.
    early = cli(*_BASE, "--trace", str(trace), "--stall-schedule", "server,start_ms,end_ms\n0,1.2,10\n1,1.2,10\n")
    assert early.exit_code == 0, early.stderr
    assert json.loads(early.stdout)["p999_ms"] == pytest.approx(1.1)


@pytest.mark.parametrize(
    ("text", "line", "field", "says"),
    [
        ("server,start,end\n0,1,2\n", 1, "header", "the header must be server,start_ms,end_ms"),
        ("server,start_ms,end_ms\n0,1,2\nx,1,2\n", 3, "server", "'x' is not a server index"),
        ("server,start_ms,end_ms\n0,-1,2\n", 2, "start_ms", "'-1' is not a time in ms"),
        ("server,start_ms,end_ms\n0,1,nan\n", 2, "end_ms", "'nan' is not a time in ms"),
        ("server,start_ms,end_ms\n0,5,5\n", 2, "end_ms", "5 ms is not after start_ms 5 ms"),
        ("server,start_ms,end_ms\n0,1\n", 2, "server", "2 fields, need 3"),
        ("server,start_ms,end_ms\n0,1,2\n\n2,1,2\n", 4, "server", "need 0..2 (a server index)"),
        ("server,start_ms,end_ms\n1,10,20\n0,10,20\n1,15,30\n", 4, "start_ms", "no overlap with line 2"),
    ],
)
def test_a_bad_row_is_one_line_naming_file_line_and_field(
    cli: Any, tmp_path: Path, text: str, line: int, field: str, says: str
) -> None:
    sched = _schedule(tmp_path, text)
    r = cli(*_BASE, "--trace", str(_trace(tmp_path)), "--stall-schedule", sched)
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert "\n" not in err, err
    assert f"{sched}:{line}: field '{field}': " in err and says in err, err


def test_the_schedule_excludes_random_stalls_and_memcached(cli: Any, tmp_path: Path) -> None:
    sched = _schedule(tmp_path, "server,start_ms,end_ms\n0,1,2\n")
    r = cli(*_BASE, "--trace", str(_trace(tmp_path)), "--stall-schedule", sched, "--stall-rate", "1")
    assert r.exit_code == 2 and "not both" in r.stderr and "--stall-schedule" in r.stderr
    r = cli("simulate", "--policy", "chisel", "--profile", "soundcloud", "--requests", "100", "--stall-schedule", sched)
    assert r.exit_code == 2 and "--stall-schedule" in r.stderr and "Cassandra model only" in r.stderr
    missing = cli(*_BASE, "--trace", str(_trace(tmp_path)), "--stall-schedule", str(tmp_path / "none.csv"))
    assert missing.exit_code == 2 and "cannot read" in missing.stderr


def test_the_deployment_records_the_schedule_and_reads_it_back() -> None:
    stalls = ((2, 2500.0, 3500.0), (2, 7500.25, 8500.0))
    dep = CassandraDeployment(servers=3, stall_schedule=stalls)
    d = dep.as_dict()
    assert d["stall_schedule"] == [[2, 2500.0, 3500.0], [2, 7500.25, 8500.0]]
    assert CassandraDeployment.from_dict(json.loads(json.dumps(d))) == dep
    assert "stall_schedule" not in CassandraDeployment().as_dict()
    assert parse_csv(render(stalls), "x")[0] == stalls
    model = dep.server_model()
    assert model is not None and model.stall_schedule == stalls
    # The schedule's stalled fraction over its own span [0, 8.5 s): 1.99975 s of 3 × 8.5 s.
    assert model.capacity_factor(3) == pytest.approx(1 - 1.99975 / 25.5)
    with pytest.raises(BadInputError, match="stall_schedule"):
        CassandraDeployment(servers=2, stall_schedule=stalls).server_model()
