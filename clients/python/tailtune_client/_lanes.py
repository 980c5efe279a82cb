"""One lane per memcached server: `connections` query threads, each with its own connection and FIFO queue.

Placement follows Chisel's dispatcher (and the simulator's `DispatchState`), per server:

* a whole per-server batch goes to the next query thread in round-robin order;
* an elephant's chunks go to consecutive query threads (so up to `connections` chunks run in parallel, each on
  its own connection);
* a mouse joins the lane's open *merge group* (at most `merge` members, all on one thread) or opens a new one
  on the next thread. When a thread takes a group member off its queue, it piggybacks every other member of
  that group already queued behind it: one `get k1 k2 ...` for all of them. Nothing waits for a member that
  has not arrived, so merging costs no latency when the thread is idle and happens when requests queue
  (the paper's piggybacking during the query set-up; no timer, no batching window).

A connection error (refused, reset, timeout) marks the server down for `dead_timeout` seconds: its queued and
new jobs fail at once instead of each waiting for a timeout; the first job after that tries again.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["Job", "Lane", "Request"]


class Request:
    """The jobs of one get_many/set_many call and the event its caller waits on."""

    __slots__ = ("abandoned", "done", "lock", "pending")

    def __init__(self, jobs: int) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.pending = jobs
        self.abandoned = False
        if jobs == 0:
            self.done.set()


class Job:
    """One per-server piece of a request: a whole batch, a chunk, or a mouse (mergeable)."""

    __slots__ = ("error", "expire", "finished", "group", "keys", "req", "result", "stored_failed", "tag", "values")

    def __init__(
        self,
        req: Request,
        keys: list[str],
        *,
        values: dict[str, bytes] | None = None,
        expire: int = 0,
        tag: object = None,
    ) -> None:
        self.req = req
        self.keys = keys
        self.values = values
        self.expire = expire
        #: The config object the request started with (merge groups never mix configs).
        self.tag = tag
        self.group: int | None = None
        self.result: dict[str, bytes] = {}
        self.stored_failed: list[str] = []
        self.error: str | None = None
        self.finished = False

    def finish(self, error: str | None = None) -> None:
        req = self.req
        with req.lock:
            if self.finished:
                return
            self.finished = True
            self.error = error
            req.pending -= 1
            if req.pending <= 0:
                req.done.set()


def _connection_error(exc: BaseException) -> bool:
    from pymemcache.exceptions import MemcacheUnexpectedCloseError

    return isinstance(exc, OSError | MemcacheUnexpectedCloseError)


class Lane:
    """The query threads of one server."""

    def __init__(
        self,
        name: str,
        address: tuple[str, int],
        *,
        connections: int,
        connect_timeout: float,
        timeout: float,
        dead_timeout: float,
        on_query: Callable[[object, int, int], None],
    ) -> None:
        self.name = name
        self.address = address
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.dead_timeout = dead_timeout
        self._on_query = on_query
        self._lock = threading.Lock()
        self._queues: list[deque[Job]] = [deque() for _ in range(connections)]
        self._conds = [threading.Condition(self._lock) for _ in range(connections)]
        self._next_thread = 0
        self._next_group = 0
        # open merge group: (id, thread, members so far, merge level, config tag)
        self._open_group: tuple[int, int, int, int, object] | None = None
        self._closing = False
        self.down_until = 0.0
        # counters (under _lock)
        self.queries = 0
        self.keys = 0
        self.hits = 0
        self.errors = 0
        self.merged = 0
        self.connects = 0
        self.busy = 0
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"tailtune-client {name} #{i}", daemon=True)
            for i in range(connections)
        ]
        for t in self._threads:
            t.start()

    # --- placement (called by the client) ------------------------------------------------------------------
    def _down_reason(self) -> str | None:
        if self._closing:
            return "client closed"
        left = self.down_until - time.monotonic()
        if left > 0:
            return f"server {self.name} is marked down for {left:.1f}s more after: {self.last_error}"
        return None

    def _push(self, job: Job, thread: int) -> None:
        self._queues[thread].append(job)
        self._conds[thread].notify()

    def _take_thread(self) -> int:
        t = self._next_thread
        self._next_thread = (t + 1) % len(self._queues)
        return t

    def submit_whole(self, job: Job) -> None:
        with self._lock:
            reason = self._down_reason()
            if reason is None:
                self._push(job, self._take_thread())
        if reason is not None:
            job.finish(reason)

    def submit_chunks(self, jobs: list[Job]) -> None:
        with self._lock:
            reason = self._down_reason()
            if reason is None:
                for job in jobs:
                    self._push(job, self._take_thread())
        if reason is not None:
            for job in jobs:
                job.finish(reason)

    def submit_mouse(self, job: Job, merge: int) -> None:
        with self._lock:
            reason = self._down_reason()
            if reason is None:
                g = self._open_group
                if g is None or g[2] >= g[3] or g[3] != merge or g[4] is not job.tag:
                    g = (self._next_group, self._take_thread(), 0, merge, job.tag)
                    self._next_group += 1
                gid, thread, count, _, _ = g
                self._open_group = (gid, thread, count + 1, merge, job.tag)
                job.group = gid
                self._push(job, thread)
        if reason is not None:
            job.finish(reason)

    def queued(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues)

    # --- query threads -------------------------------------------------------------------------------------
    def _take(self, thread: int) -> list[Job] | None:
        with self._lock:
            queue = self._queues[thread]
            while not queue and not self._closing:
                self._conds[thread].wait()
            if not queue:
                return None
            head = queue.popleft()
            batch = [head]
            if head.group is not None and queue:
                members = [j for j in queue if j.group == head.group]
                for j in members:
                    queue.remove(j)
                batch.extend(members)
            return batch

    def _connect(self) -> Any:
        from pymemcache.client.base import Client as PmClient

        with self._lock:
            self.connects += 1
        return PmClient(
            self.address,
            connect_timeout=self.connect_timeout,
            timeout=self.timeout,
            no_delay=True,
            default_noreply=False,
        )

    def _run(self, thread: int) -> None:
        conn: Any = None
        try:
            while True:
                batch = self._take(thread)
                if batch is None:
                    return
                live = [j for j in batch if not j.req.abandoned]
                for j in batch:
                    if j.req.abandoned:
                        j.finish("abandoned: the request timed out")
                if not live:
                    continue
                with self._lock:
                    reason = self._down_reason()
                if reason is not None:
                    for j in live:
                        j.finish(reason)
                    continue
                if conn is None:
                    conn = self._connect()
                with self._lock:
                    self.busy += 1
                try:
                    self._execute(conn, live)
                except Exception as exc:
                    message = f"{self.name}: {type(exc).__name__}: {exc}"
                    with self._lock:
                        self.errors += 1
                        self.last_error, self.last_error_at = message, time.time()
                        if _connection_error(exc):
                            self.down_until = time.monotonic() + self.dead_timeout
                    _close_quietly(conn)
                    conn = None
                    for j in live:
                        j.finish(message)
                finally:
                    with self._lock:
                        self.busy -= 1
        finally:
            _close_quietly(conn)

    def _execute(self, conn: Any, jobs: list[Job]) -> None:
        head = jobs[0]
        if head.values is not None:
            failed = conn.set_many(head.values, expire=head.expire, noreply=False)
            head.stored_failed = [k if isinstance(k, str) else bytes(k).decode() for k in failed or []]
            with self._lock:
                self.queries += 1
                self.keys += len(head.values)
            self._on_query(head.tag, 1, len(head.values))
            head.finish()
            return
        keys = list(dict.fromkeys(k for j in jobs for k in j.keys)) if len(jobs) > 1 else head.keys
        found: dict[str, bytes] = conn.get_many(keys)
        with self._lock:
            self.queries += 1
            self.keys += len(keys)
            self.hits += len(found)
            self.merged += len(jobs) - 1
        self._on_query(head.tag, len(jobs), len(keys))
        for j in jobs:
            j.result = {k: found[k] for k in j.keys if k in found}
            j.finish()

    def close(self, timeout_s: float) -> None:
        with self._lock:
            self._closing = True
            left = [j for q in self._queues for j in q]
            for q in self._queues:
                q.clear()
            for c in self._conds:
                c.notify_all()
        for j in left:
            j.finish("client closed")
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "queries": self.queries,
                "keys": self.keys,
                "hits": self.hits,
                "merged": self.merged,
                "errors": self.errors,
                "connects": self.connects,
                "queued": sum(len(q) for q in self._queues),
                "busy": self.busy,
                "down": self.down_until > time.monotonic(),
                "last_error": self.last_error,
                "last_error_at": self.last_error_at,
            }


def _close_quietly(conn: Any) -> None:
    if conn is None:
        return
    with contextlib.suppress(Exception):  # closing a broken socket must not take the thread down
        conn.close()
