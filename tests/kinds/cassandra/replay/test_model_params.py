"""What the Cassandra live replay tells the model about how its generator ran: the Java generator's timer tick
(`se_tick_ms`, the tick the generator's config sets), which the model's hedges then fire on; nothing for the
Python generator (no wheel timer)."""

from __future__ import annotations

from control.kind import Target
from kinds.cassandra.replay.config import TIMER_TICK_MS, GeneratorConfig
from kinds.cassandra.replay.live import CassandraReplay
from simulation import resolve


def test_the_java_generators_tick_is_the_models() -> None:
    java = CassandraReplay(Target("shop", {}, driver="java4"))._timer()
    assert java == {"se_tick_ms": float(TIMER_TICK_MS)} == {"se_tick_ms": 1.0}
    assert GeneratorConfig.__dataclass_fields__["timer_tick_ms"].default == TIMER_TICK_MS
    # a 50 ms hedge: the rendered config would run a 5 ms tick, the generator runs 1 ms, and the model replays 1
    hedge = {"driver.speculative_execution.max_executions": 2, "driver.speculative_execution.delay": 50}
    assert resolve("stock", hedge).queue_params["se_tick_ms"] == 5.0
    assert resolve("stock", {**hedge, **java}).queue_params["se_tick_ms"] == 1.0


def test_the_python_generator_has_no_tick() -> None:
    assert CassandraReplay(Target("shop", {}, driver="python"))._timer() == {}
