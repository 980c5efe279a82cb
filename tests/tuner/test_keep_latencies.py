"""The CDF figure's latencies of the baseline and the paper default come from their reference replays on the
first seed (kept once, handed over once) instead of a second replay of the whole workload."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulation import cassandra
from tuner.evaluators import KvsimCassandraEvaluator
from tuner.space import Candidate

SRC = {"profile": "soundcloud", "requests": 3000, "trace_seed": 1}
FIFO, REIN = Candidate("fifo", {}), Candidate("rein", {"k": 4, "range_factor": 3.0})


def test_kept_latencies_equal_a_replay_and_need_none(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = KvsimCassandraEvaluator(SRC, servers=16)
    want = {c.label(): fresh.latencies_ms(c, 0) for c in (FIFO, REIN)}
    ev = KvsimCassandraEvaluator(SRC, servers=16)
    ev.keep_latencies([FIFO], 0)
    ev.keep_latencies([REIN], 0)
    for seed in (0, 1):
        for c in (FIFO, REIN):
            ev.evaluate(c, seed)
    ev.evaluate(FIFO, 0, fraction=0.5)  # a prefix replay does not replace the whole one
    calls: list[Any] = []
    real = cassandra.replay

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(cassandra, "replay", counted)
    for c in (FIFO, REIN):
        assert np.array_equal(ev.latencies_ms(c, 0), want[c.label()])
    assert calls == []
    # handed over once; another seed or candidate is replayed
    assert np.array_equal(ev.latencies_ms(FIFO, 0), want[FIFO.label()])
    assert len(calls) == 1
    ev.latencies_ms(FIFO, 1)
    assert len(calls) == 2


def test_nothing_is_kept_without_the_hint() -> None:
    ev = KvsimCassandraEvaluator(SRC, servers=16)
    ev.evaluate(FIFO, 0)
    assert ev._kept == {}
