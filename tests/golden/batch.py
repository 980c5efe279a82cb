"""Runs golden cases in this one process: `python -m tests.golden.batch HOME NAME...` prints {name: JSON}.

Each case goes through `tailtune.cli.main` as the command line would (stdout captured), with its own
TAILTUNE_HOME under HOME and the settings cache cleared between cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.golden.cases import CASES


def _one(name: str, home: Path) -> Any:
    from base.settings import get_settings
    from tailtune.cli import main

    os.environ["TAILTUNE_HOME"] = str(home / name)
    get_settings.cache_clear()
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(CASES[name]))
        except SystemExit as exc:
            code = exc.code
    if code not in (0, None):
        return {"__error__": f"exit {code}: {err.getvalue().strip()[-2000:]}"}
    return json.loads(out.getvalue())


def main(argv: list[str]) -> None:
    home, names = Path(argv[0]), argv[1:]
    docs = {name: _one(name, home) for name in names}
    sys.stdout.write(json.dumps(docs))


if __name__ == "__main__":
    main(sys.argv[1:])
