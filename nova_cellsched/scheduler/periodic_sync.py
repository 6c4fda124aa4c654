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

"""nova-scheduler's periodic sync of the cell aggregates.

``[cellsched] aggregate_sync_interval`` (off by default) makes every
nova-scheduler that loads ``ProjectCellFilter`` run
:func:`.aggregate_sync.sync` every interval, so a compute node added to a
cell joins its cell's aggregate without an operator.

nova gives a filter no periodic task of its manager, so the sync runs in
a thread of its own, started once per process by :func:`setup`, which
``ProjectCellFilter.__init__`` calls. nova-scheduler builds its filters
in the process that later forks the workers (``[scheduler] workers``),
so the thread lives in that parent process: one sync per scheduler host,
whatever the number of workers. It is a ``threading.Thread``: a native
thread in nova's native threading mode, and a green thread when nova
runs eventlet-patched (``threading`` is then eventlet's, as for every
thread nova's libraries start), so its placement and database I/O
cooperates with the hub either way. The workers a fork creates get a
copy of this module's state but no thread: :class:`PeriodicSync` knows
the process it belongs to and does nothing in another one (a green
thread, which survives a fork under eventlet, ends there at its next
wake-up). A fork waits for a run in progress to end (logging a warning
every :data:`FORK_WAIT` seconds), so no worker starts with a lock, a
pooled connection or a half-made change that a run held: a worker that
inherited such a lock, e.g. nova's per-cell ``target_cell`` lock, would
hang on its first use. It waits at most ``[cellsched] list_cell_timeout``
plus :data:`FORK_WAIT_PLACEMENT` seconds (:meth:`PeriodicSync.fork_wait`):
a run reads each cell database within ``list_cell_timeout`` (in parallel,
its PyMySQL I/O bounded as well), so a frozen cell database ends its read
in time; only a placement API that does not answer keeps a run longer,
and the fork then goes on, while the run waits on placement's socket.

A run never raises: a failure (placement unreachable or answering 5xx,
the API database down, a cell database unreadable, a provider another
writer keeps changing) is logged as an error naming what failed, and the
next run starts over from what placement and the databases say then. A
cell database that does not answer within ``[cellsched]
list_cell_timeout`` is logged (a WARNING naming the cell) and left as it
is; the cells that answered are synced.
"""

# concurrent.futures' thread module registers a fork handler that takes
# the lock every ThreadPoolExecutor.submit() takes. Fork handlers run
# before a fork in the reverse order of registration: import it before
# ours is registered, so a fork first waits for the run (which submits to
# its pools) and only then takes that lock.
import concurrent.futures.thread  # noqa: F401,I001
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import nova.conf
from oslo_config import cfg
from oslo_log import log as logging

from nova_cellsched import conf
from nova_cellsched import exception
from nova_cellsched.scheduler import aggregate_sync
from nova_cellsched.scheduler import aggregates

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf.register_opts(CONF)

OPTION = 'aggregate_sync_interval'
#: Seconds between runs for an interval of 0, as nova's periodic tasks.
DEFAULT_SPACING = 60
#: Seconds between the warnings of a fork waiting for a run to end.
FORK_WAIT = 30.0
#: Seconds a fork waits for a run beyond the run's bound on its cell
#: databases (``[cellsched] list_cell_timeout``): placement's share.
FORK_WAIT_PLACEMENT = 60.0
#: ``[cellsched] list_cell_timeout``'s default, for a fork before any run.
CELL_TIMEOUT = 60.0


def spacing(interval: int) -> int | None:
    """Seconds between runs for *interval*; None when the sync is off."""
    if interval < 0:
        return None
    return interval or DEFAULT_SPACING


def read_interval(conf_obj: Any) -> int:
    """``[cellsched] aggregate_sync_interval`` as *conf_obj* has it.

    :raises InvalidConfig: oslo.config refuses the value (not an integer,
        below -1); one line naming the option, the value, the file, the
        reason and the values allowed (:func:`.conf.read_option`, which
        ``nova-cellsched check`` uses too).
    """
    return int(conf.read_option(conf_obj, OPTION))


@dataclasses.dataclass
class RunResult:
    """What one periodic run did.

    :ivar rows: the sync's rows (changes and failures), as far as it went.
    :ivar error: why the run stopped early, or None.
    """

    rows: list[aggregate_sync.SyncRow]
    error: str | None = None

    @property
    def failures(self) -> list[aggregate_sync.SyncRow]:
        return [row for row in self.rows if row.failed]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failures


