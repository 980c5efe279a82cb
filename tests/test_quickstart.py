"""The demo (`make demo`, jobs/quickstart.py) ends in a decision a newcomer can act on: what was found, how sure
(held-out evidence), what to do next."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from base.console import out_console
from base.settings import get_settings
from jobs.quickstart import decision_lines, run


@pytest.mark.slow
def test_the_demo_prints_held_out_evidence_and_a_decision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAILTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TAILTUNE_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    get_settings.cache_clear()
    with out_console.capture() as cap:
        run(requests=12000, trials=3, analyze=False)
    text = " ".join(cap.get().split())
    get_settings.cache_clear()
    assert "the decision" in text and "Found:" in text and "Next:" in text
    assert "held-out seeds" in text and "the last 20 % of the trace" in text


@pytest.mark.slow
def test_the_demo_prints_only_its_own_lines_and_names_the_log(tmp_path: Path) -> None:
    """Spark's log4j lines, the JVM's warnings, MLflow's logging and Python warnings go to the log file the demo
    names; the terminal (stdout and stderr) gets tailtune's lines only. A fresh process: its own JVM."""
    home = tmp_path / "home"
    env = {**os.environ, "TAILTUNE_HOME": str(home), "COLUMNS": "400",  # no line folded inside a path
           "TAILTUNE_MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    res = subprocess.run([sys.executable, "-m", "jobs.quickstart", "--requests", "3000", "--trials", "3"],
                         cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True,
                         timeout=1200, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    (tmp_path / "terminal.txt").write_text(res.stdout + "\n--- stderr ---\n" + res.stderr)
    foreign = [line for line in (res.stdout + res.stderr).splitlines()
               if re.search(r"WARN|log4j|Warning\b|warnings.warn|INFO|SLF4J|at org\.|Traceback", line)]
    assert foreign == []
    log = home / "logs" / "demo.log"
    said = " ".join(res.stdout.split())
    assert f"Messages from Spark and other libraries go to {log}" in said
    assert "3/4 analyze (Spark)" in said and "skipped" not in said  # the analysis ran
    assert "Every value is 1,000 B" in said and "4/4 tune" in said and "the decision" in said
    assert re.search(r"log4j|WARN", log.read_text())  # Spark's own lines went to the log


def test_decision_lines_say_what_to_do() -> None:
    conf = {"metric": "p99", "seeds": [100000, 100001, 100002], "holdout": {"fraction": 0.2},
            "improvement_pct": 47.0, "interval_pct": [41.0, 52.0], "p_value": 0.0001, "min_detectable_pct": 8.0}
    rec = {"verdict": "recommend", "reason": "…", "confirmation": conf, "objective": "p99"}
    lines = decision_lines(rec)
    assert lines[0] == ("Found: stock settings that cut p99 by 47 % (95 % interval 41–52 %) against Cassandra's "
                        "defaults.")
    assert "3 held-out seeds and the last 20 % of the trace" in lines[1] and lines[2].startswith("Next: apply")
    keep = {"verdict": "keep current", "reason": "p99 -3.0 % [...]: not significant (p ≥ 0.05)",
            "confirmation": {**conf, "improvement_pct": 3.0}, "alternatives": {
                "patched": {"verdict": "recommend", "policy": "heron", "reason": "p99 -60 %"}}}
    lines = decision_lines(keep)
    assert lines[0].startswith("Found: nothing that beats") and "8 % or more would have been detected" in lines[1]
    assert lines[2].startswith("Next: keep your settings") and lines[3].startswith("A patched server")
