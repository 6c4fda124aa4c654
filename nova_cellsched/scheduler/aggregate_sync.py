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

"""Nova adapter: keep the cell aggregates of placement in sync.

Reads each cell's compute nodes (``target_cell`` + one query of
``compute_nodes``) and the members of each cell aggregate
(``GET /resource_providers?member_of=``, one request per cell: placement
lists no provider's aggregates in bulk) and applies
:func:`~.aggregates.diff` through nova's placement report client. Only a
provider whose membership must change costs more: read its aggregates and
generation, write them back changed only in cell aggregates, read again
and retry on a generation conflict, a bounded number of times with a
growing pause. Aggregate members are listed, and providers written, by a
pool of *workers* threads, so at most *workers* placement requests are in
flight. Used by ``nova-cellsched sync-aggregates``, ``check`` and the
scheduler's periodic sync (:mod:`.periodic_sync`).

Several syncs may run at once (several schedulers, an operator's
command): each cell's aggregate members are read *before* its compute
nodes, so a provider the sync removes was in the aggregate before the
sync found it missing from the cell database (deleted, or moved to
another cell), never one another sync added for a node created since;
each write is computed again from the provider's aggregates as placement
has them at that moment, so the runs converge.

The cell databases are read in parallel, each within a bound (the
*timeout* of :func:`read_cells`, ``[cellsched] list_cell_timeout`` for
the command and the periodic sync): a cell that does not answer in time
is reported and left as it is, never emptied, and the other cells are
synced. With :func:`bound_cell_io`, the PyMySQL I/O of a read ends within
that bound too (:func:`nova_cellsched.guard.io_timeout`), so no thread
stays blocked on a frozen cell database.
"""

import concurrent.futures
import dataclasses
import datetime
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from nova import context as nova_context
from nova.scheduler.client import report
from oslo_db import exception as db_exc
from oslo_log import log as logging
from sqlalchemy import exc as sa_exc

from nova_cellsched import exception
from nova_cellsched import gather
from nova_cellsched import guard
from nova_cellsched.scheduler import aggregates
from nova_cellsched.scheduler.decision import CELL0_UUID

LOG = logging.getLogger(__name__)

#: Placement microversion: aggregates with generations (1.19).
VERSION = report.AGGREGATE_GENERATION_VERSION
#: Errors that mean "this cell database did not answer".
CELL_DB_ERRORS: tuple[type[BaseException], ...] = (
    db_exc.DBError, sa_exc.SQLAlchemyError, OSError)
#: Writes tried per provider before it is reported as failed.
ATTEMPTS = 5
#: Seconds paused after the first generation conflict on a provider,
#: doubled after each further one (with jitter), at most
#: :data:`CONFLICT_PAUSE_MAX`: a provider another writer keeps changing
#: is not hammered in a loop.
CONFLICT_PAUSE = 0.05
CONFLICT_PAUSE_MAX = 1.0
#: Providers that may give up on generation conflicts in one sync; past
#: it, the updates not started yet are not started (another writer is
#: busy on these providers: the next run finishes the work).
CONFLICT_GIVE_UPS = 20
#: Placement requests a sync keeps in flight unless told otherwise
#: (``[cellsched] aggregate_sync_workers``). Below the 10 connections
#: requests keeps per host, and a load a normal placement service (a few
#: API workers) takes next to nova's own traffic.
WORKERS = 8

#: The trait nova's resource tracker gives a compute node's provider.
COMPUTE_NODE_TRAIT = 'COMPUTE_NODE'

#: Results of a change; anything else in :attr:`SyncRow.result` is an error.
DONE = 'done'
DRY_RUN = 'dry run'
SKIPPED = 'skipped'


def _call(fn: Callable[[], Any]) -> Any:
    """Run a placement request; map keystoneauth errors to ours."""
    try:
        return fn()
    except (ks_exc.MissingAuthPlugin, ks_exc.Unauthorized,
            ks_exc.EndpointNotFound) as exc:
        raise exception.InvalidConfig(
            'placement: %s: %s; fix the [placement] options (auth_type, '
            'auth_url, credentials, region_name, valid_interfaces) in '
            'nova.conf' % (type(exc).__name__, exc)) from exc
    except ks_exc.ClientException as exc:
        raise exception.PlacementUnreachable(exc) from exc


