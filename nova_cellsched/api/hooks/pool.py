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

"""The listing workers of a nova-api process, and what bounds their calls.

One pool for every listing and every lookup of the process
(:func:`executor`, sized by :func:`pool_size` from uwsgi's threads);
each call on a cell bounded (:class:`GuardedCalls`: its I/O within
:func:`io_timeout`, the stuck-query breaker over :data:`STUCK`); the
cells found not answering held down a while (:data:`HEALTH`,
:func:`note_health`, :func:`probe`); and nova's ``scatter_gather_cells``
as the request's lookups after a listing see it
(:func:`scatter_gather_cells`, :func:`scatter_gather_listed_cells`).
"""

import concurrent.futures
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import futurist
import nova.conf
from nova import context as nova_context
from oslo_log import log as logging

from nova_cellsched.api.hooks import stuck
from nova_cellsched.api.middleware import request_state
from nova_cellsched import compat
from nova_cellsched.compat import adapter
from nova_cellsched import conf as conf_mod
from nova_cellsched import gather
from nova_cellsched import guard
from nova_cellsched import health
from nova_cellsched.listing import cross_cell

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf_mod.register_opts(CONF)


#: Queries given up on that still run, per cell, in this process.
STUCK = stuck.StuckQueries()

#: The cells this process found not answering, held down a while
#: (``[cellsched] cell_hold_down``).
HEALTH = health.CellHealth()

#: A worker's blocking calls on a cell end after this many
#: ``list_cell_timeout``.
IO_TIMEOUT_FACTOR = 2


def io_timeout(cell_timeout: float | None) -> float | None:
    """Seconds any one blocking call of a worker on a cell may take.

    Twice the listing's wait: a query given up on stays stuck for up to
    another ``list_cell_timeout`` before its driver ends it, and while
    ``[cellsched] api_stuck_queries_per_cell`` such queries run on a
    cell, listings do not ask it again (they report it down at once).
    During a long freeze, that many listings pay the wait in each such
    period instead of every listing. Once the cell answers again, its
    stuck queries end at once and the next listing asks it.
    """
    if cell_timeout is None:
        return None
    return IO_TIMEOUT_FACTOR * cell_timeout


def request_deadline(cell_timeout: float | None) -> gather.Deadline:
    """This request's deadline for its waits on the listing's workers.

    One per nova-api request (:meth:`.request_state.RequestState.
    cells_deadline`), from its first call on the cells, shared by its
    listing and the view's lookups after it; outside a request, a new
    one (:func:`.cross_cell.request_deadline`).
    """
    state = request_state.current()
    if state is None:
        return cross_cell.request_deadline(cell_timeout)
    deadline: gather.Deadline = state.cells_deadline(
        lambda: cross_cell.request_deadline(cell_timeout))
    return deadline


_EXECUTOR: concurrent.futures.Executor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _threading() -> bool:
    """Whether nova runs on native threads here, not eventlet's."""
    from nova_cellsched.compat import adapter

    return adapter.threading_mode()


def request_threads() -> int | None:
    """Requests this API worker process serves at once; None: unknown.

    uwsgi's ``threads`` (1 without it) when nova-api runs in uwsgi with
    native threads; None under eventlet (green threads: as many requests
    as arrive) or in another server.
    """
    if not _threading():
        return None
    return uwsgi_threads()


def uwsgi_threads() -> int | None:
    """uwsgi's ``threads`` of this process (1 without it); None: not uwsgi."""
    try:
        import uwsgi
    except ImportError:
        return None
    value = getattr(uwsgi, 'opt', {}).get('threads', 1)
    if isinstance(value, list):
        value = value[-1]
    if isinstance(value, bytes):
        value = value.decode()
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return None


