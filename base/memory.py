"""Giving freed memory back to the operating system.

A process that builds a large transient (a whole trace table) and frees it keeps the pages in its allocators:
NumPy's arrays come from glibc's malloc, whose heap grows for blocks under its dynamic mmap threshold (up to
32 MB) and is returned only from its top, and Arrow's buffers from Arrow's own pool. Until they are returned the
freed table counts in the process's RSS for the rest of its life. `release_freed_memory` returns both.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

__all__ = ["release_freed_memory"]


@functools.cache
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return getattr(libc, "malloc_trim", None)  # glibc only (musl has none)
    except OSError:
        return None


def release_freed_memory() -> None:
    """Returns the free pages of glibc's heap (`malloc_trim(0)`) and of Arrow's memory pool to the OS."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
