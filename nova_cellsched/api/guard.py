# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Bounds on what a hung cell can hold: stuck queries and read timeouts.

A thread cannot be killed: a query sent to a cell database that stops
answering keeps its worker and its connection until the driver gives
up. Two guards keep that bounded in a long-running nova-api worker:

* :class:`StuckQueries` counts, per cell, the queries a listing gave up
  on that still run; at a cap the cell is reported down at once instead
  of being sent another query (a circuit breaker that closes by itself
  when the stuck queries end).
* :func:`io_timeout` gives PyMySQL connections checked out by this
  thread a read and write timeout (PyMySQL applies ``_read_timeout`` to
  every read), so a worker blocked on a frozen server ends on its own.
  Other drivers keep their settings: for them, put ``read_timeout`` in
  the cell's database URL.
"""

import collections
from collections.abc import Callable, Iterator
import contextlib
import dataclasses
import threading
import time
from typing import Any

import sqlalchemy as sa

_local = threading.local()

#: Saved timeouts of a connection, in its pool record's ``info``.
_SAVED = 'cellsched_saved_timeouts'


@dataclasses.dataclass
class Query:
    """One query sent to one cell, as :class:`StuckQueries` tracks it."""

    cell: str
    started: bool = False
    finished: bool = False
    abandoned: bool = False


class StuckQueries:
    """Per cell, the queries given up on that are still running.

    Also what a caller needs to know before it waits on a cell: whether
    it is hanging (:meth:`hanging`).

    :param clock: monotonic seconds (tests pass a fake).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._stuck: collections.Counter[str] = collections.Counter()
        self._clock = clock
        self._held: dict[str, float] = {}

    def hold_down(self, cell: str, seconds: float) -> None:
        """*cell* did not answer in time: it hangs for *seconds* more."""
        with self._lock:
            self._held[cell] = max(self._held.get(cell, 0.0),
                                   self._clock() + seconds)

    def hanging(self, cell: str) -> bool:
        """True while *cell* has stuck queries or is held down."""
        with self._lock:
            if self._stuck[cell] > 0:
                return True
            until = self._held.get(cell)
            if until is None:
                return False
            if self._clock() < until:
                return True
            del self._held[cell]
            return False

    def count(self, cell: str) -> int:
        with self._lock:
            return self._stuck[cell]

    def snapshot(self) -> dict[str, int]:
        """Cell uuid -> stuck queries, for cells that have any."""
        with self._lock:
            return {cell: n for cell, n in self._stuck.items() if n}

    def begin(self, query: Query) -> bool:
        """Mark *query* running; False if it was given up on already."""
        with self._lock:
            if query.abandoned:
                return False
            query.started = True
            return True

    def end(self, query: Query) -> None:
        with self._lock:
            query.finished = True
            if query.abandoned and query.started:
                self._stuck[query.cell] -= 1

    def abandon(self, query: Query) -> None:
        """The listing stopped waiting for *query*.

        Counted as stuck only while it runs: one that never started will
        not start any more (see :meth:`begin`).
        """
        with self._lock:
            if query.finished or query.abandoned:
                return
            query.abandoned = True
            if query.started:
                self._stuck[query.cell] += 1


@contextlib.contextmanager
def _thread_setting(name: str, value: Any) -> Iterator[None]:
    previous = getattr(_local, name, None)
    setattr(_local, name, value)
    try:
        yield
    finally:
        setattr(_local, name, previous)


def io_timeout(seconds: float | None) -> contextlib.AbstractContextManager[
        None]:
    """PyMySQL connections checked out in this block time out I/O.

    :param seconds: the read and write timeout; None changes nothing.
    """
    return _thread_setting('seconds', seconds)


def own_calls() -> contextlib.AbstractContextManager[None]:
    """The lister's own cell calls in this block: :func:`in_own_call`."""
    return _thread_setting('own', True)


def in_own_call() -> bool:
    """True inside :func:`own_calls` on this thread."""
    return bool(getattr(_local, 'own', None))


def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    seconds = getattr(_local, 'seconds', None)
    if seconds is None or not hasattr(dbapi_connection, '_read_timeout'):
        return
    record.info.setdefault(_SAVED, (dbapi_connection._read_timeout,
                                    dbapi_connection._write_timeout))
    dbapi_connection._read_timeout = seconds
    dbapi_connection._write_timeout = seconds


def _on_checkin(dbapi_connection: Any, record: Any) -> None:
    saved = record.info.pop(_SAVED, None)
    if saved is not None and dbapi_connection is not None:
        dbapi_connection._read_timeout, dbapi_connection._write_timeout = (
            saved)


def install() -> None:
    """Listen to every pool's check-outs (idempotent; caller locks)."""
    if not sa.event.contains(sa.pool.Pool, 'checkout', _on_checkout):
        sa.event.listen(sa.pool.Pool, 'checkout', _on_checkout)
        sa.event.listen(sa.pool.Pool, 'checkin', _on_checkin)


def uninstall() -> None:
    if sa.event.contains(sa.pool.Pool, 'checkout', _on_checkout):
        sa.event.remove(sa.pool.Pool, 'checkout', _on_checkout)
        sa.event.remove(sa.pool.Pool, 'checkin', _on_checkin)
