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
    # parameters are checked against the registry's ranges before the trace is read (the dataset does not exist)
    (["simulate", "--dataset", "nope", "--policy", "rein", "--param", "k=-4"],
     "--param: field 'k': must be an integer in [1, 64], got -4"),
    (["simulate", "--dataset", "nope", "--policy", "rein", "--param", "k=nan"],
     "--param: field 'k': must be a finite number, got nan"),
    (["simulate", "--dataset", "nope", "--policy", "tailx", "--param", "tl_ms=-1"],
     "--param: field 'tl_ms': must be a finite number in [0, 1e6] ms (0 = derived), got -1"),
    (["simulate", "--dataset", "nope", "--policy", "stock", "--param",
      "driver.speculative_execution.max_executions=9223372036854775808"],
     "field 'driver.speculative_execution.max_executions': must be an integer in [1, 2147483647]"),
    (["simulate", "--dataset", "nope", "--policy", "c3", "--param", "b=11"],
     "--param: field 'b': must be a finite number in [0, 10], got 11"),
    (["simulate", "--dataset", "nope", "--policy", "fifo", "--replica", "c3", "--replica-param", "alpha=0"],
     "--replica-param: field 'alpha': must be a finite number in (0, 1], got 0"),
    (["simulate", "--dataset", "nope", "--policy", "chisel", "--param", "merge=0"],
     "--param: field 'merge': must be an integer in [1, 4294967295], got 0"),
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
