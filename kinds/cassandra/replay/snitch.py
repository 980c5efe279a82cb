"""The dynamic snitch's settings of every node, read and set live over JMX: what the live replay alternates.

`StorageServiceMBean.updateSnitch(null, null, update_ms, reset_ms, badness)` (tailtune's JMX client,
`kinds.cassandra.jmx`)
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

Each read or change is one `kinds.cassandra.jmx.JmxSession` with the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from base.errors import TailtuneError
from control.egress import Egress
from kinds.cassandra.jmx import DEFAULT_JMX_PORT, JmxFailed, JmxSession

__all__ = ["DEFAULT_JMX_PORT", "KNOBS", "SnitchFailed", "SnitchJmx", "SnitchValues"]

#: The knobs, in updateSnitch's order.
KNOBS: Final = ("dynamic_snitch_update_interval", "dynamic_snitch_reset_interval", "dynamic_snitch_badness_threshold")
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


class SnitchJmx:
    """Read and set the dynamic snitch of nodes over JMX at `port` (module doc)."""

    def __init__(self, egress: Egress, port: int, username: str | None = None, password: str | None = None) -> None:
        self.egress = egress
        self.port = int(port)
        self.username = username
        self.password = password

    def _session(self, address: str) -> JmxSession:
        return JmxSession(self.egress, address, self.port, username=self.username, password=self.password,
                          timeout_s=_TIMEOUT_S)

    def _values(self, address: str, jmx: JmxSession) -> SnitchValues:
        names = jmx.names("org.apache.cassandra.db:type=DynamicEndpointSnitch,*")
        if not names:
            raise SnitchFailed(f"node {address} runs no dynamic snitch (dynamic_snitch: false): its settings have "
                               "no effect there")
        des = names[0]
        return SnitchValues(int(jmx.number(des, "UpdateInterval")), int(jmx.number(des, "ResetInterval")),
                            jmx.number(des, "BadnessThreshold"))

    def _call(self, address: str, values: SnitchValues | None) -> SnitchValues:
        try:
            with self._session(address) as jmx:
                if values is not None:
                    jmx.update_snitch(values.update_ms, values.reset_ms, values.badness)
                return self._values(address, jmx)
        except JmxFailed as exc:
            raise SnitchFailed(str(exc), hint="the live replay reaches every node's JMX port (connection.jmx_port) "
                               "to alternate the dynamic snitch's settings") from None

    def read(self, address: str) -> SnitchValues:
        """The node's running dynamic snitch's settings."""
        return self._call(address, None)

    def apply(self, address: str, values: SnitchValues) -> SnitchValues:
        """Set the node's settings and read them back: SnitchFailed unless it shows them."""
        back = self._call(address, values)
        if not back.same(values):
            raise SnitchFailed(f"node {address}: after updateSnitch its dynamic snitch shows {back.as_knobs()}, "
                               f"not {values.as_knobs()}")
        return back
