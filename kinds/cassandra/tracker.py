"""The Java driver 4's request tracker (`clients/java/tracker/TailtuneRequestTracker.java`): a jar applications
whose deployment's driver is `java4` put on their classpath to capture their own requests as `tailtune-client`
traces (clients/java/README.md).

`build()` compiles the tracker with `javac` against the live replay's jars (java-driver-core 4.19.0, fetched once
by `kinds.cassandra.replay.jvm.fetch_lib`) and packs its classes into `<cache>/tailtune-tracker-<hash>.jar`, the
hash that of the source and the jars' folder: once per source. The source is read from the checkout
(`clients/java/tracker/`), not from an installed wheel. `python -m kinds.cassandra.tracker build` does it
(`scripts/setup.sh` runs it) and prints the jar's path.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Final

from base.errors import TailtuneError
from base.javac import compile_once
from kinds.cassandra.replay.jvm import fetch_lib

__all__ = ["CLASS", "SOURCE", "TOKEN_ENV", "build"]

SOURCE: Final = Path(__file__).resolve().parents[2] / "clients" / "java" / "tracker" / "TailtuneRequestTracker.java"
#: The class an application names in `advanced.request-tracker.classes`.
CLASS: Final = "io.tailtune.tracker.TailtuneRequestTracker"
#: The variable the tracker reads its bearer token from when its config names none.
TOKEN_ENV: Final = "TAILTUNE_TRACKER_TOKEN"
_MANIFEST: Final = "Manifest-Version: 1.0\nCreated-By: tailtune\n"


def build(cache: Path | None = None) -> Path:
    """The tracker's jar, compiled and packed the first time for this source and these jars."""
    if not SOURCE.is_file():
        raise TailtuneError(f"the request tracker's source {SOURCE} is not here",
                            hint="build it from a checkout of the repository (scripts/setup.sh)")
    lib = fetch_lib(cache)
    digest = hashlib.sha256(SOURCE.read_bytes() + b"\0" + str(lib.resolve()).encode()).hexdigest()[:12]
    jar = lib.parent / f"tailtune-tracker-{digest}.jar"
    if jar.is_file():
        return jar
    classes = compile_once(SOURCE, lib, lib.parent / f"tracker-{digest}", main_class=CLASS.replace(".", "/"),
                           purpose="the Java driver's request tracker")
    fd, tmp = tempfile.mkstemp(prefix=f".{jar.name}-", dir=jar.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", _MANIFEST)
            for path in sorted(classes.rglob("*.class")):
                z.write(path, path.relative_to(classes).as_posix())
        os.replace(tmp, jar)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return jar


def main(argv: list[str] | None = None) -> int:
    """`python -m kinds.cassandra.tracker build`: compile and pack the tracker, print the jar's path."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["build"]:
        print("usage: python -m kinds.cassandra.tracker build", file=sys.stderr)
        return 2
    print(build())
    return 0


if __name__ == "__main__":
    sys.exit(main())
