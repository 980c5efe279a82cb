"""The binding's modules (`simulator/py/src/*.rs`) import one another one way: no circle of `use crate::...`."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "simulator" / "py" / "src"


def _imports() -> dict[str, set[str]]:
    return {p.stem: set(re.findall(r"\buse crate::(\w+)", p.read_text())) for p in SRC.glob("*.rs")}


def test_the_binding_modules_import_one_another_without_a_circle() -> None:
    graph = _imports()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"circle of imports: {' -> '.join((*path, module))}"
        if module in done:
            return
        for dep in sorted(graph.get(module, ())):
            visit(dep, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
    assert graph["errors"] == set() and graph["buffers"] == {"errors"}
