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

from base.errors import BadInputError

__all__ = [
    "INT_MAX",
    "SPEC_KIND_CODE",
    "SpeculativeRetry",
    "parse_speculative_retry",
    "spec_core_params",
    "speculative_retry_choices",
]

INT_MAX = 2**31 - 1

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


#: speculative_retry kind → kvsim's `spec_kind` (simulator/core/src/policy/stock.rs).
SPEC_KIND_CODE: dict[str, int] = {"NEVER": 0, "ALWAYS": 1, "PERCENTILE": 2, "FIXED": 3, "MIN": 4, "MAX": 5}


def spec_core_params(policy: SpeculativeRetry) -> dict[str, float]:
    """A parsed `speculative_retry` as kvsim's `stock` parameters."""
    return {
        "spec_kind": float(SPEC_KIND_CODE[policy.function or policy.kind]),
        "spec_percentile": policy.percentile if policy.percentile is not None else 99.0,
        "spec_fixed_ms": float(policy.fixed_ms or 0),
    }


#: speculative_retry values the stock search draws from (besides NEVER and ALWAYS): percentiles, fixed times, and
#: MIN/MAX of the middle percentiles with the middle fixed times.
SPEC_PERCENTILES: tuple[float, ...] = (50.0, 75.0, 90.0, 95.0, 99.0, 99.9)
SPEC_FIXED_MS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)
SPEC_HYBRID = ((90.0, 95.0, 99.0), (2, 5, 10, 20))


def _pct(p: float) -> str:
    return f"{p:g}p"


def speculative_retry_choices() -> tuple[str, ...]:
    """Every `speculative_retry` text the stock search may try, in Cassandra's normalised spelling: `NEVER`,
    `ALWAYS`, `<X>p` for X in SPEC_PERCENTILES, `<Y>ms` for Y in SPEC_FIXED_MS, and `MIN(<X>p,<Y>ms)` /
    `MAX(<X>p,<Y>ms)` over SPEC_HYBRID."""
    pcts, fixed = SPEC_HYBRID
    hybrid = [f"{f}({_pct(p)},{y}ms)" for f in ("MIN", "MAX") for p in pcts for y in fixed]
    return ("NEVER", "ALWAYS", *(_pct(p) for p in SPEC_PERCENTILES), *(f"{y}ms" for y in SPEC_FIXED_MS), *hybrid)
