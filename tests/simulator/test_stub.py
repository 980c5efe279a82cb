"""The native module's stub (`simulator/py/python/kvsim/_kvsim.pyi`) is the one `simulator/py/stubgen.py` generates
from the built module, and the shapes it declares for the dicts the binding hands out have the keys a replay's
dicts have."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import kvsim
import kvsim.memcached
import numpy as np
import pytest
from kvsim import _kvsim

ROOT = Path(__file__).resolve().parents[2]


def _stubgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kvsim_stubgen", ROOT / "simulator" / "py" / "stubgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kvsim_stubgen", module)
    spec.loader.exec_module(module)
    return module


STUBGEN = _stubgen()


def test_the_committed_stub_is_the_generated_one() -> None:
    assert STUBGEN.STUB.read_text() == STUBGEN.generate(_kvsim), (
        "the stub is not the built module's: rebuild the module and run python simulator/py/stubgen.py"
    )
    assert STUBGEN.main(["--check"]) == 0


def test_a_binding_name_without_a_type_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(STUBGEN.RETURNS, "model_version")
    with pytest.raises(STUBGEN.StubError, match="model_version: its return type is not declared"):
        STUBGEN.generate(_kvsim)
    monkeypatch.setitem(STUBGEN.RETURNS, "model_version", "int")
    monkeypatch.setitem(STUBGEN.PARAMS, "no_such_function.x", "int")
    with pytest.raises(STUBGEN.StubError, match=r"no_such_function\.x"):
        STUBGEN.generate(_kvsim)


def _typed_dicts() -> dict[str, set[str]]:
    """Each TypedDict of the stub → its keys (with its bases')."""
    tree = ast.parse(STUBGEN.STUB.read_text())
    own: dict[str, set[str]] = {}
    bases: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            own[node.name] = {s.target.id for s in node.body
                              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]

    def keys(name: str) -> set[str]:
        return own[name].union(*(keys(b) for b in bases[name] if b in own))

    return {n: keys(n) for n in own if "TypedDict" in bases[n] or any(b in own for b in bases[n])}


TYPED = _typed_dicts()


def _check(shape: str, value: Mapping[str, Any]) -> None:
    assert set(value) == TYPED[shape], shape


def _spy(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[Any]:
    seen: list[Any] = []
    native: Callable[..., Any] = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(out := native(*args, **kwargs))
        return out

    monkeypatch.setattr(owner, name, spy)
    return seen


def test_the_records_have_the_keys_the_stub_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = kvsim.Cluster(servers=8, slots=2, replication=3, clients=4)
    offsets = np.arange(0, 401, 4, dtype=np.int64)
    keys = np.arange(400, dtype=np.uint64)
    wl = kvsim.Workload(cluster, offsets, keys=keys, load=0.5, seed=1)
    _check("WorkloadArrays", wl._raw.arrays())
    _check("LayoutArrays", _kvsim.WorkloadLayout(cluster._raw, offsets, kvsim.tokens_for_keys(keys)).arrays())
    seen = _spy(monkeypatch, _kvsim, "replay")
    kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", replica="c3", record_ops=True))
    (raw,) = seen
    _check("RawResult", raw)
    for key, shape in (("held", "RawHeld"), ("copies", "RawCopies"), ("writes", "RawWrites"),
                       ("timeouts", "RawTimeouts"), ("records", "RawRecords")):
        _check(shape, raw[key])

    seen = _spy(monkeypatch, kvsim.memcached, "replay_memcached_raw")
    kvsim.memcached.replay([2, 5, 1, 8], [0.0, 10.0, 20.0, 30.0], kvsim.MemcachedConfig(policy="batching"))
    (mc,) = seen
    _check("RawMemcachedResult", mc)


def test_the_cluster_defaults_are_the_cores() -> None:
    d = kvsim.cluster_defaults()
    c = kvsim.Cluster()
    assert (c.servers, c.slots, c.replication, c.vnodes, c.service_rate, c.clients) == (
        d.servers, d.slots, d.replication, d.vnodes, d.service_rate, d.clients)
    assert c.net_latency_us * 1000.0 == d.net_latency_ns


def test_the_native_config_protocol_is_what_replay_builds() -> None:
    from kvsim.replay import _NativeConfig

    tree = ast.parse(STUBGEN.STUB.read_text())
    (proto,) = (c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "NativeConfig")
    declared = [f.name for f in proto.body if isinstance(f, ast.FunctionDef)]
    assert declared == list(_NativeConfig.__dataclass_fields__)
