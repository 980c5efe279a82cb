"""`validation/sampling.py` on a tiny trace: one full study, one sampled study, the comparison row and the table;
the cache of full studies; a workload with profile options."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

pytest.importorskip("kvsim")


def test_sampling_validation_compares_against_the_full_replay(tmp_path: Path, tailtune_home: Path) -> None:
    from validation import sampling

    args = argparse.Namespace(requests=3000, trials=3, seeds=1, jobs=1, load=0.5, strata=4, trace_seed=1,
                              fractions=[0.5], sample_seeds=[0], server="stock", cache=tmp_path / "cache")  # fmt: skip
    rows = sampling.run_workload("soundcloud", args, tmp_path)
    assert [r["fraction"] for r in rows] == [1.0, 0.5]
    row = rows[1]
    assert 0.4 < row["replayed_fraction"] < 0.6 and row["load_factor"] > 0
    assert set(row) >= {"same_policy", "same_winner", "p50_err_pct", "p99_err_pct", "regret_pct", "peak_rejected",
                        "peak_changed", "regret_unchecked_pct", "current_storms"}  # fmt: skip
    assert rows[0]["winner"].startswith("stock")  # the stock server's space
    if row["same_winner"]:
        assert row["regret_pct"] == 0.0
    if not row["peak_changed"]:
        assert row["regret_unchecked_pct"] == row["regret_pct"]
    table = sampling._table(rows)
    assert table.count("\n| soundcloud |") == 2
    # a second run reads the full study from the cache: the same full row, its wall included
    (cached,) = list((tmp_path / "cache").glob("*.json"))
    again = sampling.run_workload("soundcloud", args, tmp_path)
    assert again[0] == rows[0] and cached.stat().st_size > 0


def test_a_workload_takes_profile_options() -> None:
    from ingest.profiles.diurnal import DiurnalOptions
    from validation.sampling import _profile

    prof = _profile("diurnal:bursts=2:burst_s=40")
    assert prof.name == "diurnal" and isinstance(prof.options, DiurnalOptions)
    assert (prof.options.bursts, prof.options.burst_s) == (2.0, 40.0)