class _GreenPools(concurrent.futures.Executor):
    """Green workers under eventlet: one pool per hub.

    Each OS thread has its own eventlet hub (uwsgi's ``threads``), and
    eventlet's green threads, queues and semaphores wake only greenlets
    of their own hub: a pool shared by two hubs loses its wake-ups
    (``greenlet.error: Cannot switch to a different thread``) and the
    request waiting on it never ends. Each hub gets a pool of *size*,
    its own; with one thread per process (devstack's layout) that is one
    pool, as before.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._pools: weakref.WeakKeyDictionary[
            Any, concurrent.futures.Executor] = weakref.WeakKeyDictionary()

    def _pool(self) -> concurrent.futures.Executor:
        from eventlet import hubs

        hub = hubs.get_hub()
        pool = self._pools.get(hub)
        if pool is None:
            # No other greenlet of this hub runs before the assignment.
            pool = self._pools[hub] = futurist.GreenThreadPoolExecutor(
                max_workers=self.size)
        return pool

    def submit(self, fn: Callable[..., Any], /, *args: Any,
               **kwargs: Any) -> 'concurrent.futures.Future[Any]':
        return self._pool().submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *,
                 cancel_futures: bool = False) -> None:
        for pool in list(self._pools.values()):
            pool.shutdown(wait=wait)


def pool_size(cells: int, requests: int | None, stuck_cap: int,
              most: int) -> int:
    """Workers for listings of *cells* cells, *requests* at a time.

    Every concurrent listing holds a worker per cell while its round
    runs, and each cell may hold ``stuck_cap`` more with queries given
    up on (:data:`STUCK`): with ``cells x (requests + stuck_cap)``
    workers no listing's task ever waits for a worker. Bounded by
    *most* (``[cellsched] list_max_workers``), which is also the size
    when *requests* is unknown (None). Threads start only when tasks
    need them, so the bound costs nothing until then.
    """
    if requests is None:
        return max(1, most)
    return max(1, min(most, cells * (requests + stuck_cap)))


def executor(cells: int | None = None) -> concurrent.futures.Executor:
    """This process's workers: green threads under eventlet, else threads.

    One pool for every listing of the process, so threads are not
    started per request (under eventlet, one per OS thread:
    :class:`_GreenPools`); sized on first use by :func:`pool_size` for
    *cells* cells (nova-api loads its cells once per worker process),
    at most ``[cellsched] list_max_workers``. A pool too small for what
    the process can run is logged once (a WARNING). A busy pool never
    makes a call wait for a worker past its wait, nor reports a cell
    down: a task still queued then runs on a thread of its own
    (:func:`.gather.run_round`). A forked child starts a pool of its own.
    """
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            group = CONF[conf_mod.GROUP_NAME]
            most = group.list_max_workers
            requests = request_threads()
            size = pool_size(cells or most, requests,
                             group.api_stuck_queries_per_cell, most)
            needed = (None if requests is None or cells is None else
                      cells * (requests + group.api_stuck_queries_per_cell))
            if needed is not None and needed > size:
                LOG.info(
                    'Listing workers: %(size)d ([cellsched] '
                    'list_max_workers), where %(cells)d cells x '
                    '(%(requests)d request threads + %(stuck)d '
                    '[cellsched] api_stuck_queries_per_cell) would be '
                    '%(needed)d: while cells are frozen, a listing\'s '
                    'queries may wait up to list_cell_timeout for a '
                    'worker before they run on threads of their own. '
                    'Set list_max_workers to %(needed)d to avoid that.',
                    {'size': size, 'cells': cells, 'requests': requests,
                     'stuck': group.api_stuck_queries_per_cell,
                     'needed': needed})
            else:
                LOG.debug('Listing workers: at most %d', size)
            if _threading():
                _EXECUTOR = futurist.ThreadPoolExecutor(max_workers=size)
            else:
                _warn_green_threads()
                _EXECUTOR = _GreenPools(size)
        return _EXECUTOR


def _warn_green_threads() -> None:
    """A WARNING for eventlet under more than one uwsgi thread."""
    threads = uwsgi_threads()
    if threads is not None and threads > 1:
        LOG.warning(
            'nova-api runs on eventlet with %d uwsgi threads a process; '
            'expected 1: eventlet\'s green threads and locks belong to one '
            'OS thread each. The listing keeps its green workers per '
            'thread, but nova and its libraries share theirs. Set uwsgi '
            'threads = 1, as devstack does, and add uwsgi processes for '
            'more requests at once.', threads)


def _after_fork_in_child() -> None:
    """A forked child (a uwsgi worker) has none of its parent's threads.

    The pool, and the queries its threads had stuck, stay the parent's:
    the child starts its own pool on first use.
    """
    global _EXECUTOR, _EXECUTOR_LOCK
    _EXECUTOR_LOCK = threading.Lock()
    _EXECUTOR = None
    STUCK.forget()
    HEALTH.forget()


# NOTE: uwsgi without lazy-apps forks its workers after the master loaded
# nova-api, whose start-up check may have started the pool.
os.register_at_fork(after_in_child=_after_fork_in_child)


def shutdown() -> None:
    """Stop this process's workers (a new pool starts on next use)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        executor, _EXECUTOR = _EXECUTOR, None
    if executor is not None:
        executor.shutdown(wait=False)


