"""The Java generator: its jars fetched once, `Generator.java` compiled once per source, and a run.

`fetch_lib()` copies the runtime dependencies of `pom.xml` (beside this module: java-driver-core 4.19.0 and
HdrHistogram 2.2.2) with `mvn dependency:copy-dependencies` into `<cache>/lib-<pom hash>/`; once there, nothing is
fetched again (offline-safe). `build()` compiles `Generator.java` with `javac` against them into
`<cache>/generator-<hash>/` (the hash of the source and the jars' folder), once. The cache is
`TAILTUNE_GENERATOR_CACHE`, or `~/.cache/tailtune/replay-generator`. `scripts/setup.sh` does both
(`python -m kinds.cassandra.replay.generator build`); a first run does them too.

`run_java(plan, config)` writes the plan and the config into a private temporary folder, starts the JVM under
the egress rules' sandbox (`control.egress.Egress.jvm_options`: it may connect to the allowed endpoints only and
resolve no name; the driver's own node filter is the second wall), with the password, if any, in its environment
(never in a file, an argument or the output), reads its one line of stdout (capped) and returns the checked
`GeneratorResult` (`result.parse_result`). `probe_java(plan, config, rounds)` starts it the same way in its probe
mode (`Generator.java`): each arm's statement timed one at a time, the latencies returned (`parse_probe`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from base.errors import TailtuneError
from base.javac import cache_root, compile_once
from control.egress import Egress
from kinds.cassandra.replay.config import ConfigError, GeneratorConfig
from kinds.cassandra.replay.plan import Plan, write_plan
from kinds.cassandra.replay.result import (
    MAX_OUTPUT,
    GeneratorAborted,
    GeneratorFailed,
    GeneratorOutputError,
    GeneratorResult,
    parse_result,
)

__all__ = ["JVM_OPTIONS", "MAX_PROBE_ROUNDS", "build", "cache_root", "fetch_lib", "parse_probe", "probe_java",
           "run_java"]

_HERE: Final = Path(__file__).resolve().parent
_SOURCE: Final = _HERE / "Generator.java"
_POM: Final = _HERE / "pom.xml"
PASSWORD_ENV: Final = "TAILTUNE_GENERATOR_PASSWORD"
#: Most timed or warm-up rounds of a probe (`Generator.java`'s MAX_PROBE_ROUNDS).
MAX_PROBE_ROUNDS: Final = 1_000_000

#: The generator's JVM: a fixed heap (no resizing during a run) and its JIT stopped at C1. C2's compiles run on
#: the generator's own cores for the first tens of seconds of a run and delay its sends: measured on a pinned
#: core (bench/RESULTS.md § Live replay load generators), C1 alone spent less CPU per request and lagged less in
#: a 15 s window after a 10 s warm-up. `extra_jvm_options` come after these (`-XX:TieredStopAtLevel=4` restores
#: C2). The environment's JAVA_TOOL_OPTIONS is not passed on.
JVM_OPTIONS: Final = ("-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Dio.netty.tryReflectionSetAccessible=true")




def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
        h.update(b"\0")
    return h.hexdigest()[:12]


def fetch_lib(cache: Path | None = None) -> Path:
    """The folder of the generator's jars, fetched with Maven the first time (then never again)."""
    root = cache or cache_root()
    pom = _POM.read_bytes()
    lib = root / f"lib-{_digest(pom)}"
    if (lib / ".complete").is_file():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise TailtuneError(
            "the Java load generator's jars are not fetched yet and Maven (mvn) is not installed",
            hint="apt-get install maven (scripts/setup.sh installs it and fetches them)",
        )
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=root))
    try:
        (work / "pom.xml").write_bytes(pom)
        r = subprocess.run(
            [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={work / 'lib'}"],
            capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
        )
        if r.returncode != 0:
            raise TailtuneError(
                f"fetching the Java load generator's jars failed: {(r.stdout + r.stderr).strip()[-2000:]}",
                hint="Maven must reach Maven Central once (then the jars are cached)",
            )
        (work / "lib" / ".complete").write_text("\n".join(sorted(p.name for p in (work / "lib").glob("*.jar"))))
        try:
            (work / "lib").rename(lib)
        except OSError:  # fetched meanwhile by another process
            if not (lib / ".complete").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lib


def build(cache: Path | None = None) -> tuple[Path, Path]:
    """(compiled classes, jars) of the generator, compiling it the first time for this source and these jars."""
    lib = fetch_lib(cache)
    source = _SOURCE.read_bytes()
    out = lib.parent / f"generator-{_digest(source, str(lib.resolve()).encode())}"
    return compile_once(_SOURCE, lib, out, main_class="Generator", purpose="the Java load generator"), lib


def _launch(
    inputs: Callable[[Path], list[str]], config: GeneratorConfig, *, timeout_s: float, egress: Egress | None,
    password: str | None, heap: str, cache: Path | None, extra_jvm_options: Sequence[str],
    stop: threading.Event | None, mode: Sequence[str] = (), tail: Sequence[str] = (),
) -> tuple[int, bytes, str]:
    """Start the generator's JVM under the egress rules' sandbox on `mode`, the files `inputs` writes into a private
    folder, the config, and `tail` (its arguments); its exit status, its stdout (capped, the password scrubbed) and
    the tail of its stderr. GeneratorFailed "cancelled" when `stop` is set, "timeout" past `timeout_s`."""
    if egress is None:
        from base.settings import get_settings

        egress = Egress.of(get_settings())
    sandbox = egress.jvm_options([e.key() for e in config.allowed])
    classes, lib = build(cache)
    java = shutil.which("java")
    if java is None:
        raise TailtuneError("the Java load generator needs Java 17", hint="apt-get install openjdk-17-jdk-headless")
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", PASSWORD_ENV, "CLASSPATH")}
    if password is not None:
        env[PASSWORD_ENV] = password
    with tempfile.TemporaryDirectory(prefix="tailtune-generator-") as tmp:
        folder = Path(tmp)
        files = inputs(folder)
        config_path = folder / "config.json"
        config_path.write_text(json.dumps(config.to_json()))
        command = [
            java, f"-Xms{heap}", f"-Xmx{heap}", *JVM_OPTIONS, *sandbox, *extra_jvm_options,
            "-cp", f"{classes}{os.pathsep}{lib}/*", "Generator", *mode, *files, str(config_path), *tail,
        ]
        with tempfile.TemporaryFile(dir=tmp) as err, tempfile.TemporaryFile(dir=tmp) as out:
            proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
            deadline = time.monotonic() + timeout_s
            try:
                while True:
                    try:
                        status = proc.wait(timeout=0.2)
                        break
                    except subprocess.TimeoutExpired:
                        if stop is not None and stop.is_set():
                            raise GeneratorFailed("cancelled", "the run was stopped") from None
                        if time.monotonic() > deadline:
                            raise GeneratorFailed("timeout", "the Java load generator did not finish in time"
                                                  ) from None
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            out.seek(0)
            raw = out.read(MAX_OUTPUT + 1)
            err.seek(0)
            err_tail = _scrub(err.read()[-4000:].decode("utf-8", errors="replace"), password)
    raw = _scrub(raw.decode("utf-8", errors="replace"), password).encode() if password else raw
    return status, raw, err_tail


def probe_java(
    plan: Plan,
    config: GeneratorConfig,
    rounds: int,
    *,
    warmup: int = 0,
    egress: Egress | None = None,
    password: str | None = None,
    heap: str = "256m",
    cache: Path | None = None,
    stop: threading.Event | None = None,
) -> dict[str, list[float]]:
    """The Java generator's probe mode (`Generator.java`): each arm's statement, bound to its first request's
    values, executed one at a time in rounds (arm 0, arm 1, ..., again), `warmup` rounds uncounted, then `rounds`
    timed client-side around the driver's execute; each arm's latencies in ms, in the order timed. Same sandbox and
    node filter as `run_java`. Raises ConfigError/PlanError before anything starts, GeneratorFailed (the JVM
    refused its input, could not connect, or an execution failed: the driver's error), GeneratorOutputError (its
    output is not a probe of this plan)."""
    config.check()
    plan.check()
    if [a.name for a in plan.arms] != [a.name for a in config.arms]:
        raise GeneratorFailed("bad_input", "the plan's arms and the config's are not the same names in one order")
    if not 1 <= rounds <= MAX_PROBE_ROUNDS or not 0 <= warmup <= MAX_PROBE_ROUNDS:
        raise ConfigError(f"probe: rounds 1 to {MAX_PROBE_ROUNDS}, warm-up rounds 0 to {MAX_PROBE_ROUNDS}")
    for i, a in enumerate(plan.arms):
        if i not in plan.arm:
            raise ConfigError(f"probe: arm {a.name!r} has no request in the plan (its values)")
    waits = max(a.request_timeout_ms * a.speculative_max_executions for a in config.arms) / 1e3
    # a generous bound: a round trip of each arm at its request timeout would be far past it, the calibration's
    # rounds take milliseconds
    timeout = 120.0 + 4 * config.connect_timeout_ms / 1e3 + waits + (rounds + warmup) * len(plan.arms) * 0.05
    status, raw, err_tail = _launch(lambda folder: [str(write_plan(plan, folder / "plan.bin"))], config,
                                    timeout_s=timeout, egress=egress, password=password, heap=heap, cache=cache,
                                    extra_jvm_options=(), stop=stop, mode=("probe",),
                                    tail=(str(rounds), str(warmup)))
    return parse_probe(raw, plan, rounds, status=status, err_tail=err_tail)


def parse_probe(raw: bytes, plan: Plan, rounds: int, *, status: int = 0, err_tail: str = "") -> dict[str, list[float]]:
    """The checked latencies (ms) of a probe's one line of JSON: each plan arm's, in its order, exactly `rounds`
    finite non-negative numbers; GeneratorFailed for the generator's own error, GeneratorOutputError otherwise."""
    if len(raw) > MAX_OUTPUT:
        raise GeneratorOutputError(f"the Java load generator's probe output is more than {MAX_OUTPUT} bytes")
    try:
        obj = json.loads(raw.decode("utf-8").strip() or "null")
    except (UnicodeDecodeError, ValueError):
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("error"), str):
        message = obj.get("message")
        raise GeneratorFailed(obj["error"][:64], str(message)[:2000] if message is not None else "(no message)",
                              status=status)
    if not isinstance(obj, dict) or obj.get("mode") != "probe" or not isinstance(obj.get("arms"), list):
        tail = err_tail.strip().splitlines()[-5:]
        if status != 0:
            raise GeneratorFailed("crash", f"the JVM exited with {status}: {' | '.join(tail) or '(no message)'}",
                                  status=status)
        raise GeneratorOutputError("the Java load generator's probe output is not a JSON object of mode probe")
    arms = obj["arms"]
    if len(arms) != len(plan.arms):
        raise GeneratorOutputError(f"the probe reports {len(arms)} arms, the plan has {len(plan.arms)}")
    out: dict[str, list[float]] = {}
    for want, got in zip(plan.arms, arms, strict=True):
        if not isinstance(got, dict) or got.get("name") != want.name:
            raise GeneratorOutputError(f"the probe's arms are not the plan's ({want.name!r} expected)")
        values = got.get("latencies_us")
        if not isinstance(values, list) or len(values) != rounds:
            raise GeneratorOutputError(f"the probe's arm {want.name!r}: {rounds} latencies expected")
        ms: list[float] = []
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 3.6e9:
                raise GeneratorOutputError(f"the probe's arm {want.name!r}: a latency {v!r} is not 0 µs to an hour")
            ms.append(float(v) / 1000.0)
        out[want.name] = ms
    if status != 0:
        raise GeneratorOutputError(f"the Java load generator exited with {status} after a finished probe")
    return out


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _timeout_s(plan: Plan, config: GeneratorConfig) -> float:
    last = plan.offsets_us[-1] / 1e6 / config.rate_scale if len(plan) else 0.0
    if config.duration_s is not None:
        last = min(last, config.duration_s)
    waits = max(a.request_timeout_ms * a.speculative_max_executions for a in config.arms) / 1e3
    return 120.0 + config.warmup_s + last + waits + 4 * config.connect_timeout_ms / 1e3