class PlacementError(exception.CellschedError):
    """Placement answered a request with an unexpected status."""

    exit_code = 1


class PlacementFailed(PlacementError):
    """Placement answered a request with a server error (5xx).

    Like :class:`~nova_cellsched.exception.PlacementUnreachable` it stops
    a sync (exit status 3): placement is not in a state to be written to.
    """

    exit_code = 3


class Placement:
    """The few placement calls a sync needs, through nova's report client.

    :param client: a ``SchedulerReportClient``; one is built from the
        ``[placement]`` options of nova.conf when None.
    :raises InvalidConfig, PlacementUnreachable: no client can be built.
    """

    def __init__(self, client: Any = None) -> None:
        self.client = client if client is not None else _call(
            report.SchedulerReportClient)
        self.context = nova_context.get_admin_context()
        #: Pauses between conflicting writes (injectable for tests).
        self.sleep: Callable[[float], Any] = time.sleep

    def _request(self, method: str, url: str, body: Any = None,
                 accept: tuple[int, ...] = ()) -> Any:
        """One placement request at :data:`VERSION`.

        :returns: the response, when its status is 200 or in *accept*.
        :raises PlacementError: any other status.
        """
        args = (url,) if body is None else (url, body)
        resp = _call(lambda: getattr(self.client, method)(
            *args, version=VERSION,
            global_request_id=self.context.global_id))
        if resp.status_code != 200 and resp.status_code not in accept:
            error = PlacementFailed if resp.status_code >= 500 else \
                PlacementError
            raise error('%s %s: %s %s' % (
                method.upper(), url, resp.status_code, resp.text))
        return resp

    def members(self, aggregate: str) -> frozenset[str]:
        """Providers in *aggregate* (empty if it has no member)."""
        resp = self._request('get', '/resource_providers?member_of=%s'
                             % aggregate)
        return frozenset(rp['uuid']
                         for rp in resp.json()['resource_providers'])

    def compute_providers(self) -> frozenset[str]:
        """Providers with nova's ``COMPUTE_NODE`` trait (one request)."""
        resp = self._request('get', '/resource_providers?required=%s'
                             % COMPUTE_NODE_TRAIT)
        return frozenset(rp['uuid']
                         for rp in resp.json()['resource_providers'])

    def aggregates_of(self, provider: str
                      ) -> tuple[frozenset[str], int] | None:
        """(aggregates, generation) of *provider*; None if it is unknown."""
        resp = self._request('get', '/resource_providers/%s/aggregates'
                             % provider, accept=(404,))
        if resp.status_code == 404:
            return None
        data = resp.json()
        return (frozenset(data['aggregates']),
                data['resource_provider_generation'])

    def set_aggregates(self, provider: str, aggs: Iterable[str],
                       generation: int) -> bool:
        """Write *provider*'s aggregates; False on a generation conflict."""
        resp = self._request(
            'put', '/resource_providers/%s/aggregates' % provider,
            {'aggregates': sorted(aggs),
             'resource_provider_generation': generation}, accept=(409,))
        return bool(resp.status_code != 409)

    def apply(self, update: aggregates.ProviderUpdate) -> str:
        """Apply *update*, retrying on conflicts; return the result text.

        At most :data:`ATTEMPTS` writes, with a pause growing from
        :data:`CONFLICT_PAUSE` between them; the text of a provider that
        gave up starts with :data:`CONFLICTED`.
        """
        for attempt in range(ATTEMPTS):
            if attempt:
                self.sleep(min(CONFLICT_PAUSE_MAX,
                               CONFLICT_PAUSE * 2 ** (attempt - 1)) *
                           random.uniform(0.5, 1.0))  # noqa: S311
            found = self.aggregates_of(update.provider)
            if found is None:
                return ('failed: no resource provider %s in placement (has '
                        'its nova-compute reported yet?)' % update.provider)
            present, generation = found
            wanted = aggregates.updated(present, update)
            if wanted == present:
                return DONE
            if self.set_aggregates(update.provider, wanted, generation):
                return DONE
            LOG.debug('Generation conflict on provider %s, retrying',
                      update.provider)
        return ('%s: provider %s changed %d times while it was written '
                '(generation conflicts: another writer); run again'
                % (CONFLICTED, update.provider, ATTEMPTS))


#: Start of the result of a provider that gave up on generation conflicts.
CONFLICTED = 'failed: conflicts'


