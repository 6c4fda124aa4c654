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

:func:`run_round` starts one task of every cell of a round (a round
of batches), none before all are submitted, and waits for them all at
once (:func:`gather`).

Each cell has a :class:`Budget`: the time charged to it is only the time
its own futures ran, so one hung cell cannot use up the allowance of the
others, whatever the order the caller waits in.

A request's own :class:`Deadline` bounds the whole wait as well, tasks
still queued for a worker included (as nova's ``scatter_gather_cells``
bounds its whole gather): whatever the pool is doing, the caller waits
no longer than that. A task still queued when its request gives up is
cancelled and never runs its work.

Failures are values, not log lines: every cell ends as a
:class:`Outcome`, and a failed one keeps the original exception object.
"""

import bisect
import concurrent.futures
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Generic, TypeVar

from futurist import waiters

K = TypeVar('K')
R = TypeVar('R')

OK = 'ok'
FAILED = 'failed'
TIMED_OUT = 'timed out'

#: Seconds between looks at tasks still waiting for a worker.
QUEUED_POLL = 0.05


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
    """A point on a monotonic clock; :meth:`remaining` never negative.

    :param seconds: from now (or from :meth:`begin`); None for no
        deadline.
    :param limit: the limit to name in a :class:`CellTimeout` when it is
        not *seconds* (a budget's total rather than what was left of it).
    :param pending: the clock starts at :meth:`begin`, not now: a task
        waiting in an executor's queue is not yet charged.
    """

    def __init__(self, seconds: float | None,
                 clock: Callable[[], float] = time.monotonic,
                 limit: float | None = None,
                 pending: bool = False) -> None:
        self.seconds = seconds if limit is None else limit
        self._allowed = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self.began: float | None = None
        self._at: float | None = None
        if not pending:
            self.begin()

    def begin(self) -> None:
        """Start the clock now (once: later calls change nothing)."""
        with self._lock:
            if self.began is not None:
                return
            self.began = self._clock()
            if self._allowed is not None:
                self._at = self.began + self._allowed

    @property
    def pending(self) -> bool:
        """True until :meth:`begin`: the task has not started yet."""
        return self.began is None

    def remaining(self) -> float | None:
        """Seconds left; the whole allowance while pending; None: no limit.
        """
        if self._allowed is None:
            return None
        if self._at is None:
            return self._allowed
        return max(0.0, self._at - self._clock())


class Budget:
    """The seconds one cell may spend in one listing, over all its work.

    Each future of the cell is charged from the moment its worker starts
    it (:meth:`Deadline.begin`) until it completes, so a cell's first
    batch and its further batches share one allowance; neither the time
    the caller spends waiting for *other* cells nor the time the task
    waits for a free worker is charged to it: one hung cell cannot run
    down the budgets of the healthy ones. (A queued task is bounded by
    its request's deadline instead: see :func:`run_round`.)
    """

    def __init__(self, seconds: float | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._spent = 0.0
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        """Seconds charged by the futures that have completed."""
        with self._lock:
            return self._spent

    def remaining(self) -> float | None:
        """Seconds left for new work; None without a limit."""
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - self.spent)

    def exhaust(self) -> None:
        """Spend it all: the cell timed out, it gets no more time.

        A future still running at its deadline is charged only when it
        completes; the cell must not be waited for again meanwhile.
        """
        with self._lock:
            self._spent = float('inf')

    def start(self, future: 'concurrent.futures.Future[Any]',
              pending: bool = False) -> Deadline:
        """Charge *future* to this budget; return the point to stop waiting.

        Call it right after submitting the future. With *pending*, the
        deadline (and the charge) starts when the worker calls the
        deadline's :meth:`~Deadline.begin`; a future that never began
        is charged nothing.
        """
        deadline = Deadline(self.remaining(), self._clock,
                            limit=self.seconds, pending=pending)

        def charge(_done: 'concurrent.futures.Future[Any]') -> None:
            if deadline.began is None:
                return
            with self._lock:
                self._spent += max(0.0, self._clock() - deadline.began)

        future.add_done_callback(charge)
        return deadline


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


def _left(own: Deadline, overall: Deadline | None) -> float | None:
    """Seconds the caller may still wait for a task: the lesser bound."""
    mine = own.remaining()
    if overall is None:
        return mine
    whole = overall.remaining()
    if mine is None:
        return whole
    if whole is None:
        return mine
    return min(mine, whole)


def gather(futures: Mapping[K, 'concurrent.futures.Future[R]'],
           deadline: Deadline | Mapping[K, Deadline],
           overall: Deadline | None = None) -> dict[K, Outcome[R]]:
    """Wait for *futures*, each until its deadline; one outcome per key.

    :param deadline: one deadline for all, or one per key (from each
        cell's :meth:`Budget.start`). A pending deadline (its task still
        queued) is waited on until the task starts, then until it ends,
        but never past *overall*.
    :param overall: the request's deadline, started: the wait ends by
        then for every future, queued or running, whatever its own
        deadline. None: only the futures' own deadlines.

    Futures still running at their deadline are reported timed out and
    left to finish on their own (a thread cannot be killed; the database
    drivers' own read timeouts end them). Their results are dropped. A
    future not started by then is cancelled (its work never runs) and
    reported timed out. The wait ends as soon as every future is done or
    past its deadline.
    """
    deadlines = (deadline if isinstance(deadline, Mapping)
                 else dict.fromkeys(futures, deadline))
    pending = dict(futures)
    while pending:
        left = [_left(deadlines[key], overall) for key in pending]
        finite = [seconds for seconds in left if seconds is not None]
        if any(deadlines[key].pending for key in pending):
            # A queued task's clock starts when a worker takes it: look
            # again soon, so its deadline is kept once it runs.
            finite.append(QUEUED_POLL)
        waiters.wait_for_all(list(pending.values()),
                             timeout=min(finite) if finite else None)
        pending = {key: future for key, future in pending.items()
                   if not future.done() and
                   _left(deadlines[key], overall) != 0.0}
    return {key: _outcome(future, deadlines[key])
            for key, future in futures.items()}


def run_round(submit: Callable[..., 'concurrent.futures.Future[R]'],
              calls: Mapping[K, tuple[Callable[..., R], tuple[Any, ...]]],
              budgets: Mapping[K, Budget],
              deadline: Deadline | None = None) -> dict[K, Outcome[R]]:
    """Run ``function(*args)`` per key in parallel, each within its budget.

    :param submit: an executor's ``submit``.
    :param calls: key -> (function, args).
    :param budgets: key -> the :class:`Budget` its task is charged to.
    :param deadline: the request's deadline (started), which bounds the
        whole wait, tasks still queued included; None: only the budgets.

    Each task is charged to its budget from the moment a worker starts
    it until it ends: time spent waiting for a free worker (a pool busy
    with other listings) is not charged to the cell. It is bounded by
    *deadline* instead: a task that has not started when the request's
    deadline passes is cancelled (its function never runs, so a pool
    filled with tasks of frozen cells does not grow a backlog) and
    :data:`TIMED_OUT`, for this call only. A key whose task runs past
    its budget or the deadline is :data:`TIMED_OUT` and its budget
    exhausted: it must not be waited for again.

    No task starts before the last one is submitted. A thread pool
    starts a thread per submit until it is full, and ``Thread.start``
    waits until the new thread runs. Were the first tasks already
    working (holding the GIL, as a worker parsing rows does), every later
    start would wait for them, a switch interval (5 ms) at a time, and
    the last cells of a round would be asked tens of milliseconds after
    the first. Held at a gate, the tasks leave the GIL to the caller
    until the last one is submitted. The gate opens even when a submit
    fails (the error is raised), so no submitted task waits for ever.
    """
    if deadline is not None and deadline.remaining() == 0.0:
        # The request gave up already: no cell is asked.
        for key in calls:
            budgets[key].exhaust()
        return {key: Outcome(TIMED_OUT, error=CellTimeout(
            deadline.seconds or 0.0)) for key in calls}
    gate = threading.Event()
    deadlines: dict[K, Deadline] = {}
    # Keys given up on; a task of one of them that a worker takes
    # afterwards (it could not be cancelled in time) does no work.
    given_up: set[K] = set()
    lock = threading.Lock()

    def gated(key: K, function: Callable[..., R],
              args: tuple[Any, ...]) -> R:
        gate.wait()
        with lock:
            if key in given_up:
                raise CellTimeout(deadlines[key].seconds or 0.0)
            deadlines[key].begin()
        return function(*args)

    futures: dict[K, concurrent.futures.Future[R]] = {}
    try:
        for key, (function, args) in calls.items():
            future = submit(gated, key, function, args)
            futures[key] = future
            deadlines[key] = budgets[key].start(future, pending=True)
    finally:
        gate.set()
    outcomes = gather(futures, deadlines, deadline)
    with lock:
        given_up.update(key for key, outcome in outcomes.items()
                        if outcome.status == TIMED_OUT)
    for key in given_up:
        budgets[key].exhaust()
    return outcomes


#: Margin on a cell's expected share of the rows a page still misses.
SHARE_MARGIN = 1.25
#: Fewest rows a further round asks of a cell (unless it can give fewer).
MIN_REFETCH = 10
#: A cell that filled every batch so far may be asked, in its next one,
#: for this many times the rows it has given (at least a batch): its
#: batches grow geometrically, so a page living in one cell costs
#: O(log(limit / batch)) rounds instead of limit / batch.
GROWTH = 2


def refetch_sizes(runs: Mapping[K, Sequence[tuple[Any, ...]]],
                  open_cells: Collection[K], batch_size: int,
                  limit: int | None, grow: bool = True) -> dict[K, int]:
    """Rows to ask each open cell for in the next round; empty: done.

    :param runs: cell -> the rows fetched from it so far, in order, each
        a tuple whose first item is its sort key.
    :param open_cells: cells whose last batch was full (they may hold
        more rows); each has at least one row in *runs*.
    :param batch_size: the most rows asked of a cell in one round, unless
        *grow*.
    :param limit: rows the answer needs; None for all of them.
    :param grow: a cell may be asked for up to :data:`GROWTH` times the
        rows it has given so far when that is more than *batch_size*
        (False: never more than *batch_size*, as ``[api]
        instance_list_cells_batch_strategy = fixed`` asks).

    A cell whose last row is not among the first *limit* rows fetched so
    far cannot contribute any more. Any other cell can contribute at most
    ``limit - rank`` rows (``rank``: rows fetched so far that come before
    or at its last row), and is expected to contribute its share of them:
    it holds ``len(run) / rank`` of the rows up to its last one. It is
    asked for that share plus :data:`SHARE_MARGIN` (at least
    :data:`MIN_REFETCH` rows), never more than it can contribute nor more
    than its cap: a batch, or with *grow* ``GROWTH * len(run)`` when
    that is more. A cell that returns all it was asked for stays open and
    is asked again in the next round if it can still contribute, so the
    estimate costs at most another round, never a wrong answer. A cell
    that holds every row of the page (a project living in one cell)
    thus triples its rows each round: a page of 1,000 rows with first
    batches of 30 takes 5 rounds, not 34.
    """
    def cap(run: Sequence[Any]) -> int:
        return max(batch_size, GROWTH * len(run)) if grow else batch_size

    if limit is None:
        return {cell: cap(runs[cell]) for cell in open_cells}
    # Every sort key fetched so far, in order: each run is sorted, so
    # sorting their concatenation is a merge for timsort.
    keys = sorted([row[0] for run in runs.values() for row in run])
    wanted = {}
    for cell in open_cells:
        run = runs[cell]
        rank = bisect.bisect_right(keys, run[-1][0])
        if rank < limit:
            share = len(run) / rank * (limit - rank) * SHARE_MARGIN
            wanted[cell] = min(limit - rank, cap(run),
                               max(math.ceil(share), MIN_REFETCH))
    return wanted
