"""A third deployment kind, registered from the tests (`third_kind_model.THIRD`, `filekv`), reaches every model-side
caller through the registry with no other edit: the policy listing, the config checks, `tailtune simulate`, the
tuner's space, evaluator, references and rendering, `tailtune tune --store`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from base.errors import BadInputError
from simulation.kinds import find_kind, kind_names, kind_of_policy, model_kind
from tests.kinds.third_kind_model import POLICIES, THIRD, FileKvDeployment, FileKvEvaluator, register_third

pytest.importorskip("kvsim")

PROFILE = ("--profile", "mice-elephant", "--requests", "1500")


@pytest.fixture
def third() -> Iterator[None]:
    with register_third():
        yield


def _figures(stdout: str) -> dict[str, Any]:
    """A replay's JSON without its wall-clock timing."""
    return {k: v for k, v in json.loads(stdout).items() if k not in ("sim_wall_s", "events_per_s")}


def _problem(exc: pytest.ExceptionInfo[BadInputError]) -> tuple[str, str | None]:
    p = exc.value.problems[0]
    return p.problem, p.field


def test_registered_for_the_block_only() -> None:
    assert "filekv" not in kind_names()
    with register_third() as kind:
        assert kind is THIRD and kind_names()[-1] == "filekv" and model_kind("filekv") is THIRD
        with pytest.raises(ValueError, match="already registered"), register_third():
            pass
        assert find_kind("filekv") is THIRD
    assert find_kind("filekv") is None
    with pytest.raises(BadInputError) as exc:
        model_kind("filekv", field="store")
    assert _problem(exc) == ("unknown deployment kind 'filekv' (one of cassandra, memcached)", "store")


@pytest.mark.usefixtures("third")
def test_its_deployment_and_policies_through_the_registry() -> None:
    from simulation.registry import all_policies

    assert THIRD.deployment_class() is FileKvDeployment
    assert all_policies()["filekv"] == POLICIES
    assert list(all_policies())[:2] == ["cassandra", "memcached"]
    assert kind_of_policy("filekv-chisel") is THIRD and kind_of_policy("chisel") is model_kind("memcached")
    assert kind_of_policy("fifo") is model_kind("cassandra") and kind_of_policy("no-such") is None


@pytest.mark.usefixtures("third")
def test_its_configs_are_checked_by_its_own_checks() -> None:
    from simulation.config_check import check_config, check_params

    check_params("filekv", "filekv-chisel", {"merge": 2, "split_keys": 8})
    with pytest.raises(BadInputError) as exc:
        check_params("filekv", "filekv-chisel", {"merge": 0.5})
    assert exc.value.problems[0].field == "merge"
    with pytest.raises(BadInputError) as exc:
        check_params("filekv", "chisel", {})
    assert _problem(exc) == ("unknown filekv policy 'chisel' (one of filekv-batching, filekv-chisel)", "policy")
    config = {"policy": "filekv-batching", "params": {}, "target": {"json": {"filekv": {}}}}
    assert check_config(config, "filekv", max_depth=8) is config
    with pytest.raises(BadInputError) as exc:
        check_config({"policy": "batching"}, "filekv", max_depth=8)
    assert _problem(exc) == ("unknown filekv policy 'batching' (one of filekv-batching, filekv-chisel)",
                             "config.policy")
    with pytest.raises(BadInputError) as exc:
        check_config({"policy": "filekv-chisel", "params": {"merge": 0}}, "filekv", max_depth=8)
    assert exc.value.problems[0].field == "config.params.merge"


def test_unregistered_its_configs_are_refused() -> None:
    from simulation.config_check import check_config, check_params

    with pytest.raises(BadInputError) as exc:
        check_params("filekv", "filekv-chisel", {})
    assert _problem(exc) == ("unknown deployment kind 'filekv'", "kind")
    with pytest.raises(BadInputError) as exc:
        check_config({"policy": "filekv-chisel"}, "filekv", max_depth=8)
    assert _problem(exc) == ("unknown deployment kind 'filekv'", "kind")


@pytest.mark.usefixtures("third")
def test_the_tuner_finds_its_space_evaluator_and_references() -> None:
    from tuner.kinds import render, space_for, tuner_kind

    space = space_for("filekv", {"multiget_size": {"p50": 4, "p99": 40, "max": 60}})
    assert space.deployment == "filekv" and [p.policy for p in space.policies] == list(POLICIES)
    assert tuner_kind("filekv").baseline.policy == "filekv-batching"
    assert render("filekv", tuner_kind("filekv").paper_default) == {"json": {"filekv": {"policy": "filekv-chisel"}}}
    from tuner.evaluators import EvaluatorSpec, build_evaluator

    ev = build_evaluator(EvaluatorSpec(THIRD.evaluator, {"source": {"profile": "mice-elephant", "requests": 300}}))
    assert isinstance(ev, FileKvEvaluator) and ev.policies() == POLICIES


@pytest.mark.usefixtures("third")
def test_a_tune_of_it_runs_on_its_evaluator() -> None:
    from simulation.source import WorkloadSource
    from tuner.tune import TuneRequest, run_tune

    req = TuneRequest(source=WorkloadSource(profile="mice-elephant", requests=1500), deployment="filekv", trials=4,
                      seeds=2, storage="memory", mlflow=False, plots=False)
    rec = run_tune(req)
    assert rec.deployment == "filekv" and rec.tuned_for["kind"] == "filekv"
    assert rec.baseline["policy"] == "filekv-batching" and rec.paper_default["policy"] == "filekv-chisel"
    assert rec.policy in POLICIES and rec.render == {"json": {"filekv": {"policy": rec.policy, **rec.params}}}
    assert rec.server is None and rec.alternatives is None  # a single build: no server, no alternative study
    with pytest.raises(BadInputError) as exc:
        run_tune(TuneRequest(source=req.source, deployment="filekv", server="stock", storage="memory",
                             mlflow=False, plots=False))
    assert _problem(exc) == ("--server is a Cassandra setting (stock or rein-patched)", "server")


@pytest.mark.usefixtures("third")
def test_tailtune_simulate_replays_it(cli: Any) -> None:
    """Its policy names the kind; its own run replays its deployment class: the memcached engine's figures."""
    r = cli("simulate", *PROFILE, "--policy", "filekv-chisel", "--servers", "3", "--json")
    assert r.exit_code == 0, r.stderr
    mine = _figures(r.stdout)
    r = cli("simulate", *PROFILE, "--policy", "chisel", "--servers", "3", "--service-cv", "0.5", "--json")
    assert r.exit_code == 0, r.stderr
    assert mine == _figures(r.stdout)
    r = cli("simulate", *PROFILE, "--policy", "filekv-batching", "--param", "nope=1")
    assert r.exit_code != 0 and "nope" in r.stderr


@pytest.mark.usefixtures("third")
def test_tailtune_tune_takes_it_as_a_store(cli: Any) -> None:
    r = cli("tune", *PROFILE, "--store", "filekv", "--trials", "3", "--seeds", "1", "--load", "0.5", "--no-mlflow",
            "--storage", "memory", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["deployment"] == "filekv" and doc["baseline"]["policy"] == "filekv-batching"
    assert "load" not in doc["tuned_for"]  # no such field in its model: --load is not passed to it
    r = cli("tune", *PROFILE, "--store", "filekv", "--use-timestamps", "--no-mlflow")
    assert r.exit_code != 0 and "only the cassandra store replays trace timestamps" in r.stderr
