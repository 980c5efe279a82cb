"""The CLI's `simulate --json` and `tune --json` outputs stay identical to the recorded golden outputs.

New keys are allowed (names are contracts: keep them, add to them); every recorded key must keep its value
exactly (floats compared bit for bit through their JSON text).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.golden.cases import CASES, DATA, run_cases


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case's output, from one process that runs them all (see `run_cases`)."""
    return run_cases(sorted(CASES), tmp_path_factory.mktemp("golden"))


def _missing_or_changed(expected: Any, got: Any, path: str = "$") -> list[str]:
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected an object, got {got!r}"]
        out: list[str] = []
        for k, v in expected.items():
            if k not in got:
                out.append(f"{path}.{k}: missing")
            else:
                out.extend(_missing_or_changed(v, got[k], f"{path}.{k}"))
        return out
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return [f"{path}: expected {expected!r}, got {got!r}"]
        return [d for i, (e, g) in enumerate(zip(expected, got, strict=True)) for d in
                _missing_or_changed(e, g, f"{path}[{i}]")]
    if json.dumps(expected) != json.dumps(got):
        return [f"{path}: expected {expected!r}, got {got!r}"]
    return []


@pytest.mark.xdist_group("golden")
@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, outputs: dict[str, Any]) -> None:
    expected = json.loads((DATA / f"{name}.json").read_text())
    got = outputs[name]
    diffs = _missing_or_changed(expected, got)
    assert not diffs, f"{name} differs from tests/golden/data/{name}.json:\n" + "\n".join(diffs[:20])
