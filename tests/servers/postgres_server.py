"""A throw-away PostgreSQL server (Debian package `postgresql`) on a free 127.0.0.1 port, for tests and local runs.

`PostgresServer.start()` runs `initdb` into a private temp folder and `pg_ctl start` with durability off
(`-F`, fsync/synchronous_commit/full_page_writes off: the data is thrown away anyway), the Unix socket in that
folder, TCP on 127.0.0.1 only and `trust` auth for the `postgres` role. `close()` stops it (`pg_ctl stop -m
immediate`) and removes the folder. PostgreSQL refuses to run as root, so as root every server command runs as
the `postgres` user (created by the Debian package) through `runuser`, with the folder owned by that user.

The binaries are looked up in `TAILTUNE_PG_BINDIR`, then the newest `/usr/lib/postgresql/<ver>/bin` (Debian keeps
`initdb`/`pg_ctl` off the PATH), then the PATH. `python -m tests.servers.postgres_server run` starts one,
prints the URL of its database `tailtune` and serves until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.servers.cassandra_server import free_port

__all__ = ["PostgresMissing", "PostgresServer", "find_bindir", "running_postgres"]

SERVER_USER = "postgres"
MISSING_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found: run `make setup` (it installs the Debian package "
    "`postgresql`), or point TAILTUNE_PG_BINDIR at the folder that holds them"
)
_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresMissing(RuntimeError):
    """The PostgreSQL server binaries (or the `postgres` user, when running as root) are not installed."""


def find_bindir() -> Path | None:
    """The folder holding `initdb` and `pg_ctl`, or None when PostgreSQL is not installed."""

    def ok(d: Path) -> bool:
        return (d / "initdb").is_file() and (d / "pg_ctl").is_file()

    env = os.environ.get("TAILTUNE_PG_BINDIR")
    if env:
        return Path(env) if ok(Path(env)) else None
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        versions = sorted(
            (d for d in debian.iterdir() if d.name.isdigit() and ok(d / "bin")), key=lambda d: int(d.name)
        )
        if versions:
            return versions[-1] / "bin"
    initdb = shutil.which("initdb")
    if initdb is not None and ok(Path(initdb).parent):
        return Path(initdb).parent
    return None


class PostgresServer:
    """One private PostgreSQL cluster. Use as a context manager, or `start()` … `close()`."""

    def __init__(self, port: int | None = None, bindir: Path | None = None) -> None:
        found = bindir or find_bindir()
        if found is None:
            raise PostgresMissing(MISSING_HINT)
        self.bindir = found
        self.as_root = os.geteuid() == 0
        if self.as_root:
            try:
                self._pw = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise PostgresMissing(
                    f"running as root, but there is no '{SERVER_USER}' user to run PostgreSQL as: {MISSING_HINT}"
                ) from None
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.user = SERVER_USER
        self.root = Path(tempfile.mkdtemp(prefix="tailtune-pg-"))
        self.data = self.root / "data"
        self.logfile = self.root / "server.log"
        self.started = False
        self._names = itertools.count(1)

    # --- process control ------------------------------------------------------------------------------------
    def _cmd(self, exe: str, *args: str) -> list[str]:
        cmd = [str(self.bindir / exe), *args]
        return ["runuser", "-u", SERVER_USER, "--", *cmd] if self.as_root else cmd

    def _run(self, exe: str, *args: str, timeout: float = 60.0) -> None:
        proc = subprocess.run(
            self._cmd(exe, *args), capture_output=True, text=True, timeout=timeout, cwd=self.root, check=False
        )
        if proc.returncode != 0:
            log = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
            raise RuntimeError(
                f"{exe} {' '.join(args[:2])} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}\n{log}"
            )

    def start(self, timeout_s: float = 30.0) -> None:
        if self.as_root:
            os.chown(self.root, self._pw.pw_uid, self._pw.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", self.user, "-A", "trust", "-E", "UTF8", "--no-locale", "-N")
        opts = (
            f"-F -c fsync=off -c synchronous_commit=off -c full_page_writes=off -k {self.root} "
            f"-c listen_addresses={self.host} -p {self.port} -c max_connections=200"
        )
        self._run(
            "pg_ctl", "start", "-D", str(self.data), "-l", str(self.logfile), "-w", "-t", str(int(timeout_s)),
            "-o", opts, timeout=timeout_s + 10,
        )  # fmt: skip
        self.started = True

    def stop(self) -> None:
        if self.started:
            self.started = False
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- databases ------------------------------------------------------------------------------------------
    def url(self, database: str = "postgres", driver: str = "psycopg") -> str:
        """A SQLAlchemy URL of `database` (driver psycopg 3: `postgresql+psycopg://...`)."""
        return f"postgresql+{driver}://{self.user}@{self.host}:{self.port}/{database}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(
            host=self.host, port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql.encode())

    def create_database(self, name: str | None = None, template: str | None = None) -> str:
        """Create a database (a fresh name when None; a copy of `template` when given); returns its name."""
        name = name or f"tt_{os.getpid()}_{next(self._names)}"
        for n in (name, template):
            if n is not None and not _NAME_RE.match(n):
                raise ValueError(f"database name {n!r}: use lower-case letters, digits and '_'")
        self._admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, closing any connections still open to it."""
        if not _NAME_RE.match(name):
            raise ValueError(f"database name {name!r}: use lower-case letters, digits and '_'")
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextlib.contextmanager
    def database(self, template: str | None = None) -> Iterator[str]:
        """A fresh database for one test: yields its URL, dropped afterwards."""
        name = self.create_database(template=template)
        try:
            yield self.url(name)
        finally:
            self.drop_database(name)


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.servers.postgres_server")
    parser.add_argument("action", choices=["run"])
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        server = PostgresServer(port=args.port)
    except PostgresMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill PID` stops and removes the server too
    with server:
        name = server.create_database("tailtune")
        print(server.url(name), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
