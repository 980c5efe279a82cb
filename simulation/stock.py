"""The `stock` policy's vocabulary: the coordinator knobs as Cassandra and the drivers spell them → kvsim's
numbers (`stock_params`), through each knob's applier (`simulation.stock_appliers`); the snitch knobs →
the snitch selectors' parameters (`snitch_selector_params`). `speculative_retry`'s grammar is
`simulation.speculative_retry` (re-exported here).
"""

from __future__ import annotations

from base.errors import BadInputError
from simulation.java_timer import TIMER_DRIVERS, modelled_tick_ms
from simulation.speculative_retry import (
    INT_MAX,
    SPEC_KIND_CODE,
    SpeculativeRetry,
    parse_speculative_retry,
    spec_core_params,
)
from simulation.stock_appliers import CLIENT, SNITCH, TABLE
from simulation.stock_knobs import (
    DRIVER_DEFAULT,
    DRIVERS,
    EXTRA_READS_OFF,
    STOCK_KNOBS,
    StockKnob,
    driver_refusal,
)

__all__ = [
    "CLIENT_KNOBS",
    "COORDINATOR_KNOBS",
    "DEFAULT_SPECULATIVE_RETRY",
    "DRIVER_CODE",
    "INT_MAX",
    "NOT_MODELLED",
    "PATCHED_SPECULATIVE_RETRY",
    "SNITCH_KNOBS",
    "SNITCH_MODEL_PARAMS",
    "SNITCH_SELECTOR",
    "SPEC_KIND_CODE",
    "STOCK_POLICY",
    "STOCK_STRING_PARAMS",
    "TABLE_KNOBS",
    "SpeculativeRetry",
    "parse_speculative_retry",
    "snitch_refusal",
    "snitch_selector_params",
    "spec_core_params",
    "stock_params",
]

STOCK_POLICY = "stock"
#: kvsim's driver-timer tick (ms; 0 = exact).
TICK = "se_tick_ms"
#: The table options (`cql` rows), each set on every table of a deployment.
TABLE_KNOBS = TABLE.knobs()
#: Stock knobs whose values are names.
STOCK_STRING_PARAMS = (
    *(k.name for k in TABLE_KNOBS if isinstance(k.default, str)),
    "driver",
    *(k.name for k in CLIENT.knobs() if isinstance(k.default, str)),
)
#: kvsim's `driver` number of each driver.
DRIVER_CODE = {"java4": 0.0, "python": 1.0}
#: The kvsim selector `stock` reads replicas with by default: Cassandra's DynamicEndpointSnitch.
SNITCH_SELECTOR = SNITCH.SELECTORS[0]
#: The dynamic snitch's settings (the table's `jmx` knobs) and Cassandra 5.0's defaults (cassandra.yaml; the
#: intervals in ms); `snitch_selector_params` maps each onto the snitch selectors' parameters.
SNITCH_DEFAULTS = {k.name: float(k.default) for k in SNITCH.knobs()}
#: Knobs of the table not modelled (refused with the reason rather than ignored): none today.
NOT_MODELLED = {k.name: k.unmodelled_reason for k in STOCK_KNOBS if not k.modelled}
#: The client-side knobs (drivers and multiget shape): table entries with a kvsim `stock` parameter.
CLIENT_KNOBS = CLIENT.knobs()
#: kvsim `stock` parameters a user may also set directly (the threshold rule, the drop rule, paged `IN` queries,
#: the Java driver's timer tick — unset, the tick the rendered config runs, `simulation.java_timer`; see
#: docs/stock-cassandra.md).
CORE_PARAMS = ("read_timeout_ms", "drop_expired", "spec_refresh_ms", "spec_initial_ms", "spec_warm", "window",
               "spec_histogram", "paged", "se_tick_ms")
#: `dynamic-snitch` parameters `stock` also takes as `--param` (facts of the modelled cluster, not knobs: never
#: searched): `local` = 1 makes coordinator c the node of server c mod servers, reading itself unsampled.
SNITCH_MODEL_PARAMS = ("local",)