class Nodes(frozenset[str]):
    """Compute node uuids of a cell, with when each was created.

    :ivar created_at: node uuid -> creation time (aware, UTC) as the cell
        database has it; nodes without one are left out.
    """

    created_at: Mapping[str, datetime.datetime]

    def __new__(cls, created_at: Mapping[str, datetime.datetime | None]
                ) -> 'Nodes':
        nodes = super().__new__(cls, created_at)
        nodes.created_at = {uuid: when for uuid, when in created_at.items()
                            if when is not None}
        return nodes


def read_nodes(cell_mapping: Any) -> Nodes:
    """Compute nodes of one cell: the nodes ``ComputeNodeList.get_all``
    lists (rows not deleted), with when each was created.

    One query of two columns on nova's ``compute_nodes`` table, through
    the cell's engine as ``target_cell`` gives it: no ``ComputeNode``
    object is built. Building them decodes every row's JSON (CPU info,
    supported instances, PCI pools, NUMA topology) into more nova
    objects the sync does not use, and needs those objects' classes
    registered (the command registers only the objects it reads). A row
    without a uuid (nova gives one on its next load) is left out.

    :raises: one of :data:`CELL_DB_ERRORS` when the database fails.
    """
    from nova.db.main import api as main_db_api
    from nova.db.main import models as main_models
    import sqlalchemy as sa

    table = main_models.ComputeNode.__table__
    query = sa.select(table.c.uuid, table.c.created_at).where(
        table.c.deleted == 0)
    ctxt = nova_context.get_admin_context()
    with nova_context.target_cell(ctxt, cell_mapping) as cctxt:
        with main_db_api.get_engine(context=cctxt).connect() as conn:
            rows = conn.execute(query).all()
    return Nodes({str(uuid): _utc(created) for uuid, created in rows
                  if uuid})


def _utc(when: datetime.datetime | None) -> datetime.datetime | None:
    """A database time (naive, UTC) as nova's objects give it (aware)."""
    if when is None or when.tzinfo is not None:
        return when
    return when.replace(tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class SyncRow:
    """One line of ``sync-aggregates`` output."""

    cell: str
    aggregate: str
    provider: str
    action: str
    result: str

    @property
    def failed(self) -> bool:
        return self.result not in (DONE, DRY_RUN)


@dataclasses.dataclass(frozen=True)
class CellsRead:
    """Compute nodes and aggregate members of the cells looked at."""

    nodes: Mapping[str, frozenset[str]]
    members: Mapping[str, frozenset[str]]
    unreadable: Mapping[str, str]
    labels: Mapping[str, str]


def _label(cm: Any) -> str:
    return '%s (%s)' % (cm.name, cm.uuid) if cm.name else cm.uuid


def _pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    if workers < 1:
        raise ValueError('workers must be at least 1, got %r' % workers)
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix='cellsched-sync')


def bound_cell_io() -> bool:
    """Let :func:`read_cells` bound the PyMySQL I/O of its cell reads.

    Turns on nova-cellsched's ``guard`` part (:mod:`nova_cellsched.compat`,
    idempotent): the PyMySQL connections made afterwards keep a thread's
    :func:`nova_cellsched.guard.io_timeout`; the cell connections
    pooled before are closed. Called by the command and the periodic
    sync; without it a read past its bound is still not waited for, but
    its thread stays until the driver returns.

    :returns: True when the bound is on (one WARNING says why not).
    """
    from nova_cellsched import compat

    return not compat.install(['guard'])['guard']


def _read_bounded(nodes_of: Callable[[Any], frozenset[str]],
                  cell_mapping: Any, timeout: float | None
                  ) -> frozenset[str]:
    with guard.io_timeout(timeout):
        return nodes_of(cell_mapping)


def _db_reason(exc: BaseException) -> str:
    reason = (str(getattr(exc, 'orig', None) or exc).strip()
              .splitlines() or [''])[0]
    return '%s: %s' % (type(exc).__name__, reason)


