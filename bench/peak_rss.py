"""Run a command and report the peak RSS of each process of its tree (coordinator and workers alike).

    python -m bench.peak_rss [--every 0.1] [--timeline FILE] -- COMMAND ...

Samples `/proc/PID/status` (`VmRSS`) of the command and all its descendants every `--every` seconds; prints the
wall time, the exit status, and per process (pid, peak RSS, when the peak was seen, its command line) on standard
error when the command ends. `--timeline` writes `seconds, pid, rss_kb` rows of every sample (CSV) for a plot.
The command's own output passes through. `/usr/bin/time -v` gives the largest single process's peak
(`Maximum resident set size`) but not which process, nor when.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _tree(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=float, default=0.1)
    ap.add_argument("--timeline", type=Path)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give the command after --")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd)
    peak: dict[int, tuple[int, float, str]] = {}
    timeline = args.timeline.open("w") if args.timeline else None
    try:
        while proc.poll() is None:
            now = time.monotonic() - t0
            for pid in _tree(proc.pid):
                kb = _rss_kb(pid)
                if kb is None:
                    continue
                if timeline is not None:
                    timeline.write(f"{now:.1f},{pid},{kb}\n")
                if pid not in peak or kb > peak[pid][0]:
                    peak[pid] = (kb, now, peak[pid][2] if pid in peak else _cmdline(pid))
            time.sleep(args.every)
    finally:
        if timeline is not None:
            timeline.close()
    wall = time.monotonic() - t0
    print(f"[peak_rss] wall {wall:.1f} s, exit {proc.returncode}", file=sys.stderr)
    for pid, (kb, at, cmd_s) in sorted(peak.items(), key=lambda x: -x[1][0])[:8]:
        print(f"[peak_rss] pid {pid}: {kb / 1024**2:.2f} GiB at {at:.0f} s  {cmd_s[:100]}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