class CellHeldDown(Exception):
    """A cell held down in this process (:data:`HEALTH`): not asked."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__('held down for %.0f s more after it did not '
                         'answer' % seconds)


def _health() -> health.CellHealth:
    """:data:`HEALTH`, with this request's options."""
    group = CONF[conf_mod.GROUP_NAME]
    HEALTH.configure(group.cell_hold_down, group.cell_probe_interval)
    return HEALTH


def _not_answering(outcome: gather.Outcome[Any]) -> bool:
    """Whether *outcome* is a cell that did not answer a bounded read:
    it timed out, or its database refused or dropped the connection.
    """
    if outcome.status == gather.TIMED_OUT:
        return True
    return health.not_answering(outcome.error)


def note_health(outcomes: Mapping[str, gather.Outcome[Any]]) -> None:
    """What the cells' *outcomes* say of their health, into :data:`HEALTH`.
    """
    cells = _health()
    for uuid, outcome in outcomes.items():
        if outcome.ok:
            cells.answered(uuid)
        elif isinstance(outcome.error, CellHeldDown):
            continue
        elif _not_answering(outcome):
            cells.failed(uuid, outcome.describe() or outcome.status)


def probe(ctx: Any, cell_mapping: Any) -> None:
    """Read one row of a held-down cell in the background, if one is due.

    Bounded as a listing's read (:class:`GuardedCalls`); its end tells
    :data:`HEALTH` whether the cell answers again.
    """
    cells = _health()
    uuid = cell_mapping.uuid
    if not cells.claim_probe(uuid):
        return
    group = CONF[conf_mod.GROUP_NAME]
    calls = GuardedCalls(group.list_cell_timeout,
                          group.api_stuck_queries_per_cell)
    try:
        with nova_context.target_cell(ctx, cell_mapping) as cctxt:
            pass
    except Exception as exc:
        cells.probed(uuid, False, gather.describe_error(exc))
        return
    query = stuck.Query(uuid)
    future = gather.run_late(
        calls.guarded, query, adapter.batch, cctxt, {}, 1, [],
        ['created_at'], ['desc'])

    def done(ended: 'concurrent.futures.Future[Any]') -> None:
        error = ended.exception()
        cells.probed(uuid, error is None,
                     '' if error is None else gather.describe_error(error))

    future.add_done_callback(done)


