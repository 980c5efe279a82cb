"""No code dispatches on a deployment kind's name: callers go through the registry (`simulation.kinds`).

The checker reads the syntax tree of every product module (`PRODUCT`) and reports, as `path:line: what`, each
place that chooses a behaviour by comparing with a registered kind's name (`kind_names()`):

- a comparison (`==`, `!=`, `in`, `not in`) where one side is a string constant equal to a kind's name, or a
  tuple / list / set literal holding one (`kind in ("cassandra", "memcached")`);
- the same with a module-level constant bound to such a value (`CASSANDRA = "cassandra"` … `kind == CASSANDRA`;
  `DEPLOYMENTS = ("cassandra", "memcached")` … `x in DEPLOYMENTS`);
- a `match` case on such a constant, at any depth of the pattern (`case "cassandra":`,
  `case "cassandra" | "memcached":`, `case {"kind": "memcached"}:`);
- a dict literal with such a key (`{"cassandra": …}`), or `dict(cassandra=…)`;
- a subscript by such a constant (`POLICIES["cassandra"]`: a per-kind value picked by name;
  `Literal["cassandra", "memcached"]`: a type spelling the list of kinds out again).

Passing a name as a value is no dispatch (`TuneRequest(deployment="cassandra")`, a record's
`{"kind": "cassandra"}`, a default `store: str = "cassandra"`).

**Allowed places.** The registry (`simulation/kinds.py`, and `control/kinds.py`, which resolves a kind's
operations) may name every kind. A kind's own modules may name that kind (not another): a module is kind K's own
when K's name is part of its path below the repository — a folder (`kinds/cassandra/…`) or the file's name
(`simulation/cassandra.py`, `tuner/evaluators/_kvsim_cassandra.py`, `ingest/formats/cassandra_fql/…`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from simulation.kinds import kind_names

ROOT = Path(__file__).resolve().parents[1]
#: The product's top-level import packages, every module of which is checked.
PRODUCT = ("tailtune", "jobs", "service", "control", "tuner", "analysis", "simulation", "ingest", "base", "kinds")
#: The registry's modules: they may name every kind.
REGISTRY = frozenset({"simulation/kinds.py", "control/kinds.py"})
@dataclass(frozen=True, order=True)
class Hit:
    """One dispatch on a kind's name: where, and which form (`path:line: what`)."""

    path: str
    line: int
    what: str
    kind: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _own(path: str, kind: str) -> bool:
    """Whether `path` (relative, `/`-separated) is one of `kind`'s own modules: its name is part of a folder's name
    on the path or of the file's."""
    return any(kind in part for part in path.removesuffix(".py").split("/"))


def _names_in(node: ast.expr, kinds: frozenset[str]) -> set[str]:
    """The kinds' names `node` is, or holds as a tuple / list / set literal's element."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in kinds:
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {n for e in node.elts for n in _names_in(e, kinds)}
    return set()


def _constants(tree: ast.Module, kinds: frozenset[str]) -> dict[str, set[str]]:
    """Module-level names bound to a kind's name or a literal holding one (`A = "cassandra"`,
    `A, B = "cassandra", "memcached"`, `A: tuple[str, ...] = ("cassandra",)`)."""
    out: dict[str, set[str]] = {}

    def bind(target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            found = _names_in(value, kinds)
            if found:
                out[target.id] = found
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                bind(t, v)

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                bind(target, stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            bind(stmt.target, stmt.value)
    return out


def dispatches(source: str, path: str, kinds: Iterable[str]) -> list[Hit]:
    """Every dispatch on one of `kinds`' names in `source` (the module at `path`, relative to the repository),
    the allowed ones left out (module doc)."""
    names = frozenset(kinds)
    if path in REGISTRY:
        return []
    tree = ast.parse(source, filename=path)
    constants = _constants(tree, names)

    def named(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        return _names_in(node, names)

    hits: list[Hit] = []

    def hit(node: ast.AST, found: Iterable[str], what: str) -> None:
        for kind in sorted(found):
            if not _own(path, kind):
                hits.append(Hit(path, getattr(node, "lineno", 0), f"{what} on {kind!r}", kind))

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
                hit(node, {n for side in (node.left, *node.comparators) for n in named(side)}, "comparison")
        elif isinstance(node, ast.match_case):
            hit(node.pattern, _pattern_names(node.pattern, named), "match case")  # value patterns at any depth
        elif isinstance(node, ast.Dict):
            hit(node, {n for key in node.keys if key is not None for n in _names_in(key, names)}, "dict key")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            hit(node, {k.arg for k in node.keywords if k.arg is not None and k.arg in names}, "dict key")
        elif isinstance(node, ast.Subscript):
            hit(node, named(node.slice), "subscript")
    return sorted(hits)


def _pattern_names(pattern: ast.pattern, named: Callable[[ast.expr], set[str]]) -> set[str]:
    """The kinds' names a `case` pattern matches as values or mapping keys, at any depth (`case "cassandra"`,
    `case A | "memcached"`, `case {"kind": "cassandra"}`, `case ["memcached", *_]`)."""
    found: set[str] = set()
    for sub in ast.walk(pattern):
        if isinstance(sub, ast.MatchValue):
            found |= named(sub.value)
        elif isinstance(sub, ast.MatchMapping):
            found |= {n for key in sub.keys for n in named(key)}
    return found


def _product_files() -> Iterator[tuple[str, Path]]:
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path


def product_hits(kinds: Sequence[str]) -> list[Hit]:
    """Every dispatch on a kind's name in the product (`PRODUCT`)."""
    return [h for rel, path in _product_files() for h in dispatches(path.read_text(encoding="utf-8"), rel, kinds)]


# ------------------------------------------------------------------------------------------------ the product