def run_java(
    plan: Plan,
    config: GeneratorConfig,
    *,
    egress: Egress | None = None,
    password: str | None = None,
    heap: str = "512m",
    cache: Path | None = None,
    extra_jvm_options: Sequence[str] = (),
    stop: threading.Event | None = None,
) -> GeneratorResult:
    """Run `plan` under `config` on the Java driver (see the module doc). Raises ConfigError/PlanError before
    anything starts, GeneratorFailed (the JVM refused its input or could not connect; "cancelled" when `stop`
    was set: the JVM is killed), GeneratorAborted (with the partial result), GeneratorOutputError (its output is
    not a result of this plan)."""
    config.check()
    plan.check()
    if [a.name for a in plan.arms] != [a.name for a in config.arms]:
        raise GeneratorFailed("bad_input", "the plan's arms and the config's are not the same names in one order")
    for arm in config.arms:
        if arm.shuffle_replicas is False:
            raise ConfigError(f"generator config: arm {arm.name!r}: the Java driver 4 always shuffles replicas "
                              "(shuffle_replicas false is a Python driver setting)")
    status, raw, err_tail = _launch(lambda folder: [str(write_plan(plan, folder / "plan.bin"))], config,
                                    timeout_s=_timeout_s(plan, config), egress=egress, password=password,
                                    heap=heap, cache=cache, extra_jvm_options=extra_jvm_options, stop=stop)
    try:
        result = parse_result(raw, plan, config)
    except GeneratorFailed as exc:
        raise GeneratorFailed(exc.kind, exc.detail, status=status) from None
    except GeneratorOutputError:
        if status not in (0, 3):
            tail = err_tail.strip().splitlines()[-5:]
            raise GeneratorFailed("crash", f"the JVM exited with {status}: {' | '.join(tail) or '(no message)'}",
                                  status=status) from None
        raise
    if result.status == "aborted":
        raise GeneratorAborted(result)
    if status != 0:
        raise GeneratorOutputError(f"the Java load generator exited with {status} after a finished result")
    return result
