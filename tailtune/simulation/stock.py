"""Cassandra's `speculative_retry` table option: its grammar, its normalised text and equality of parsed forms,
exactly as Cassandra 5.0 accepts and prints them (`SpeculativeRetryPolicy.fromString` and the five
implementations in `org.apache.cassandra.service.reads`; see docs/stock-cassandra.md for the sources).

Grammar (the order in which Cassandra tries the forms):

- `ALWAYS` (any letter case, Java `equalsIgnoreCase`);
- `NEVER` or its alias `NONE` (any case); prints `NEVER`;
- `<X>p` / `<X>percentile` (regex `[0-9.]+p(ercentile)?`, ASCII case-insensitive), X parsed as a double, valid
  when 0 < X < 100; prints `DecimalFormat("#.####")` of X (HALF_EVEN, so `99.0` → `99p`, `0.5` → `.5p`);
- `<Y>ms` (regex `[0-9.]+ms`), Y parsed as a double and truncated to a Java `int` (`5.7ms` → `5ms`;
  saturating at 2147483647); prints `%dms`;
- `MIN(a,b)` / `MAX(a,b)` (regex `(MIN|MAX)\\(([0-9.]+[a-z]+)\\s*,\\s*([0-9.]+[a-z]+)\\)`), one argument a
  percentile and the other a fixed time, either order; prints the function in upper case with the percentile
  first: `max(5ms, 99PERCENTILE)` → `MAX(99p,5ms)`.

Everything else (leading or trailing blanks included) is rejected with a BadInputError, as Cassandra rejects it
with a ConfigurationException. Equality is Cassandra's `equals`: kind and values (percentile as a double, the
fixed time as whole milliseconds, the function).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Literal

from tailtune.base.errors import BadInputError
from tailtune.simulation.stock_knobs import DRIVER_DEFAULT, DRIVERS, STOCK_KNOBS, StockKnob, driver_refusal
from tailtune.simulation.stock_knobs import knob as knob_of

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
    "STOCK_POLICY",
    "STOCK_STRING_PARAMS",
    "SpeculativeRetry",
    "parse_speculative_retry",
    "snitch_refusal",
    "snitch_selector_params",
    "spec_core_params",
    "stock_params",
]

INT_MAX = 2**31 - 1
DEFAULT_SPECULATIVE_RETRY = "99p"

Kind = Literal["NEVER", "FIXED", "PERCENTILE", "HYBRID", "ALWAYS"]

# Java's Pattern.CASE_INSENSITIVE without UNICODE_CASE folds ASCII letters only: re.ASCII | re.IGNORECASE.
_FLAGS = re.ASCII | re.IGNORECASE
_PERCENTILE = re.compile(r"(?P<val>[0-9.]+)p(ercentile)?", _FLAGS)
_FIXED = re.compile(r"(?P<val>[0-9.]+)ms", _FLAGS)
_HYBRID = re.compile(r"(?P<fun>MIN|MAX)\((?P<val1>[0-9.]+[a-z]+)\s*,\s*(?P<val2>[0-9.]+[a-z]+)\)", _FLAGS)


@dataclass(frozen=True)
class SpeculativeRetry:
    """A parsed `speculative_retry`: `kind` with its values (`percentile` for PERCENTILE and HYBRID, `fixed_ms`
    for FIXED and HYBRID, `function` `MIN`/`MAX` for HYBRID). Equality and hashing are Cassandra's."""

    kind: Kind
    percentile: float | None = None
    fixed_ms: int | None = None
    function: Literal["MIN", "MAX"] | None = None

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        """Cassandra's normalised text (what `system_schema.tables` shows)."""
        if self.kind in ("NEVER", "ALWAYS"):
            return self.kind
        if self.kind == "PERCENTILE":
            return _render_percentile(self._p())
        if self.kind == "FIXED":
            return f"{self._ms()}ms"
        return f"{self.function}({_render_percentile(self._p())},{self._ms()}ms)"

    def threshold_ns(self, percentile_ns: float | None, existing_ns: int) -> int | None:
        """Cassandra's `calculateThreshold`: the threshold in ns given the histogram's value at `percentile`
        (None = empty histogram: keep `existing_ns`); None means never speculate, 0 means always."""
        if self.kind == "NEVER":
            return None
        if self.kind == "ALWAYS":
            return 0
        fixed = self._ms() * 1_000_000 if self.fixed_ms is not None else 0
        if self.kind == "FIXED":
            return fixed
        if percentile_ns is None:
            return existing_ns
        p = int(percentile_ns)
        if self.kind == "PERCENTILE":
            return p
        return min(p, fixed) if self.function == "MIN" else max(p, fixed)

    def _p(self) -> float:
        assert self.percentile is not None
        return self.percentile

    def _ms(self) -> int:
        assert self.fixed_ms is not None
        return self.fixed_ms


