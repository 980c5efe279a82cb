"""Caps on one ingest: decompressed bytes, compression ratio, rows, line length and column count.

Each cap is checked while the file streams (never after materializing what it bounds) and fails the ingest with a
`BadInputError` naming the cap and how to raise it. 0 means no limit. Where the caps come from:

* the service (uploads through the API, the nightly job) and any caller of `ingest_file` that passes no limits:
  `Limits.from_settings` — the `TAILTUNE_INGEST_MAX_*` settings, whose defaults are sized for uploads;
* `tailtune ingest` of a local file: `Limits.local` — the shape caps (line length, columns) from the settings, no
  amount caps (decompressed bytes, ratio, rows) unless given on the command line (`--max-rows`, ...), because the
  largest legitimate traces (10^8 requests) are beyond the upload defaults; `--upload-limits` applies the service's.

See docs/operations.md § Limits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Final, Literal

from base.errors import BadInputError
from base.settings import Settings

__all__ = ["RATIO_CHECK_AFTER_BYTES", "LimitName", "Limits", "parse_size"]

LimitName = Literal["max_decompressed_bytes", "max_compression_ratio", "max_rows", "max_line_bytes", "max_columns"]

#: The compression ratio is judged only once this many bytes were decompressed (a small file may compress well).
RATIO_CHECK_AFTER_BYTES: Final = 16 << 20

#: Cap → (environment variable of its setting, `tailtune ingest` option).
_KNOBS: Final[dict[str, tuple[str, str]]] = {
    "max_decompressed_bytes": ("TAILTUNE_INGEST_MAX_DECOMPRESSED_BYTES", "--max-decompressed-bytes"),
    "max_compression_ratio": ("TAILTUNE_INGEST_MAX_COMPRESSION_RATIO", "--max-compression-ratio"),
    "max_rows": ("TAILTUNE_INGEST_MAX_ROWS", "--max-rows"),
    "max_line_bytes": ("TAILTUNE_INGEST_MAX_LINE_BYTES", "--max-line-bytes"),
    "max_columns": ("TAILTUNE_INGEST_MAX_COLUMNS", "--max-columns"),
}


@dataclass(frozen=True)
class Limits:
    """The caps of one ingest (0 = no limit) and where they came from (for the message that names them)."""

    max_decompressed_bytes: int = 0
    max_compression_ratio: float = 0.0
    max_rows: int = 0
    max_line_bytes: int = 0
    max_columns: int = 0
    #: "settings": a cap is named by its TAILTUNE_* variable; "command line": by its `tailtune ingest` option.
    origin: Literal["settings", "command line"] = "settings"
    #: The compression ratio is checked once more than this many bytes were decompressed.
    ratio_check_after_bytes: int = RATIO_CHECK_AFTER_BYTES

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name.startswith("max_") and not getattr(self, f.name) >= 0:
                raise BadInputError.single(
                    self.origin, f"must be >= 0 (0: no limit), got {getattr(self, f.name)}", field=self.knob(f.name)
                )

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The service's caps: every `TAILTUNE_INGEST_MAX_*` setting."""
        return cls(
            max_decompressed_bytes=settings.ingest_max_decompressed_bytes,
            max_compression_ratio=settings.ingest_max_compression_ratio,
            max_rows=settings.ingest_max_rows,
            max_line_bytes=settings.ingest_max_line_bytes,
            max_columns=settings.ingest_max_columns,
        )

    @classmethod
    def local(cls, settings: Settings) -> Limits:
        """`tailtune ingest` defaults: the shape caps from the settings, no amount caps (before any --max-*)."""
        return cls(
            max_line_bytes=settings.ingest_max_line_bytes,
            max_columns=settings.ingest_max_columns,
            origin="command line",
        )

    def with_overrides(self, **caps: int | float | None) -> Limits:
        """These caps replaced where given (not None); the result names its caps by their command-line options."""
        given = {k: v for k, v in caps.items() if v is not None}
        return replace(self, origin="command line", **given)  # type: ignore[arg-type]

    def knob(self, name: str) -> str:
        """How the user raises cap `name`: its setting's variable, or its `tailtune ingest` option."""
        env, flag = _KNOBS[name]
        return flag if self.origin == "command line" else env

    def exceeded(
        self, label: str, name: LimitName, problem: str, *, line: int | None = None, field: str | None = None
    ) -> BadInputError:
        """The error for a cap that was passed: the problem, the cap's value and the knob that raises it."""
        value = getattr(self, name)
        shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        knob = self.knob(name)
        env, flag = _KNOBS[name]
        if self.origin == "command line":
            hint = f"raise it with {flag} N (0: no limit)"
        else:
            hint = f"raise the setting {env} (0: no limit), or ingest the file with `tailtune ingest {flag} N`"
        return BadInputError.single(label, f"{problem} (limit {knob} = {shown})", line=line, field=field, hint=hint)


_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str, option: str) -> int:
    """`1048576`, `64K`, `16GiB`, `1.5G` → bytes (binary multiples); BadInputError naming `option` otherwise."""
    m = _SIZE.match(text)
    if m is None:
        raise BadInputError.single(
            "command line", f"expected a size in bytes (e.g. 1048576, 64K, 16GiB), got {text!r}", field=option
        )
    number, unit = float(m.group(1)), m.group(2).lower()
    return int(number * (1 << (10 * " kmgt".index(unit or " "))))
