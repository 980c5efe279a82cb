"""Rewrites the golden outputs: `python -m tests.golden.regen [NAME ...]`."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tests.golden.cases import CASES, DATA, run_case


def main(names: list[str]) -> None:
    DATA.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(CASES):
            doc = run_case(name, Path(tmp))
            (DATA / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            print(name, file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
