"""The dynamic snitch's settings of every node, read and set live over JMX: what the live replay alternates.

`StorageServiceMBean.updateSnitch(null, null, update_ms, reset_ms, badness)` (`SnitchJmx.java`, beside this module)
keeps the node's snitch and applies the three numbers to its running `DynamicEndpointSnitch`
(`applyConfigChanges`: the update and reset timers rescheduled, the badness threshold replaced; its scores are kept;
nothing is persisted: a restart returns to cassandra.yaml). Each node is then read back from its
`DynamicEndpointSnitch` MBean (`UpdateInterval`, `ResetInterval`, `BadnessThreshold`) and must show what was set.

**Where.** Each node at its address (as the cluster reports it, checked by the egress rules) and the deployment's
`connection.jmx_port` (Cassandra's default 7199). The JVM runs under the egress sandbox (`Egress.jvm_options`) that
grants that one address and port: the RMI stub the node sends (where to connect back to) must name them too, so a
node must export its JMX connector on its registry port (`-Dcom.sun.management.jmxremote.rmi.port=<jmx port>`,
as Cassandra's `cassandra-env.sh` does). A login, when the deployment has one (`connection.username`, the password
bound by an admin), is sent to JMX too (Cassandra's JMX authenticates against its roles with
`cassandra.jmx.remote.login.config=CassandraLogin`); it reaches the JVM in its environment, never an argument.

`SnitchJmx.java` is compiled once with `javac` (JDK classes only) into the generator's cache
(`kinds.cassandra.replay.jvm.cache_root()`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from base.errors import TailtuneError
from base.javac import compile_once
from control.egress import Egress

__all__ = ["DEFAULT_JMX_PORT", "KNOBS", "SnitchFailed", "SnitchJmx", "SnitchValues", "compiled"]

_SOURCE: Final = Path(__file__).resolve().parent / "SnitchJmx.java"
#: Cassandra's JMX port unless the connection names another.
DEFAULT_JMX_PORT: Final = 7199
#: The knobs, in updateSnitch's order.
KNOBS: Final = ("dynamic_snitch_update_interval", "dynamic_snitch_reset_interval", "dynamic_snitch_badness_threshold")
USER_ENV: Final = "TAILTUNE_JMX_USERNAME"
PASSWORD_ENV: Final = "TAILTUNE_JMX_PASSWORD"
_TIMEOUT_S: Final = 60.0


class SnitchFailed(TailtuneError):
    """A node's snitch could not be read or set over JMX (names the node and why)."""


@dataclass(frozen=True)
class SnitchValues:
    """One node's dynamic-snitch settings: update and reset intervals (ms) and the badness threshold."""

    update_ms: int
    reset_ms: int
    badness: float

    def as_knobs(self) -> dict[str, int | float]:
        return {KNOBS[0]: self.update_ms, KNOBS[1]: self.reset_ms, KNOBS[2]: self.badness}

    @classmethod
    def of(cls, knobs: Mapping[str, object], base: SnitchValues | None = None) -> SnitchValues:
        """The knobs given (by name), the others `base`'s."""
        def get(i: int, default: object) -> object:
            return knobs.get(KNOBS[i], default)

        b = base or cls(100, 600_000, 0.1)
        return cls(int(float(str(get(0, b.update_ms)))), int(float(str(get(1, b.reset_ms)))),
                   float(str(get(2, b.badness))))

    def same(self, other: SnitchValues) -> bool:
        return (self.update_ms == other.update_ms and self.reset_ms == other.reset_ms
                and abs(self.badness - other.badness) <= 1e-9 * max(1.0, abs(other.badness)))


def compiled() -> Path:
    """The folder of the compiled `SnitchJmx` (compiled the first time; `generator build` does it at setup)."""
    from kinds.cassandra.replay.jvm import cache_root

    root = cache_root()
    empty = root / "jdk-only"
    empty.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:12]
    return compile_once(_SOURCE, empty, root / f"snitch-jmx-{digest}", main_class="SnitchJmx",
                        purpose="the live replay's JMX client")


class SnitchJmx:
    """Read and set the dynamic snitch of nodes over JMX at `port` (module doc)."""

    def __init__(self, egress: Egress, port: int, username: str | None = None, password: str | None = None) -> None:
        self.egress = egress
        self.port = int(port)
        self.username = username
        self.password = password

    def _call(self, address: str, *args: str) -> SnitchValues:
        java = shutil.which("java")
        if java is None:
            raise SnitchFailed("the live replay's JMX client needs Java 17", hint="apt-get install "
                               "openjdk-17-jdk-headless")
        sandbox = self.egress.jvm_options([(address, self.port)])
        env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "CLASSPATH", USER_ENV,
                                                                   PASSWORD_ENV)}
        if self.username:
            env[USER_ENV] = self.username
            env[PASSWORD_ENV] = self.password or ""
        try:
            r = subprocess.run([java, "-Xmx64m", "-XX:TieredStopAtLevel=1", *sandbox, "-cp", str(compiled()),
                                "SnitchJmx", address, str(self.port), *args],
                               capture_output=True, text=True, timeout=_TIMEOUT_S, check=False,
                               stdin=subprocess.DEVNULL, env=env)
        except subprocess.TimeoutExpired:
            raise SnitchFailed(f"node {address}: JMX at port {self.port} did not answer in {_TIMEOUT_S:g} s"
                               ) from None
        line = (r.stdout.strip().splitlines() or [""])[-1]
        if self.password:
            line = line.replace(self.password, "***")
        if line == "off":
            raise SnitchFailed(f"node {address} runs no dynamic snitch (dynamic_snitch: false): its settings have "
                               "no effect there")
        parts = line.split()
        if r.returncode != 0 or len(parts) != 4 or parts[0] != "ok":
            why = line.removeprefix("error ") or (r.stderr.strip()[-300:] if r.stderr else f"exit {r.returncode}")
            raise SnitchFailed(f"node {address}: JMX at port {self.port}: {why}",
                               hint="the live replay reaches every node's JMX port (connection.jmx_port) to "
                               "alternate the dynamic snitch's settings")
        try:
            return SnitchValues(int(parts[1]), int(parts[2]), float(parts[3]))
        except ValueError:
            raise SnitchFailed(f"node {address}: unexpected answer {line[:200]!r}") from None

    def read(self, address: str) -> SnitchValues:
        """The node's running dynamic snitch's settings."""
        return self._call(address, "get")

    def apply(self, address: str, values: SnitchValues) -> SnitchValues:
        """Set the node's settings and read them back: SnitchFailed unless it shows them."""
        back = self._call(address, "set", str(values.update_ms), str(values.reset_ms), repr(values.badness))
        if not back.same(values):
            raise SnitchFailed(f"node {address}: after updateSnitch its dynamic snitch shows {back.as_knobs()}, "
                               f"not {values.as_knobs()}")
        return back
