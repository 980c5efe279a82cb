"""Per-process scratch and the start-up sweep of what killed processes left behind.

`tailtune serve` and `tailtune worker` each claim a scratch folder `TAILTUNE_HOME/tmp/<role>-<host>-<pid>-<rand>/`
(their `settings.tmp_dir` from then on: uploads in progress, ingest staging, analysis staging, deleted datasets'
trash) and hold an exclusive `flock` on the sibling file `<same name>.lock` for as long as they live. The kernel
drops the lock when the process dies, kill -9 included, so at start-up each process sweeps:

* an **owned** folder whose lock it can take: its owner is dead — removed with its lock file. A folder whose lock
  is held belongs to a live process (on this machine or another one sharing the folder through a filesystem with
  working `flock`) and is never touched;
* an **unowned** entry of `tmp/` (left by a `tailtune ingest` run or an older version, which write there
  directly): removed once nothing in it changed for `tmp_unowned_max_age_s` (default a day);
* an **orphan upload** `uploads/*.trace` that no trace row names (the API died between moving it in place and
  committing the row): removed under the same age rule.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

from base.settings import Settings
from control.db import Database, TraceRow

__all__ = ["LOCK_SUFFIX", "claim_scratch", "release_scratch", "sweep_orphan_uploads", "sweep_tmp"]

log = logging.getLogger("tailtune.scratch")

LOCK_SUFFIX = ".lock"
#: home → (scratch folder, lock fd) of this process.
_held: dict[Path, tuple[Path, int]] = {}


def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                try:
                    newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
                except OSError:
                    continue
    return newest


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep_tmp(settings: Settings, *, now: float | None = None) -> list[Path]:
    """Remove the scratch of dead processes and old unowned entries under home/tmp; returns what went."""
    root = settings.home_dir / "tmp"
    if not root.is_dir():
        return []
    now = time.time() if now is None else now
    mine = {held[0].name for home, held in _held.items() if home == settings.home_dir}
    removed: list[Path] = []
    owned: set[str] = set()
    for lock in root.glob(f"*{LOCK_SUFFIX}"):
        name = lock.name.removesuffix(LOCK_SUFFIX)
        owned.add(name)
        if name in mine:
            continue
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # held: its owner is alive
            continue
        try:
            folder = root / name
            if folder.exists():
                _remove(folder)
                removed.append(folder)
            lock.unlink(missing_ok=True)
        finally:
            os.close(fd)
    for entry in root.iterdir():
        if entry.name.endswith(LOCK_SUFFIX) or entry.name in owned or entry.name in mine:
            continue
        try:
            age = now - _newest_mtime(entry)
        except OSError:
            continue
        if age > settings.tmp_unowned_max_age_s:
            _remove(entry)
            removed.append(entry)
    for path in removed:
        log.info("swept %s (left by a process that is gone)", path.relative_to(settings.home_dir))
    return removed


def claim_scratch(settings: Settings, role: str) -> Path:
    """Give this process its own scratch under home/tmp (set as `settings.tmp_dir`), after sweeping what dead
    processes left. Idempotent per process and home."""
    home = settings.home_dir
    held = _held.get(home)
    if held is None:
        sweep_tmp(settings)
        root = home / "tmp"
        root.mkdir(parents=True, exist_ok=True)
        while True:
            name = f"{role}-{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            lock = root / f"{name}{LOCK_SUFFIX}"
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:  # a sweeper may have taken and removed the file between create and lock: start again
                same = os.stat(lock).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        folder = root / name
        folder.mkdir()
        held = (folder, fd)
        _held[home] = held
        atexit.register(_release, home)
    settings._scratch = held[0]
    return held[0]


def release_scratch(settings: Settings) -> None:
    """Remove this process's scratch (a clean shutdown; uvicorn ends `serve` by re-raising the signal, which
    skips atexit, so the API calls this when its app shuts down)."""
    _release(settings.home_dir)
    settings._scratch = None


def _release(home: Path) -> None:
    held = _held.pop(home, None)
    if held is None:
        return
    folder, fd = held
    shutil.rmtree(folder, ignore_errors=True)
    Path(f"{folder}{LOCK_SUFFIX}").unlink(missing_ok=True)
    os.close(fd)


def sweep_orphan_uploads(settings: Settings, db: Database, *, now: float | None = None) -> list[Path]:
    """Remove `uploads/*.trace` files no trace row names, once untouched for `tmp_unowned_max_age_s`."""
    from sqlalchemy import select

    folder = settings.home_dir / "uploads"
    if not folder.is_dir():
        return []
    with db.session() as s:
        known = {str(p) for p in s.scalars(select(TraceRow.upload_path).where(TraceRow.upload_path.is_not(None)))}
    now = time.time() if now is None else now
    removed = []
    for path in folder.glob("*.trace"):
        if str(path) in known:
            continue
        try:
            if now - path.stat().st_mtime <= settings.tmp_unowned_max_age_s:
                continue
        except OSError:
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
        log.info("swept uploads/%s (no trace names it)", path.name)
    return removed
