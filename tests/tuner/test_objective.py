from __future__ import annotations

import pytest

from base.errors import BadInputError
from tuner.objective import Metrics, mean_ci, parse_objective

M = Metrics(p50_ms=1.0, p95_ms=2.0, p99_ms=4.0, p999_ms=8.0, mean_ms=1.5)
BASE = Metrics(p50_ms=1.0, p95_ms=3.0, p99_ms=5.0, p999_ms=9.0, mean_ms=2.0)


def test_single_weighted_and_multi():
    assert parse_objective("p99").values(M) == [4.0]
    assert parse_objective("0.25*p50+0.75*p99").values(M) == [0.25 * 1.0 + 0.75 * 4.0]
    o = parse_objective("p50,p999")
    assert o.multi and o.values(M) == [1.0, 8.0] and o.directions == ["minimize", "minimize"]
    assert parse_objective("0.5*p50+p99").spec == "0.5*p50+1*p99"
    assert parse_objective(parse_objective("0.5*p50+p99").spec).values(M) == [4.5]


def test_constraints_against_baseline():
    o = parse_objective("p99", ["p50<=5%", "mean<=0%"])
    worse = Metrics(p50_ms=1.06, p95_ms=2.0, p99_ms=4.0, p999_ms=8.0, mean_ms=2.0)
    vals = o.constraint_values(worse, BASE)
    assert vals[0] == pytest.approx(0.06 - 0.05)
    assert vals[1] == pytest.approx(0.0)
    assert o.violated(worse, BASE) == ["p50<=5%"]
    assert o.feasible(M, BASE)


@pytest.mark.parametrize("spec", ["p98", "2*", "-1*p99", "p99+", "latency"])
def test_bad_objective(spec):
    with pytest.raises(BadInputError, match="field 'objective'"):
        parse_objective(spec)


def test_bad_constraint():
    with pytest.raises(BadInputError, match="field 'constraint'"):
        parse_objective("p99", ["p50 < 5"])


def test_mean_ci_hand_worked():
    mean, half = mean_ci([1.0, 2.0, 3.0])
    # sd = 1, t(0.975, 2) = 4.302653; half = 4.302653 / sqrt(3)
    assert mean == 2.0
    assert half == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-5)
    assert mean_ci([5.0]) == (5.0, 0.0)