#: The snitch knobs (the `dynamic-snitch` selector's, or `ds`'s).
SNITCH_KNOBS = tuple(SNITCH_DEFAULTS)
#: Every coordinator knob: what `stock` takes and what every other queue policy but `duplicate` and
#: `speculative` accepts too (kvsim's coordinator section, plus the snitch knobs for a snitch selector).
COORDINATOR_KNOBS = (*(k.name for k in TABLE_KNOBS), "driver", *SNITCH_KNOBS, *(k.name for k in CLIENT_KNOBS),
                     *CORE_PARAMS)


def _table_default(knob: StockKnob, stock: bool) -> int | float | str:
    """A table option's value when none is given: Cassandra's default for `stock`; for a patched policy the value
    that turns its extra reads off (`EXTRA_READS_OFF`: a replay as without the knobs), else the default."""
    return knob.default if stock else EXTRA_READS_OFF.get(knob.name, knob.default)


_SPECULATIVE_RETRY = next(k for k in TABLE_KNOBS if k.name == "speculative_retry")
#: `speculative_retry` of `stock` and of a patched policy when none is given (`simulate --json` shows it).
DEFAULT_SPECULATIVE_RETRY = str(_table_default(_SPECULATIVE_RETRY, True))
PATCHED_SPECULATIVE_RETRY = str(_table_default(_SPECULATIVE_RETRY, False))


def stock_params(
    params: dict[str, int | float | str], where: str, *, policy: str = STOCK_POLICY
) -> tuple[dict[str, float], dict[str, float]]:
    """The coordinator knobs of `policy` (Cassandra's and the drivers' names; unset = Cassandra's and that
    driver's defaults from `stock_knobs`, except that a patched policy's table options default to their extra
    reads off: `speculative_retry` `99p` for `stock`, `NEVER` for the patched policies) → (kvsim's coordinator
    params, the dynamic-snitch knobs for `snitch_selector_params`: every one for `stock`, the given ones for the
    others, and for `stock` the given `SNITCH_MODEL_PARAMS`). Unknown knobs, knobs the stated driver lacks and
    knobs that do not apply are a BadInputError naming the reason."""
    for k in params:
        if k in NOT_MODELLED:
            raise BadInputError.single(where, f"{k}: {NOT_MODELLED[k]}", field=k)
    known = (*COORDINATOR_KNOBS, "replica")
    stock = policy == STOCK_POLICY
    if stock:
        known = (*known, *SNITCH_MODEL_PARAMS)
    unknown = sorted(k for k in params if k not in known)
    if unknown:
        raise BadInputError.single(
            where,
            f"unknown parameter {unknown[0]!r} for policy {policy!r}: valid are {', '.join(known)}",
            field=unknown[0],
        )
    core: dict[str, float] = {}
    for option in TABLE_KNOBS:
        value = TABLE.parse(option, params.get(option.name, _table_default(option, stock)), where=where)
        core.update(TABLE.kvsim(option, value, replica=""))
    driver = params.get("driver", DRIVER_DEFAULT)
    if driver not in DRIVERS:
        raise BadInputError.single(where, f"driver must be one of {', '.join(DRIVERS)}, got {driver!r}", field="driver")
    driver = str(driver)
    for k in params:
        why = driver_refusal(k, driver)
        if why is not None:
            raise BadInputError.single(where, f"{k} is not a setting of the {driver} driver: {why}", field=k)
    core["driver"] = DRIVER_CODE[driver]
    for knob in CLIENT_KNOBS:
        if driver not in knob.drivers:
            continue
        value = CLIENT.parse(knob, params.get(knob.name, knob.default_for(driver)), where=where)
        core.update(CLIENT.kvsim(knob, value, replica=""))
        for other, want in knob.only_with:
            if knob.name in params and params.get(other, _default(other, driver)) != want:
                raise BadInputError.single(
                    where, f"{knob.name} applies only with {other}={want}", field=knob.name
                )
    for k in CORE_PARAMS:
        if k in params:
            core[k] = _number(params[k], k, where)
    _timer_tick(core, params, driver, where)
    for row in SNITCH.knobs():
        if row.name in params:
            SNITCH.parse(row, params[row.name], where=where)
    snitch = {k: _number(params.get(k, v), k, where) for k, v in SNITCH_DEFAULTS.items() if stock or k in params}
    if "read_timeout_ms" in core:
        snitch["read_timeout_ms"] = core["read_timeout_ms"]
    for k in SNITCH_MODEL_PARAMS:
        if k in params:
            replica = params.get("replica", SNITCH_SELECTOR)
            if replica != SNITCH_SELECTOR:
                raise BadInputError.single(
                    where, f"{k} is a parameter of the {SNITCH_SELECTOR} selector, and replicas are chosen by "
                    f"{replica!r}: add --param replica={SNITCH_SELECTOR}", field=k,
                )
            snitch[k] = _number(params[k], k, where)
    return core, snitch


