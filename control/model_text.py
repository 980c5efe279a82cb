"""A model input's value as short readable lines (the console's model table, `tailtune deployments show` and
`calibrate`): a field a line, never raw JSON.

A mapping's fields are listed by name (nested ones as `outer.inner`); a number with 3 significant digits; a list of
101 numbers under a `*_quantiles_ms` key (a distribution kept as p0, p1, ..., p100, as calibration stores the client
round trip) as its p50 and p99; another list of numbers by its length and range; a list of records (a ring's nodes)
by its length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["QUANTILES", "number", "value_fields", "value_line"]

#: The length of a stored quantile list: p0, p1, ..., p100.
QUANTILES = 101


def number(x: Any) -> str:
    """A number with 3 significant digits (thousands separated), anything else as text."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return "—" if x is None else str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3g}" if abs(x) < 1e6 else f"{x:,.0f}"


def _numbers(v: Any) -> bool:
    return isinstance(v, Sequence) and not isinstance(v, str) and all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in v)


def _leaf(key: str, v: Any) -> str:
    if _numbers(v):
        xs = [float(x) for x in v]
        if key.endswith("quantiles_ms") and len(xs) == QUANTILES:
            return f"p50 {number(xs[50])} ms, p99 {number(xs[99])} ms (of {QUANTILES} quantiles p0…p100)"
        if len(xs) <= 4:
            return ", ".join(number(x) for x in xs) or "(none)"
        return f"{len(xs)} values, {number(min(xs))} to {number(max(xs))}"
    if isinstance(v, Sequence) and not isinstance(v, str):
        return f"{len(v)} entr{'y' if len(v) == 1 else 'ies'}"
    return number(v)


def value_fields(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """`value` as (field, text) pairs; a value that is no mapping is one pair with the field `prefix` ('' at the
    top)."""
    if not isinstance(value, Mapping):
        return [(prefix, _leaf(prefix, value))]
    out: list[tuple[str, str]] = []
    for k in sorted(value, key=str):
        name = f"{prefix}.{k}" if prefix else str(k)
        out.extend(value_fields(value[k], name))
    return out or [(prefix, "(empty)")]


def value_line(value: Any) -> str:
    """`value` in one line: its fields joined with '; '."""
    return "; ".join(f"{k} {v}" if k else v for k, v in value_fields(value))