def read_cells(placement: Placement, cell_mappings: Iterable[Any],
               nodes_of: Callable[[Any], frozenset[str]] = read_nodes,
               workers: int = WORKERS,
               timeout: float | None = None) -> CellsRead:
    """Read every cell but cell0: nodes from its database, members from
    placement. A cell whose database fails, or does not answer within
    *timeout* seconds, is in ``unreadable`` only.

    Placement lists the aggregates' members on *workers* threads; then
    every cell database is read at once, each on a thread of its own and
    within *timeout* (a :class:`~nova_cellsched.gather.Budget` per cell):
    the call returns within *timeout* of the last member list, whatever a
    frozen cell does, and the thread of a cell not waited for ends with
    its I/O bound (:func:`bound_cell_io`). A cell's database is read only
    once its aggregate's members are in: a provider found in the
    aggregate and not in the database was there before the node left
    the database, so concurrent syncs never remove a node created
    meanwhile.

    :param timeout: seconds per cell database; None: no bound.
    :raises PlacementUnreachable, PlacementError: placement did not list
        an aggregate's members; nothing can be decided then.
    """
    cells = [cm for cm in cell_mappings if cm.uuid != CELL0_UUID]
    labels = {cm.uuid: _label(cm) for cm in cells}
    nodes: dict[str, frozenset[str]] = {}
    members: dict[str, frozenset[str]] = {}
    unreadable: dict[str, str] = {}
    with _pool(workers) as pool:
        futures = {cm.uuid: pool.submit(placement.members, cm.uuid)
                   for cm in cells}
        try:
            # Members first, then nodes (see above).
            for cm in cells:
                members[cm.uuid] = futures[cm.uuid].result()
        except BaseException:
            for future in futures.values():
                future.cancel()
            raise
    # One thread per cell read (gather.run_late): no read waits for a
    # worker, and a read stuck on a database whose driver has no I/O
    # bound keeps neither a pool nor the command's exit waiting.
    outcomes = gather.run_round(
        gather.run_late,
        {cm.uuid: (_read_bounded, (nodes_of, cm, timeout)) for cm in cells},
        {cm.uuid: gather.Budget(timeout) for cm in cells})
    for cm in cells:
        outcome = outcomes[cm.uuid]
        if outcome.ok:
            nodes[cm.uuid] = outcome.result or frozenset()
            continue
        error = outcome.error
        if outcome.status == gather.TIMED_OUT or error is None:
            unreadable[cm.uuid] = ('no answer within %g s ([cellsched] '
                                   'list_cell_timeout)' % (timeout or 0))
        elif isinstance(error, CELL_DB_ERRORS):
            unreadable[cm.uuid] = _db_reason(error)
        else:
            # Not a database failure: a bug, as before the bound.
            raise error
        LOG.warning('Cannot read the compute nodes of cell %s, its '
                    'aggregate is left as it is: %s', labels[cm.uuid],
                    unreadable[cm.uuid])
    return CellsRead(nodes, members, unreadable, labels)


#: Result of an update not started because placement failed before it.
NOT_STARTED = ('not started: placement failed during the sync (see the '
               'error); run again')


#: Result of an update not started because too many providers gave up
#: on generation conflicts before it.
NOT_STARTED_CONFLICTS = (
    'not started: %d providers gave up on generation conflicts in this '
    'sync (another writer is busy on them); run again' % CONFLICT_GIVE_UPS)


class _Writer:
    """Applies provider updates on a pool; stops at a placement fault,
    or once :data:`CONFLICT_GIVE_UPS` providers gave up on conflicts.
    """

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self.fault: exception.CellschedError | None = None
        self.gave_up = 0
        self._lock = threading.Lock()

    def apply(self, update: aggregates.ProviderUpdate) -> str:
        with self._lock:
            if self.fault is not None:
                return NOT_STARTED
            if self.gave_up >= CONFLICT_GIVE_UPS:
                return NOT_STARTED_CONFLICTS
        try:
            result = self.placement.apply(update)
            if result.startswith(CONFLICTED):
                with self._lock:
                    self.gave_up += 1
            return result
        except (PlacementFailed, exception.PlacementUnreachable) as exc:
            with self._lock:
                if self.fault is None:
                    self.fault = exc
            return 'failed: %s' % exc
        except PlacementError as exc:
            return 'failed: %s' % exc

    def apply_all(self, pool: concurrent.futures.Executor,
                  updates: list[aggregates.ProviderUpdate]
                  ) -> dict[str, str]:
        futures = {u.provider: pool.submit(self.apply, u) for u in updates}
        return {provider: future.result()
                for provider, future in futures.items()}


