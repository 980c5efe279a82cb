"""The job kinds the worker runs, registered explicitly: `default_handlers()` (and `default_finalizers()`, what
brings a kind's rows to an end state when its job ends without success) are injected into `Worker`."""

from __future__ import annotations

import time
from typing import Any

from control.queue import SELFTEST, SELFTEST_OFF
from jobs import calibrate, discover, nightly, replay, verify
from jobs.context import Handler, JobContext, JobFailed
from jobs.worker import Finalizer

__all__ = ["default_finalizers", "default_handlers"]


def _selftest(ctx: JobContext) -> dict[str, Any]:
    """A job of N sleeping steps that appends to a marker file: for operators' smoke tests and the crash
    tests. It fails at once where `selftest_jobs` is off (production), as `enqueue` refuses it there.
    """
    if not ctx.settings.selftest_jobs:
        raise JobFailed(SELFTEST_OFF)
    n, pause = int(ctx.payload.get("steps", 3)), float(ctx.payload.get("sleep_s", 0.1))
    marker = ctx.payload.get("marker")
    if ctx.attempt <= int(ctx.payload.get("fail_attempts", 0)):
        raise RuntimeError(f"selftest: attempt {ctx.attempt} fails on purpose")

    def one(i: int) -> dict[str, Any]:
        if marker:
            with open(marker, "a") as fh:
                fh.write(f"start {i} attempt {ctx.attempt}\n")
        time.sleep(pause)
        if marker:
            with open(marker, "a") as fh:
                fh.write(f"done {i}\n")
        return {"i": i}

    for i in range(n):
        ctx.step(f"step-{i}", lambda i=i: one(i))  # type: ignore[misc]
    if ctx.payload.get("wait_for_stop"):  # a long job (for tests of cancel and time budgets): until stopped
        ctx.step("wait", lambda: _wait_for_stop(ctx))
    return {"steps": n}


def _wait_for_stop(ctx: JobContext) -> dict[str, Any]:
    while not ctx.stopping.wait(0.05):
        pass
    ctx.check_cancel()
    return {}


def default_handlers() -> dict[str, Handler]:
    """Every job kind of `control.queue.JOB_KINDS` and its handler."""
    return {
        "ingest": nightly.run_ingest,
        "analyze": nightly.run_analyze,
        "nightly": nightly.run_nightly,
        "publish": nightly.run_publish,
        "verify": verify.run_verify,
        SELFTEST: _selftest,
        "discover": discover.run_discover,
        "calibrate": calibrate.run_calibrate,
        "replay": replay.run_replay_job,
    }


def default_finalizers() -> dict[str, Finalizer]:
    """Job kinds whose rows need an end state when their job fails, is cancelled or is given up."""
    return {"ingest": nightly.finalize_ingest, "analyze": nightly.finalize_analyze}
