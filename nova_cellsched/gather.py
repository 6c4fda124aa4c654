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

"""Scatter work over cells in parallel, under one deadline per cell.

Pure Python over :mod:`concurrent.futures` executors (futurist's
included). Unlike nova's ``scatter_gather_cells`` fed with generators,
every task here runs *to completion* in its worker thread and returns a
list: the database work really happens in parallel, and the deadline is
enforced on the futures themselves, so a hung cell costs the caller at
most its remaining time, never more.

:func:`gather` waits for the first batches of all cells at once; a
:class:`CellStream` feeds one cell's sorted rows to the merge, and
fetches the next batch from that cell (in a worker, under the same
deadline) only when the merge has consumed the current one and needs
more.

Failures are values, not log lines: every cell ends as a
:class:`Outcome`, and a failed one keeps the original exception object.
"""

import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from futurist import waiters

K = TypeVar('K')
R = TypeVar('R')

OK = 'ok'
FAILED = 'failed'
TIMED_OUT = 'timed out'


class CellTimeout(Exception):
    """A cell did not answer before its deadline."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__('no answer within %.1fs' % seconds)


@dataclasses.dataclass(frozen=True)
class Outcome(Generic[R]):
    """How one cell's task ended: its result, or why there is none."""

    status: str
    result: R | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    def describe(self) -> str | None:
        """One line for humans: the exception type and message."""
        if self.error is None:
            return None
        return describe_error(self.error)


def describe_error(error: BaseException) -> str:
    """``Type: message`` on one line.

    A database library error that wraps the driver's (SQLAlchemy's
    ``DBAPIError.orig``) is described by the driver's, without the SQL
    text that SQLAlchemy appends.
    """
    inner = getattr(error, 'orig', None)
    if isinstance(inner, BaseException):
        error = inner
    lines = str(error).strip().splitlines() or ['']
    return '%s: %s' % (type(error).__name__, lines[0])


class Deadline:
    """A point on a monotonic clock; :meth:`remaining` never negative."""

    def __init__(self, seconds: float | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._at = None if seconds is None else clock() + seconds

    def remaining(self) -> float | None:
        if self._at is None:
            return None
        return max(0.0, self._at - self._clock())


def _outcome(future: 'concurrent.futures.Future[R]',
             deadline: Deadline) -> Outcome[R]:
    if not future.done() or future.cancelled():
        # Not started (cancelled now or before) or still running: either
        # way the cell did not answer in time.
        future.cancel()
        return Outcome(TIMED_OUT,
                       error=CellTimeout(deadline.seconds or 0.0))
    error = future.exception()
    if error is not None:
        return Outcome(FAILED, error=error)
    return Outcome(OK, result=future.result())


def gather(futures: Mapping[K, 'concurrent.futures.Future[R]'],
           deadline: Deadline) -> dict[K, Outcome[R]]:
    """Wait for *futures* until *deadline*; return one outcome per key.

    Futures still running at the deadline are reported timed out and left
    to finish on their own (a thread cannot be killed; the database
    drivers' own read timeouts end them). Their results are dropped.
    """
    waiters.wait_for_all(list(futures.values()),
                         timeout=deadline.remaining())
    return {key: _outcome(future, deadline)
            for key, future in futures.items()}


class CellStream(Generic[K, R]):
    """The sorted rows of one cell, fetched batch by batch on demand.

    :param key: the cell's key (its uuid).
    :param first: the first batch, already fetched.
    :param submit_after: ``submit_after(last_row)`` starts fetching the
        next batch (rows strictly after *last_row* in the listing order)
        in a worker and returns its future; it is waited for under
        *deadline*.
    :param batch_size: rows asked per batch; a shorter batch means the
        cell has no more rows. None: the first batch was everything.
    :param failures: where a failed refetch is recorded (by *key*).
    :param on_refetch: ``on_refetch(key, start, end)`` after each wait
        for a further batch, times from *clock*, for the timings.
    """

    def __init__(self, key: K, first: Sequence[R],
                 submit_after: Callable[
                     [R], 'concurrent.futures.Future[Sequence[R]]'],
                 batch_size: int | None,
                 deadline: Deadline,
                 failures: MutableMapping[K, Outcome[Any]],
                 on_refetch: Callable[[K, float, float], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.key = key
        self._batch: Sequence[R] = first
        self._submit_after = submit_after
        self._batch_size = batch_size
        self._deadline = deadline
        self._failures = failures
        self._on_refetch = on_refetch
        self._clock = clock
        self.rows_yielded = 0
        self.batches = 1

    def _more_possible(self) -> bool:
        return (self._batch_size is not None and
                len(self._batch) >= self._batch_size)

    def __iter__(self) -> Iterator[R]:
        while True:
            for row in self._batch:
                self.rows_yielded += 1
                yield row
            if not self._batch or not self._more_possible():
                return
            last = self._batch[-1]
            start = self._clock()
            future = self._submit_after(last)
            waiters.wait_for_all([future],
                                 timeout=self._deadline.remaining())
            outcome = _outcome(future, self._deadline)
            if self._on_refetch is not None:
                self._on_refetch(self.key, start, self._clock())
            if not outcome.ok:
                self._failures[self.key] = outcome
                return
            assert outcome.result is not None  # noqa: S101 - ok has result
            self._batch = outcome.result
            self.batches += 1
