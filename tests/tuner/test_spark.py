"""Spark mode: one tuner worker per Spark task against the shared journal file (uses the session SparkSession).

Opt-in (`TAILTUNE_TEST_SPARK_TUNER=1`): ~90 s on the shared 2-core box, mostly Spark start-up and Python workers.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.tuner._runner import config as fake_config
from tuner.study import run_spark_workers


@pytest.mark.spark
@pytest.mark.skipif(os.environ.get("TAILTUNE_TEST_SPARK_TUNER") != "1", reason="opt-in: TAILTUNE_TEST_SPARK_TUNER=1")
def test_spark_workers_share_the_study(spark: Any, tmp_path: Any) -> None:
    cfg = fake_config(str(tmp_path / "journal.log"), trials=6, delay_s=0.0)
    out = run_spark_workers(cfg, spark, executors=2)
    fin = [t for t in out.study.get_trials(deepcopy=False) if t.state.name in ("COMPLETE", "PRUNED")]
    assert 6 <= len(fin) <= 7  # two workers may each pass the budget check once
    assert len({t.number for t in fin}) == len(fin)
    assert out.finished == len(fin)
