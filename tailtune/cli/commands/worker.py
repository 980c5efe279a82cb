"""`tailtune worker`: run jobs from the metadata DB queue and fire cron schedules until stopped."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["register"]


def worker(
    max_jobs: Annotated[int | None, typer.Option("--max-jobs", help="Exit after this many jobs.")] = None,
    no_scheduler: Annotated[bool, typer.Option("--no-scheduler", help="Do not fire cron schedules.")] = False,
    worker_id: Annotated[str | None, typer.Option("--id", help="Worker id (default: host-pid-random).")] = None,
) -> None:
    """Claim jobs with a lease, heartbeat, retry with backoff; SIGTERM/Ctrl-C stops after the current job."""
    import logging
    import signal
    import threading

    from base.settings import get_settings
    from control.db import database_for
    from control.redact import install_log_redaction
    from control.scratch import claim_scratch
    from jobs.handlers import default_finalizers, default_handlers
    from jobs.worker import Worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    install_log_redaction()
    settings = get_settings()
    claim_scratch(settings, "worker")  # this process's scratch; sweeps what killed processes left behind
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    w = Worker(
        settings,
        database_for(settings.resolved_database_url),
        worker_id,
        handlers=default_handlers(),
        finalizers=default_finalizers(),
        schedule=not no_scheduler,
    )
    try:
        w.run(stop, max_jobs=max_jobs)
    except KeyboardInterrupt:
        stop.set()


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)
