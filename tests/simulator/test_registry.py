"""Every policy and selector of kvsim's registry reaches every place that lists policies: the CLI help, the
simulation layer's vocabulary, the tuner's search space (with its declared search ranges), the stock knobs of a
patched server (the coordinator section, and the patched space that searches them) and a real replay.
A policy added to the registry and missing from any of them fails here."""

from __future__ import annotations

import re
import subprocess
import sys

import kvsim
import pytest

from base.errors import BadInputError
from simulation import cassandra, resolve
from simulation.cassandra import CassandraDeployment
from simulation.policies import NO_COORDINATOR, ParamValue
from simulation.registry import NOT_TUNABLE, all_policies
from tuner.space import cassandra_space, patched_space

POLICIES = kvsim.policy_names()
SELECTORS = kvsim.replica_names()


@pytest.fixture(scope="module")
def help_text() -> str:
    out = subprocess.run([sys.executable, "-m", "tailtune", "simulate", "--help"], capture_output=True, text=True,
                         check=True, env={"COLUMNS": "400", "PATH": ""}).stdout
    return re.sub(r"\s+", " ", out.replace("│", " "))


@pytest.mark.parametrize("name", POLICIES)
def test_policy_in_cli_help(name: str, help_text: str) -> None:
    assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", help_text), name


@pytest.mark.parametrize("name", SELECTORS)
def test_selector_in_cli_help(name: str, help_text: str) -> None:
    assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", help_text), name


@pytest.mark.parametrize("name", POLICIES)
def test_policy_in_vocabulary_and_tuner_space(name: str) -> None:
    assert name in all_policies()["cassandra"]
    space = cassandra_space(None)
    if name in NOT_TUNABLE:
        assert name not in [p.policy for p in space.policies]
        return
    searched = {p.name for p in kvsim.policy_spec(name).searched()}
    assert searched <= {p.name for p in space.policy_space(name).params}


@pytest.fixture(scope="module")
def trace() -> cassandra.PreparedTrace:
    from simulation.source import WorkloadSource

    dep = CassandraDeployment(servers=8)
    return cassandra.prepare(WorkloadSource(profile="bimodal", requests=300).load(), dep, source="t")


@pytest.mark.parametrize("name", POLICIES)
def test_policy_replays_through_the_simulation_layer(name: str, trace: cassandra.PreparedTrace) -> None:
    res = cassandra.replay(trace, CassandraDeployment(servers=8), resolve(name, {}), 0)
    assert res.requests == 300 and res.p99_ms > 0


#: Two stock knobs of a patched server: the coordinator's speculative retry and the driver's executions.
KNOBS: dict[str, ParamValue] = {"speculative_retry": "MIN(5ms,99p)", "driver.speculative_execution.max_executions": 2}


@pytest.mark.parametrize("name", POLICIES)
def test_policy_takes_the_stock_knobs(name: str, trace: cassandra.PreparedTrace) -> None:
    """A queue policy replays under the coordinator section unless it refuses it (`NO_COORDINATOR`, with the
    reason); the patched space searches the knobs on every tunable policy that takes them."""
    searched = {p.policy: {q.name for q in p.params} for p in patched_space(cassandra_space(None)).policies}
    if name in NO_COORDINATOR:
        with pytest.raises(BadInputError, match="takes no coordinator knobs"):
            resolve(name, KNOBS)
        assert not set(KNOBS) & searched.get(name, set())
        return
    resolved = resolve(name, KNOBS)
    params = resolved.queue_params
    assert (params["spec_kind"], params["spec_fixed_ms"], params["se_max"]) == (4.0, 5.0, 2.0)
    assert cassandra.replay(trace, CassandraDeployment(servers=8), resolved, 0).requests == 300
    if name not in NOT_TUNABLE:
        assert set(KNOBS) <= searched[name]


@pytest.mark.parametrize("name", SELECTORS)
def test_selector_replays_through_the_simulation_layer(name: str, trace: cassandra.PreparedTrace) -> None:
    res = cassandra.replay(trace, CassandraDeployment(servers=8), resolve("fifo", {"replica": name}), 0)
    assert res.replica == name and res.requests == 300
