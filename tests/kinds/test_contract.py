"""The contract of a deployment kind's operations (`control.kind.DeploymentKind`), run over every registered kind
and the tests' third kind, `filekv` (`tests/kinds/third_kind_ops.py`, written against the contract alone): what
`control.kinds.operations` hands out, the connection and body rules, the model built from defaults, the
publisher against the kind's real target (the session's Cassandra and memcached, a temporary directory for
`filekv`): publish, read back, fence a deleted same-name deployment's entry; and the typed refusal of an optional
capability a kind does not have. The control plane's dispatchers take the third kind with no edit of theirs.

A new kind runs through every test here once it is registered; its real target is one row of `LIVE`.
"""

from __future__ import annotations

import importlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from base.settings import Settings
from control.discovery import discover, merge_model
from control.errors import Invalid
from control.jobspec import check_capture_kind
from control.kind import CAPABILITIES, DeploymentKind, Target, Unsupported, kind_class
from control.kinds import operations, supports
from control.model import build_model, shown_topology
from control.publishers import Known
from control.replay_trace import ReplayDriver
from simulation.kinds import kind_names, model_kind
from tests.kinds.third_kind_model import THIRD, register_third
from tests.kinds.third_kind_ops import CLUSTER_FILE

KINDS = (*kind_names(), THIRD.name)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each kind's name, the third one registered for the test."""
    if request.param == THIRD.name:
        with register_third():
            yield request.param
    else:
        yield request.param