class PeriodicSync:
    """The periodic sync of one process.

    :param conf_obj: nova's ``CONF``.
    :param placement: returns the :class:`.aggregate_sync.Placement` to
        use (built on the first run that needs it, again after a failure
        to build it).
    :param cell_mappings: returns every cell mapping (the API database).
    :param wall: wall clock (seconds since the epoch), for the memory of
        when a node was first found missing.
    :raises InvalidConfig: the interval is not valid.
    """

    def __init__(self, conf_obj: Any,
                 placement: Callable[[], aggregate_sync.Placement]
                 | None = None,
                 cell_mappings: Callable[[], Sequence[Any]] | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self._conf = conf_obj
        self.interval = read_interval(conf_obj)
        self._new_placement = placement or aggregate_sync.Placement
        self._placement: aggregate_sync.Placement | None = None
        self._cell_mappings = cell_mappings or _load_cell_mappings
        self._wall = wall
        self.pid = os.getpid()
        #: Held for the whole of a run (one run at a time; forks wait).
        self.run_lock = threading.Lock()
        #: Thread ident of the run in progress, if any.
        self._running_in: int | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: (cell uuid, provider) -> wall time a run first found the node
        #: missing from its cell's aggregate, while it still is.
        self.missing_since: dict[tuple[str, str], float] = {}
        #: Completed runs, and the last one's result.
        self.runs = 0
        self.last: RunResult | None = None
        #: Set after each run (tests wait on it).
        self.ran = threading.Condition()
        #: Seconds each cell database may take, as the last run read it.
        self.cell_timeout = CELL_TIMEOUT
        self._bounded = False

    # -- one run -----------------------------------------------------------

    def run_once(self) -> RunResult:
        """One sync; logs what it did or what failed, never raises."""
        with self.run_lock:
            self._running_in = threading.get_ident()
            try:
                result = self._run()
                self._remember(result)
                self._log(result)
            finally:
                self._running_in = None
        with self.ran:
            self.runs += 1
            self.last = result
            self.ran.notify_all()
        return result

    def _run(self) -> RunResult:
        group = self._conf[conf.GROUP_NAME]
        try:
            max_removal = float(group.aggregate_sync_max_removal)
        except (cfg.Error, ValueError) as exc:
            return RunResult([], '[%s] aggregate_sync_max_removal is not '
                             'valid: %s; expected a share from 0 to 1 '
                             '(default 0.5); nothing was changed' % (
                                 conf.GROUP_NAME, _first_line(exc)))
        try:
            self.cell_timeout = float(group.list_cell_timeout)
        except (cfg.Error, ValueError) as exc:
            return RunResult([], '[%s] list_cell_timeout is not valid: %s; '
                             'expected a number of seconds of at least 0.1 '
                             '(default 60); nothing was changed' % (
                                 conf.GROUP_NAME, _first_line(exc)))
        try:
            cells = list(self._cell_mappings())
        except Exception as exc:  # noqa: BLE001 - any API database failure
            return RunResult([], 'cannot read the cell mappings from the '
                             'API database (%s: %s)' % (
                                 type(exc).__name__, _first_line(exc)))
        try:
            if self._placement is None:
                self._placement = self._new_placement()
            if not self._bounded:
                self._bounded = aggregate_sync.bound_cell_io()
            # Never forced: a cell the removal guard holds stays held
            # until an operator runs ``sync-aggregates --force``.
            return RunResult(aggregate_sync.sync(
                self._placement, cells, workers=group.aggregate_sync_workers,
                max_removal=max_removal, timeout=self.cell_timeout))
        except aggregate_sync.SyncFailed as exc:
            return RunResult(exc.rows, str(exc))
        except exception.CellschedError as exc:
            # Unreachable, 5xx or another unexpected status while reading:
            # nothing was written.
            return RunResult([], '%s; nothing was changed' % exc)
        except Exception as exc:  # noqa: BLE001 - never kill the thread
            LOG.exception('Unexpected error in the periodic sync of the '
                          'cell aggregates')
            return RunResult([], 'unexpected %s: %s; nothing removed after '
                             'it' % (type(exc).__name__, _first_line(exc)))

    def _remember(self, result: RunResult) -> None:
        """Keep when each node still missing was first found missing."""
        now = self._wall()
        if result.error is not None and not result.rows:
            return
        for row in result.rows:
            if row.action != aggregates.Action.ADD.value:
                continue
            key = (row.aggregate, row.provider)
            if row.failed:
                self.missing_since.setdefault(key, now)
            else:
                self.missing_since.pop(key, None)
        if result.error is None:
            # A complete run: anything it did not try to add is in place
            # (or gone, or in an unreadable cell: then not known now).
            tried = {(row.aggregate, row.provider) for row in result.rows}
            for key in list(self.missing_since):
                if key not in tried:
                    del self.missing_since[key]

    def missing_for(self, cell: str, provider: str) -> str:
        """The periodic sync's words on how long a node has been missing."""
        since = self.missing_since.get((cell, provider))
        if since is None:
            return ''
        return (' (missing for at least %s: this scheduler\'s periodic '
                'sync first found it missing at %s)' % (
                    aggregates.duration(self._wall() - since),
                    time.strftime('%Y-%m-%d %H:%M:%S UTC',
                                  time.gmtime(since))))

    def _log(self, result: RunResult) -> None:
        done = [row for row in result.rows if not row.failed]
        if done:
            LOG.info('Periodic sync of the cell aggregates: %d change(s): '
                     '%s', len(done), '; '.join(
                         '%s %s in cell %s' % (row.action, row.provider,
                                               row.cell) for row in done))
        conflicts = [row for row in result.failures if row.result.startswith(
            (aggregate_sync.CONFLICTED, aggregate_sync.NOT_STARTED_CONFLICTS))]
        for row in result.failures:
            if row in conflicts:
                continue
            if not row.provider:
                LOG.error('Periodic sync of the cell aggregates: cell %s: '
                          '%s', row.cell, row.result)
                continue
            LOG.error('Periodic sync of the cell aggregates: %s %s in cell '
                      '%s: %s%s', row.action, row.provider, row.cell,
                      row.result,
                      self.missing_for(row.aggregate, row.provider)
                      if row.action == aggregates.Action.ADD.value else '')
        if conflicts:
            LOG.error('Periodic sync of the cell aggregates: %d provider '
                      'update(s) not made because of generation conflicts '
                      '(another writer kept changing the providers; at most '
                      '%d attempts each, %d providers giving up stop the '
                      'run): %s; the next run tries again', len(conflicts),
                      aggregate_sync.ATTEMPTS,
                      aggregate_sync.CONFLICT_GIVE_UPS, ', '.join(
                          sorted(row.provider for row in conflicts)[:10]) +
                      (', ...' if len(conflicts) > 10 else ''))
        if result.error is not None:
            LOG.error('Periodic sync of the cell aggregates failed: %s; the '
                      'next run in %s s tries again', result.error,
                      spacing(self.interval))
        elif not result.rows:
            LOG.debug('Periodic sync of the cell aggregates: nothing to do')

    # -- the thread ----------------------------------------------------------

    def _mine(self) -> bool:
        return os.getpid() == self.pid

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive() and self._mine()

    def start(self) -> bool:
        """Start the thread if the interval asks for it; True if it runs.
        """
        if not self._mine() or spacing(self.interval) is None:
            return False
        if self.running:
            return True
        self._stopping = False
        self._thread = threading.Thread(
            target=self._loop, name='cellsched-periodic-sync', daemon=True)
        self._thread.start()
        LOG.info('Periodic sync of the cell aggregates every %d seconds '
                 '([cellsched] %s = %d)', spacing(self.interval), OPTION,
                 self.interval)
        return True

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread after the run in progress, if any."""
        self._stopping = True
        self._wake.set()
        thread = self._thread
        if thread is not None and self._mine():
            thread.join(timeout)
        self._thread = None

    def _loop(self) -> None:
        while True:
            wait = spacing(self.interval)
            if wait is None or self._stopping or not self._mine():
                return
            if self._wake.wait(wait):
                # Woken: stopped, or a new interval (wait it afresh).
                self._wake.clear()
                continue
            if self._stopping or not self._mine():
                # A green thread copied into a forked worker ends here.
                return
            self.run_once()

    def reconfigure(self, conf_obj: Any) -> None:
        """Apply the interval *conf_obj* has now (the SIGHUP hook)."""
        if not self._mine():
            return
        try:
            interval = read_interval(conf_obj)
        except exception.InvalidConfig as exc:
            LOG.error('Ignoring the new value, the periodic sync keeps '
                      'its interval of %d: %s', self.interval, exc)
            return
        if interval == self.interval:
            return
        LOG.info('[cellsched] %s changed from %d to %d', OPTION,
                 self.interval, interval)
        self.interval = interval
        if spacing(interval) is None:
            self.stop()
        elif self.running:
            self._wake.set()
        else:
            self.start()

    # -- forks ---------------------------------------------------------------

    def fork_wait(self) -> float:
        """Seconds a fork waits for a run at most: ``[cellsched]
        list_cell_timeout`` (as the last run read it) plus
        :data:`FORK_WAIT_PLACEMENT`.
        """
        return self.cell_timeout + FORK_WAIT_PLACEMENT

    def before_fork(self) -> bool:
        """Wait for a run in progress to end, at most :meth:`fork_wait`
        seconds; True if the run lock is now held and must be released by
        :meth:`after_fork`.

        A child forked in the middle of a run could inherit a lock the
        run's threads held (nova's per-cell ``target_cell`` lock, a
        connection pool's mutex, ...), with no thread left to release
        it, and hang on first use: so the fork waits, logging a warning
        every :data:`FORK_WAIT` seconds. A run reads its cell databases
        within ``list_cell_timeout``; one still going at the bound waits
        on placement (a socket read, which holds none of those locks):
        the fork then goes on, after an ERROR saying so. A fork made by
        the run's own thread does not wait (it would wait for itself).
        """
        if not self._mine() or self._running_in == threading.get_ident():
            return False
        limit = self.fork_wait()
        began = time.monotonic()
        while True:
            left = limit - (time.monotonic() - began)
            if left <= 0:
                LOG.error('A fork of this process (nova-scheduler starting '
                          'a worker) waited %g s, its bound ([cellsched] '
                          'list_cell_timeout + %g s), for the periodic sync '
                          'of the cell aggregates to end, and goes on '
                          'without waiting further: the run waits on the '
                          'placement API (see the [placement] timeout '
                          'option and placement\'s health)',
                          limit, FORK_WAIT_PLACEMENT)
                return False
            if self.run_lock.acquire(timeout=min(FORK_WAIT, left)):
                return True
            if left > FORK_WAIT:
                LOG.warning('A fork of this process (nova-scheduler starting '
                            'a worker) has waited %d s for the periodic '
                            'sync of the cell aggregates to end, and waits '
                            'on, %d s at most: a worker forked in the '
                            'middle of a run could hang on a lock the run '
                            'holds. A run this long waits on placement or '
                            'a cell database (see the [placement] timeout '
                            'option and the cell databases\' health)',
                            time.monotonic() - began, limit)

    def after_fork(self, held: bool) -> None:
        if held:
            self.run_lock.release()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [''])[0]


def _load_cell_mappings() -> list[Any]:
    from nova_cellsched import cells
    return cells.load_cell_mappings()


_lock = threading.Lock()
_worker: PeriodicSync | None = None
_fork_held = threading.local()


def setup(conf_obj: Any = None) -> PeriodicSync:
    """The periodic sync of this process, built and started on first use.

    Called by ``ProjectCellFilter.__init__``; later calls return the same
    one. Registers :func:`reload_hook` on *conf_obj* (a SIGHUP applies a
    new interval) and the fork handlers, once.

    :raises InvalidConfig: the interval is not valid (one line naming the
        option); it is also logged, and nothing is kept.
    """
    global _worker
    conf_obj = CONF if conf_obj is None else conf_obj
    with _lock:
        worker = _worker
        if worker is None or not worker._mine():
            try:
                worker = PeriodicSync(conf_obj)
            except exception.InvalidConfig as exc:
                LOG.error('%s', exc)
                raise
            _worker = worker
            conf_obj.register_mutate_hook(reload_hook)
            _register_fork_handlers()
    worker.start()
    return worker


def get() -> PeriodicSync | None:
    """This process's periodic sync, if :func:`setup` built one here."""
    worker = _worker
    return worker if worker is not None and worker._mine() else None


def reload_hook(conf_obj: cfg.ConfigOpts, fresh: Any) -> None:
    """oslo.config mutate hook: apply a new interval."""
    worker = get()
    if worker is not None:
        worker.reconfigure(conf_obj)


_fork_handlers = False


def _register_fork_handlers() -> None:
    global _fork_handlers
    if _fork_handlers or not hasattr(os, 'register_at_fork'):
        return
    os.register_at_fork(before=_before_fork,
                        after_in_parent=_after_fork_in_parent)
    _fork_handlers = True


def _before_fork() -> None:
    worker = get()
    _fork_held.worker = worker
    _fork_held.held = worker.before_fork() if worker is not None else False


def _after_fork_in_parent() -> None:
    worker = getattr(_fork_held, 'worker', None)
    if worker is not None:
        worker.after_fork(getattr(_fork_held, 'held', False))
    _fork_held.worker = None
