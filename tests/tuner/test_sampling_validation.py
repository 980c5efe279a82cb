"""`validation/sampling.py` on a tiny trace: one full study, one sampled study, the comparison row and the table."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

pytest.importorskip("kvsim")


def test_sampling_validation_compares_against_the_full_replay(tmp_path: Path, tailtune_home: Path) -> None:
    from validation import sampling

    args = argparse.Namespace(requests=3000, trials=3, seeds=1, jobs=1, load=0.5, strata=4, trace_seed=1,
                              fractions=[0.5], sample_seeds=[0])  # fmt: skip
    rows = sampling.run_workload("soundcloud", args, tmp_path)
    assert [r["fraction"] for r in rows] == [1.0, 0.5]
    row = rows[1]
    assert 0.4 < row["replayed_fraction"] < 0.6 and row["load_factor"] > 0
    assert set(row) >= {"same_policy", "same_winner", "p50_err_pct", "p99_err_pct", "regret_pct"}
    if row["same_winner"]:
        assert row["regret_pct"] == 0.0
    table = sampling._table(rows)
    assert table.count("\n| soundcloud |") == 2
