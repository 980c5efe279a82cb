"""A single-node Apache Cassandra 5.0.x on 127.0.0.1 from the Maven Central `cassandra-all` jars (no Docker).

`fetch_jars()` runs `mvn dependency:copy-dependencies` once into a cache dir (`TAILTUNE_CASSANDRA_CACHE`,
default `~/.cache/tailtune/cassandra-<version>`); `CassandraNode` writes a minimal cassandra.yaml +
logback.xml into its own folder, starts `java ... org.apache.cassandra.service.CassandraDaemon` with Java 17's
`--add-exports/--add-opens` (from Cassandra's conf/jvm17-server.options) and the fast-start flags (ring_delay
1 s, no gossip settle wait), on free ports, and always stops it. `python -m tests.servers.cassandra_server
fetch|run` for manual use.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from control.egress import Egress

__all__ = [
    "DEFAULT_VERSION",
    "CassandraNode",
    "cache_dir",
    "fetch_jars",
    "free_port",
    "jmx_tool",
    "nodetool",
    "running_cassandra",
]

DEFAULT_VERSION = "5.0.9"

JVM17_OPTIONS = [
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports",
    "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports",
    "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports",
    "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports",
    "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports",
    "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens",
    "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens",
    "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
]

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tailtune</groupId><artifactId>cassandra-fetch</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId><version>{version}</version>
  </dependency></dependencies>
</project>
"""

_LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d %-5level [%thread] %logger{{36}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def cache_dir(version: str = DEFAULT_VERSION) -> Path:
    base = os.environ.get("TAILTUNE_CASSANDRA_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "tailtune" / f"cassandra-{version}"


def fetch_jars(version: str = DEFAULT_VERSION, dest: Path | None = None) -> Path:
    """The folder of cassandra-all + runtime dependency jars, downloading them with Maven the first time."""
    root = dest or cache_dir(version)
    lib = root / "lib"
    if (lib / f"cassandra-all-{version}.jar").is_file():
        return lib
    if shutil.which("mvn") is None:
        raise RuntimeError("Maven (mvn) is not installed: apt-get install -y maven")
    root.mkdir(parents=True, exist_ok=True)
    (root / "pom.xml").write_text(_POM.format(version=version))
    tmp = root / "lib.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(
        [
            "mvn",
            "-q",
            "-f",
            str(root / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={tmp}",
        ],
        check=True,
    )
    tmp.rename(lib)
    return lib


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CassandraNode:
    """One Cassandra node in `workdir` on free 127.0.0.1 ports. `start()`, `pause()/resume()`, `stop()`."""

    def __init__(self, workdir: Path, lib: Path, heap: str = "384M") -> None:
        self.workdir = workdir
        self.lib = lib
        self.heap = heap
        self.host = "127.0.0.1"
        self.port = free_port()
        self.storage_port = free_port()
        self.jmx_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def _write_config(self) -> Path:
        d = self.workdir
        for sub in ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        (d / "cassandra.yaml").write_text(f"""cluster_name: tailtune-test
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{self.storage_port}"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: {self.storage_port}
native_transport_port: {self.port}
start_native_transport: true
data_file_directories: [{d / "data"}]
commitlog_directory: {d / "commitlog"}
saved_caches_directory: {d / "saved_caches"}
hints_directory: {d / "hints"}
cdc_raw_directory: {d / "cdc_raw"}
commitlog_sync: periodic
commitlog_sync_period: 10000ms
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
""")
        (d / "logback.xml").write_text(_LOGBACK.format(log=d / "logs" / "system.log"))
        return d / "cassandra.yaml"

    def command(self) -> list[str]:
        yaml = self._write_config()
        d = self.workdir
        return [
            "java",
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            *JVM17_OPTIONS,
            f"-Dcassandra.config=file://{yaml}",
            f"-Dcassandra.storagedir={d}",
            f"-Dcassandra.logdir={d / 'logs'}",
            f"-Dlogback.configurationFile={d / 'logback.xml'}",
            f"-Dcassandra.jmx.local.port={self.jmx_port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={self.jmx_port}",  # the connector on the registry's port
            "-Dcassandra.ring_delay_ms=1000",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            "-Dcassandra-foreground=yes",
            "-cp",
            f"{self.lib}/*",
            "org.apache.cassandra.service.CassandraDaemon",
        ]

    def start(self, timeout_s: float = 300.0) -> None:
        out = (self.workdir / "stdout.log").open("wb")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cassandra exited with {self.proc.returncode}; see {self.workdir}/logs")
            if self._cql_ok():
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"cassandra did not accept CQL within {timeout_s}s; see {self.workdir}/logs")

    def _cql_ok(self) -> bool:
        try:
            socket.create_connection((self.host, self.port), timeout=0.5).close()
        except OSError:
            return False
        from cassandra.cluster import Cluster

        cluster = Cluster([self.host], port=self.port, protocol_version=5, connect_timeout=2)
        try:
            cluster.connect().execute("SELECT release_version FROM system.local")
            return True
        except Exception:
            return False
        finally:
            cluster.shutdown()

    def pause(self) -> None:
        """SIGSTOP: the node stops answering (connections hang) — a target that times out."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


def nodetool(node: CassandraNode, *args: str, timeout_s: float = 120.0, host: str | None = None) -> str:
    """Run `nodetool ARGS` against the node over its local JMX port (Cassandra's own NodeTool from the jars: there
    is no nodetool script here), e.g. `nodetool(node, "enablefullquerylog", "--path", DIR)`; its output. `host`:
    where that port listens when not the node's address (a local JMX port binds the loopback address
    127.0.0.1 whatever the node's own address is)."""
    return jmx_tool(node.lib, host or node.host, node.jmx_port, *args, timeout_s=timeout_s,
                    logback=node.workdir / "logback.xml")


def jmx_tool(lib: Path, host: str, port: int, *args: str, timeout_s: float = 120.0,
             logback: Path | None = None) -> str:
    """Cassandra's NodeTool (from the jars in `lib`) over JMX at `host`:`port`; its output. The JVM is pinned
    to the address the egress check resolved `host` to and to `port` (`Egress.jvm_options`): the RMI stub the
    server sends names where to connect back to, and one naming another host or port is refused (the node
    exports its JMX connector on its registry's port, `com.sun.management.jmxremote.rmi.port`)."""
    egress = Egress()
    address = egress.resolve(host, port)[0]
    r = subprocess.run(
        [
            "java",
            *JVM17_OPTIONS,
            *egress.jvm_options([(address, port)]),
            *([f"-Dlogback.configurationFile={logback}"] if logback else []),
            "-cp",
            f"{lib}/*",
            "org.apache.cassandra.tools.NodeTool",
            "-h",
            address,
            "-p",
            str(port),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"nodetool {' '.join(args)} failed ({r.returncode}): {(r.stderr or r.stdout)[-2000:]}")
    return r.stdout


@contextlib.contextmanager
def running_cassandra(version: str = DEFAULT_VERSION, heap: str = "384M") -> Iterator[CassandraNode]:
    """Start a throw-away node (fetching jars if needed) and always stop it and remove its data."""
    lib = fetch_jars(version)
    workdir = Path(tempfile.mkdtemp(prefix="tailtune-cassandra-"))
    node = CassandraNode(workdir, lib, heap)
    try:
        node.start()
        yield node
    finally:
        node.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.servers.cassandra_server", description=__doc__)
    ap.add_argument("action", choices=["fetch", "run"])
    ap.add_argument("--version", default=DEFAULT_VERSION)
    a = ap.parse_args(argv)
    if a.action == "fetch":
        print(fetch_jars(a.version))
        return 0
    with running_cassandra(a.version) as node:
        print(f"cassandra {a.version} on {node.host}:{node.port} (Ctrl-C stops it)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while node.proc is not None and node.proc.poll() is None:
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