class GuardedCalls:
    """Calls on cells in the workers, each bounded and tracked.

    What a hung cell can hold: every call's I/O ends within
    :func:`io_timeout` (:func:`nova_cellsched.guard.io_timeout`), a call
    given up on is counted in :data:`STUCK` while it still runs, and a
    cell with ``api_stuck_queries_per_cell`` such calls is not asked again
    until they end (:meth:`tripped`, the breaker). Also adds up the
    seconds each cell's calls ran (:attr:`cell_seconds`).
    """

    def __init__(self, cell_timeout: float, stuck_cap: int) -> None:
        self.cell_timeout = cell_timeout
        self.stuck_cap = stuck_cap
        #: Cell uuid -> seconds its calls ran in the workers.
        self.cell_seconds: dict[str, float] = {}
        self._seconds_lock = threading.Lock()

    def tripped(self, cell: str) -> bool:
        """Whether *cell* has too many stuck calls to be asked (logged)."""
        if STUCK.count(cell) < self.stuck_cap:
            return False
        LOG.warning('Cell %(cell)s has %(n)d queries still running '
                    'after their deadline; not asking it again '
                    'until they end',
                    {'cell': cell, 'n': STUCK.count(cell)})
        return True

    def run(self, in_cells: Callable[[dict[str, cross_cell.Call]],
                                     dict[str, gather.Outcome[Any]]],
            calls: dict[str, cross_cell.Call]
            ) -> dict[str, gather.Outcome[Any]]:
        """*calls* through *in_cells*, each guarded; given-up ones stuck."""
        queries = {uuid: stuck.Query(uuid) for uuid in calls}
        outcomes = in_cells({
            uuid: (self.guarded, (queries[uuid], function) + args)
            for uuid, (function, args) in calls.items()})
        for uuid, outcome in outcomes.items():
            if outcome.status == gather.TIMED_OUT:
                STUCK.abandon(queries[uuid])
        return outcomes

    def seconds(self) -> dict[str, float]:
        """Cell uuid -> seconds its calls ran so far (a copy)."""
        with self._seconds_lock:
            return dict(self.cell_seconds)

    def guarded(self, query: stuck.Query, function: Callable[..., Any],
                *args: Any) -> Any:
        """Worker: *function* on one cell, its I/O bounded, tracked."""
        if not STUCK.begin(query):
            raise gather.CellTimeout(self.cell_timeout)
        start = time.monotonic()
        try:
            # Each blocking call bounded, not their sum: the listing
            # gives the cell up on its silence (.gather), and the calls
            # after that end at once.
            with guard.io_timeout(io_timeout(self.cell_timeout),
                                  total=False, given_up=query):
                return function(*args)
        finally:
            STUCK.end(query)
            with self._seconds_lock:
                self.cell_seconds[query.cell] = (
                    self.cell_seconds.get(query.cell, 0.0) +
                    time.monotonic() - start)


def scatter_gather_cells(context: Any, cell_mappings: Iterable[Any],
                         timeout: float | None, fn: Callable[..., Any],
                         *args: Any, **kwargs: Any) -> dict[str, Any]:
    """nova's ``scatter_gather_cells``, skipping what this listing gave up on.

    After the listing, nova-api asks the cells again within the same
    request: ``InstanceList.fill_faults`` asks every cell for faults,
    the detail view at >= 2.69 asks the cells of the listed servers for
    their block device mappings, each with nova's ``CELL_TIMEOUT`` of
    60 s. A frozen cell the listing gave up on would make the request
    wait that long after all. Within the request whose listing gave up
    on a cell (:attr:`.request_state.RequestState.given_up`), that cell
    is not asked again: it is reported as not responding at once
    (``did_not_respond_sentinel``), which nova's callers handle as a
    cell that did not respond in time. A call inside
    :func:`.request_state.cell_reads` (the ``min_version`` part) goes to
    the gather it names. Every other call, and every call of any other
    request (quota counts, a server's own page), is nova's function,
    unchanged.
    """
    gather_reads = request_state.cell_reads_gather()
    if gather_reads is not None and not kwargs:
        # A call a part bounds (request_state.cell_reads).
        answers: dict[str, Any] = gather_reads(context, cell_mappings, fn,
                                               *args)
        return answers
    state = request_state.current()
    skipped = frozenset() if state is None else state.given_up
    cell_mappings = list(cell_mappings)
    if not skipped or not any(cm.uuid in skipped for cm in cell_mappings):
        answer: dict[str, Any] = compat.original(
            'nova.context', 'scatter_gather_cells')(
            context, cell_mappings, timeout, fn, *args, **kwargs)
        return answer
    asked = [cm for cm in cell_mappings if cm.uuid not in skipped]
    results = {}
    if asked:
        results = compat.original('nova.context', 'scatter_gather_cells')(
            context, asked, timeout, fn, *args, **kwargs)
    for cm in cell_mappings:
        if cm.uuid in skipped:
            results[cm.uuid] = _not_asked_again(cm.uuid)
    return results


def _not_asked_again(cell: str) -> object:
    """A cell this request's listing gave up on: logged, not asked."""
    LOG.warning('Cell %s did not answer this request\'s listing in '
                'time and is not asked again by this request', cell)
    return nova_context.did_not_respond_sentinel


