"""The one check of configs and parameters (`simulation.config_check`): the tree walk survives any
depth, every stock knob has a valid range and is refused outside it, the registry's ranges reach every
parameter, a name a policy has itself is its own, and the memcached check agrees with the client's own parser."""

from __future__ import annotations

import itertools
import math
from typing import Any

import kvsim
import pytest
from tailtune_client.config import ConfigError, parse_config

from base.errors import BadInputError
from simulation import resolve
from simulation.config_check import check_config, check_params, check_tree
from simulation.stock_knobs import JAVA_INT_MAX, STOCK_KNOBS, StockKnob


def _field(exc: pytest.ExceptionInfo[BadInputError]) -> str | None:
    return exc.value.problems[0].field


def test_the_tree_walk_takes_any_depth_without_recursion() -> None:
    deep: Any = []
    for _ in range(200_000):  # far past the interpreter's recursion limit
        deep = [deep]
    with pytest.raises(BadInputError, match=r"nested deeper than 32 levels \(config_max_depth\)") as exc:
        check_tree({"target": deep}, max_depth=32)
    assert _field(exc) == "config.target" + "[0]" * 31
    check_tree({"target": {"a": [1, 2.5, "x", None, True]}}, max_depth=3)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(BadInputError, match="NaN and Infinity are not JSON") as exc:
            check_tree({"params": {"k": 4}, "target": {"l": [0, {"x": bad}]}}, max_depth=32)
        assert _field(exc) == "config.target.l[1].x"


@pytest.mark.parametrize("kn", STOCK_KNOBS, ids=[k.name for k in STOCK_KNOBS])
def test_every_stock_knob_has_a_valid_range_and_is_refused_outside_it(kn: StockKnob) -> None:
    driver = kn.drivers[0]
    params: dict[str, Any] = {"driver": driver}
    if kn.only_with:
        params.update(dict(kn.only_with))
    check_params("cassandra", "stock", {**params, kn.name: kn.default_for(driver)}, config=True)
    if kn.kind in ("int", "float"):
        # integers are Java ints; a float without an upper bound in Cassandra meets the simulator's
        assert kn.valid_low is not None and (kn.valid_high is not None or kn.kind == "float")
        high = kn.valid_high if kn.valid_high is not None else 1e300
        assert high <= JAVA_INT_MAX or kn.kind == "float"
        bad: list[Any] = [kn.valid_low - 1, high + 1, 2**63, 10**400, "1", True, math.nan, math.inf]
        if kn.kind == "int":
            bad.append(kn.valid_low + 0.5)
    elif kn.kind == "bool":
        bad = [2, -1, 0.5, "1", True, math.nan]
    elif kn.kind == "choice":
        bad = ["sideways", 1, None]
    else:
        bad = ["101p", 5, "MIN(99p,95p)"]
    for value in bad:
        with pytest.raises(BadInputError) as exc:
            check_params("cassandra", "stock", {**params, kn.name: value}, config=True)
        assert _field(exc) == f"config.params.{kn.name}", (value, exc.value)


def test_the_simulators_range_applies_after_the_knobs_row() -> None:
    knob = "driver.speculative_execution.max_executions"
    check_params("cassandra", "stock", {knob: 16})
    with pytest.raises(BadInputError, match=r"simulator's range \[1, 16\]") as exc:
        check_params("cassandra", "stock", {knob: 17})  # a Java int, beyond what the core models
    assert (exc.value.problems[0].file, _field(exc)) == ("--param", knob)
    with pytest.raises(BadInputError, match=r"must be an integer in \[1, 2147483647\]"):
        check_params("cassandra", "rein", {knob: 2**31})


def test_the_coordinator_section_is_in_the_registry() -> None:
    spec = kvsim.coordinator_spec()
    for policy in kvsim.policy_names():
        defaults = kvsim.coordinator_defaults(policy)
        assert not defaults or set(defaults) == {p.name for p in spec.params}, policy
    assert spec.param("se_max").high == 16 and spec.param("read_timeout_ms").low == 1


