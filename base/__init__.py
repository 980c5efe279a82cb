"""The bottom layer every other part imports: errors, settings (paths included), consoles, URL helpers.

It imports nothing else of tailtune. `__version__` is the product's version (the one of pyproject.toml).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
