"""How a generator runs a plan: where it connects, which nodes it may touch, and each arm's driver profile.

The Java generator reads this as a JSON file (`GeneratorConfig.to_json`); the Python generator takes the object.
Fields (JSON names are the attribute names):

* `contact_points`, `allowed`: endpoints `{"address": IP literal, "port": int}`. The node filter admits a node
  only when its address and port are in `allowed`; every contact point must be in it. Addresses are literals
  already checked by the egress rules (`control.egress`): nothing is resolved.
* `local_dc`: the driver's local datacenter. `keyspace`: the session's keyspace (or null). `username`: a login
  (its password is given to the run, never written here).
* `arms`: one `ArmProfile` per plan arm, in the plan's order, same names: `consistency`, `request_timeout_ms`,
  `speculative_class` (`NoSpeculativeExecutionPolicy` or `ConstantSpeculativeExecutionPolicy`),
  `speculative_max_executions` (the Java driver's `max-executions`: the first execution included),
  `speculative_delay_ms`, `slow_replica_avoidance` (the Java driver's; null: its default, true; the Python
  driver has no such mechanism and refuses true), `shuffle_replicas` (the Python driver's token-aware policy;
  null: its default; the Java driver 4 always shuffles and refuses false).
* `timer_tick_ms`: the Java driver's `advanced.netty.timer.tick-duration` (default 100 ms in the driver, which
  would fire a 10 ms hedge on a 100 ms tick; 1 ms here). A speculative delay below it is refused.
* `rate_scale`: request i is sent at offset_i / rate_scale (2: twice as fast). `duration_s`: only requests
  intended before it are sent (null: the whole plan). `warmup_s`: the plan's first seconds are run once before
  the measured run, unrecorded (the JIT, the connections, the caches).
* `block_s`: each arm's latencies are also kept per block of this many seconds of intended send time (block b:
  the requests intended in [b, b + 1) × block_s, scaled; `result.block_of`), at 2 significant digits; null: no
  blocks. At most `MAX_BLOCK_HISTOGRAMS` (arms × blocks) per run.
* `max_in_flight`: outstanding queries at most (a request of more queries than this holds them all); a send
  short of them waits (that wait is lag, counted in `throttled`).
* `max_error_fraction`, `abort_after`: once `abort_after` requests completed, a run whose errors and timeouts
  exceed that fraction of them stops sending and reports `status: aborted` (the Java generator exits 3).
* `spin_us`: the scheduling thread sleeps until this long before a send and spins the rest (0: sleeps only).
* `connect_timeout_ms`: connecting, the session's setup queries, the schema's.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass
from typing import Any, Final

from base.errors import TailtuneError

__all__ = [
    "CONSISTENCIES",
    "MAX_BLOCK_HISTOGRAMS",
    "SPECULATIVE_CLASSES",
    "TIMER_TICK_MS",
    "ArmProfile",
    "ConfigError",
    "Endpoint",
    "GeneratorConfig",
]

CONSISTENCIES: Final = frozenset(
    {"ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_ONE", "LOCAL_QUORUM", "EACH_QUORUM"}
)
SPECULATIVE_CLASSES: Final = ("NoSpeculativeExecutionPolicy", "ConstantSpeculativeExecutionPolicy")
#: The Java generator's `advanced.netty.timer.tick-duration`, ms (the driver's default is 100).
TIMER_TICK_MS: Final = 1
#: Most per-block histograms (arms × blocks) one run keeps (about 27 KiB each in the JVM).
MAX_BLOCK_HISTOGRAMS: Final = 4096
_ARM_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAME: Final = re.compile(r"[A-Za-z0-9_]{1,48}")


class ConfigError(TailtuneError):
    """A generator config that breaks a rule (exit code 2, as bad input)."""

    exit_code = 2


@dataclass(frozen=True)
class Endpoint:
    """A node's native-protocol endpoint: an IP literal and a port."""

    address: str
    port: int

    def key(self) -> tuple[str, int]:
        """(normalized address, port): how the node filters compare endpoints."""
        return str(ipaddress.ip_address(self.address.strip("[]"))), self.port


@dataclass(frozen=True)
class ArmProfile:
    """One arm's execution profile (the driver settings a recommendation sets)."""

    name: str
    consistency: str = "LOCAL_ONE"
    request_timeout_ms: int = 2000
    speculative_class: str = "NoSpeculativeExecutionPolicy"
    speculative_max_executions: int = 1
    speculative_delay_ms: int = 0
    slow_replica_avoidance: bool | None = None
    #: The Python driver's `TokenAwarePolicy(shuffle_replicas=)` (null: the driver's default; the Java driver 4
    #: always shuffles and refuses false).
    shuffle_replicas: bool | None = None

    @property
    def hedges(self) -> bool:
        return self.speculative_class == "ConstantSpeculativeExecutionPolicy" and self.speculative_max_executions > 1


