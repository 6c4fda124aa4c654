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
its own futures kept waiting on the cell, so one hung cell cannot use up
the allowance of the others, whatever the order the caller waits in.
Where the kernel tells (:mod:`.silence`: Linux, tasks on OS threads)
or eventlet's hub does (tasks on green threads), that is the time a
task's thread slept waiting on I/O without an answer, its cell's
silence; time it waited for the GIL, a lock, a CPU or another green
thread is the process's, never charged. Elsewhere it is the wall time
the task ran.

A call's *wait* (a :class:`Deadline`) bounds how long its tasks may wait
in the executor's queue: a task that no worker has taken by then is not
the cell's fault, so it is taken out of the queue and run at once on a
thread of its own (:func:`run_late`), under the same budget. A cell is
therefore reported as not answering only when its own database kept
its task waiting past its budget, never because the process was busy.

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

import futurist
from futurist import waiters

from nova_cellsched import silence

K = TypeVar('K')
R = TypeVar('R')

OK = 'ok'
FAILED = 'failed'
TIMED_OUT = 'timed out'

#: Seconds between looks at tasks still waiting for a worker.
QUEUED_POLL = 0.05
#: Seconds between looks at what a running task's thread waits on
#: (:mod:`.silence`). A wait is first seen up to one look after it
#: began and counted from there, so a cell is given up on at most twice
#: this after its silence reached its budget.
SILENCE_POLL = 0.1


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
    :param silent: count only the silence of the thread that calls
        :meth:`begin` (:mod:`.silence`), sampled by :meth:`sample` in the
        thread that made the deadline, rather than wall time, where that
        thread can be watched.
    """

    def __init__(self, seconds: float | None,
                 clock: Callable[[], float] = time.monotonic,
                 limit: float | None = None,
                 pending: bool = False, silent: bool = False) -> None:
        self.seconds = seconds if limit is None else limit
        self._allowed = seconds
        self._clock = clock
        self._sampler = threading.get_native_id() if silent else None
        self._lock = threading.Lock()
        self.began: float | None = None
        self._at: float | None = None
        #: The task's thread, watched (:meth:`begin` with *silent*).
        self.watch: silence.Watch | silence.GreenWatch | None = None
        if not pending:
            self.begin()

    def begin(self) -> None:
        """Start the clock now (once: later calls change nothing).

        With *silent*, called by the task's own thread: that thread is
        the one watched.
        """
        with self._lock:
            if self.began is not None:
                return
            if self._sampler is not None and self._allowed is not None:
                self.watch = silence.watch(threading.get_native_id(),
                                           self._clock, self._sampler)
            self.began = self._clock()
            if self._allowed is not None and self.watch is None:
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
        if self.watch is not None:
            return max(0.0, self._allowed - self.watch.silence)
        if self._at is None:
            return self._allowed
        return max(0.0, self._at - self._clock())

    def sample(self) -> None:
        """Look at what the watched thread waits on (see :mod:`.silence`).
        """
        if self.watch is not None:
            self.watch.sample()

    def charged(self) -> float:
        """Seconds to charge: the silence seen, or the wall time since
        :meth:`begin` (0 before it).
        """
        if self.began is None:
            return 0.0
        if self.watch is not None:
            return self.watch.silence
        return max(0.0, self._clock() - self.began)


class Budget:
    """The seconds one cell may spend in one listing, over all its work.

    Each future of the cell is charged, once it completes, what its
    deadline counted from the moment its worker started it
    (:meth:`Deadline.begin`): with *silent*, the time the task's thread
    slept waiting on the cell without an answer (:mod:`.silence`), else
    the wall time it ran. A cell's first batch and its further batches
    share one allowance; neither the time the caller spends waiting for
    *other* cells nor the time the task waits for a free worker is
    charged to it: one hung cell cannot run down the budgets of the
    healthy ones, and a busy process (the GIL, a CPU) runs down none.
    (A queued task is bounded by its request's deadline instead: see
    :func:`run_round`.)

    :param silent: charge silence where the task's thread can be
        watched (its :meth:`start` deadlines are silent).
    """

    def __init__(self, seconds: float | None,
                 clock: Callable[[], float] = time.monotonic,
                 silent: bool = True) -> None:
        self.seconds = seconds
        self._clock = clock
        self.silent = silent
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
                            limit=self.seconds, pending=pending,
                            silent=self.silent and pending)

        def charge(_done: 'concurrent.futures.Future[Any]') -> None:
            if deadline.began is None:
                return
            with self._lock:
                self._spent += deadline.charged()

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


def run_late(function: Callable[..., R], *args: Any,
             like: 'concurrent.futures.Future[Any] | None' = None
             ) -> 'concurrent.futures.Future[R]':
    """``function(*args)`` at once on a new thread; its future.

    The reserved capacity of :func:`gather`: a task still queued at its
    call's wait runs here instead, whatever the executor is doing. Its
    future is of the class of *like* (the queued task's), so that both
    can be waited on together: a green thread for futurist's green
    futures (eventlet), else a daemon thread. The task ends itself: its
    I/O bound is the task's own.
    """
    future: concurrent.futures.Future[R] = (
        concurrent.futures.Future() if like is None else type(like)())
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            result = function(*args)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    if isinstance(future, futurist.GreenFuture):
        import eventlet
        eventlet.spawn_n(run)
    else:
        threading.Thread(target=run, name='cellsched-late',
                         daemon=True).start()
    return future


def gather(futures: Mapping[K, 'concurrent.futures.Future[R]'],
           deadline: Deadline | Mapping[K, Deadline],
           wait: Deadline | None = None,
           late: Callable[[K], tuple['concurrent.futures.Future[R]',
                                     Deadline]] | None = None
           ) -> dict[K, Outcome[R]]:
    """Wait for *futures*, each until its deadline; one outcome per key.

    :param deadline: one deadline for all, or one per key (from each
        cell's :meth:`Budget.start`). A pending deadline (its task still
        queued) is waited on until the task starts, then until it ends.
    :param wait: how long a task may stay queued (started); None: as
        long as it takes a worker to take it.
    :param late: what to do with a task still queued at *wait*: it is
        cancelled in the executor's queue and ``late(key)`` runs it
        elsewhere at once (:func:`run_late`), to be waited for until its
        new deadline. None: it is reported timed out and never runs.

    A future still running at its deadline is reported timed out and
    left to finish on its own (a thread cannot be killed; the database
    drivers' own read timeouts end it). Its result is dropped. The wait
    ends as soon as every future is done or past its deadline.
    """
    deadlines = (dict(deadline) if isinstance(deadline, Mapping)
                 else dict.fromkeys(futures, deadline))
    futures = dict(futures)
    pending = dict(futures)
    while pending:
        if wait is not None and wait.remaining() == 0.0:
            for key in [k for k in pending if deadlines[k].pending]:
                # cancel() fails once a worker took the task (or for one
                # run late already): its deadline begins soon.
                if not pending[key].cancel():
                    continue
                if late is None:
                    del pending[key]
                else:
                    futures[key], deadlines[key] = late(key)
                    pending[key] = futures[key]
        timeouts = []
        for key in pending:
            if deadlines[key].pending:
                # A queued task's clock starts when a worker takes it:
                # look again soon, so its deadline is kept once it runs.
                timeouts.append(QUEUED_POLL)
                left = None if wait is None else wait.remaining()
                if left:
                    # NOTE: once the wait is over, a task taken by a
                    # worker (or run late) but not begun yet is polled,
                    # not spun on: a green thread must get to run.
                    timeouts.append(left)
            else:
                own = deadlines[key].remaining()
                if own is not None:
                    timeouts.append(own)
                if deadlines[key].watch is not None:
                    timeouts.append(SILENCE_POLL)
        if not pending:
            break
        waiters.wait_for_all(list(pending.values()),
                             timeout=min(timeouts) if timeouts else None)
        for key, future in pending.items():
            if not future.done():
                deadlines[key].sample()
        pending = {key: future for key, future in pending.items()
                   if not future.done() and
                   (deadlines[key].pending or
                    deadlines[key].remaining() != 0.0)}
    return {key: _outcome(future, deadlines[key])
            for key, future in futures.items()}


def run_round(submit: Callable[..., 'concurrent.futures.Future[R]'],
              calls: Mapping[K, tuple[Callable[..., R], tuple[Any, ...]]],
              budgets: Mapping[K, Budget],
              wait: Deadline | None = None) -> dict[K, Outcome[R]]:
    """Run ``function(*args)`` per key in parallel, each within its budget.

    :param submit: an executor's ``submit``.
    :param calls: key -> (function, args).
    :param budgets: key -> the :class:`Budget` its task is charged to.
    :param wait: how long a task may wait for a worker (started); None:
        until a worker takes it.

    Each task is charged to its budget from the moment it starts until
    it ends: time spent waiting for a free worker is not charged to the
    cell. A task still queued at *wait* is not the cell's fault either:
    it is cancelled in the queue and run at once on a thread of its own
    (:func:`run_late`), under its budget. A key whose task runs past
    its budget is :data:`TIMED_OUT` and its budget exhausted: it must
    not be waited for again. So the call returns within *wait* plus the
    longest budget, and a key is timed out only when its own task ran
    its budget without answering.

    No task starts before the last one is submitted (a gate, opened even
    when a submit fails, so no submitted task waits for ever).
    """
    # NOTE: without the gate, each Thread.start of the executor waits
    # for the tasks already running (holding the GIL while they parse
    # rows), and the last cells of a round are asked tens of
    # milliseconds after the first.
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

    def late(key: K) -> tuple['concurrent.futures.Future[R]', Deadline]:
        function, args = calls[key]
        with lock:
            # The new thread's gated() waits for the lock: its deadline
            # is in place before it begins.
            future = run_late(gated, key, function, args,
                              like=futures[key])
            deadlines[key] = budgets[key].start(future, pending=True)
        return future, deadlines[key]

    futures: dict[K, concurrent.futures.Future[R]] = {}
    try:
        for key, (function, args) in calls.items():
            future = submit(gated, key, function, args)
            futures[key] = future
            deadlines[key] = budgets[key].start(future, pending=True)
    finally:
        gate.set()
    outcomes = gather(futures, deadlines, wait, late)
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