def _cassandra(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    node = request.getfixturevalue("cassandra_node")
    return {"contact_points": [node.host], "port": node.port, "keyspace": "tailtune_contract"}


def _memcached(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return {"servers": [request.getfixturevalue("memcached_node").address]}


def _filekv(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return {"path": str(tmp_path)}


#: kind → the connection of its real target (started on first use).
LIVE: dict[str, Callable[[pytest.FixtureRequest, Path], dict[str, Any]]] = {
    "cassandra": _cassandra,
    "memcached": _memcached,
    THIRD.name: _filekv,
}


def test_operations_are_the_kinds_own(kind: str) -> None:
    ops = operations(kind)
    assert isinstance(ops, DeploymentKind) and ops.name == kind
    assert operations(kind) is ops and type(ops) is kind_class(kind)
    assert ops.model_inputs and len(set(ops.model_inputs)) == len(ops.model_inputs)
    assert ops.body_fields <= {"server", "driver", "tables"}
    driver = ops.replay_driver(Target("contract", {}))  # no side effects until its run
    assert driver is None or isinstance(driver, ReplayDriver)


def test_an_unknown_kind_is_refused_naming_the_field() -> None:
    from base.errors import BadInputError

    with pytest.raises(BadInputError, match="unknown deployment kind 'nosuch'") as err:
        operations("nosuch")
    assert err.value.problems[0].field == "kind"
    assert not supports("nosuch", "capture")


def test_an_empty_connection_is_refused_naming_the_field(kind: str) -> None:
    with pytest.raises(Invalid) as err:
        operations(kind).check_connection({})
    assert err.value.field is not None and err.value.field.startswith("connection.")
    assert err.value.status_code == 422


def test_every_kind_takes_the_bodys_defaults(kind: str) -> None:
    ops = operations(kind)
    for creating in (True, False):
        ops.check_body({"tables": [], "server": "stock", "driver": "java4"}, creating=creating)
    assert ops.endpoints({}) == []


def test_the_model_from_defaults_is_the_kinds_deployment(kind: str) -> None:
    """Built with nothing declared, discovered or calibrated: every input recorded (from its default), in the
    kind's order, and the options are the kind's model deployment class's."""
    ops = operations(kind)
    module, _, attr = model_kind(kind).deployment.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    for timestamps in (False, True):
        m = build_model(kind, {}, {}, {}, timestamps=timestamps)
        assert m.kind == kind and isinstance(cls.from_dict(m.options), cls)
        assert list(m.sources) == list(ops.model_inputs) == list(m.inputs)
    shown, sources = shown_topology(kind, {}, {}, {})
    assert shown and all(key.startswith("topology.") for key in sources)


@pytest.mark.slow
def test_the_publisher_publishes_reads_back_and_fences(kind: str, request: pytest.FixtureRequest,
                                                        tmp_path: Path, settings: Settings) -> None:
    """On the kind's real target: a version published reads back identical; a deleted deployment's entry under the
    same name is replaced by the next deployment of that name (whatever its version); ping answers."""
    if kind not in LIVE:
        pytest.fail(f"deployment kind {kind!r} has no real target in LIVE (tests/kinds/test_contract.py)")
    ops = operations(kind)
    target = Target(f"contract-{uuid.uuid4().hex[:8]}", LIVE[kind](request, tmp_path))
    old = {"policy": "fifo", "params": {}}
    new = {"policy": "fifo", "params": {}, "note": "the next deployment of the name"}
    first = ops.publisher(target, settings)
    first.ping()
    gone = Known(1, {1: old, 2: old}, frozenset({1}), identity="1.aa", live_identities=frozenset({"1.aa"}))
    out = first.publish(2, old, known=gone)
    assert (out.version, out.advanced, out.current_version) == (2, True, 2)
    assert first.read_current() == (2, old)
    again = first.publish(2, old, known=gone)
    assert (again.advanced, again.current_version) == (False, 2)
    # deployment 1 was deleted; deployment 2 of the same name publishes its first version
    second = ops.publisher(target, settings)
    fenced = second.publish(1, new, known=Known(2, {1: new}, frozenset({2}), identity="2.bb",
                                                live_identities=frozenset({"2.bb"})))
    assert fenced.current_version == 1
    assert second.read_current() == (1, new)


def test_an_optional_capability_a_kind_lacks_is_refused_naming_it(kind: str, tmp_path: Path,
                                                                   settings: Settings) -> None:
    ops = operations(kind)
    lacking = [cap for cap, (flag, _) in CAPABILITIES.items() if not getattr(ops, flag)]
    if not lacking:
        pytest.skip(f"{kind} has every optional capability")
    assert lacking == ["capture"]  # the one optional capability there is
    with pytest.raises(Unsupported) as err:
        ops.capture(Target("contract", {}), tmp_path / "trace", duration_s=1.0, stop=threading.Event(),
                    settings=settings)
    assert err.value.kind == kind and f"not a {kind} one" in err.value.detail and err.value.field == "capture"
    assert not (tmp_path / "trace").exists()
    with pytest.raises(Unsupported, match=f"not a {kind} one"):
        check_capture_kind({"duration_s": 1}, kind)


def test_captures_are_refused_with_todays_message() -> None:
    with pytest.raises(Invalid) as err:
        check_capture_kind({"duration_s": 1}, "cassandra")
    assert (err.value.detail, err.value.field) == ("only a memcached deployment can be captured, not a cassandra one",
                                                    "capture")
    with pytest.raises(Invalid) as unknown:
        check_capture_kind({"duration_s": 1}, "unknown")
    assert unknown.value.detail == "only a memcached deployment can be captured, not a unknown one"
    check_capture_kind({"duration_s": 1}, "memcached")
    check_capture_kind(None, "cassandra")


def test_the_control_planes_dispatchers_take_the_third_kind(tmp_path: Path, settings: Settings) -> None:
    """Discovery, the model it feeds and the answer's topology reach `filekv` through the registry alone."""
    (tmp_path / CLUSTER_FILE).write_text(json.dumps({"servers": 5, "worker_threads": 2}))
    with register_third():
        found = discover(THIRD.name, {"path": str(tmp_path)}, [], settings)
        model = merge_model({}, found)
        m = build_model(THIRD.name, {}, {"path": str(tmp_path)}, model, timestamps=False)
        assert m.options == {"servers": 5, "worker_threads": 2}
        assert m.sources == {"servers": "discovered", "worker_threads": "discovered", "arrivals": "default"}
        assert shown_topology(THIRD.name, {}, {}, model) == ({"servers": 5}, {"topology.servers": "discovered"})
        (tmp_path / CLUSTER_FILE).write_text(json.dumps({"servers": 0}))
        with pytest.raises(Exception, match="field 'servers'"):
            discover(THIRD.name, {"path": str(tmp_path)}, [], settings)
    with pytest.raises(Exception, match="unknown deployment kind 'filekv'"):
        operations(THIRD.name)
