"""Numbers in words a reader takes in at a glance: counts with thousands separators, shares as percentages,
bytes, durations and rates with their unit. One place, so the findings, the tables and the console agree."""

from __future__ import annotations

import math

__all__ = ["bytes_", "count", "duration", "keys", "number", "plural", "rate", "ratio", "share"]


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(float(x))


def number(x: float | None, digits: int = 3) -> str:
    """A plain number, `digits` significant digits; integers keep every digit (with separators); a minus sign,
    not a hyphen."""
    if not _finite(x):
        return "—"
    assert x is not None
    v = float(x)
    if v == int(v) and abs(v) < 1e15:
        text = f"{int(v):,}"
    elif abs(v) >= 10 ** digits:
        text = f"{v:,.0f}"
    else:
        text = f"{v:.{digits}g}"
    return text.replace("-", "−")


def count(x: float | None) -> str:
    """1234567 → '1,234,567'."""
    return "—" if not _finite(x) else f"{round(float(x)):,}"  # type: ignore[arg-type]


def plural(n: float, word: str, words: str | None = None) -> str:
    """'1 key', '2 keys', '1,908 keys'."""
    return f"{number(n)} {word if n == 1 else (words or word + 's')}"


def keys(x: float | None) -> str:
    """A number of keys: '1 key', '8.98 keys'."""
    return "—" if not _finite(x) else plural(float(x), "key")  # type: ignore[arg-type]


def share(x: float | None) -> str:
    """A fraction as a percentage with as many decimals as it needs: 0.41 → '41%', 0.0012 → '0.12%', 0 → '0%'."""
    if not _finite(x):
        return "—"
    p = 100.0 * float(x)  # type: ignore[arg-type]
    if p in (0.0, 100.0) or 10 <= p < 99:
        return f"{p:.0f}%"
    if p >= 99:
        return f"{p:.4g}%"
    if p >= 0.01:
        return f"{p:.2g}%"
    return "< 0.01%" if p > 0 else f"{p:.2g}%"


def bytes_(x: float | None) -> str:
    """A size in bytes: exact below 10,000 B ('1,000 B'), else kB/MB/GB (powers of 1000) with 3 digits."""
    if not _finite(x):
        return "—"
    v = float(x)  # type: ignore[arg-type]
    if abs(v) < 10_000:
        return f"{number(v)} B"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} B"  # pragma: no cover - unreachable


def duration(seconds: float | None) -> str:
    """A duration with the unit that keeps it readable: '20.1 s', '0.702 ms', '35 µs', '2.5 h'."""
    if not _finite(seconds):
        return "—"
    s = float(seconds)  # type: ignore[arg-type]
    a = abs(s)
    if a == 0:
        return "0 s"
    if a >= 3 * 3600:
        return f"{s / 3600:.3g} h"
    if a >= 3 * 60:
        return f"{s / 60:.3g} min"
    if a >= 1:
        return f"{s:.3g} s"
    if a >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def rate(x: float | None) -> str:
    """Requests per second."""
    return "—" if not _finite(x) else f"{number(float(x))} requests/s"  # type: ignore[arg-type]


def ratio(x: float | None) -> str:
    """A multiple: '1.01×'."""
    return "—" if not _finite(x) else f"{float(x):.3g}×"  # type: ignore[arg-type]