@dataclass(frozen=True)
class GeneratorConfig:
    """See the module doc."""

    contact_points: tuple[Endpoint, ...]
    allowed: tuple[Endpoint, ...]
    local_dc: str
    arms: tuple[ArmProfile, ...]
    keyspace: str | None = None
    username: str | None = None
    timer_tick_ms: int = TIMER_TICK_MS
    rate_scale: float = 1.0
    duration_s: float | None = None
    block_s: float | None = None
    warmup_s: float = 0.0
    max_in_flight: int = 1024
    max_error_fraction: float = 0.01
    abort_after: int = 100
    spin_us: int = 50
    connect_timeout_ms: int = 10_000

    def allowed_keys(self) -> frozenset[tuple[str, int]]:
        return frozenset(e.key() for e in self.allowed)

    def check(self) -> None:
        """ConfigError for the first rule the config breaks (the Java generator applies the same)."""
        problems = self.problems()
        if problems:
            raise ConfigError(f"generator config: {problems[0]}")

    def problems(self) -> list[str]:
        out: list[str] = []
        if not 1 <= len(self.contact_points) <= 64:
            out.append("1 to 64 contact points expected")
        if not 1 <= len(self.allowed) <= 4096:
            out.append("1 to 4096 allowed endpoints expected")
        for e in (*self.contact_points, *self.allowed):
            try:
                e.key()
            except ValueError:
                out.append(f"{e.address!r} is not an IP address (a checked address, never a name)")
            if not isinstance(e.port, int) or not 0 < e.port < 65536:
                out.append(f"{e.address}: port {e.port!r} is not 1..65535")
        if out:
            return out
        allowed = self.allowed_keys()
        for e in self.contact_points:
            if e.key() not in allowed:
                out.append(
                    f"contact point {e.address}:{e.port} is not in the allow-list: the generator connects to "
                    "allowed nodes only"
                )
        if not self.local_dc or len(self.local_dc) > 256:
            out.append("local_dc: a datacenter name expected")
        if self.keyspace is not None and not _NAME.fullmatch(self.keyspace):
            out.append(f"keyspace {self.keyspace!r} is not a CQL name")
        if self.username is not None and not 0 < len(self.username) <= 256:
            out.append("username: 1 to 256 characters")
        if not 1 <= self.timer_tick_ms <= 1000:
            out.append("timer_tick_ms: 1 to 1000")
        if not 1e-6 <= self.rate_scale <= 1e6:
            out.append("rate_scale: 1e-6 to 1e6")
        if self.duration_s is not None and not 1e-3 <= self.duration_s <= 1e7:
            out.append("duration_s: 0.001 to 1e7 s, or null")
        if self.block_s is not None and not 1e-3 <= self.block_s <= 1e7:
            out.append("block_s: 0.001 to 1e7 s, or null")
        if not 0 <= self.warmup_s <= 3600:
            out.append("warmup_s: 0 to 3600")
        if not 1 <= self.max_in_flight <= 1 << 20:
            out.append("max_in_flight: 1 to 1048576")
        if not 0 <= self.max_error_fraction <= 1:
            out.append("max_error_fraction: 0 to 1")
        if self.abort_after < 1:
            out.append("abort_after: at least 1")
        if not 0 <= self.spin_us <= 100_000:
            out.append("spin_us: 0 to 100000")
        if not 1 <= self.connect_timeout_ms <= 600_000:
            out.append("connect_timeout_ms: 1 to 600000")
        if not 1 <= len(self.arms) <= 64:
            out.append("1 to 64 arms expected")
        if len({a.name for a in self.arms}) != len(self.arms):
            out.append("two arms have one name")
        for a in self.arms:
            out.extend(f"arm {a.name!r}: {p}" for p in self._arm_problems(a))
        return out

    def _arm_problems(self, a: ArmProfile) -> list[str]:
        out = []
        if not _ARM_NAME.fullmatch(a.name):
            out.append("its name is not [A-Za-z0-9_-]{1,64}")
        if a.consistency not in CONSISTENCIES:
            out.append(f"consistency {a.consistency!r} is not one of {', '.join(sorted(CONSISTENCIES))}")
        if not 1 <= a.request_timeout_ms <= 600_000:
            out.append("request_timeout_ms: 1 to 600000")
        if a.speculative_class not in SPECULATIVE_CLASSES:
            out.append(f"speculative_class {a.speculative_class!r} is not one of {', '.join(SPECULATIVE_CLASSES)}")
        if not 1 <= a.speculative_max_executions <= 16:
            out.append("speculative_max_executions: 1 to 16")
        if not 0 <= a.speculative_delay_ms <= 600_000:
            out.append("speculative_delay_ms: 0 to 600000")
        if a.hedges and 0 < a.speculative_delay_ms < self.timer_tick_ms:
            out.append(
                f"a speculative delay of {a.speculative_delay_ms} ms under a timer tick of {self.timer_tick_ms} ms "
                "fires on the tick, late: lower timer_tick_ms"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        """The JSON object the Java generator reads (no password: it is given to the run apart)."""
        d = asdict(self)
        d["contact_points"] = [{"address": e.key()[0], "port": e.port} for e in self.contact_points]
        d["allowed"] = [{"address": e.key()[0], "port": e.port} for e in self.allowed]
        d["arms"] = [
            {**asdict(a), "slow_replica_avoidance": a.slow_replica_avoidance is not False} for a in self.arms
        ]
        return d