def _render_percentile(p: float) -> str:
    # java.text.DecimalFormat("#.####"): HALF_EVEN on the double's exact value, no trailing zeros, no leading
    # zero before the point (0.5 → ".5"), and "0" when no digit is left.
    q = Decimal(p).quantize(Decimal("0.0001"), rounding=ROUND_HALF_EVEN)
    text = format(q, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text.startswith("0") and len(text) > 1:
        text = text[1:]
    if text in ("", "."):
        text = "0"
    return f"{text}p"


def _java_equals_ignore_case(a: str, b: str) -> bool:
    """java.lang.String.equalsIgnoreCase: same length, each char pair equal after per-char upper or lower case."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        ux, uy = _java_upper(x), _java_upper(y)
        if ux == uy or _java_lower(ux) == _java_lower(uy):
            continue
        return False
    return True


def _java_upper(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 else c


def _java_lower(c: str) -> str:
    lo = c.lower()
    return lo if len(lo) == 1 else c


def _bad(text: str, why: str = "", where: str = "speculative_retry") -> BadInputError:
    expected = "NEVER, NONE, ALWAYS, <X>p, <X>PERCENTILE, <Y>ms, MIN(<X>p,<Y>ms) or MAX(<X>p,<Y>ms)"
    problem = f"invalid value {text!r}" + (f": {why}" if why else f" (expected {expected})")
    return BadInputError.single(where, problem, field="speculative_retry")


def _java_double(val: str, text: str, where: str) -> float:
    try:
        return float(val)  # the regexes admit only [0-9.]+, where float() and Double.parseDouble agree
    except ValueError:
        raise _bad(text, f"{val!r} is not a number", where) from None


def _java_int(x: float) -> int:
    if math.isnan(x):
        return 0
    return int(min(x, INT_MAX))


def parse_speculative_retry(text: str, *, where: str = "speculative_retry") -> SpeculativeRetry:
    """Parses `text` as Cassandra does; a BadInputError (naming `where`) for what Cassandra rejects."""
    if not isinstance(text, str):
        raise _bad(repr(text), "not a string", where)
    if _java_equals_ignore_case(text, "ALWAYS"):
        return SpeculativeRetry("ALWAYS")
    if _java_equals_ignore_case(text, "NEVER") or _java_equals_ignore_case(text, "NONE"):
        return SpeculativeRetry("NEVER")
    if m := _PERCENTILE.fullmatch(text):
        p = _java_double(m.group("val"), text, where)
        if p <= 0.0 or p >= 100.0:
            raise _bad(text, "a percentile must be between 0.0 and 100.0 (exclusive)", where)
        return SpeculativeRetry("PERCENTILE", percentile=p)
    if m := _FIXED.fullmatch(text):
        return SpeculativeRetry("FIXED", fixed_ms=_java_int(_java_double(m.group("val"), text, where)))
    if m := _HYBRID.fullmatch(text):
        try:
            a = parse_speculative_retry(m.group("val1"), where=where)
            b = parse_speculative_retry(m.group("val2"), where=where)
        except BadInputError:
            raise _bad(text, "an argument of MIN()/MAX() is not a valid percentile or time", where) from None
        if a.kind == b.kind:
            raise _bad(text, f"MIN()/MAX() arguments should be of different types, but both are {a.kind}", where)
        pct, fixed = (a, b) if a.kind == "PERCENTILE" else (b, a)
        fun: Literal["MIN", "MAX"] = "MIN" if m.group("fun").upper() == "MIN" else "MAX"
        return SpeculativeRetry("HYBRID", percentile=pct.percentile, fixed_ms=fixed.fixed_ms, function=fun)
    raise _bad(text, where=where)


# ----------------------------------------------------------------------------------------------------------------
# The `stock` policy's vocabulary: the knob names as Cassandra and the drivers spell them → kvsim's numbers.

STOCK_POLICY = "stock"
#: speculative_retry kind → kvsim's `spec_kind` (simulator/core/src/policy/stock.rs).
SPEC_KIND_CODE: dict[str, int] = {"NEVER": 0, "ALWAYS": 1, "PERCENTILE": 2, "FIXED": 3, "MIN": 4, "MAX": 5}
#: Stock knobs whose values are names.
STOCK_STRING_PARAMS = ("speculative_retry", "driver", "multiget.shape")
#: kvsim's `driver` number of each driver.
DRIVER_CODE = {"java4": 0.0, "python": 1.0}
#: The kvsim selector `stock` reads replicas with by default: Cassandra's DynamicEndpointSnitch.
SNITCH_SELECTOR = "dynamic-snitch"
#: The dynamic snitch's settings (the table's `jmx` knobs) and Cassandra 5.0's defaults (cassandra.yaml; the
#: intervals in ms); `snitch_selector_params` maps each onto the snitch selectors' parameters.
SNITCH_DEFAULTS = {k.name: float(k.default) for k in STOCK_KNOBS if k.applied == "jmx"}
#: Knobs of the table not modelled (refused with the reason rather than ignored): none today.
NOT_MODELLED = {k.name: k.unmodelled_reason for k in STOCK_KNOBS if not k.modelled}
#: The client-side knobs (drivers and multiget shape): table entries with a kvsim `stock` parameter.
CLIENT_KNOBS = tuple(k for k in STOCK_KNOBS if k.core)
#: kvsim `stock` parameters a user may also set directly (the threshold rule, the drop rule, paged `IN` queries;
#: see docs/stock-cassandra.md).
CORE_PARAMS = ("read_timeout_ms", "drop_expired", "spec_refresh_ms", "spec_initial_ms", "spec_warm", "window",
               "spec_histogram", "paged")
#: `dynamic-snitch` parameters `stock` also takes as `--param` (facts of the modelled cluster, not knobs: never
#: searched): `local` = 1 makes coordinator c the node of server c mod servers, reading itself unsampled.
SNITCH_MODEL_PARAMS = ("local",)


#: The snitch knobs (the `dynamic-snitch` selector's, or `ds`'s).
SNITCH_KNOBS = tuple(SNITCH_DEFAULTS)
#: Every coordinator knob: what `stock` takes and what every other queue policy but `duplicate` and
#: `speculative` accepts too (kvsim's coordinator section, plus the snitch knobs for a snitch selector).
COORDINATOR_KNOBS = ("speculative_retry", "driver", *SNITCH_KNOBS, *(k.name for k in CLIENT_KNOBS), *CORE_PARAMS)
#: `speculative_retry` of a patched policy when none is given: the machinery off (a replay as without the knobs).
PATCHED_SPECULATIVE_RETRY = "NEVER"


def spec_core_params(policy: SpeculativeRetry) -> dict[str, float]:
    """A parsed `speculative_retry` as kvsim's `stock` parameters."""
    return {
        "spec_kind": float(SPEC_KIND_CODE[policy.function or policy.kind]),
        "spec_percentile": policy.percentile if policy.percentile is not None else 99.0,
        "spec_fixed_ms": float(policy.fixed_ms or 0),
    }


def stock_params(
    params: dict[str, int | float | str], where: str, *, policy: str = STOCK_POLICY
) -> tuple[dict[str, float], dict[str, float]]:
    """The coordinator knobs of `policy` (Cassandra's and the drivers' names; unset = Cassandra's and that
    driver's defaults from `stock_knobs`, except `speculative_retry`: `99p` for `stock`, `NEVER` for the patched
    policies) → (kvsim's coordinator params, the dynamic-snitch knobs for `snitch_selector_params`: every one for
    `stock`, the given ones for the others, and for `stock` the given `SNITCH_MODEL_PARAMS`). Unknown knobs, knobs
    the stated driver lacks and knobs that do not apply are a BadInputError naming the reason."""
    for k in params:
        if k in NOT_MODELLED:
            raise BadInputError.single(where, f"{k}: {NOT_MODELLED[k]}", field=k)
    known = ("speculative_retry", "driver", *SNITCH_DEFAULTS, *(k.name for k in CLIENT_KNOBS), *CORE_PARAMS, "replica")
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
    text = params.get("speculative_retry", DEFAULT_SPECULATIVE_RETRY if stock else PATCHED_SPECULATIVE_RETRY)
    if not isinstance(text, str):
        raise BadInputError.single(where, f"speculative_retry must be text, got {text!r}", field="speculative_retry")
    core = spec_core_params(parse_speculative_retry(text, where=where))
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
        core[knob.core] = _client_value(knob, params.get(knob.name, knob.default_for(driver)), where)
        for other, value in knob.only_with:
            if knob.name in params and params.get(other, _default(other, driver)) != value:
                raise BadInputError.single(
                    where, f"{knob.name} applies only with {other}={value}", field=knob.name
                )
    for k in CORE_PARAMS:
        if k in params:
            core[k] = _number(params[k], k, where)
    for k in SNITCH_DEFAULTS:
        why = _row(k).refusal(params[k]) if k in params else None
        if why is not None:
            raise BadInputError.single(where, f"{k} {why}", field=k)
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


def snitch_selector_params(snitch: dict[str, float], replica: str) -> dict[str, float]:
    """The dynamic-snitch knobs (as `stock_params` returns them; those present) as the parameters of kvsim
    selector `replica`: `dynamic-snitch` (Cassandra's DynamicEndpointSnitch, stock's default) or `ds` (the
    papers' snitch); other selectors take none of them (`snitch_refusal` says why)."""
    out: dict[str, float] = {}
    if replica not in (SNITCH_SELECTOR, "ds"):
        return out
    if "dynamic_snitch_badness_threshold" in snitch:
        out["badness"] = snitch["dynamic_snitch_badness_threshold"]
    if "dynamic_snitch_update_interval" in snitch:
        out["update_ms"] = snitch["dynamic_snitch_update_interval"]
    if "dynamic_snitch_reset_interval" in snitch:
        reset = snitch["dynamic_snitch_reset_interval"]
        if replica == SNITCH_SELECTOR:
            out["reset_ms"] = reset
        else:
            out["reset_s"] = reset / 1000.0
    if replica == SNITCH_SELECTOR and "read_timeout_ms" in snitch:
        out["timeout_ms"] = snitch["read_timeout_ms"]
    if replica == SNITCH_SELECTOR:
        out |= {k: snitch[k] for k in SNITCH_MODEL_PARAMS if k in snitch}
    return out


def snitch_refusal(name: str, replica: str) -> str | None:
    """Why snitch knob `name` does not apply with selector `replica` (None: it applies, or it is no snitch knob)."""
    if name not in SNITCH_KNOBS or replica in (SNITCH_SELECTOR, "ds"):
        return None
    return (
        f"{name} is a setting of the dynamic snitch, and replicas are chosen by {replica!r}: "
        f"add --param replica={SNITCH_SELECTOR} (or ds)"
    )


def _row(name: str) -> StockKnob:
    k = knob_of(name)
    assert k is not None, name
    return k


def _default(name: str, driver: str) -> int | float | str:
    k = next(k for k in STOCK_KNOBS if k.name == name)
    return k.default_for(driver)


def _client_value(knob: StockKnob, v: int | float | str, where: str) -> float:
    """A client-side knob's value as kvsim's number (a choice → its index; bools 0 or 1; counts whole), refused
    outside the knob's valid values (`StockKnob.refusal`; the simulator's own range is kvsim's)."""
    why = knob.refusal(v)
    if why is not None:
        raise BadInputError.single(where, f"{knob.name} {why}", field=knob.name)
    if knob.kind == "choice":
        return float(knob.choices.index(v))
    return float(v)


def _number(v: int | float | str, k: str, where: str) -> float:
    try:
        return float(v)
    except ValueError:
        raise BadInputError.single(where, f"value {v!r} is not a number", field=k) from None
