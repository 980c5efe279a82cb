"""A node's GC pauses as the model's stall process: the pauses between two readings of the JVM's collectors
(hand-worked), the calibrated `pauses` input in the model, and a refused reading."""

from __future__ import annotations

import time
from typing import Any

import pytest

from control.model import build_model
from kinds.cassandra.pauses import pauses_between

_YOUNG = "java.lang:name=G1 Young Generation,type=GarbageCollector"
_OLD = "java.lang:name=G1 Old Generation,type=GarbageCollector"


def test_the_pauses_of_a_span_are_a_rate_of_unpaused_time_and_a_mean_length() -> None:
    """20 s in which the young collector paused 3 times for 60 ms and the old once for 20 ms: 4 pauses, 80 ms,
    over 19.92 s unpaused → 0.2008 a second of 20 ms; the exact Poisson interval of 4 counts is 1.0899..10.2416."""
    before = {_YOUNG: (10.0, 100.0), _OLD: (1.0, 50.0)}
    after = {_YOUNG: (13.0, 160.0), _OLD: (2.0, 70.0)}
    p = pauses_between(before, after, 20.0)
    assert (p.count, p.total_ms, p.mean_ms) == (4, 80.0, 20.0)
    assert p.rate_per_s == pytest.approx(4 / 19.92)
    assert p.interval == pytest.approx((1.0899 / 19.92, 10.2416 / 19.92), rel=1e-4)
    value, uncertainty = p.as_input()
    assert value == {"rate_per_s": p.rate_per_s, "mean_ms": 20.0, "count": 4, "seconds": 20.0}
    assert uncertainty == {"rate_per_s": list(p.interval)}
    # no pause: rate 0, no length, an upper end of −ln(0.025) = 3.689 counts over the span
    none = pauses_between(before, before, 10.0)
    assert (none.count, none.rate_per_s, none.mean_ms) == (0, 0.0, None)
    assert none.interval == pytest.approx((0.0, 3.6889 / 10.0), rel=1e-4)


def test_a_reading_that_cannot_be_a_span_of_pauses_is_refused() -> None:
    with pytest.raises(ValueError, match="went back"):  # the JVM restarted between the readings
        pauses_between({_YOUNG: (10.0, 100.0)}, {_YOUNG: (2.0, 10.0)}, 20.0)
    with pytest.raises(ValueError, match="positive"):
        pauses_between({}, {}, 0.0)
    with pytest.raises(ValueError, match="paused throughout"):
        pauses_between({_YOUNG: (0.0, 0.0)}, {_YOUNG: (1.0, 5000.0)}, 5.0)


def _model(pauses: dict[str, Any] | None) -> Any:
    inputs = {} if pauses is None else {"pauses": {"value": pauses, "source": "calibrated", "at": time.time(),
                                                   "how": "GC over JMX"}}
    return build_model("cassandra", {"servers": 3}, {}, {"inputs": inputs}, timestamps=False)


def test_calibrated_pauses_are_every_servers_stalls() -> None:
    m = _model({"rate_per_s": 0.2008, "mean_ms": 20.0, "count": 4, "seconds": 20.0})
    assert (m.options["stall_rate"], m.options["stall_ms"]) == (0.2008, 20.0)
    assert m.sources["pauses"] == "calibrated"
    from simulation import CassandraDeployment

    model = CassandraDeployment.from_dict(m.options).server_model()
    assert model is not None and model.stalls == (0.2008, 20.0)
    # none measured: no stalls, calibrated; not measured: none, the default; not numbers: none, a note
    m = _model({"rate_per_s": 0.0, "mean_ms": None, "count": 0, "seconds": 20.0})
    assert "stall_rate" not in m.options and m.sources["pauses"] == "calibrated"
    assert any("no GC pause" in n for n in m.notes)
    m = _model(None)
    assert "stall_rate" not in m.options and m.sources["pauses"] == "default"
    m = _model({"rate_per_s": "often", "mean_ms": 20.0})
    assert "stall_rate" not in m.options and m.sources["pauses"] == "default"
    assert any("not a rate and a length" in n for n in m.notes)
