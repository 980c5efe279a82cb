"""No command-line value produces a traceback: every option of a few commands, given a hostile value (a 5000-character
path, a NUL byte, a number too large for any type, a non-number), ends in one `error:` line and exit 2 — or runs,
when the value happens to be a valid one. `--debug` is what shows a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from tailtune.cli.app import app

HOSTILE = {
    "long": "a" * 5000,
    "long-path": "/tmp/" + "d" * 300 + "/" + "f" * 300,
    "nul": "x\x00y",
    "huge": "9" * 400,
    "inf": "1e999",
    "minus": "-5",
    "json": "{\"a\": [",
}


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(f"{i // 3},{(i // 3) * 0.001},k{i % 7},100\n"
                                                          for i in range(60)))
    return path


def _bases(tmp_path: Path) -> dict[str, list[str]]:
    return {
        "simulate": ["simulate", "--profile", "bimodal", "--requests", "40", "--policy", "fifo"],
        "ingest": ["ingest", str(_trace(tmp_path))],
        "generate": ["generate", "--profile", "bimodal", "--requests", "20", "--out", str(tmp_path / "g.parquet")],
        "datasets show": ["datasets", "show", "nope"],
        "capture memcached": ["capture", "memcached", "127.0.0.1:1", "--duration", "1", "--out",
                              str(tmp_path / "c.watch")],
    }


def _command(path: str) -> Any:
    cmd: Any = typer.main.get_command(app)
    for part in path.split():
        cmd = cmd.commands[part]
    return cmd


def _options(path: str) -> list[str]:
    """The first flag of every option of `path` that takes a value."""
    out = []
    for p in _command(path).params:
        if p.param_type_name == "option" and not p.is_flag and p.opts[0] != "--help":
            out.append(p.opts[0])
    return out


CASES = [(cmd, opt, kind) for cmd in ("simulate", "ingest", "generate", "datasets show", "capture memcached")
         for opt in _options(cmd) for kind in ("long", "nul", "huge")]
#: Every hostile value on the options where a path or a list of numbers is read.
CASES += [(cmd, opt, kind) for cmd, opt in (("simulate", "--client-rtt-ms"), ("simulate", "--ring"),
                                            ("simulate", "--stall-schedule"), ("simulate", "--trace"),
                                            ("simulate", "--summary"), ("simulate", "--server-speeds"),
                                            ("ingest", "--out"), ("generate", "--out"))
          if opt in _options(cmd) for kind in HOSTILE]


def _replace(base: list[str], opt: str, value: str) -> list[str]:
    if opt in base:
        i = base.index(opt)
        return [*base[:i], opt, value, *base[i + 2:]]
    return [*base, opt, value]


@pytest.mark.parametrize(("cmd", "opt", "kind"), CASES, ids=[f"{c}-{o}-{k}" for c, o, k in CASES])
def test_a_hostile_option_value_is_one_line_not_a_traceback(cmd: str, opt: str, kind: str, cli: Any,
                                                            tmp_path: Path) -> None:
    args = _replace(_bases(tmp_path)[cmd], opt, HOSTILE[kind])
    res = cli(*args)
    assert "Traceback" not in res.stderr
    if res.exit_code == 0:  # a value that happens to be valid (a seed of -5)
        return
    lines = [line for line in res.stderr.strip().splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert res.exit_code in (2, 3), (args[:8], res.exit_code, res.stderr[-2000:])
    assert len(errors) == 1, res.stderr[-2000:]
    tail = lines[errors[0]:]  # the error and at most a hint, each a line of reasonable length
    assert len(tail) <= 2 and all(len(line) < 600 for line in tail), res.stderr[-2000:]


def test_debug_still_shows_the_traceback_of_an_unexpected_error(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import tailtune.cli.commands.simulate as simulate

    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(simulate, "cassandra_deployment", boom)
    base = ["simulate", "--profile", "bimodal", "--requests", "40", "--policy", "fifo"]
    res = cli(*base)
    assert res.exit_code == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: internal error: RuntimeError: boom") and "--debug" in res.stderr
    with pytest.raises(RuntimeError):
        cli("--debug", *base)
