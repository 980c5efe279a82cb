"""Read a Cassandra node's figures over JMX: one session per node, several reads in it (`Jmx.java`, beside this
module: JDK classes only, compiled once with `javac` into the generator's cache).

**Where.** A node at its address (a checked IP literal, as the cluster reports it and the egress rules resolved) and
the deployment's `connection.jmx_port` (Cassandra's default 7199). The JVM runs under the egress sandbox
(`Egress.jvm_options`) granting that one address and port, so the RMI stub the node sends must name them too: the
node exports its JMX connector on its registry port (`-Dcom.sun.management.jmxremote.rmi.port=<jmx port>`, as
Cassandra's `cassandra-env.sh` does). A login (`connection.username` with the password an admin bound) is sent only
to a node whose address is one of the deployment's contact points' (where the password was bound); it reaches the
JVM in its environment, never as an argument, and is scrubbed from every text.

**What.** `get(object_name, attribute)` → a number (or a tuple of numbers, an array attribute), `names(pattern)` →
the MBeans matching it, `time_ns()` → the client JVM's clock; its one write, `update_snitch(update_ms, reset_ms,
badness)` (the live replay's alternating periods, `kinds.cassandra.replay.snitch`). A value that is not a number is
refused by the client (it reads figures, never objects); an answer longer than `MAX_LINE` or a session past its
deadline ends it (`JmxFailed` naming the node): a hostile node cannot hold a calibration or a replay.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Final

from base.errors import TailtuneError
from base.javac import cache_root, compile_once
from control.egress import Egress

__all__ = ["DEFAULT_JMX_PORT", "MAX_LINE", "JmxFailed", "JmxSession", "compiled"]

_SOURCE: Final = Path(__file__).resolve().parent / "Jmx.java"
#: Cassandra's JMX port unless the connection names another.
DEFAULT_JMX_PORT: Final = 7199
#: The longest answer line read (an array attribute of a few thousand numbers fits).
MAX_LINE: Final = 1 << 20
USER_ENV: Final = "TAILTUNE_JMX_USERNAME"
PASSWORD_ENV: Final = "TAILTUNE_JMX_PASSWORD"


class JmxFailed(TailtuneError):
    """A node's JMX could not be read (names the node, the port and why)."""


def compiled() -> Path:
    """The folder of the compiled `Jmx` (compiled the first time; `generator build` does it at setup)."""
    root = cache_root()
    empty = root / "jdk-only"
    empty.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:12]
    return compile_once(_SOURCE, empty, root / f"jmx-{digest}", main_class="Jmx",
                        purpose="tailtune's JMX client")