class SyncFailed(exception.CellschedError):
    """Placement failed in the middle of a sync (exit status 3).

    :ivar rows: the sync's rows, as far as it went.
    """

    exit_code = 3

    def __init__(self, cause: exception.CellschedError,
                 rows: list['SyncRow']) -> None:
        self.cause = cause
        self.rows = rows
        done = sum(1 for row in rows if row.result == DONE)
        super().__init__(
            'placement failed during the sync, which stopped: %s; %d '
            'change(s) made, no removal started after the failure; run '
            'the sync again once placement answers' % (cause, done))


#: Action of the row of a cell the removal guard holds.
HOLD = 'hold cell'
#: Start of the result of such a row.
HELD = 'failed: held'


def sync(placement: Placement, cell_mappings: Iterable[Any],
         dry_run: bool = False,
         nodes_of: Callable[[Any], frozenset[str]] = read_nodes,
         workers: int = WORKERS,
         max_removal: float = aggregates.MAX_REMOVAL,
         force: bool = False,
         only: Set[str] | None = None,
         timeout: float | None = None) -> list[SyncRow]:
    """Make each cell aggregate hold exactly its cell's compute nodes.

    *only* (cell uuids) limits the changes to those cells; the other
    cells of *cell_mappings* are read too, so that the removal guard
    knows a provider another cell's database lists (moved, not gone).

    Each cell database is read within *timeout* seconds (None: no
    bound; see :func:`read_cells`): a cell that fails or does not answer
    in time gets a failed row (action ``skip cell``) and no change.

    A cell whose database would take every member out of its aggregate,
    or more than *max_removal* of them (gone from the databases or moved
    to another cell alike), is held (see
    :func:`.aggregates.plan`): nothing is changed in its aggregate, and
    its row (action :data:`HOLD`, naming the cell and the counts) is a
    failure, which the command prints and the periodic sync logs as an
    ERROR; other cells proceed. *force* holds nothing (the command's
    ``--force``).

    At most *workers* placement requests are in flight. Providers that
    only join aggregates are written first; providers that leave one are
    written only when all of those succeeded without a placement fault.
    A provider that changes under the sync (generation conflict) is read
    and written again, :data:`ATTEMPTS` times at most.

    :returns: one row per change (and per unreadable cell), in cell and
        provider order; a row whose :attr:`SyncRow.failed` is true is a
        failure.
    :raises PlacementUnreachable, PlacementFailed: placement failed while
        the aggregates were read: nothing was written.
    :raises SyncFailed: placement failed (unreachable, 5xx) while
        providers were written: no write was started after the failure,
        and none that removes a provider from an aggregate if it came
        while providers were being added.
    """
    state = read_cells(placement, cell_mappings, nodes_of, workers,
                       timeout)
    rows = [SyncRow(state.labels[cell], cell, '', 'skip cell',
                    'failed: cannot read the cell database (%s); nothing '
                    'changed in its aggregate' % reason)
            for cell, reason in sorted(state.unreadable.items())
            if only is None or cell in only]
    planned = aggregates.plan(state.nodes, state.members, max_removal,
                              force=force, cells=only)
    for cell, why in sorted(planned.held.items()):
        rows.append(SyncRow(state.labels[cell], cell, '', HOLD, '%s: %s' % (
            HELD, why.reason(state.labels[cell], state.labels))))
    changes = planned.changes
    results: dict[str, str] = {}
    writer = _Writer(placement)
    if not dry_run and changes:
        updates = aggregates.per_provider(changes)
        with _pool(workers) as pool:
            results.update(writer.apply_all(
                pool, [u for u in updates if not u.remove]))
            results.update(writer.apply_all(
                pool, [u for u in updates if u.remove]))
    for change in changes:
        rows.append(SyncRow(state.labels[change.cell], change.cell,
                            change.provider, change.action.value,
                            DRY_RUN if dry_run else results[change.provider]))
    if writer.fault is not None:
        raise SyncFailed(writer.fault, rows)
    return rows


