"""Helpers for the ingest tests: writing small trace files, snapshotting TAILTUNE_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest


def snapshot(home: Path) -> list[str]:
    """Every path under TAILTUNE_HOME/datasets and TAILTUNE_HOME/tmp (what a failed ingest must not leave)."""
    out: list[str] = []
    for sub in ("datasets", "tmp"):
        root = home / sub
        if root.exists():
            out += [str(p.relative_to(home)) for p in sorted(root.rglob("*"))]
    return out


@pytest.fixture
def write(tmp_path: Path):
    """write(name, text_or_bytes) → path of a new input file."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content)
        else:
            path.write_bytes(content)
        return path

    return _write
