"""Compiling a small Java program of tailtune's once, against a folder of jars: the full query log's reader, the
live replay's load generator and the JMX client use it.

`cache_root()` is where the compiled programs and their jars are kept (`TAILTUNE_GENERATOR_CACHE`, else
`~/.cache/tailtune/replay-generator`).

`compile_once(source, lib, out, ...)` compiles `source` with `javac` against every jar of `lib` into `out`, unless
`out` already holds the main class: the folder's name carries the digest of what it was built from (the caller's
choice), so a changed source or other jars build anew. It builds in a temporary folder beside `out` and renames it
into place, so a process that finds `out` finds it whole; two processes building at once both succeed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from base.errors import TailtuneError

__all__ = ["cache_root", "compile_once"]

_JDK_HINT = "apt-get install openjdk-17-jdk-headless (scripts/setup.sh installs it)"


def cache_root() -> Path:
    """Where the compiled programs and their jars are kept (module doc)."""
    base = os.environ.get("TAILTUNE_GENERATOR_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "tailtune" / "replay-generator"


def compile_once(
    source: Path, lib: Path, out: Path, *, main_class: str, purpose: str, files: Mapping[str, str] | None = None
) -> Path:
    """`out`, holding `main_class` compiled from `source` against `lib/*` (and `files`: name → text written beside
    the classes); compiled the first time. `purpose` completes "… needs a JDK (javac) to be compiled once" in the
    error a machine without `javac` gets; a failed compile is a TailtuneError with the compiler's last words."""
    if (out / f"{main_class}.class").is_file():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise TailtuneError(f"{purpose} needs a JDK (javac) to be compiled once", hint=_JDK_HINT)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        r = subprocess.run(
            [javac, "-nowarn", "-d", str(tmp), "-cp", f"{lib}/*", str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise TailtuneError(f"compiling {source.name} against {lib} failed: {r.stderr.strip()[-2000:]}")
        for name, text in (files or {}).items():
            (tmp / name).write_text(text)
        try:
            tmp.rename(out)
        except OSError:  # built meanwhile by another process
            if not (out / f"{main_class}.class").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
