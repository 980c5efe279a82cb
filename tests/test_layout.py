"""The house: the product packages ship no test scaffolding, memcached has one launcher, the stock rendering
lives with the stock model."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

from setuptools import find_packages  # type: ignore[import-untyped]  # no stubs installed

ROOT = Path(__file__).resolve().parents[1]
PRUNE = {"target", "build", "__pycache__", "node_modules"}  # and every hidden folder (.venv, .git, caches)
#: What starts a server process: the program looked up to run it, or its main class. (`java` alone is no server:
#: the full query log's reader and the live replay's generator are small Java programs; `mvn` fetches jars once;
#: a Cassandra node is `CassandraDaemon`.)
SERVER_START = re.compile(r'which\("(memcached|initdb|pg_ctl)"\)|CassandraDaemon')


def _python_files(top: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in PRUNE and not d.startswith(".") and not d.endswith(".egg-info")]
        yield from (Path(folder) / f for f in files if f.endswith(".py"))


def _shipped() -> list[str]:
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return sorted(find_packages(where=str(ROOT), include=found["include"]))


def test_shipped_packages_hold_no_test_servers() -> None:
    shipped = _shipped()
    assert {"tailtune", "ingest", "analysis", "tuner", "service", "jobs"} <= set(shipped)
    assert [p for p in shipped if p.split(".")[0] == "tests" or "testing" in p.split(".")] == []
    for pkg in shipped:
        for path in (ROOT / pkg.replace(".", "/")).glob("*.py"):
            text = path.read_text()
            assert not re.search(r"^\s*(from|import) tests\b", text, re.M), path
            assert not SERVER_START.search(text), f"{path.relative_to(ROOT)} starts a server"
    assert not (ROOT / "analysis" / "memcached_loadgen.py").exists()


def test_memcached_has_one_launcher() -> None:
    launchers = sorted(
        str(p.relative_to(ROOT))
        for p in _python_files(ROOT)
        if p != Path(__file__).resolve() and "Popen(" in (text := p.read_text()) and 'which("memcached")' in text
    )
    assert launchers == ["tests/servers/memcached_server.py"]


def test_the_control_plane_renders_stock_configs_without_the_tuner() -> None:
    """The stock rendering lives next to the stock model (simulation): control needs no tuner. Only the live
    replay's engine (`control.replay`, `control.replay_trace`) and its stored reports (`control.fidelity_store`,
    which pools them) read the tuner's statistics (`tuner.fidelity`), and no other module of control imports
    them."""
    import grimp

    graph = grimp.build_graph("control", "simulation", "tuner", cache_dir=None)
    assert "simulation.stock_render" in graph.modules and "tuner.stock_render" not in graph.modules
    replay = {"control.replay", "control.replay_trace", "control.fidelity_store"}
    for module in sorted(graph.find_descendants("control") - replay):
        assert not graph.chain_exists(importer=module, imported="tuner", as_packages=True), module
        assert not any(graph.chain_exists(importer=module, imported=r) for r in replay), module
