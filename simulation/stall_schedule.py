"""A stall schedule as text: the CSV `tailtune simulate --stall-schedule` reads and `cli_args` writes.

    server,start_ms,end_ms
    2,2500.0,3500.0
    2,7500.0,8500.0

One row per stall: the server's index (0 .. servers − 1, the simulated servers' order), the stall's start and end in
ms on the replay's clock (0 = the workload's time origin: the first request's arrival with the trace's own
timestamps, the replay's start with Poisson arrivals; docs/simulator.md § Stalls). Rows in any order; on one server
they must not overlap (`kvsim` checks it with the server count, naming the entry; `check_lines` maps an entry back
to its line). Blank lines are skipped.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from base.errors import BadInputError

__all__ = ["HEADER", "Stall", "check_lines", "parse_csv", "read", "render"]

HEADER = ("server", "start_ms", "end_ms")
#: (server index, start ms, end ms)
Stall = tuple[int, float, float]


def parse_csv(text: str, where: str) -> tuple[tuple[Stall, ...], list[int]]:
    """The stalls of CSV `text` and the line of each (1-based); BadInputError naming `where`, line and field."""
    stalls: list[Stall] = []
    lines: list[int] = []
    header_seen = False
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if not header_seen:
            if tuple(cells) != HEADER:
                raise BadInputError.single(
                    where, f"the header must be {','.join(HEADER)}, got {line!r}", line=no, field="header"
                )
            header_seen = True
            continue
        if len(cells) != len(HEADER):
            raise BadInputError.single(
                where, f"{len(cells)} fields, need {len(HEADER)} ({','.join(HEADER)})", line=no, field="server"
            )
        try:
            server = int(cells[0])
        except ValueError:
            server = -1
        if server < 0:
            raise BadInputError.single(where, f"{cells[0]!r} is not a server index (an integer ≥ 0)", line=no,
                                       field="server")
        times: list[float] = []
        for name, cell in zip(HEADER[1:], cells[1:], strict=True):
            try:
                v = float(cell)
            except ValueError:
                v = math.nan
            if not (math.isfinite(v) and v >= 0.0):
                raise BadInputError.single(where, f"{cell!r} is not a time in ms (a finite number ≥ 0)", line=no,
                                           field=name)
            times.append(v)
        if not times[1] > times[0]:
            raise BadInputError.single(where, f"{times[1]:g} ms is not after start_ms {times[0]:g} ms", line=no,
                                       field="end_ms")
        stalls.append((server, times[0], times[1]))
        lines.append(no)
    if not header_seen:
        raise BadInputError.single(where, f"empty: need the header {','.join(HEADER)}", field="header")
    return tuple(stalls), lines


def read(path: str) -> tuple[tuple[Stall, ...], list[int]]:
    """The stalls of the CSV file `path` (see `parse_csv`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInputError.single(
            "--stall-schedule", f"cannot read {path}: {exc.strerror or exc}", field="stall_schedule"
        ) from None
    except UnicodeDecodeError:
        raise BadInputError.single(path, "not UTF-8 text", field="stall_schedule") from None
    return parse_csv(text, path)


def render(stalls: tuple[Stall, ...]) -> str:
    """The CSV text of `stalls` (header included); `parse_csv` reads it back to the same values."""
    rows = [",".join(HEADER)] + [f"{s},{a!r},{e!r}" for s, a, e in stalls]
    return "\n".join(rows) + "\n"


def check_lines(exc: BadInputError, where: str, lines: list[int]) -> BadInputError:
    """`exc` when its first problem names no entry `stall_schedule[i]` (the field kvsim's check names); else that
    problem as line `lines[i]` of `where`, the other entries it mentions as their lines."""
    p = exc.problems[0]
    m = re.fullmatch(r"stall_schedule\[(\d+)\](?:\.(\w+))?", p.field or "")
    if m is None or int(m.group(1)) >= len(lines):
        return exc
    field = {"start": "start_ms", "end": "end_ms", "server": "server"}.get(m.group(2) or "", "start_ms")

    def line_of(k: re.Match[str]) -> str:
        i = int(k.group(1))
        return f"line {lines[i]}" if i < len(lines) else k.group(0)

    problem = re.sub(r"stall_schedule\[(\d+)\]", line_of, p.problem)
    return BadInputError.single(where, problem, line=lines[int(m.group(1))], field=field)
