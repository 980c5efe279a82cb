"""The Java driver 4's timer tick (`advanced.netty.timer.tick-duration`): the tick tailtune renders for a hedge,
and the tick the model replays it on (kvsim's `se_tick_ms`).

The Java driver schedules each speculative execution on its Netty `HashedWheelTimer`, which fires a timeout on
the first tick boundary past its deadline: up to one tick late (docs/stock-cassandra.md § The Java driver's
timer, with the source lines). The tick defaults to 100 ms and is a global setting only ("Overridable in a
profile: no", read when the session starts), so a 10 ms hedge on the default tick fires up to 100 ms late
(10–110 ms after its request).

**The rendering's rule.** A config that hedges (`max_executions` > 1) with a delay below the default tick (the
delay as the driver runs it: whole ms) sets the tick to the largest whole ms at most a tenth of that delay, at
least 1 ms (Netty runs a shorter tick as 1 ms): a hedge then fires at most a tenth of its delay late (half that
on average), while the timer thread wakes 1000 / tick times a second whatever is due — 100 wake-ups a second for
a 100 ms delay's 10 ms tick rather than a thousand. A delay of 100 ms or more leaves the driver's default, at or
below the delay as the driver's own comment asks. A delay under 10 ms gets the 1 ms floor (up to 1 ms late).

**The model.** The tick the rendered config runs: that tick; the default 100 ms for a Java hedge the rendering
leaves alone; 0 (exact timing) without a hedge, and always for the Python driver, whose speculative executions
are timers of its event loop (no wheel). A caller that knows the tick the application really runs (the live
replay's generator: 1 ms) gives `se_tick_ms` itself.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "JAVA_DEFAULT_TICK_MS",
    "LATENESS_DIVISOR",
    "TIMER_DRIVERS",
    "modelled_tick_ms",
    "rendered_tick_ms",
]

#: `advanced.netty.timer.tick-duration` in the Java driver 4.19's reference.conf.
JAVA_DEFAULT_TICK_MS: Final = 100
#: The rendered tick is at most the delay / this: a hedge fires at most this fraction of its delay late.
LATENESS_DIVISOR: Final = 10
#: The drivers whose speculative executions run on a wheel timer.
TIMER_DRIVERS: Final = ("java4",)


def rendered_tick_ms(max_executions: int, delay_ms: float) -> int | None:
    """The tick the rendered Java driver config sets, whole ms: None when it sets none (no hedge, or a delay of
    the default tick or more). The delay is taken as the driver runs it: whole ms (sub-ms precision dropped)."""
    if max_executions <= 1:
        return None
    ms = int(delay_ms)
    if ms >= JAVA_DEFAULT_TICK_MS:
        return None
    return max(1, ms // LATENESS_DIVISOR)


def modelled_tick_ms(driver: str, max_executions: int, delay_ms: float) -> float:
    """The tick the model replays `driver`'s hedges on when the application runs tailtune's rendered config, ms
    (0 = exact timing: no hedge, or a driver without a wheel timer)."""
    if driver not in TIMER_DRIVERS or max_executions <= 1:
        return 0.0
    tick = rendered_tick_ms(max_executions, delay_ms)
    return float(JAVA_DEFAULT_TICK_MS if tick is None else tick)