def test_no_product_module_dispatches_on_a_kind_name() -> None:
    hits = product_hits(kind_names())
    assert not hits, "dispatch on a kind's name outside the registry and the kinds' own modules " \
        "(use simulation.kinds / control.kinds):\n" + "\n".join(map(str, hits))


# ------------------------------------------------------------------------------------------------ the checker

KINDS = ("cassandra", "memcached")

#: One snippet per form the checker catches; the line it must name ends with `# hit`.
CAUGHT = {
    "equal": 'def f(kind):\n    return kind == "cassandra"  # hit\n',
    "not equal, constant on the left": 'def f(kind):\n    return "memcached" != kind  # hit\n',
    "in a tuple": 'def f(kind):\n    return kind in ("cassandra", "redis")  # hit\n',
    "not in a list": 'def f(kind):\n    return kind not in ["memcached"]  # hit\n',
    "in a set": 'def f(kind):\n    return kind in {"cassandra"}  # hit\n',
    "chained": 'def f(a, kind):\n    return 0 < a and a != 2 != kind != "cassandra"  # hit\n',
    "module constant": 'CASSANDRA = "cassandra"\n\n\ndef f(kind):\n    return kind == CASSANDRA  # hit\n',
    "module constants unpacked": 'C, M = "cassandra", "memcached"\n\n\ndef f(kind):\n    return kind == M  # hit\n',
    "annotated tuple constant": 'KINDS: tuple[str, ...] = ("cassandra", "memcached")\n\n\ndef f(k):\n'
                                '    return k in KINDS  # hit\n',
    "match case": 'def f(kind):\n    match kind:\n        case "cassandra":  # hit\n            return 1\n'
                  '        case _:\n            return 2\n',
    "match or": 'def f(kind):\n    match kind:\n        case "x" | "memcached":  # hit\n            return 1\n',
    "match as": 'def f(kind):\n    match kind:\n        case ("cassandra" as k):  # hit\n            return k\n',
    "match inside a mapping": 'def f(doc):\n    match doc:\n        case {"kind": "memcached"}:  # hit\n'
                              '            return 1\n',
    "match a mapping key": 'def f(doc):\n    match doc:\n        case {"cassandra": x}:  # hit\n            return x\n',
    "Literal of names": 'from typing import Literal\n\nKind = Literal["cassandra", "memcached"]  # hit\n',
    "dict literal key": 'RENDER = {"cassandra": 1, "memcached": 2}  # hit\n',
    "dict() keyword": 'RENDER = dict(memcached=2)  # hit\n',
    "subscript": 'def f(table):\n    return table["cassandra"]  # hit\n',
    "subscript by constant": 'M = "memcached"\n\n\ndef f(table):\n    return table[M]  # hit\n',
}

NOT_DISPATCH = {
    "a name passed as a value": 'req = dict(deployment="cassandra")\nf(deployment="memcached")\n',
    "a record's kind": 'record = {"kind": "cassandra", "source": 1}\n',
    "a default": 'def f(store: str = "cassandra"):\n    return store\n',
    "another word": 'def f(kind):\n    return kind == "int" or kind in ("cat", "float")\n',
    "a name inside a longer text": 'def f(kind):\n    return kind == "cassandra-4" or kind in ("memcached_client",)\n',
    "a local constant": 'def f(kind):\n    c = "cassandra"\n    return c\n',
    "ordering": 'def f(kind):\n    return kind < "cassandra"\n',
}


@pytest.mark.parametrize("form", sorted(CAUGHT))
def test_the_checker_catches(form: str) -> None:
    lines = CAUGHT[form].splitlines()
    marked = [i + 1 for i, line in enumerate(lines) if line.endswith("# hit")]
    hits = dispatches(CAUGHT[form], "tuner/somewhere.py", KINDS)
    assert hits and {h.line for h in hits} == set(marked), (form, [str(h) for h in hits])
    assert all(str(h).startswith(f"tuner/somewhere.py:{marked[0]}: ") for h in hits)


@pytest.mark.parametrize("form", sorted(NOT_DISPATCH))
def test_the_checker_leaves(form: str) -> None:
    assert dispatches(NOT_DISPATCH[form], "tuner/somewhere.py", KINDS) == []


def test_the_checker_names_file_and_line() -> None:
    source = 'import x\n\n\ndef f(kind):\n    if kind == "memcached":\n        return 1\n'
    assert [str(h) for h in dispatches(source, "jobs/run.py", KINDS)] == ["jobs/run.py:5: comparison on 'memcached'"]


def test_a_kinds_own_modules_may_name_that_kind_only() -> None:
    source = 'def f(kind):\n    return kind == "cassandra" or kind == "memcached"\n'
    for own in ("simulation/cassandra.py", "kinds/cassandra/publisher.py", "tuner/evaluators/_kvsim_cassandra.py",
                "ingest/formats/cassandra_fql/records.py"):
        assert [h.kind for h in dispatches(source, own, KINDS)] == ["memcached"], own
    assert dispatches(source, "simulation/kinds.py", KINDS) == []
    assert dispatches(source, "control/kinds.py", KINDS) == []
    assert [h.kind for h in dispatches(source, "control/kind.py", KINDS)] == ["cassandra", "memcached"]


def test_the_checker_reads_the_registered_names() -> None:
    """A third registered kind's name is caught as the others are (the checker reads `kind_names()`)."""
    from tests.kinds.third_kind_model import register_third

    with register_third():
        names = kind_names()
    assert "filekv" in names
    assert dispatches('def f(k):\n    return k == "filekv"\n', "tuner/x.py", names)
    assert dispatches('def f(k):\n    return k == "filekv"\n', "tuner/x.py", KINDS) == []
