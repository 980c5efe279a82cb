"""The demo (`make demo`, jobs/quickstart.py) ends in a decision a newcomer can act on: what was found, how sure
(held-out evidence), what to do next."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.quickstart import decision_lines, run
from tailtune.base.console import out_console
from tailtune.base.settings import get_settings


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
