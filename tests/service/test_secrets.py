"""Credentials and server internals stay on the server: readiness details, job errors and logs, the process
log; readiness checks stores for real and creates nothing."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from base.settings import get_settings
from control.queue import enqueue
from control.redact import install_log_redaction, public, redact
from jobs.context import JobContext
from jobs.worker import Worker
from tests.app_fixtures import Svc
from tests.servers.cassandra_server import free_port
from tests.servers.postgres_server import PostgresServer

API = "/api/v1"
SECRET = "s3cr3t-pw"


def _ready(svc: Svc, monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    r = svc.client.get(f"{API}/health/ready", headers=svc.read)
    assert SECRET not in r.text, r.text
    return {c["name"]: c for c in r.json()["checks"]}


def test_readiness_hides_passwords_checks_for_real_and_creates_nothing(
    svc: Svc, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    dead = f"postgresql+psycopg://tailtune:{SECRET}@127.0.0.1:{free_port()}/mlflow"
    checks = _ready(svc, monkeypatch, TAILTUNE_MLFLOW_TRACKING_URI=dead, TAILTUNE_OPTUNA_STORAGE=dead)
    assert checks["mlflow"]["ok"] is False and checks["optuna"]["ok"] is False
    assert "tailtune:***@127.0.0.1" in checks["mlflow"]["detail"]
    assert list(cwd.iterdir()) == []  # no folder named after the URI
    checks = _ready(svc, monkeypatch, TAILTUNE_OPTUNA_STORAGE=str(svc.settings.home_dir / "optuna" / "j.log"))
    assert checks["optuna"]["ok"] is True and checks["optuna"]["detail"].startswith("optuna/j.log (")
    checks = _ready(svc, monkeypatch, TAILTUNE_MLFLOW_TRACKING_URI=f"http://u:{SECRET}@127.0.0.1:{free_port()}")
    assert checks["mlflow"]["ok"] is False


def test_readiness_connects_to_a_live_store(
    svc: Svc, monkeypatch: pytest.MonkeyPatch, postgres_server: PostgresServer
) -> None:
    with postgres_server.database() as url:
        checks = _ready(svc, monkeypatch, TAILTUNE_MLFLOW_TRACKING_URI=url)
        assert checks["mlflow"]["ok"] is True and "connected" in checks["mlflow"]["detail"]


def test_job_errors_and_logs_carry_no_secrets_paths_or_tracebacks(svc: Svc) -> None:
    where = svc.settings.home_dir / "uploads" / "abc.trace"

    def leaky(ctx: JobContext) -> dict[str, Any]:
        def step() -> dict[str, Any]:
            raise RuntimeError(f"cannot open 'postgresql://tt:{SECRET}@db:5432/optuna' for {where}")

        return ctx.step("leak", step)

    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, "selftest", {}, max_attempts=1).id
    assert Worker(svc.settings, svc.db, "w", handlers={"selftest": leaky}, schedule=False).run_once() == "failed"
    job = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    text = f"{job['error']} {job['logs']} {job['steps']}"
    assert SECRET not in text and str(svc.settings.home_dir) not in text and "Traceback" not in text
    assert "postgresql://tt:***@db:5432/optuna" in job["error"] and "uploads/abc.trace" in job["error"]


def test_the_process_log_hides_credentials() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        install_log_redaction()
        try:
            raise ValueError(f"bad url postgresql://u:{SECRET}@h/db")
        except ValueError:
            logging.getLogger("tailtune.test").exception("failed with password=%s", SECRET)
    finally:
        root.removeHandler(handler)
    out = stream.getvalue()
    assert SECRET not in out and "Traceback" in out and "password=***" in out


def test_redaction_rules() -> None:
    assert redact(f"host=db user=u password={SECRET} dbname=x") == "host=db user=u password=*** dbname=x"
    assert SECRET not in redact(f"Authorization: Bearer {SECRET}")
    assert SECRET not in redact(f"token tt_{'A' * 40}{SECRET}")
    assert public("see /api/v1/traces?deployment_id=1") == "see /api/v1/traces?deployment_id=1"
    assert public(f"{os.getcwd()}/x/y.py failed") == "x/y.py failed"
    assert public("/var/lib/other/file.bin is gone") == "file.bin is gone"


#: Every printable ASCII character, quotes, spaces, `@`, `/`, `#` and `%` included.
EVERY_PRINTABLE = "".join(chr(c) for c in range(32, 127))


def _leaks(text: str, password: str, window: int = 6) -> list[str]:
    """Pieces of `password` (runs of `window` characters) found in `text`."""
    return [password[i:i + window] for i in range(len(password) - window + 1) if password[i:i + window] in text]


@pytest.mark.parametrize("encoded", [False, True], ids=["raw", "percent-encoded"])
def test_readiness_hides_passwords_of_every_printable_character(
    svc: Svc, monkeypatch: pytest.MonkeyPatch, encoded: bool
) -> None:
    from urllib.parse import quote

    pw = quote(EVERY_PRINTABLE, safe="") if encoded else EVERY_PRINTABLE
    port = free_port()
    for key, url in (
        ("TAILTUNE_MLFLOW_TRACKING_URI", f"postgresql+psycopg://tailtune:{pw}@127.0.0.1:{port}/mlflow"),
        ("TAILTUNE_OPTUNA_STORAGE", f"postgresql://tailtune:{pw}@127.0.0.1:{port}/optuna"),
        ("TAILTUNE_MLFLOW_TRACKING_URI", f"http://tailtune:{pw}@127.0.0.1:{port}"),
        ("TAILTUNE_OPTUNA_STORAGE", f"mysql://tailtune:{pw}@127.0.0.1:{port}/optuna?password={pw}"),
    ):
        monkeypatch.setenv(key, url)
        get_settings.cache_clear()
        r = svc.client.get(f"{API}/health/ready", headers=svc.read)
        assert r.status_code in (200, 503), r.text
        details = " ".join(c["detail"] for c in r.json()["checks"])
        for form in {EVERY_PRINTABLE, pw, quote(EVERY_PRINTABLE, safe="")}:
            assert not _leaks(details, form), (key, url, details)
            assert not _leaks(r.text, form), (key, url, r.text)
        assert "tailtune:***" in details, details


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://u:{EVERY_PRINTABLE}@db:5432/x",
        f"postgresql+psycopg://u:{EVERY_PRINTABLE.replace('%', '%25')}@db/x?sslmode=require",
        f"http://u:{EVERY_PRINTABLE}@mlflow:5000",
        "host=db user=u password='" + EVERY_PRINTABLE.replace("\\", "\\\\").replace("'", "\\'") + "' dbname=x",
        f"postgresql://db/x?user=u&password={EVERY_PRINTABLE.replace('&', '%26').replace('#', '%23')}",
    ],
    ids=["url-raw", "url-encoded", "http", "libpq-dsn", "query"],
)
def test_redact_url_parses_instead_of_guessing(text: str) -> None:
    from base.secrets import redact_url, url_secrets

    shown = redact_url(text)
    assert "***" in shown
    for s in url_secrets(text):
        assert s not in shown, (s, shown)
    # the whole password, in whatever form the text holds it, is among the secrets found
    assert any(EVERY_PRINTABLE in (s, s.strip("'")) or len(s) >= 60 for s in url_secrets(text)), url_secrets(text)
    assert not _leaks(shown, EVERY_PRINTABLE[:40]) and not _leaks(shown, EVERY_PRINTABLE[50:])