def scatter_gather_listed_cells(context: Any, cell_mappings: Iterable[Any],
                                fn: Callable[..., Any], *args: Any
                                ) -> dict[str, Any]:
    """The view's lookups after a listing: on the listing's workers.

    What nova's ``scatter_gather_cells`` answers, for the lookups
    :mod:`.view` makes of the listed servers' cells (block device
    mappings, faults): cell uuid -> ``fn(cctxt, *args)``'s result, the
    exception it raised, or ``did_not_respond_sentinel``. Each cell is
    targeted with ``nova.context.target_cell`` in this thread, as the
    listing's cells are (nova's cell cache; nova's ``DownCellFixture``
    takes cells down there too). What differs is where and how long:

    * ``fn`` runs on this process's listing workers (:func:`executor`),
      not on nova's ``cell_worker`` pool (``[DEFAULT]
      cell_worker_thread_pool_size``, 5 threads). Under a frozen cell,
      nova's pool fills with other requests' reads of it (a server's
      own page, ``GET /servers/{id}``, waits nova's 60 s
      ``CELL_TIMEOUT`` for it), and a lookup queued behind them waited
      as long, although the listing had already given the frozen cell
      up. The listing's workers are kept from filling that way: a cell
      with ``api_stuck_queries_per_cell`` calls stuck is not asked
      (:class:`GuardedCalls`), and the pool is sized for the rest
      (:func:`pool_size`).
    * Each call's I/O is bounded as a listing's (:func:`io_timeout`),
      each cell's call runs at most ``[cellsched] list_cell_timeout``
      (not nova's 60 s), and its wait for a worker counts against the
      request's deadline, as the listing's do (:func:`request_deadline`).
    * A cell this request's listing or an earlier lookup gave up on is
      not asked (``did_not_respond_sentinel`` at once, as
      :func:`scatter_gather_cells` does); a cell that does not answer
      now is given up on for the rest of the request.

    A cell whose call fails is logged with why (one line, as
    :func:`.gather.describe_error` writes it: no SQL, no URL) and its
    exception is its answer, as in nova.
    """
    group = CONF[conf_mod.GROUP_NAME]
    state = request_state.current()
    skipped = frozenset() if state is None else state.given_up
    calls = GuardedCalls(group.list_cell_timeout,
                          group.api_stuck_queries_per_cell)
    results: dict[str, Any] = {}
    todo: dict[str, cross_cell.Call] = {}
    for cm in cell_mappings:
        if cm.uuid in skipped:
            results[cm.uuid] = _not_asked_again(cm.uuid)
        elif calls.tripped(cm.uuid) or _health().held(cm.uuid):
            results[cm.uuid] = nova_context.did_not_respond_sentinel
        else:
            try:
                with nova_context.target_cell(context, cm) as cctxt:
                    todo[cm.uuid] = (fn, (cctxt,) + args)
            except Exception as exc:
                results[cm.uuid] = exc
    if todo:
        wait = cross_cell.call_wait(
            group.list_cell_timeout,
            request_deadline(group.list_cell_timeout))
        budgets = {uuid: gather.Budget(group.list_cell_timeout)
                   for uuid in todo}
        submit = executor(max(len(todo), len(nova_context.CELLS or ()))
                           ).submit
        outcomes = calls.run(
            lambda guarded: gather.run_round(submit, guarded, budgets,
                                             wait), todo)
        note_health(outcomes)
        timed_out = set()
        for uuid, outcome in outcomes.items():
            if outcome.ok:
                results[uuid] = outcome.result
            elif outcome.status == gather.TIMED_OUT:
                results[uuid] = nova_context.did_not_respond_sentinel
                timed_out.add(uuid)
            else:
                results[uuid] = outcome.error
        if state is not None and timed_out:
            state.given_up = state.given_up | timed_out
    for uuid, answer in results.items():
        if isinstance(answer, Exception):
            LOG.warning('Error gathering result from cell %(cell)s: '
                        '%(why)s', {'cell': uuid,
                                    'why': gather.describe_error(answer)})
    return results
