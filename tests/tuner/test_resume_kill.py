"""kill -9 the tuner mid-study, start it again: it continues, no finished trial lost or duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TRIALS = 12


def _finished(storage: str) -> list[Any]:
    import optuna

    from tuner.study import open_storage

    try:
        study = optuna.load_study(study_name="resume", storage=open_storage(storage))
    except KeyError:
        return []
    return [t for t in study.get_trials(deepcopy=False) if t.state.name in ("COMPLETE", "PRUNED")]


def _start(storage: str, jobs: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.tuner._runner", storage, str(TRIALS), "0.05", str(jobs)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.parametrize("jobs", [1])  # jobs=2 works too (~2x slower); test_study covers workers
def test_kill_9_and_resume(tmp_path, jobs):
    storage = str(tmp_path / "journal.log")
    proc = _start(storage, jobs)
    try:
        for _ in range(2400):  # wait (no timing assertion) until the journal shows >= 4 finished trials
            if len(_finished(storage)) >= 4 or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.2)  # let killed workers (PR_SET_PDEATHSIG) go
    before = {t.number: (t.state.name, t.values) for t in _finished(storage)}
    assert 4 <= len(before) < TRIALS
    again = _start(storage, jobs)
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0, err.decode()
    after = _finished(storage)
    numbers = [t.number for t in after]
    assert len(numbers) == len(set(numbers))
    assert TRIALS <= len(after) <= TRIALS + jobs - 1
    assert {t.number: (t.state.name, t.values) for t in after if t.number in before} == before