class JmxSession:
    """One JMX connection to one node (module doc); a context manager: `with JmxSession(...) as jmx: jmx.get(...)`.
    Every read waits at most `timeout_s`; the whole session lives at most `deadline_s`."""

    def __init__(self, egress: Egress, address: str, port: int, *, username: str | None = None,
                 password: str | None = None, timeout_s: float = 30.0, deadline_s: float = 3600.0,
                 scrub: Callable[[str], str] = lambda t: t) -> None:
        self.address, self.port = address, int(port)
        self._egress, self._username, self._password = egress, username, password
        self._timeout_s, self._deadline = float(timeout_s), time.monotonic() + float(deadline_s)
        self._scrub = scrub
        self._proc: subprocess.Popen[bytes] | None = None

    # --- the session ---------------------------------------------------------------------------------------
    def _where(self) -> str:
        return f"cassandra node {self.address}: JMX at port {self.port}"

    def _clean(self, text: str) -> str:
        text = self._scrub(text)
        return text.replace(self._password, "***") if self._password else text

    def __enter__(self) -> JmxSession:
        java = shutil.which("java")
        if java is None:
            raise JmxFailed(f"{self._where()}: reading JMX needs Java 17",
                            hint="apt-get install openjdk-17-jdk-headless")
        sandbox = self._egress.jvm_options([(self.address, self.port)])
        env = {k: v for k, v in os.environ.items()
               if k not in ("JAVA_TOOL_OPTIONS", "CLASSPATH", USER_ENV, PASSWORD_ENV)}
        if self._username:
            env[USER_ENV], env[PASSWORD_ENV] = self._username, self._password or ""
        self._proc = subprocess.Popen(
            [java, "-Xmx64m", "-XX:TieredStopAtLevel=1", *sandbox, "-cp", str(compiled()), "Jmx", self.address,
             str(self.port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        first = self._line()
        if first != "ready":
            self.close()
            raise JmxFailed(f"{self._where()}: {first.removeprefix('error ') or 'no answer'}",
                            hint="calibrating a node's capacity reads its JMX port (connection.jmx_port); the node "
                                 "must export its connector on that port (com.sun.management.jmxremote.rmi.port)")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()

    def _line(self) -> str:
        """The client's next answer line, within the read's timeout and the session's deadline."""
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise JmxFailed(f"{self._where()}: the session is closed")
        wait = min(self._timeout_s, self._deadline - time.monotonic())
        if wait <= 0:
            self.close()
            raise JmxFailed(f"{self._where()}: the session is past its deadline")
        box: dict[str, bytes] = {}
        reader = threading.Thread(target=lambda: box.setdefault("line", proc.stdout.readline(MAX_LINE + 1))
                                  if proc.stdout is not None else None, daemon=True)
        reader.start()
        reader.join(wait)
        if reader.is_alive():
            self.close()
            raise JmxFailed(f"{self._where()}: no answer in {wait:.3g} s")
        raw = box.get("line", b"")
        if len(raw) > MAX_LINE:
            self.close()
            raise JmxFailed(f"{self._where()}: an answer longer than {MAX_LINE} bytes")
        return self._clean(raw.decode("utf-8", "replace").strip())

    def _ask(self, request: str) -> str:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise JmxFailed(f"{self._where()}: the session is closed")
        try:
            proc.stdin.write((request + "\n").encode())
            proc.stdin.flush()
        except OSError:
            raise JmxFailed(f"{self._where()}: the client ended") from None
        line = self._line()
        if line.startswith("ok"):
            return line[3:]
        raise JmxFailed(f"{self._where()}: {request.split(' ')[0]} {request.split(' ', 2)[1:2]}: "
                        f"{line.removeprefix('error ')[:300] or 'the client ended'}")

    # --- reads ---------------------------------------------------------------------------------------------
    def get(self, object_name: str, attribute: str) -> float | tuple[float, ...]:
        """The attribute's value: a number, or a tuple of numbers (an array attribute). An object name may hold
        spaces (the attribute is the request's last word); a line break or an attribute with a space is refused (a
        name a node reported must not add a request of its own)."""
        if any(c in object_name + attribute for c in "\r\n") or " " in attribute or not attribute:
            raise JmxFailed(f"{self._where()}: {object_name[:80]!r} {attribute[:80]!r}: not an object name and an "
                            "attribute")
        text = self._ask(f"get {object_name} {attribute}")
        try:
            if "," in text:
                return tuple(float(x) for x in text.split(","))
            if text in ("true", "false"):
                return 1.0 if text == "true" else 0.0
            return float(text)
        except ValueError:
            raise JmxFailed(f"{self._where()}: {object_name} {attribute}: not a number: {text[:80]!r}") from None

    def number(self, object_name: str, attribute: str) -> float:
        """A number attribute (JmxFailed for an array)."""
        v = self.get(object_name, attribute)
        if isinstance(v, tuple):
            raise JmxFailed(f"{self._where()}: {object_name} {attribute}: an array, not a number")
        return v

    def names(self, pattern: str) -> list[str]:
        """The MBeans whose names match `pattern` (e.g. `java.lang:type=GarbageCollector,*`), sorted."""
        text = self._ask(f"names {pattern}")
        return [n for n in text.split("\t") if n]

    def time_ns(self) -> int:
        """The client JVM's monotonic clock, ns."""
        return int(self._ask("time"))

    def update_snitch(self, update_ms: int, reset_ms: int, badness: float) -> None:
        """`StorageServiceMBean.updateSnitch(null, null, update_ms, reset_ms, badness)` (module doc)."""
        self._ask(f"update-snitch {int(update_ms)} {int(reset_ms)} {float(badness)!r}")
