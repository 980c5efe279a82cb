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
`GeneratorResult` (`result.parse_result`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
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

__all__ = ["JVM_OPTIONS", "build", "cache_root", "fetch_lib", "run_java"]

_HERE: Final = Path(__file__).resolve().parent
_SOURCE: Final = _HERE / "Generator.java"
_POM: Final = _HERE / "pom.xml"
PASSWORD_ENV: Final = "TAILTUNE_GENERATOR_PASSWORD"

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
        plan_path = write_plan(plan, folder / "plan.bin")
        config_path = folder / "config.json"
        import json

        config_path.write_text(json.dumps(config.to_json()))
        command = [
            java, f"-Xms{heap}", f"-Xmx{heap}", *JVM_OPTIONS, *sandbox, *extra_jvm_options,
            "-cp", f"{classes}{os.pathsep}{lib}/*", "Generator", str(plan_path), str(config_path),
        ]
        with tempfile.TemporaryFile(dir=tmp) as err, tempfile.TemporaryFile(dir=tmp) as out:
            proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
            deadline = time.monotonic() + _timeout_s(plan, config)
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
