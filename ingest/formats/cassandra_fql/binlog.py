"""`cassandra-fql`: the binary full query log, the chronicle-queue directory `nodetool enablefullquerylog --path
DIR` writes (docs/formats.md).

The log is read by `FqlReader.java` (beside this module), a small program on Cassandra's own jars (chronicle-queue
reads the files; `FullQueryLogger` and `BinLog` name the fields) that prints one JSON object per record. It is
compiled once per version of its source with `javac` against the jars, into `fql-reader-<hash>/` beside the jars'
folder (`scripts/setup.sh` does it: `python -m ingest.formats.cassandra_fql.binlog build`; a first ingest does it
too). The jars are the ones the project's setup fetches (cassandra-all 5.0.x from Maven Central), or the `lib/`
of a Cassandra 4.1+ installation (`TAILTUNE_CASSANDRA_LIB`). Reading needs a JDK 17 (`openjdk-17-jdk-headless`).

Line numbers of its problems are the records' numbers: the n-th record of the log (metadata documents not
counted) is line n. A log that cannot be read whole (a hole, a record not complete before the store's write
position, a file cut short, a record with its metadata bit set, a record that cannot be read) is refused naming the
cycle file and the byte offset of the document; a log still being written (its last record not complete, after the
write position) is read up to its last complete record, with a warning (`warnings`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, ClassVar, Final

from base.errors import BadInputError, TailtuneError
from base.javac import compile_once
from base.jvm_sandbox import sandbox_options
from ingest.formats.cassandra_fql.records import UNSET, QueryLogReader, Record, Statement, Value
from ingest.formats.head import Head

__all__ = [
    "CassandraFqlReader",
    "build_reader",
    "default_lib",
    "hash_log",
    "is_log_dir",
    "log_files",
]

_SOURCE: Final = Path(__file__).with_name("FqlReader.java")
_VERSION: Final = "5.0.9"

#: What the reader's JVM needs on Java 17 (chronicle-queue maps files and reads JDK internals).
JVM_OPTIONS: Final = (
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "-Dchronicle.analytics.disable=true",
    "-Dchronicle.announcer.disable=true",
)

_LOGBACK: Final = """<configuration>
  <appender name="ERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="ERR"/></root>
</configuration>
"""

#: The data files of a chronicle queue (`metadata.cq4t` beside them is bookkeeping).
_DATA_SUFFIX: Final = ".cq4"


def default_lib() -> Path:
    """Where the project's setup puts the cassandra-all jars (`TAILTUNE_CASSANDRA_CACHE`, as the test servers)."""
    base = os.environ.get("TAILTUNE_CASSANDRA_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "tailtune" / f"cassandra-{_VERSION}"
    return root / "lib"


def log_files(path: Path) -> list[Path]:
    """The chronicle-queue data files of a log directory, by name."""
    return sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_DATA_SUFFIX))


def is_log_dir(path: Path) -> bool:
    return path.is_dir() and bool(log_files(path))


def hash_log(path: Path) -> tuple[str, int]:
    """(sha256, bytes) of a log directory: over each data file's name, size and sha256, in name order."""
    h = hashlib.sha256()
    total = 0
    for f in log_files(path):
        fh = hashlib.sha256()
        size = 0
        with f.open("rb") as src:
            while block := src.read(8 << 20):
                fh.update(block)
                size += len(block)
        total += size
        h.update(f"{f.name}\0{size}\0{fh.hexdigest()}\n".encode())
    return h.hexdigest(), total


def _need(lib: Path) -> None:
    if not any(lib.glob("cassandra-all-*.jar")) and not any(lib.glob("apache-cassandra-*.jar")):
        raise TailtuneError(
            f"reading a binary full query log needs Cassandra's jars; none in {lib}",
            hint="run scripts/setup.sh (it fetches them), or set TAILTUNE_CASSANDRA_LIB to the lib/ folder of a "
            "Cassandra 4.1+ installation; or ingest the text of `fqltool dump` (--format cassandra-fql-dump)",
        )


def build_reader(lib: Path) -> Path:
    """The folder of the compiled reader for the jars in `lib` (compiling it the first time)."""
    _need(lib)
    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(source + str(lib.resolve()).encode()).hexdigest()[:12]
    out = lib.parent / f"fql-reader-{digest}"
    return compile_once(_SOURCE, lib, out, main_class="FqlReader", purpose="reading a binary full query log",
                        files={"logback.xml": _LOGBACK})

def _values(raw: Any, where: str) -> list[Value]:
    if not isinstance(raw, list):
        raise ValueError(f"{where} is not a list")
    out: list[Value] = []
    for v in raw:
        if v is None:
            out.append(None)
        elif v == UNSET:
            out.append(UNSET)
        elif isinstance(v, str):
            out.append(bytes.fromhex(v))
        else:
            raise ValueError(f"{where} holds {v!r}")
    return out


