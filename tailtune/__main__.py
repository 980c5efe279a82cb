from __future__ import annotations

from tailtune.cli import main

main()
