"""The live replay's load generators for Cassandra, one entry: a plan (`plan`), a config (`config`), a run through
the deployment's real driver, a checked result (`result`).

* `run_java(plan, config)` — the Apache Cassandra Java driver 4 (java-driver-core 4.19.0), for deployments whose
  `driver` is `java4`: its speculative executions and slow replica avoidance run for real, on a netty timer whose
  tick the config sets (`jvm`; `Generator.java`).
* `run_python(plan, config)` — the DataStax Python driver, for `python` deployments (`pydriver`).
* `run(driver, plan, config)` — the one of the two the deployment's driver names.
* `probe_java(plan, config, rounds, warmup=)` — the Java generator's probe mode: each arm's statement executed
  one at a time, in rounds, after uncounted warm-up rounds, each execution's latency returned (ms): calibration's
  timing of the client path of a `java4` deployment (`kinds.cassandra.calibration`).

Both send open loop (each request at its intended time, its latency from that time: no coordinated omission),
measure their own lag and CPU per request, and return the same `GeneratorResult`; `GeneratorResult.require_lag`
refuses a comparison whose generator lagged past a limit.

`python -m kinds.cassandra.replay.generator build` fetches the Java generator's jars and compiles it
(`scripts/setup.sh` runs it); it prints the folder of the classes.
"""

from __future__ import annotations

import sys
import threading

from control.egress import Egress
from kinds.cassandra.replay.config import ArmProfile, ConfigError, Endpoint, GeneratorConfig
from kinds.cassandra.replay.jvm import build, probe_java, run_java
from kinds.cassandra.replay.plan import Plan, PlanArm, PlanError, encode_value, read_plan, write_plan
from kinds.cassandra.replay.pydriver import run_python
from kinds.cassandra.replay.result import (
    GeneratorAborted,
    GeneratorFailed,
    GeneratorOutputError,
    GeneratorResult,
    LagTooHigh,
)

__all__ = [
    "DRIVERS",
    "ArmProfile",
    "ConfigError",
    "Endpoint",
    "GeneratorAborted",
    "GeneratorConfig",
    "GeneratorFailed",
    "GeneratorOutputError",
    "GeneratorResult",
    "LagTooHigh",
    "Plan",
    "PlanArm",
    "PlanError",
    "build",
    "encode_value",
    "probe_java",
    "read_plan",
    "run",
    "run_java",
    "run_python",
    "write_plan",
]

#: A deployment's `driver` → its generator.
DRIVERS = {"java4": run_java, "python": run_python}


def run(
    driver: str, plan: Plan, config: GeneratorConfig, *, egress: Egress | None = None, password: str | None = None,
    stop: threading.Event | None = None,
) -> GeneratorResult:
    """Run `plan` under `config` on the generator of `driver` (`java4` or `python`); a set `stop` ends it
    (GeneratorFailed "cancelled")."""
    if driver == "java4":
        return run_java(plan, config, egress=egress, password=password, stop=stop)
    if driver == "python":
        return run_python(plan, config, egress=egress, password=password, stop=stop)
    raise ConfigError(f"no load generator for driver {driver!r} (one of {', '.join(DRIVERS)})")


def main(argv: list[str] | None = None) -> int:
    """`python -m kinds.cassandra.replay.generator build`: fetch the Java generator's jars, compile it."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["build"]:
        print("usage: python -m kinds.cassandra.replay.generator build", file=sys.stderr)
        return 2
    classes, _lib = build()
    print(classes)
    from kinds.cassandra.jmx import compiled

    print(compiled())
    return 0


if __name__ == "__main__":
    sys.exit(main())
