"""`tailtune simulate`'s deployment options take their defaults from the deployment classes: every field of
`CassandraDeployment` and `MemcachedDeployment` has the option of its name, left out it is the class's default,
its help shows that default, and the flags `cli_args` writes (what a recommendation's `reproduce` runs) set it."""

from __future__ import annotations

import re
from dataclasses import MISSING, Field, fields, replace
from typing import Any

import pytest
import typer

from simulation import CassandraDeployment, MemcachedDeployment
from tailtune.cli.commands.simulate import cassandra_deployment, memcached_deployment

DEPLOYMENTS = {"cassandra": CassandraDeployment, "memcached": MemcachedDeployment}


def _command() -> Any:
    from tailtune.cli.app import app

    return typer.main.get_command(app).commands["simulate"]  # type: ignore[attr-defined]


def _options() -> dict[str, Any]:
    return {p.name: p for p in _command().params}


def _parse(*args: str) -> dict[str, Any]:
    """`simulate`'s parsed options (the values its body reads) for `args`."""
    ctx = _command().make_context("simulate", ["--policy", "fifo", *args])
    return dict(ctx.params)


def _other(f: Field[Any]) -> Any:
    """A value of field `f` other than its default (of the field's type)."""
    d = f.default
    assert d is not MISSING, f"{f.name}: a deployment field needs a default"
    kind = str(f.type)
    if f.name == "stall_schedule":  # (server, start ms, end ms) each, on the default cluster's servers
        return ((0, 10.0, 20.5), (127, 0.0, 1e3))
    if f.name == "client_rtt_ms":  # quantiles: non-decreasing
        return (0.5, 1.0, 2.0)
    if kind.startswith("tuple"):
        return (1.0, 2.0, 0.5)
    if kind.startswith("bool"):
        return not d
    if kind.startswith("int"):
        return 3 if d is None else d + 1
    if kind.startswith("float"):
        return 0.375 if d is None else d * 2 + 0.25
    if kind.startswith("str"):
        return "other" if d is None else d + "-other"
    if f.name == "ring":  # a ring the default cluster can replay: 128 nodes of one datacenter, RF 3
        step = 2**64 // 128
        return {"partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",
                "strategy": {"class": "SimpleStrategy", "replication_factor": 3}, "local_dc": "dc1",
                "nodes": [{"address": f"10.0.0.{i}", "dc": "dc1", "rack": "r1", "tokens": [-(2**63) + i * step]}
                          for i in range(128)]}
    raise AssertionError(f"{f.name}: no test value for a field of type {kind}")


def test_left_out_every_option_is_the_deployments_default():
    options = _parse()
    assert cassandra_deployment(options) == CassandraDeployment()
    assert memcached_deployment(options) == MemcachedDeployment()


@pytest.mark.parametrize("kind", sorted(DEPLOYMENTS))
def test_every_field_has_its_option_defaulting_to_the_field(kind):
    options = _options()
    for f in fields(DEPLOYMENTS[kind]):
        assert f.name in options, f"{kind} field {f.name!r} has no `tailtune simulate` option"
        option = options[f.name]
        assert option.default is None, f"--{f.name}: restates a default; leave it None (the class's default)"
        if f.default is not None:
            shown = ("on" if f.default else "off") if isinstance(f.default, bool) else str(f.default)
            shows = re.search(rf"\(default: [^)]*(?<![\w.]){re.escape(shown)}(?![\w.])", option.help)
            assert shows, f"{f.name}: the help {option.help!r} does not show the default {shown}"
        if isinstance(f.default, bool) and not option.secondary_opts:
            assert f.default is False, f"{f.name}: a flag without --no- form cannot turn off a default of True"


@pytest.mark.parametrize("kind", sorted(DEPLOYMENTS))
def test_the_flags_of_cli_args_set_each_field(kind):
    cls = DEPLOYMENTS[kind]
    build = cassandra_deployment if kind == "cassandra" else memcached_deployment
    for f in fields(cls):
        dep = replace(cls(), **{f.name: _other(f)})
        args = dep.cli_args()
        assert args, f"{f.name}: cli_args wrote nothing for a value other than the default"
        assert build(_parse(*args)) == dep, f"{f.name}: {args} do not give {dep}"