def problems(placement: Placement, cell_mappings: Iterable[Any],
             workers: int = WORKERS,
             max_removal: float = aggregates.MAX_REMOVAL,
             known: Set[str] | None = None,
             timeout: float | None = None) -> list[str]:
    """``check``'s lines about the cell aggregates (see
    :func:`.aggregates.problems`), unreadable cells included.

    :param known: with every cell mapping's uuid and nova's host
        aggregates, the aggregates deleted cell mappings left behind are
        looked for too (:func:`find_stale`; not when a cell could not be
        read).
    :param timeout: seconds per cell database (:func:`read_cells`).
    """
    state = read_cells(placement, cell_mappings, workers=workers,
                       timeout=timeout)
    found = ['cannot read the compute nodes of cell %s (%s), its aggregate '
             'is not checked' % (state.labels[cell], reason)
             for cell, reason in sorted(state.unreadable.items())]
    created: dict[str, datetime.datetime] = {}
    for nodes in state.nodes.values():
        created.update(getattr(nodes, 'created_at', {}))
    found += aggregates.problems(state.nodes, state.members,
                                 state.labels, created_at=created,
                                 max_removal=max_removal)
    if known is not None:
        stale = find_stale(placement, state, known, workers)
        found += [aggregates.stale_problem(aggregate, providers)
                  for aggregate, providers in sorted((stale or {}).items())]
    return found


def read_host_aggregates() -> frozenset[str]:
    """uuids of nova's host aggregates (the API database's
    ``aggregates`` table), which nova mirrors into placement.
    """
    from nova.db.api import api as api_db_api
    from nova.db.api import models as api_models
    import sqlalchemy as sa

    table = api_models.Aggregate.__table__
    with api_db_api.get_engine().connect() as conn:
        return frozenset(str(row[0]) for row in conn.execute(
            sa.select(table.c.uuid)) if row[0])


def find_stale(placement: Placement, state: CellsRead, known: Set[str],
               workers: int = WORKERS) -> dict[str, frozenset[str]] | None:
    """The aggregates deleted cell mappings left behind (see
    :func:`.aggregates.stale`): aggregate -> its members.

    One request lists the compute node providers; each orphan (a
    compute node provider of no cell) costs one more, and each aggregate
    of theirs nova does not know one more: nothing more when there is
    none.

    :param state: every cell mapping's cell, read (:func:`read_cells`).
    :param known: every cell mapping's uuid and nova's host aggregates.
    :returns: None when a cell could not be read (its nodes would look
        orphaned, nothing can be decided).
    """
    if state.unreadable:
        return None
    orphans = aggregates.orphans(placement.compute_providers(), state.nodes)
    orphan_aggregates: dict[str, frozenset[str]] = {}
    members: dict[str, frozenset[str]] = {}
    with _pool(workers) as pool:
        found = {p: pool.submit(placement.aggregates_of, p)
                 for p in sorted(orphans)}
        for provider, future in found.items():
            result = future.result()
            if result is not None:   # deleted meanwhile
                orphan_aggregates[provider] = result[0]
        candidates = frozenset().union(
            *orphan_aggregates.values()) - frozenset(known)
        listed = {a: pool.submit(placement.members, a)
                  for a in sorted(candidates)}
        members = {a: future.result() for a, future in listed.items()}
    return aggregates.stale(orphan_aggregates, members, known)


#: Label and action of the rows of ``sync-aggregates --remove-stale``.
STALE_CELL = '(deleted cell mapping)'
REMOVE_STALE = 'remove stale'


def remove_stale(placement: Placement, stale: Mapping[str, Set[str]],
                 dry_run: bool = False,
                 workers: int = WORKERS) -> list[SyncRow]:
    """Take every member out of each aggregate of *stale* (aggregate ->
    members, from :func:`find_stale`); other aggregates of the providers
    are kept. One row per provider and aggregate.

    :raises SyncFailed: placement failed (unreachable, 5xx) while
        providers were written; no write was started after the failure.
    """
    leave: dict[str, set[str]] = {}
    for aggregate, providers in stale.items():
        for provider in providers:
            leave.setdefault(provider, set()).add(aggregate)
    results: dict[str, str] = {}
    writer = _Writer(placement)
    if not dry_run and leave:
        with _pool(workers) as pool:
            results = writer.apply_all(pool, [
                aggregates.ProviderUpdate(p, frozenset(), frozenset(a))
                for p, a in sorted(leave.items())])
    rows = [SyncRow(STALE_CELL, aggregate, provider, REMOVE_STALE,
                    DRY_RUN if dry_run else results[provider])
            for aggregate in sorted(stale)
            for provider in sorted(stale[aggregate])]
    if writer.fault is not None:
        raise SyncFailed(writer.fault, rows)
    return rows
