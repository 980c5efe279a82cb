"""Engine, sessions and programmatic alembic migrations of the metadata DB (SQLite default, PostgreSQL by
URL).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from base.db_url import normalize_url
from base.errors import BadInputError, TailtuneError

__all__ = ["Database", "DatabaseUnavailable", "migrate", "normalize_url"]

SETTING = "TAILTUNE_DATABASE_URL"


class DatabaseUnavailable(TailtuneError):
    """The metadata DB cannot be opened (server down, wrong host/port/credentials, missing database, ...)."""


def _safe(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable URL>"

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_migrate_lock = threading.Lock()


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest alembic revision (idempotent; run by `serve` and `worker` at start-up).
    """
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    sqlite = engine.dialect.name == "sqlite"
    with _migrate_lock, engine.connect() as conn:
        if sqlite:  # batch migrations recreate tables: a parent's DROP must not cascade into its children
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        try:
            with conn.begin():
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        finally:
            if sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()


def _sqlite_pragmas(dbapi_conn: Any, _: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class Database:
    """One engine + session factory. `session()` commits on success and rolls back on error."""

    def __init__(self, url: str, *, run_migrations: bool = True) -> None:
        url = normalize_url(url)
        self.url = url
        try:
            if url.startswith("sqlite:///"):
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
                self.engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
                event.listen(self.engine, "connect", _sqlite_pragmas)
            else:
                self.engine = create_engine(url, pool_pre_ping=True)
        except (ArgumentError, NoSuchModuleError, ModuleNotFoundError) as exc:
            raise BadInputError.single(
                "settings",
                f"{_safe(url)} is not a usable database URL ({exc}); use sqlite:////abs/path.db or "
                "postgresql+psycopg://user:password@host:5432/dbname",
                field=SETTING,
            ) from None
        self._factory = sessionmaker(self.engine, expire_on_commit=False)
        if run_migrations:
            try:
                migrate(self.engine)
            except OperationalError as exc:
                self.engine.dispose()
                reason = str(exc.orig or exc).strip().splitlines()[0]
                raise DatabaseUnavailable(
                    f"metadata DB {_safe(url)} ({SETTING}) cannot be used: {reason}",
                    hint="is the database server up? check host, port, credentials and database name in the URL",
                ) from None

    @contextmanager
    def session(self) -> Iterator[Session]:
        s = self._factory()
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    def dispose(self) -> None:
        self.engine.dispose()


@lru_cache(maxsize=8)
def database_for(url: str) -> Database:
    """One migrated Database per URL per process."""
    return Database(url)
