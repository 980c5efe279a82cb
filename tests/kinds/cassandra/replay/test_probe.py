"""The Java generator's probe output is checked before calibration uses it: a hostile or broken generator's line
is refused with what is wrong, never half-read."""

from __future__ import annotations

import json

import pytest

from kinds.cassandra.replay.jvm import parse_probe
from kinds.cassandra.replay.plan import Plan, PlanArm
from kinds.cassandra.replay.result import GeneratorFailed, GeneratorOutputError

PLAN = Plan.of([PlanArm("trivial", "SELECT release_version FROM system.local"),
                PlanArm("read", "SELECT * FROM ks.t WHERE k = ?")], [(0, 0, ()), (0, 1, (b"a",))])


def _line(arms: object, **extra: object) -> bytes:
    return json.dumps({"generator": "java-driver-core-4.19.0", "mode": "probe", "arms": arms, **extra}).encode()


def test_a_probe_gives_each_arms_latencies_in_ms() -> None:
    raw = _line([{"name": "trivial", "latencies_us": [500, 612.5]}, {"name": "read", "latencies_us": [900, 1000]}])
    assert parse_probe(raw, PLAN, 2) == {"trivial": [0.5, 0.6125], "read": [0.9, 1.0]}


@pytest.mark.parametrize(("arms", "says"), [
    ([{"name": "trivial", "latencies_us": [500, 600]}], "reports 1 arms"),
    ([{"name": "read", "latencies_us": [1, 2]}, {"name": "trivial", "latencies_us": [1, 2]}], "'trivial' expected"),
    ([{"name": "trivial", "latencies_us": [500]}, {"name": "read", "latencies_us": [1, 2]}], "2 latencies expected"),
    ([{"name": "trivial", "latencies_us": [500, -1]}, {"name": "read", "latencies_us": [1, 2]}], "-1 is not"),
    ([{"name": "trivial", "latencies_us": [500, "x"]}, {"name": "read", "latencies_us": [1, 2]}], "'x' is not"),
    ([{"name": "trivial", "latencies_us": [500, True]}, {"name": "read", "latencies_us": [1, 2]}], "True is not"),
    ([{"name": "trivial", "latencies_us": [1e300, 1]}, {"name": "read", "latencies_us": [1, 2]}], "is not 0 µs"),
])
def test_a_probe_line_that_is_not_one_of_this_plan_is_refused(arms: object, says: str) -> None:
    with pytest.raises(GeneratorOutputError, match=says):
        parse_probe(_line(arms), PLAN, 2)


def test_the_generators_own_error_and_a_crash_are_failures_naming_them() -> None:
    with pytest.raises(GeneratorFailed, match=r"connect.*AllNodesFailed"):
        parse_probe(b'{"error": "connect", "message": "AllNodesFailedException: no node"}', PLAN, 2, status=4)
    with pytest.raises(GeneratorFailed, match="exited with 1: Exception in thread"):
        parse_probe(b"", PLAN, 2, status=1, err_tail="Exception in thread main\n")
    with pytest.raises(GeneratorOutputError, match="not a JSON object of mode probe"):
        parse_probe(b'{"generator": "x", "arms": []}', PLAN, 2)