def _timer_tick(core: dict[str, float], params: dict[str, int | float | str], driver: str, where: str) -> None:
    """`core` with the driver timer's tick (`se_tick_ms`) its hedges fire on: the one given, else the one the
    rendered config runs (`simulation.java_timer`; none without a hedge). A driver without a wheel timer takes
    no tick."""
    if TICK in params:
        if 0.0 < core[TICK] < 1.0:
            raise BadInputError.single(
                where, f"{TICK}: 0 (exact) or at least 1 ms (Netty's HashedWheelTimer runs a shorter tick as 1 ms), "
                f"got {core[TICK]:g}", field=TICK,
            )
        if driver not in TIMER_DRIVERS and core[TICK] != 0.0:
            raise BadInputError.single(
                where, f"{TICK}: the {driver} driver has no wheel timer (its speculative executions are timers of its "
                "event loop, on time): 0 or unset", field=TICK,
            )
        return
    tick = modelled_tick_ms(driver, int(core.get("se_max", 1.0)), core.get("se_delay_ms", 0.0))
    if tick:
        core[TICK] = tick


def snitch_selector_params(snitch: dict[str, float], replica: str) -> dict[str, float]:
    """The dynamic-snitch knobs (as `stock_params` returns them; those present) as the parameters of kvsim
    selector `replica`: `dynamic-snitch` (Cassandra's DynamicEndpointSnitch, stock's default) or `ds` (the
    papers' snitch), each as its row's `selector_params` say; other selectors take none of them
    (`snitch_refusal` says why)."""
    out: dict[str, float] = {}
    if replica not in SNITCH.SELECTORS:
        return out
    for row in SNITCH.knobs():
        if row.name in snitch:
            out.update(SNITCH.kvsim(row, snitch[row.name], replica=replica))
    timeout, source = SNITCH.TIMEOUT
    if replica == SNITCH_SELECTOR and source in snitch:
        out[timeout] = snitch[source]
    if replica == SNITCH_SELECTOR:
        out |= {k: snitch[k] for k in SNITCH_MODEL_PARAMS if k in snitch}
    return out


def snitch_refusal(name: str, replica: str) -> str | None:
    """Why snitch knob `name` does not apply with selector `replica` (None: it applies, or it is no snitch knob)."""
    if name not in SNITCH_KNOBS or replica in SNITCH.SELECTORS:
        return None
    return (
        f"{name} is a setting of the dynamic snitch, and replicas are chosen by {replica!r}: "
        f"add --param replica={SNITCH_SELECTOR} (or ds)"
    )


def _default(name: str, driver: str) -> int | float | str:
    k = next(k for k in STOCK_KNOBS if k.name == name)
    return k.default_for(driver)


def _number(v: int | float | str, k: str, where: str) -> float:
    try:
        return float(v)
    except ValueError:
        raise BadInputError.single(where, f"value {v!r} is not a number", field=k) from None
