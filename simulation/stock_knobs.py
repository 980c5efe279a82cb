"""The stock knobs as one table: for each knob its contract name, its default, the drivers that have it (a driver
that lacks a knob refuses it with the reason), how a deployment applies it, and the range the tuner searches.

Each row also states the knob's valid values: `kind` (`int`: whole numbers; `float`: finite numbers; `bool`: 0 or
1; `choice`: one of `choices`; `text`: Cassandra's grammar) and, for numbers, `valid_low`..`valid_high` — what the
driver or Cassandra itself accepts (a Java `int` setting is at most 2^31 − 1). A config or `--param` outside them is
refused (`simulation.config_check`, with the field); the simulator's own range for the kvsim parameter
the knob sets (`core`, kvsim's coordinator section) is checked after it.

`simulate --policy stock` validates parameters against this table and passes each knob to kvsim's `stock`
parameter named by `core`; the tuner's stock search space is built from it (`tuner.space`); the renderer
(`simulation.stock_render`) groups knobs by `applied`. A knob with `modelled=False` would be refused by
`simulate` with `unmodelled_reason` and left out of the search (every knob of the table is modelled).

Driver speculative execution acts only on statements marked idempotent, and both drivers default to
non-idempotent. The model assumes the application marks its multiget reads idempotent whenever
`driver.speculative_execution.max_executions` > 1 (a recommendation that hedges in the driver includes marking
them: the renderer's notes say so); an application whose reads are not marked has max_executions = 1, its
current setting whatever policy object it configured.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from simulation.speculative_retry import (
    parse_speculative_retry,
    spec_core_params,
    speculative_retry_choices,
)

__all__ = [
    "DRIVERS",
    "DRIVER_DEFAULT",
    "EXTRA_READS_OFF",
    "EXTRA_READS_ONLY",
    "JAVA_INT_MAX",
    "SPECULATIVE_RETRY_SEARCH",
    "STOCK_KNOBS",
    "StockKnob",
    "driver_refusal",
    "knob",
    "stock_knobs",
]

Applied = Literal["cql", "jmx", "driver", "client-code"]
Kind = Literal["text", "float", "int", "bool", "choice"]

#: The drivers a deployment may state (`java4`: DataStax/Apache Java driver 4.x; `python`: cassandra-driver).
DRIVERS = ("java4", "python")
DRIVER_DEFAULT = "java4"
#: The largest Java `int` (the drivers' and Cassandra's integer settings, milliseconds included).
JAVA_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class StockKnob:
    """One stock knob. `default` is Cassandra's or the driver's own (per driver where they differ:
    `driver_defaults`); `low`/`high`/`log`/`choices` are the tuner's search range; `applied` is how it reaches a
    running system (`cql`: ALTER TABLE, live; `jmx`: StorageServiceMBean, live but not persisted, plus yaml;
    `driver`: the driver's configuration; `client-code`: the application's query code). `valid_low`..`valid_high`
    (numbers only) is what the driver or Cassandra accepts, whatever the tuner searches."""

    name: str
    kind: Kind
    default: int | float | str
    applied: Applied
    drivers: tuple[str, ...] = DRIVERS
    lacks: str = ""
    driver_defaults: tuple[tuple[str, int | float | str], ...] = ()
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[int | float | str, ...] = ()
    modelled: bool = True
    unmodelled_reason: str = ""
    doc: str = ""
    #: kvsim `stock` parameter the knob sets ("" = the speculative_retry text or the snitch, mapped apart).
    core: str = ""
    #: The knob exists only when these other knobs have these values (the search sets it only then; `simulate`
    #: refuses it otherwise, with the reason).
    only_with: tuple[tuple[str, int | float | str], ...] = ()
    #: The valid values of a number (`int`, `float`): inclusive bounds, as the driver or Cassandra accepts them.
    valid_low: float | None = None
    valid_high: float | None = None
    #: Values an operator would write (cassandra.yaml, a driver's configuration, query code) rather than any point
    #: of the range: the tuner searches these instead of `low`..`high` (a `text` knob's search is always a grid).
    grid: tuple[int | float | str, ...] = ()
    #: `text`: the grammar, `(text, *, where) -> value` (a value with Cassandra's `==` and `render()`, the
    #: normalised text), raising BadInputError for what Cassandra refuses.
    grammar: Callable[..., Any] | None = None
    #: A value of the grammar → the kvsim parameters it sets (instead of `core`).
    to_core: Callable[[Any], dict[str, float]] | None = None
    #: `cql`: the key under a version's `published.cassandra` where the publisher records each table's value
    #: before and after (`{"ks.t": {"before": TEXT, "after": TEXT}}`; a rollback restores from it).
    record: str = ""
    #: `jmx`: the kvsim selectors' parameters the setting is (selector, parameter, divisor: the parameter = the
    #: value / divisor), and its place among the interval and threshold arguments of the live JMX operation
    #: (`updateSnitch`) and the yaml lines; `unit`: the unit its yaml line writes after the value.
    selector_params: tuple[tuple[str, str, float], ...] = ()
    jmx_arg: int = 0
    unit: str = ""
    #: `driver`: its key in the rendered driver settings (`stock_driver_settings`), which the Java profile and
    #: the Python settings read.
    setting: str = ""

    def default_for(self, driver: str) -> int | float | str:
        return dict(self.driver_defaults).get(driver, self.default)

    def refusal(self, value: object) -> str | None:
        """Why `value` is not a valid value of this knob (None: it is). Numbers are JSON numbers (not true/false);
        `text` knobs are checked by their own grammar (`simulation.stock.parse_speculative_retry`)."""
        shown = _shown(value)
        if self.kind == "text":
            return None if isinstance(value, str) else f"must be text, got {shown}"
        if self.kind == "choice":
            return None if value in self.choices and not isinstance(value, bool) else (
                f"must be one of {', '.join(map(str, self.choices))}, got {shown}"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            value = None
        if self.kind == "bool":
            return None if value in (0, 1) else f"must be 0 or 1, got {shown}"
        low = -math.inf if self.valid_low is None else self.valid_low
        high = math.inf if self.valid_high is None else self.valid_high
        whole = self.kind == "int"
        ok = value is not None and _finite(value) and low <= value <= high
        if ok and whole and isinstance(value, float):
            ok = value.is_integer()
        if ok:
            return None
        noun = "an integer" if whole else "a finite number"
        if self.valid_low is None and self.valid_high is None:
            return f"must be {noun}, got {shown}"
        if self.valid_high is None:
            return f"must be {noun} >= {_num(low)}, got {shown}"
        return f"must be {noun} in [{_num(low)}, {_num(high)}], got {shown}"


#: speculative_retry's search: the kinds and ranges the tuner draws the text from (tuner.space composes
#: `NEVER`, `ALWAYS`, `<X>p`, `<Y>ms`, `MIN(<X>p,<Y>ms)`, `MAX(<X>p,<Y>ms)`).
SPECULATIVE_RETRY_SEARCH = {
    "kinds": ("NEVER", "ALWAYS", "PERCENTILE", "FIXED", "MIN", "MAX"),
    "percentile": (50.0, 99.9),
    "fixed_ms": (1, 200),
}

STOCK_KNOBS: tuple[StockKnob, ...] = (
    StockKnob(
        "speculative_retry",
        "text",
        "99p",
        "cql",
        grid=speculative_retry_choices(),
        grammar=parse_speculative_retry,
        to_core=spec_core_params,
        record="tables",
        doc="per table; ALTER TABLE ks.t WITH speculative_retry = '...'",
    ),
    StockKnob(
        "dynamic_snitch_badness_threshold",
        "float",
        1.0,
        "jmx",
        low=0.0,
        high=2.0,
        valid_low=0.0,
        grid=tuple(round(0.1 * i, 1) for i in range(21)),
        selector_params=(("dynamic-snitch", "badness", 1.0), ("ds", "badness", 1.0)),
        jmx_arg=2,
        doc="cassandra.yaml; live over JMX StorageServiceMBean.updateSnitch (not persisted)",
    ),
    StockKnob(
        "dynamic_snitch_update_interval", "int", 100, "jmx", low=10, high=1000, log=True,
        valid_low=1, valid_high=JAVA_INT_MAX, grid=(10, 20, 50, 100, 200, 500, 1000),
        selector_params=(("dynamic-snitch", "update_ms", 1.0), ("ds", "update_ms", 1.0)), jmx_arg=0, unit="ms",
        doc="ms",
    ),
    StockKnob(
        "dynamic_snitch_reset_interval", "int", 600_000, "jmx", low=10_000, high=600_000, log=True,
        valid_low=1, valid_high=JAVA_INT_MAX, grid=(10_000, 60_000, 120_000, 300_000, 600_000),
        selector_params=(("dynamic-snitch", "reset_ms", 1.0), ("ds", "reset_s", 1000.0)), jmx_arg=1, unit="ms",
        doc="ms",
    ),
    StockKnob(
        "driver.speculative_execution.delay",
        "float",
        100.0,
        "driver",
        low=0.5,
        high=100.0,
        log=True,
        valid_low=0.0,
        valid_high=JAVA_INT_MAX,
        grid=(1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0),
        core="se_delay_ms",
        setting="delay_ms",
        doc="ms between executions (ConstantSpeculativeExecutionPolicy; Java reference.conf's example: 100 ms); "
        "acts when max_executions > 1, on reads marked idempotent (assumed then)",
    ),
    StockKnob(
        "driver.speculative_execution.max_executions",
        "int",
        1,
        "driver",
        low=1,
        high=3,
        valid_low=1,
        valid_high=JAVA_INT_MAX,
        core="se_max",
        setting="max_executions",
        doc="counting the first execution (Java's max-executions; Python's max_attempts = this - 1); "
        "1 = no speculative execution",
    ),
    StockKnob(
        "driver.slow_replica_avoidance",
        "bool",
        1,
        "driver",
        drivers=("java4",),
        lacks="the Python driver has no slow-replica avoidance (only the Java driver 4's DefaultLoadBalancingPolicy)",
        choices=(0, 1),
        core="slow_avoid",
        setting="slow_replica_avoidance",
        doc="basic.load-balancing-policy.slow-replica-avoidance; acts with 3 or more replicas, per-partition queries",
    ),
    StockKnob(
        "driver.shuffle_replicas",
        "bool",
        1,
        "driver",
        drivers=("python",),
        lacks="the Java driver 4 always shuffles replicas; it has no setting for it",
        driver_defaults=(("python", 0),),
        choices=(0, 1),
        core="shuffle",
        setting="shuffle_replicas",
        doc="TokenAwarePolicy(..., shuffle_replicas=); acts on per-partition queries",
    ),
    StockKnob(
        "multiget.shape",
        "choice",
        "in",
        "client-code",
        choices=("in", "per-partition"),
        core="shape",
        doc="in: one SELECT ... WHERE pk IN (...) per chunk (the coordinator fans out); "
        "per-partition: one token-aware query per key, concurrently",
    ),
    StockKnob(
        "multiget.chunk",
        "int",
        0,
        "client-code",
        low=1,
        high=64,
        log=True,
        valid_low=0,
        valid_high=JAVA_INT_MAX,
        grid=(0, 1, 2, 4, 8, 16, 32, 64),
        core="chunk",
        only_with=(("multiget.shape", "in"),),
        doc="keys per IN query; 0 = all the multiget's keys (per-partition: 1 key per query, no chunk)",
    ),
)

_BY_NAME = {k.name: k for k in STOCK_KNOBS}


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond every float
        return False


def _num(x: float) -> str:
    """A bound as the messages state it: whole numbers in full (2147483647), others as `%g`."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"

#: The knobs that make extra reads (the coordinator's speculative retry, the driver's speculative executions) at
#: the value that turns them off: a config with these values sends each read once.
EXTRA_READS_OFF: dict[str, int | float | str] = {
    "speculative_retry": "NEVER",
    "driver.speculative_execution.max_executions": 1,
}

#: The knobs that act only while extra reads are on (the driver's delay between executions: max_executions > 1):
#: with them off, their value changes nothing.
EXTRA_READS_ONLY: tuple[str, ...] = ("driver.speculative_execution.delay",)


def knob(name: str) -> StockKnob | None:
    return _BY_NAME.get(name)


def driver_refusal(name: str, driver: str) -> str | None:
    """Why `driver` refuses knob `name` (None: it has it, or it is not a driver knob)."""
    k = _BY_NAME.get(name)
    if k is None or driver in k.drivers:
        return None
    return k.lacks or f"{name} is not a setting of the {driver} driver"


def stock_knobs(driver: str = DRIVER_DEFAULT, *, modelled_only: bool = True) -> list[StockKnob]:
    """The knobs a deployment with `driver` has (the tuner's stock search space when `modelled_only`)."""
    return [k for k in STOCK_KNOBS if driver in k.drivers and (k.modelled or not modelled_only)]
