"""The bottom layer every other part imports: errors, settings (paths included), consoles, URL helpers.

It imports nothing else of tailtune.
"""

from __future__ import annotations
