"""The shape of a workload (`requests`, `opsets`, `ops`) on `kvsim.WorkloadLayout` and `kvsim.Workload` however
they are made, the native getters the stub declares, and `Workload.prefix` of a workload made by the constructor."""

from __future__ import annotations

import ast
from pathlib import Path

import kvsim
import numpy as np
import pytest
from kvsim import _kvsim

COUNTS = ("requests", "opsets", "ops")


def _inputs() -> tuple[kvsim.Cluster, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    k = rng.integers(1, 9, size=300)
    offsets = np.concatenate([[0], np.cumsum(k)])
    keys = rng.integers(0, 50_000, size=int(offsets[-1]))
    return kvsim.Cluster(servers=12, slots=2, clients=4), offsets, keys


def _frozen(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Read-only copies (what `from_arrays` borrows)."""
    out = {k: v.copy() for k, v in arrays.items()}
    for v in out.values():
        v.flags.writeable = False
    return out


def _make(how: str) -> kvsim.WorkloadLayout | kvsim.Workload:
    cluster, offsets, keys = _inputs()
    layout = kvsim.WorkloadLayout(cluster, offsets, keys=keys)
    if how == "layout":
        return layout
    if how == "layout.from_arrays":
        return kvsim.WorkloadLayout.from_arrays(cluster, layout.offsets, layout.tokens, _frozen(layout.arrays()))
    built = kvsim.Workload(cluster, offsets, keys=keys, load=0.5, seed=4)
    drawn = kvsim.Workload.draw(layout, load=0.5, seed=4)
    if how == "from_arrays":
        draws = _frozen(dict(drawn.draws()))
        return kvsim.Workload.from_arrays(layout, draws["arrival_ns"], draws["demand_ns"])
    if how.startswith("prefix of"):
        return (drawn if how == "prefix of a drawn workload" else built).prefix(120)
    return {"constructor": built, "draw": drawn}[how]


@pytest.mark.parametrize(
    "how",
    [
        "layout",
        "layout.from_arrays",
        "constructor",
        "draw",
        "from_arrays",
        "prefix of a drawn workload",
        "prefix of a constructed workload",
    ],
)
def test_counts_are_the_arrays_lengths(how: str) -> None:
    made = _make(how)
    a = made.arrays()
    # req_opsets and opset_ops are offsets (requests + 1, opsets + 1)
    expected = {
        "requests": a["req_opsets"].size - 1,
        "opsets": a["opset_group"].size,
        "ops": a["op_input"].size,
    }
    assert expected["requests"] == a["client"].size
    assert expected["opsets"] == int(a["req_opsets"][-1]) and expected["ops"] == int(a["opset_ops"][-1])
    assert expected["ops"] == int(made.offsets[-1]) == made.tokens.size
    got = {name: getattr(made, name) for name in COUNTS}
    assert got == expected
    assert all(type(v) is int for v in got.values())
    assert {name: getattr(made._raw, name) for name in COUNTS} == expected
    assert made.requests == (120 if how.startswith("prefix") else 300)


def test_prefix_of_a_constructed_workload_is_the_constructor_on_the_first_requests() -> None:
    cluster, offsets, keys = _inputs()
    built = kvsim.Workload(cluster, offsets, keys=keys, load=0.5, seed=4)
    first = kvsim.Workload(cluster, offsets[:121], keys=keys[: offsets[120]], load=0.5, seed=4)
    prefix = built.prefix(120)
    np.testing.assert_array_equal(prefix.offsets, first.offsets)
    np.testing.assert_array_equal(prefix.tokens, first.tokens)
    for k, v in first.arrays().items():
        np.testing.assert_array_equal(prefix.arrays()[k], v, err_msg=k)
    # and a prefix of that prefix
    assert prefix.prefix(50).requests == 50


def _stub_properties(cls: str) -> dict[str, str]:
    stub = ast.parse(Path(_kvsim.__file__).with_name("_kvsim.pyi").read_text())
    (node,) = (c for c in stub.body if isinstance(c, ast.ClassDef) and c.name == cls)
    return {
        f.name: ast.unparse(f.returns) if f.returns is not None else ""
        for f in node.body
        if isinstance(f, ast.FunctionDef) and any(ast.unparse(d) == "property" for d in f.decorator_list)
    }


@pytest.mark.parametrize("cls", [_kvsim.WorkloadLayout, _kvsim.Workload])
def test_the_stub_declares_every_native_getter(cls: type) -> None:
    native = {n for n, v in vars(cls).items() if type(v).__name__ == "getset_descriptor" and not n.startswith("__")}
    declared = _stub_properties(cls.__name__)
    assert set(declared) == native
    assert {n: declared[n] for n in (*COUNTS, "nbytes")} == dict.fromkeys((*COUNTS, "nbytes"), "int")