class CassandraFqlReader(QueryLogReader):
    """The binary full query log (see the module doc)."""

    name: ClassVar[str] = "cassandra-fql"
    sniff_rank: ClassVar[int | None] = 15
    reads_directory: ClassVar[bool] = True

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        raw = head.raw
        if len(raw) >= 32 and raw[4:12] == b"\xb9\x06header" and b"SCQStore" in raw[:40]:
            return "a chronicle-queue file (SCQStore header)"
        return None

    @classmethod
    def hash_directory(cls, path: Path) -> tuple[str, int]:
        return hash_log(path)

    @classmethod
    def sniff_directory(cls, path: Path) -> str | None:
        files = log_files(path)
        if files:
            return f"a directory of chronicle-queue files ({len(files)} .cq4 file(s))"
        return None

    def records_of(self) -> Iterator[Record]:
        path = self.source.path
        label = self.source.label
        if not path.is_dir():
            where = f" ({path.parent})" if path.name.endswith(_DATA_SUFFIX) else ""
            raise BadInputError.single(
                label,
                "a binary full query log is the directory nodetool enablefullquerylog writes, not one file: "
                f"ingest the directory that holds it{where}",
                hint="or ingest the text of `fqltool dump` (--format cassandra-fql-dump)",
            )
        lib = self.options.cassandra_lib or default_lib()
        classes = build_reader(lib)
        java = shutil.which("java")
        if java is None:
            raise TailtuneError(
                "reading a binary full query log needs Java 17", hint="apt-get install openjdk-17-jdk-headless"
            )
        command = [
            java,
            *JVM_OPTIONS,
            *sandbox_options(),  # it reads files only: no connection, no name resolved (base.jvm_sandbox)
            f"-Dlogback.configurationFile={classes / 'logback.xml'}",
            "-cp",
            f"{classes}{os.pathsep}{lib}/*",
            "FqlReader",
            str(path),
        ]
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
            assert proc.stdout is not None
            try:
                yield from self._read(proc.stdout, label)
                status = proc.wait()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
            if status != 0:
                err.seek(0)
                text = err.read().decode("utf-8", errors="replace").strip()
                raise BadInputError.single(
                    label, f"the log reader stopped with status {status}: {text[-1500:] or '(no message)'}"
                )

    def _read(self, stream: IO[bytes], label: str) -> Iterator[Record]:
        for number, raw in enumerate(stream, start=1):
            try:
                obj = json.loads(raw)
            except ValueError:
                raise self.fatal(number, None, f"the log reader printed what is not JSON: {raw[:200]!r}") from None
            if not isinstance(obj, dict):
                raise self.fatal(number, None, "the log reader printed what is not a record")
            if "error" in obj:
                raise self._damaged(obj, label)
            if "unfinished" in obj:
                self._unfinished(obj["unfinished"], label)
                continue
            try:
                yield self._record(obj)
            except (KeyError, TypeError, ValueError) as exc:
                raise self.fatal(number, None, f"unexpected record from the log reader: {exc}") from None

    def _damaged(self, obj: dict[str, Any], label: str) -> Exception:
        """The reader's account of a log it cannot read whole: the cycle file and the byte offset of the document."""
        name, offset, done = obj.get("file"), obj.get("offset"), int(obj.get("record") or 0)
        where = f"{label.rstrip('/')}/{name}" if isinstance(name, str) else None
        after = f"after record {done:,}" if done else "before its first record"
        at = f"byte {offset} ({after}): " if isinstance(offset, int) else ""
        hint = (
            "the log is damaged (the dataset would silently miss what follows): ingest an intact copy, or the "
            "text of `fqltool dump` of what can be read"
        )
        return self.fatal(None, None, f"{at}{obj['error']}", hint=hint, file=where)

    def _unfinished(self, obj: Any, label: str) -> None:
        """A log still being written: its last record not complete, after the write position (a warning)."""
        if not isinstance(obj, dict):
            raise self.fatal(None, None, "unexpected end of the log from the log reader")
        name, offset, left = obj.get("file"), obj.get("offset"), obj.get("bytes")
        left = f"{left:,}" if isinstance(left, int) else "?"
        self.warnings.append(
            f"{label.rstrip('/')}/{name}: the log is still being written: ingested up to its last complete record; "
            f"the record at byte {offset} is not complete yet ({left} bytes left out). Run "
            "`nodetool disablefullquerylog` and ingest it again for the whole log"
        )

    @staticmethod
    def _record(obj: dict[str, Any]) -> Record:
        line = int(obj["record"])
        kind = str(obj["type"])
        keyspace = obj.get("keyspace")
        statements: list[Statement] = []
        if kind == "single-query":
            names = obj.get("names")
            statements.append(
                Statement(str(obj["query"]), _values(obj["values"], "values"), line, names=names)
            )
        else:
            queries = obj["queries"]
            values = obj["batch_values"]
            if len(queries) != len(values):
                raise ValueError(f"a batch of {len(queries)} statements with {len(values)} lists of values")
            for q, v in zip(queries, values, strict=True):
                statements.append(Statement(str(q), _values(v, "batch values"), line))
        return Record(line, kind, int(obj["start_ms"]), keyspace if isinstance(keyspace, str) else None, statements)


def main(argv: list[str] | None = None) -> int:
    """`python -m ingest.formats.cassandra_fql.binlog build [LIB]`: compile the reader (scripts/setup.sh)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "build" or len(args) > 2:
        print("usage: python -m ingest.formats.cassandra_fql.binlog build [CASSANDRA_LIB]", file=sys.stderr)
        return 2
    from base.settings import get_settings

    lib = Path(args[1]) if len(args) == 2 else (get_settings().cassandra_lib or default_lib())
    print(build_reader(lib))
    return 0


if __name__ == "__main__":
    sys.exit(main())
