"""A full disk, as the API and readiness see it: free space of a folder's filesystem, and telling a disk-full error
(ENOSPC, EDQUOT, SQLite's SQLITE_FULL, PostgreSQL's disk_full) from any other failure.

A write that finds its filesystem full becomes `InsufficientStorage` (507): the path it wrote, relative to
TAILTUNE_HOME (never an absolute server path), and the bytes still free there.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from base.errors import TailtuneError
from base.settings import Settings
from control.errors import InsufficientStorage
from control.redact import public

__all__ = ["DISK_FULL_ERRNOS", "DiskFull", "disk_full_cause", "free_bytes", "raise_if_disk_full", "storage_full"]

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13  # the primary result code; extended codes keep it in the low byte
_PG_DISK_FULL = "53100"


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding `path` (or its nearest existing
    parent)."""
    st = os.statvfs(_nearest_existing(path))
    return st.f_bavail * st.f_frsize


def disk_full_cause(exc: BaseException) -> BaseException | None:
    """The disk-full error in `exc`'s chain (its SQLAlchemy `orig`, `__cause__`, `__context__`), else None."""
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo:
        cur = todo.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in DISK_FULL_ERRNOS:
            return cur
        if isinstance(cur, sqlite3.Error) and (getattr(cur, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_FULL:
            return cur
        if getattr(cur, "sqlstate", None) == _PG_DISK_FULL:  # psycopg's DiskFull
            return cur
        todo += [e for e in (getattr(cur, "orig", None), cur.__cause__, cur.__context__) if e is not None]
    return None


def _sqlite_file(settings: Settings) -> Path | None:
    url = settings.resolved_database_url
    if not url.startswith("sqlite:///"):
        return None
    raw = url.removeprefix("sqlite:///")
    return Path(raw) if raw not in ("", ":memory:") else None


def storage_full(
    settings: Settings, cause: BaseException | None, path: Path | None = None, *, needed: int | None = None
) -> InsufficientStorage:
    """The 507 for `cause` (a disk-full error; None: a write of `needed` bytes that would not fit): the path
    written (given, named by the error, or the metadata DB's file), shown relative to TAILTUNE_HOME, and the bytes
    free on its filesystem."""
    if isinstance(cause, OSError) and path is None and isinstance(cause.filename, str):
        path = Path(cause.filename)
    if path is None and cause is not None and not isinstance(cause, OSError):
        path = _sqlite_file(settings)
        if path is None:  # PostgreSQL: its disk is the database server's
            return InsufficientStorage(
                "the metadata DB's server has no space left; free space on the database server and retry",
                path="metadata DB",
                free_bytes=None,
            )
    where = (path if path is not None else settings.home_dir).resolve()
    if where.is_relative_to(settings.home_dir):
        rel = where.relative_to(settings.home_dir).as_posix()
        shown = "TAILTUNE_HOME" if rel == "." else f"TAILTUNE_HOME/{rel}"
    else:
        shown = public(str(where), settings)
    try:
        free: int | None = free_bytes(where)
    except OSError:
        free = None
    left = f"{free} bytes free" if free is not None else "free space unknown"
    what = f"no space left on the filesystem holding {shown}: {left}"
    if needed is not None:
        what = f"{needed} bytes do not fit on the filesystem holding {shown}: {left}"
    return InsufficientStorage(
        f"{what}; free space there (or move TAILTUNE_HOME to a larger filesystem) and retry",
        path=shown,
        free_bytes=free,
    )


class DiskFull(TailtuneError):
    """A job's or a command's write found its filesystem full: the message names the path and the bytes free
    (the `InsufficientStorage` an API answer would carry)."""

    def __init__(self, full: InsufficientStorage) -> None:
        super().__init__(full.detail)
        self.path = full.path
        self.free_bytes = full.free_bytes


def raise_if_disk_full(exc: BaseException, settings: Settings) -> None:
    """Raise `DiskFull` from `exc` when a full disk is in its chain; else return (the caller re-raises `exc`)."""
    if isinstance(exc, DiskFull):
        return
    cause = disk_full_cause(exc)
    if cause is not None:
        raise DiskFull(storage_full(settings, cause)) from exc
