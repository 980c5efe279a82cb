"""Usage errors are one line naming the command and what to do, exit 2, no traceback (`--debug` shows one)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = [
    (["simulate", "--bogus"], "no such option: --bogus"),
    (["simulate", "--policy"], "tailtune simulate: option '--policy' requires an argument"),
    (["simulate", "--policy", "fifo", "--dataset"], "option '--dataset' requires an argument"),
    (["tune", "--trials", "x"], "tailtune tune: invalid value for '--trials'"),
    (["bogus"], "no such command 'bogus'"),
    (["simulate", "--profile", "soundcloud", "--requests", "50", "--policy", "rein", "--param", "K=3"],
     "unknown parameter 'K' for policy 'rein': valid are k (default 4), range_factor (default 3)"),
    (["simulate", "--profile", "soundcloud", "--requests", "50", "--policy", "lifo"],
     "unknown queue discipline 'lifo' (one of fifo,"),
    (["simulate", "--profile", "bimodal", "--requests", "50", "--policy", "heron", "--param", "queue=lifo"],
     "field 'queue': unknown queue discipline 'lifo'"),
]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tailtune", *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("args", "expected"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_usage_error_is_one_line_exit_2(args: list[str], expected: str) -> None:
    proc = _run(args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert expected in lines[0]
    assert "Traceback" not in proc.stderr


def test_debug_shows_the_traceback() -> None:
    proc = _run(["--debug", "simulate", "--bogus"])
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_error_text_with_brackets_is_printed_verbatim(tmp_path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("request_id,ts,key\n1,2,[bold]x[/bold]\n")
    proc = _run(["simulate", "--trace", str(bad), "--policy", "fifo", "--param", "[red]k=1"])
    assert proc.returncode == 2
    assert "[red]k" in proc.stderr