def test_a_name_the_policy_has_itself_is_its_own() -> None:
    # `window` is also the coordinator section's (the latency histogram's samples)
    assert resolve("speculative", {"window": 50}).queue_params["window"] == 50
    assert resolve("ds", {"window": 50}).replica_params == {"window": 50}
    assert resolve("replica", {"replica": "ds", "window": 50}).replica_params == {"window": 50}
    assert resolve("rein", {"window": 50}).queue_params["window"] == 50  # rein has none: the coordinator's
    with pytest.raises(BadInputError, match=r"must be a number in \[1, 100000\]") as exc:
        check_params("cassandra", "ds", {"window": 200_000})
    assert _field(exc) == "window"
    with pytest.raises(BadInputError, match=r"must be a number in \[1, 10000000\]"):
        check_params("cassandra", "rein", {"window": 0})


def test_cli_values_are_named_by_their_option() -> None:
    with pytest.raises(BadInputError) as exc:
        check_params("cassandra", "fifo", {}, replica_params={"b": 11.0})  # c3's b is in [0, 10]
    # fifo reads replicas round-robin: resolve names the unknown selector parameter
    assert _field(exc) == "b"
    with pytest.raises(BadInputError, match=r"must be a finite number in \[0, 10\], got 11") as exc:
        check_params("cassandra", "fifo", {"replica": "c3"}, replica_params={"b": 11.0})
    assert (exc.value.problems[0].file, _field(exc)) == ("--replica-param", "b")
    with pytest.raises(BadInputError, match=r"must be an integer in \[1, 4294967295\], got 0") as exc:
        check_params("memcached", "chisel", {"merge": 0.0})
    assert (exc.value.problems[0].file, _field(exc)) == ("--param", "merge")
    check_params("memcached", "chisel", {"split_chunks": 4.0, "merge": 2.0})  # the simulator has split_chunks


# ----------------------------------------------------------------------------- the memcached client's parser
_VALUES: list[Any] = [None, 0, 1, 2, 2.0, 2.5, -1, "3", True, 2**32, 2**63]
_KEYS = ("elephant_threshold", "merge", "split_keys")


def _variants() -> list[dict[str, Any]]:
    """Configs whose client block differs from a valid one in one key (each value of `_VALUES`, None = absent),
    rendered in the target or read from the params, plus modes."""
    good = {"elephant_threshold": 50, "merge": 2, "split_keys": 8}
    out: list[dict[str, Any]] = []
    for key, value, rendered in itertools.product(_KEYS, _VALUES, (True, False)):
        block = {k: v for k, v in {**good, key: value}.items() if v is not None}
        if rendered:
            out.append({"policy": "chisel", "params": dict(good),
                        "target": {"json": {"memcached_client": {"mode": "chisel", **block}}}})
        else:
            out.append({"policy": "chisel", "params": block})
    for mode in ("batching", "chisel", "lifo", None, 3):
        out.append({"policy": "batching", "params": {}, "target": {"json": {"memcached_client": {"mode": mode}}}})
    out.append({"policy": "chisel", "params": {"split_chunks": 4, "merge": 2, "elephant_threshold": 5}})
    return out


@pytest.mark.parametrize("config", _variants())
def test_the_memcached_check_refuses_what_the_client_refuses(config: dict[str, Any]) -> None:
    try:
        parse_config(config)
        client_ok = True
    except ConfigError:
        client_ok = False
    try:
        check_config(config, "memcached", max_depth=32)
        server_ok = True
    except BadInputError as exc:
        server_ok = False
        field = exc.problems[0].field or ""
        assert field.startswith(("config.target.json.memcached_client", "config.params", "config.policy")), field
    assert client_ok or not server_ok, config  # never stored when the client would refuse it
    if client_ok and not server_ok:  # stricter only where the simulator is: its range ends at 2^32 - 1
        assert any(v in (2**32, 2**63) for v in _block_values(config)), config


def _block_values(config: dict[str, Any]) -> list[Any]:
    block = config.get("target", {}).get("json", {}).get("memcached_client") or config["params"]
    return list(block.values())
