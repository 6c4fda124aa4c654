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

"""nova-api's instance listing on the gatherer: the replacement functions.

:func:`get_instance_objects_sorted` and :func:`get_instances_sorted`
have the signatures and the contract of nova's functions of the same
names in ``nova.compute.instance_list``, and answer with nova's own
pieces: the cells come from ``nova.context`` (so nova's
cell cache, engines and test fixtures apply), every batch is nova's
``instance_get_all_by_filters_sort`` (its filters and project scope),
and the objects are built by nova's ``_make_instance_list``. How the
running nova release's lister makes those calls is the adapter's
(:mod:`nova_cellsched.compat.adapter`).
What differs is how the cells are asked and how rows are read:

* every cell's batch runs to completion in a worker, all cells in
  parallel (:mod:`nova_cellsched.gather`), each under its own budget of
  ``[cellsched] list_cell_timeout``; a cell that fails or does not
  answer in time is a down cell, reported to nova's caller as nova's
  lister reports one;
* the rows are paged by their sort values (:mod:`.keyset`) and merged
  in the same order (:mod:`nova_cellsched.listing.sorting`), NULL where
  nova's queries put it (highest when every cell is on PostgreSQL, else
  lowest), so a NULL sort value neither fails the request nor loses
  rows after a marker;
* a cell is asked for more rows only while they can still be part of
  the page (:func:`nova_cellsched.gather.refetch_sizes`), and a cell
  that keeps filling its batches is asked for more each round, unless
  ``[api] instance_list_cells_batch_strategy = fixed``;
* a batch's rows and joins come back as plain dicts (:mod:`.rows`)
  rather than ORM entities, where that module knows every join asked
  for.

The listing is :class:`_Listing`, a
:class:`nova_cellsched.listing.cross_cell.CrossCellLister` (the rounds,
the marker lookup, the budgets and deadline, shared with the command
line's lister) whose hooks use nova's DB API: :meth:`_Listing.targeted`
(a context per cell), :func:`check_down` (nova's down-cell policy),
:func:`report_timings` (the request's timings) and :func:`listed_cells`
(what the view needs, left in the request's state). Its calls run on the
process's listing workers, each bounded (:mod:`.pool`).
"""

import concurrent.futures
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from nova.compute import instance_list as nova_instance_list
import nova.conf
from nova import context as nova_context
from nova import exception as nova_exception
from oslo_log import log as logging

from nova_cellsched.api.hooks import driver_advice
from nova_cellsched.api.hooks import keyset
from nova_cellsched.api.hooks import pool
from nova_cellsched.api.hooks import rows as rows_mod
from nova_cellsched.api.middleware import request_state
from nova_cellsched.api.middleware import server_timing
from nova_cellsched.api.view import render
from nova_cellsched import compat
from nova_cellsched.compat import adapter
from nova_cellsched import conf as conf_mod
from nova_cellsched import counters
from nova_cellsched import exception as cellsched_exception
from nova_cellsched import gather
from nova_cellsched.listing import batches
from nova_cellsched.listing import cross_cell
from nova_cellsched.listing import order
from nova_cellsched.listing import rounds
from nova_cellsched.listing import sorting

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf_mod.register_opts(CONF)


def _nova(owner: str, name: str) -> Callable[..., Any]:
    """nova's own *owner.name*, which this module stands in for.

    Called with ``[cellsched] api_lister`` off, and for the calls that
    are not the listing's.
    """
    found: Callable[..., Any] = compat.original(owner, name)
    return found


#: How many listings each lister answered in this process:
#: ``{'cellsched': n, 'nova': m}``.
SERVED = counters.Counts(('cellsched', 'nova'))

class CellsLister:
    """What one listing found out about its cells.

    The properties of nova's ``CrossCellLister`` that nova's callers
    read: lists of cell uuids.
    """

    def __init__(self) -> None:
        self._responded: set[str] = set()
        self._failed: set[str] = set()
        self._timed_out: set[str] = set()
        #: Cell uuid -> why it is down (``Type: message``).
        self.reasons: dict[str, str] = {}

    @property
    def cells_responded(self) -> list[str]:
        return sorted(self._responded - self._failed - self._timed_out)

    @property
    def cells_failed(self) -> list[str]:
        return sorted(self._failed)

    @property
    def cells_timed_out(self) -> list[str]:
        return sorted(self._timed_out)

    @property
    def marker_identifier(self) -> str:
        return 'uuid'

    def record(self, cell: str, outcome: gather.Outcome[Any]) -> None:
        if outcome.ok:
            self._responded.add(cell)
            return
        if outcome.status == gather.TIMED_OUT:
            self._timed_out.add(cell)
        else:
            self._failed.add(cell)
        self.reasons.setdefault(cell, outcome.describe() or outcome.status)


def sort_order(sort_keys: Sequence[str] | None,
               sort_dirs: Sequence[str] | None) -> sorting.SortSpec:
    """The order nova's cell queries sort in, for these API arguments.

    :func:`.sorting.nova_order`, the normalisation the command line's
    lister uses too: the order every batch is read in and the runs are
    merged in.

    :raises nova.exception.InvalidInput: as nova's
        ``process_sort_params``, with its message.
    """
    try:
        keys, dirs = sorting.nova_order(sort_keys, sort_dirs)
    except cellsched_exception.InvalidListRequest as exc:
        raise nova_exception.InvalidInput(reason=exc.expected)
    return sorting.SortSpec(keys, dirs)


class _Listing(cross_cell.CrossCellLister):
    """nova-api's cross-cell listing: the hooks on nova's DB API.

    Cells are reached through ``nova.context.target_cell`` and batches
    read as the release's lister reads them (:attr:`nova`, the adapter:
    nova's ``instance_get_all_by_filters_sort``, paged by
    :mod:`.keyset`), in this process's workers
    (:func:`.pool.executor`), guarded (:class:`.pool.GuardedCalls`). What
    it found about the cells is :attr:`lister` (nova's ``CrossCellLister``
    properties).
    """

    def __init__(self, ctx: Any, filters: Any, columns_to_join: Any,
                 spec: sorting.SortSpec) -> None:
        group = CONF[conf_mod.GROUP_NAME]
        super().__init__(ctx, spec, group.list_cell_timeout,
                         pool.request_deadline(group.list_cell_timeout))
        self.filters = filters
        self.columns_to_join = columns_to_join
        self._key = spec.key_function()
        self.calls = pool.GuardedCalls(group.list_cell_timeout,
                                   group.api_stuck_queries_per_cell)
        #: Cells this process lists, to size the worker pool.
        self.cell_count = 1
        self.lister = CellsLister()
        #: Cell uuid -> context targeted at it (:meth:`targeted`).
        self.cctxts: dict[str, Any] = {}
        #: The CellMappings held down, not asked (:data:`.pool.HEALTH`).
        self.held: list[Any] = []
        #: Rows as dicts (:mod:`.rows`) where it knows every join.
        self.plain_rows = rows_mod.supports(columns_to_join)
        #: The instance columns to read (None: all): the renderer's and
        #: the sort keys, for rows it will render
        #: (:func:`get_instance_objects_sorted`).
        state = request_state.current()
        columns = None if state is None else state.row_columns
        self.row_columns = (None if columns is None else
                            frozenset(columns) | frozenset(spec.keys))
        #: nova's side of the hooks (:mod:`nova_cellsched.compat.adapter`).
        self.nova = adapter

    @property
    def ctx(self) -> Any:
        return self.context

    # The hooks.

    def key(self, row: Any) -> Any:
        return self._key(row)

    def values_of(self, row: Any) -> Sequence[Any]:
        return self.spec.values_of(row)

    def submit(self) -> Callable[..., 'concurrent.futures.Future[Any]']:
        return pool.executor(self.cell_count).submit

    def span(self, name: str, **info: Any
             ) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return _span(name, **info)

    def in_cells(self, calls: Mapping[str, cross_cell.Call],
                 budgets: Mapping[str, gather.Budget]
                 ) -> dict[str, gather.Outcome[Any]]:
        """Each call guarded (:class:`.pool.GuardedCalls`), in *budgets*."""
        return self.calls.run(
            lambda guarded: super(_Listing, self).in_cells(guarded, budgets),
            dict(calls))

    def fetch_round(self, calls: Mapping[str, tuple[Sequence[Any] | None,
                                                    int | None]]
                    ) -> dict[str, gather.Outcome[rounds.Batch]]:
        return self.round({uuid: (self.cctxts[uuid], start, size)
                           for uuid, (start, size) in calls.items()})

    def read_marker(self, cell_mapping: Any, marker: str
                    ) -> tuple[Any, ...]:
        """The marker's sort values, read in a worker within the budget.

        Deleted instances included; within ``list_cell_timeout`` (nova
        reads it in the request's thread, without a bound).
        """
        cell = cell_mapping
        elevated = self.nova.marker_context(self.ctx)
        if pool._health().held(cell.uuid):
            pool.probe(self.ctx, cell)
            raise self.nova.not_responding(cell.uuid)
        with nova_context.target_cell(elevated, cell) as cctxt:
            outcomes = self.in_cells(
                {cell.uuid: (self.nova.marker_row, (cctxt, marker))},
                {cell.uuid: gather.Budget(self.cell_timeout)})
        pool.note_health(outcomes)
        outcome = outcomes[cell.uuid]
        if outcome.status == gather.TIMED_OUT:
            raise self.nova.not_responding(cell.uuid)
        if outcome.error is not None:
            # nova's MarkerNotFound for a marker not in its cell.
            raise outcome.error
        return self.spec.values_of(outcome.result)

    # The listing's steps.

    def targeted(self, cell_mappings: Sequence[Any]
                 ) -> dict[str, Any]:
        """A context targeted at each cell that can be asked.

        Each by ``nova.context.target_cell`` in this thread, as nova's
        ``pool.scatter_gather_cells`` targets them (nova's cell cache and
        engines apply, and nova's tests stub it to take cells down): no
        I/O, no worker. A cell that fails here, or that already has
        ``api_stuck_queries_per_cell`` queries stuck, is down.
        """
        cctxts: dict[str, Any] = {}
        for cm in cell_mappings:
            self.budgets[cm.uuid] = gather.Budget(self.cell_timeout)
            driver_advice.warn_unbounded_cell(
                cm, pool.io_timeout(self.cell_timeout),
                CONF.database.connection_parameters)
            if self.calls.tripped(cm.uuid):
                self.lister.record(cm.uuid, gather.Outcome(
                    gather.TIMED_OUT,
                    error=gather.CellTimeout(self.calls.cell_timeout)))
                continue
            left = pool._health().snapshot().get(cm.uuid)
            if left is not None:
                self.lister.record(cm.uuid, gather.Outcome(
                    gather.TIMED_OUT, error=pool.CellHeldDown(left)))
                self.held.append(cm)
                pool.probe(self.ctx, cm)
                continue
            try:
                with nova_context.target_cell(self.ctx, cm) as cctxt:
                    cctxts[cm.uuid] = cctxt
            except Exception as exc:
                self.lister.record(cm.uuid, gather.Outcome(gather.FAILED,
                                                           error=exc))
        return cctxts

    def round(self, calls: dict[str, tuple[Any, Sequence[Any] | None,
                                           int | None]]
              ) -> dict[str, gather.Outcome[rounds.Batch]]:
        """One batch per cell, in parallel; an outcome per cell.

        :param calls: cell uuid -> (targeted context, sort values to
            start after or None, rows to fetch or None for all).
        """
        outcomes = self.in_cells({
            uuid: (self._fetch, call) for uuid, call in calls.items()},
            self.budgets)
        for uuid, outcome in outcomes.items():
            self.lister.record(uuid, outcome)
        pool.note_health(outcomes)
        return outcomes

    def _fetch(self, cctxt: Any, after: Sequence[Any] | None,
               limit: int | None) -> rounds.Batch:
        """Worker: one batch of one cell, with nova's DB API."""
        loader = (rows_mod.Loader(cctxt, self.columns_to_join,
                                  self.row_columns)
                  if self.plain_rows else None)
        with keyset.paging(after, loader, self.spec.nulls_high):
            found = list(self.nova.batch(
                cctxt, self.filters, limit,
                [] if loader else self.columns_to_join,
                list(self.spec.keys), list(self.spec.dirs)))
        rows = loader.finish(found) if loader else found
        return rounds.Batch(rows, len(rows))

    def marker_values(self, marker: str) -> tuple[Any, ...]:
        """The marker instance's sort values, as nova finds the marker.

        Its InstanceMapping names its cell (:func:`.cross_cell.marker_cell`,
        the command line's lookup too; none: nova's ``MarkerNotFound``),
        where :meth:`read_marker` reads it.
        """
        try:
            return super().marker_values(marker)
        except cellsched_exception.MarkerNotFound:
            raise nova_exception.MarkerNotFound(marker=marker)

    def run(self, cell_mappings: Sequence[Any], marker: str | None,
            limit: int | None, batch_size: int | None,
            cell_down_support: bool) -> list[Any]:
        """The page: nova DB rows in the global order, at most *limit*.

        Each cell's own queries run ``list_cell_timeout`` at most in all
        (its budget): a cell whose query has not answered by then is down
        for this request and not asked again. Waits for a worker are
        bounded by the request's deadline
        (:meth:`.cross_cell.CrossCellLister.in_cells`) and never make a
        cell down.
        """
        self.start(())
        self.cell_count = max(len(cell_mappings),
                              len(nova_context.CELLS or ()))
        with server_timing.phase('gather'):
            after = self.marker_values(marker) if marker else None
        if limit == 0:
            return []
        self.cctxts = self.targeted(cell_mappings)
        batch_size = batch_size or limit or CONF.api.max_limit
        first = min(batch_size, limit) if limit else batch_size
        page = self.page(list(self.cctxts), after, first, batch_size, limit,
                         batches.batches_grow())
        timings = server_timing.current()
        if timings is not None:
            report_timings(timings, cell_mappings, self.calls.seconds(),
                           self.lister)
            timings.held.extend(cm.name or cm.uuid for cm in self.held)
        state = request_state.current()
        if state is not None:
            # The rest of this request (faults, block device mappings)
            # does not wait again for a cell the listing gave up on.
            state.given_up |= frozenset(self.lister.cells_timed_out)
        check_down(self.lister, cell_down_support)
        if state is not None:
            # The view asks each listed server's own cell (:mod:`.view`).
            state.listed = listed_cells(page.picked, cell_mappings)
        return [row for _key, _cell, row in page.picked]


def report_timings(timings: server_timing.RequestTimings,
                   cell_mappings: Sequence[Any],
                   cell_seconds: Mapping[str, float],
                   cells_lister: CellsLister) -> None:
    """Per-cell times and down cells, into this request's *timings*.

    :param cell_seconds: cell uuid -> seconds its calls ran.
    """
    names = {cm.uuid: cm.name or cm.uuid for cm in cell_mappings}
    for uuid, seconds in cell_seconds.items():
        name = names.get(uuid, uuid)
        timings.cells[name] = timings.cells.get(name, 0.0) + seconds
    timings.down.extend(
        names.get(uuid, uuid) for uuid in
        cells_lister.cells_failed + cells_lister.cells_timed_out)


def check_down(cells_lister: CellsLister, cell_down_support: bool) -> None:
    """nova's down-cell policy: fail the listing, or log and go on.

    :raises nova.exception.NovaException: a cell is down, ``[api]
        list_records_by_skipping_down_cells`` is off and the caller
        cannot show down cells' servers (nova's message).
    """
    down = cells_lister.cells_failed + cells_lister.cells_timed_out
    if not down:
        return
    if (not CONF.api.list_records_by_skipping_down_cells and
            not cell_down_support):
        raise adapter.not_responding(down[0])
    for uuid in down:
        LOG.warning('Cell %(cell)s is not responding and hence is '
                    'being omitted from the results: %(why)s',
                    {'cell': uuid, 'why': cells_lister.reasons[uuid]})


def listed_cells(picked: Iterable[tuple[Any, str, Any]],
                 cell_mappings: Sequence[Any]) -> dict[str, Any]:
    """Server uuid -> CellMapping of the listed rows (*picked*).

    A server in two cells (a cross-cell resize in flight) is shown as
    its first copy: nova's compute API keeps the first and drops the
    later ones (``_get_unique_filter_method``), so its lookups must go
    to the first copy's cell.
    """
    mappings = {cm.uuid: cm for cm in cell_mappings}
    listed: dict[str, Any] = {}
    for _key, cell, row in picked:
        listed.setdefault(row['uuid'], mappings[cell])
    return listed


def _span(name: str, **_info: Any
          ) -> contextlib.AbstractContextManager[dict[str, Any]]:
    """The rounds' phases as this request's: a further round is gather."""
    return server_timing.phase('gather' if name == 'refetch' else name)


def get_instances_sorted(ctx: Any, filters: Any, limit: int | None,
                         marker: str | None, columns_to_join: Any,
                         sort_keys: Sequence[str] | None,
                         sort_dirs: Sequence[str] | None,
                         cell_mappings: Sequence[Any] | None = None,
                         batch_size: int | None = None,
                         cell_down_support: bool = False
                         ) -> tuple[Any, Iterable[Any]]:
    """nova's ``get_instances_sorted``: (lister, DB rows in order).

    As nova's, the listing runs when the caller starts iterating the
    rows (and errors such as ``MarkerNotFound`` are raised then), and
    the lister's down cells are known once the rows are consumed. All
    the cells' batches are fetched at that first step, in parallel.
    """
    if not CONF[conf_mod.GROUP_NAME].api_lister:
        SERVED.count('nova')
        delegated: tuple[Any, Iterable[Any]] = _nova(
            'nova.compute.instance_list', 'get_instances_sorted')(
            ctx, filters, limit, marker, columns_to_join, sort_keys,
            sort_dirs, cell_mappings=cell_mappings, batch_size=batch_size,
            cell_down_support=cell_down_support)
        return delegated
    SERVED.count('cellsched')
    if not cell_mappings:
        # NOTE: as nova's CrossCellLister (``if self.cells``): a project
        # with no cell mappings yet is listed in every cell.
        cell_mappings = adapter.all_cells()
    spec = sort_order(sort_keys, sort_dirs).with_nulls_high(
        sorting.nulls_high_for(
            order.backend_of(cm.database_connection)
            for cm in cell_mappings))
    listing = _Listing(ctx, filters, columns_to_join, spec)

    def rows() -> Iterator[Any]:
        yield from listing.run(cell_mappings, marker, limit, batch_size,
                               cell_down_support)

    return listing.lister, rows()


def get_instance_objects_sorted(ctx: Any, filters: Any, limit: int | None,
                                marker: str | None, expected_attrs: Any,
                                sort_keys: Sequence[str] | None,
                                sort_dirs: Sequence[str] | None,
                                cell_down_support: bool = False
                                ) -> tuple[Any, list[str]]:
    """nova's ``get_instance_objects_sorted``: (InstanceList, down cells).

    The same cells (``[api] instance_list_per_project_cells``), batch
    size (``[api] instance_list_cells_batch_*``), joins and objects as
    nova; see :func:`get_instances_sorted` for the rows.
    """
    if not CONF[conf_mod.GROUP_NAME].api_lister:
        # nova's function calls get_instances_sorted (this module's),
        # which counts the listing.
        answer: tuple[Any, list[str]] = (
            _nova('nova.compute.instance_list',
                  'get_instance_objects_sorted')(
                ctx, filters, limit, marker, expected_attrs, sort_keys,
                sort_dirs, cell_down_support=cell_down_support))
        return answer
    cell_mappings = adapter.cells_to_list(ctx)
    batch_size = batches.first_batch_size(limit, len(cell_mappings))
    columns_to_join = adapter.columns_to_join(expected_attrs)
    # Rows the renderer will render hold only the columns it reads.
    state = request_state.current()
    partial = (state is not None and render.will_stash(filters) and
               rows_mod.supports(columns_to_join))
    if state is not None and partial:
        state.row_columns = render.ROW_COLUMNS
    try:
        # Through nova's module, as nova calls it (it is ours once
        # installed).
        cells_lister, rows = nova_instance_list.get_instances_sorted(
            ctx, filters, limit, marker, columns_to_join, sort_keys,
            sort_dirs, cell_mappings=cell_mappings, batch_size=batch_size,
            cell_down_support=cell_down_support)
        # The listing runs here (errors such as MarkerNotFound are
        # raised here, as in nova), timed apart from building the
        # objects.
        db_rows = list(rows)
    finally:
        if state is not None:
            state.row_columns = None
    with server_timing.phase('objects'):
        # NOTE: partial rows are for the renderer, even if its option
        # changed during the listing: nova's objects need whole rows.
        if (partial or render.will_stash(filters)) and all(
                type(row) is dict for row in db_rows):
            instance_list = render.stash(
                ctx, db_rows, expected_attrs,
                columns_to_join if partial else None)
        else:
            instance_list = adapter.instance_objects(ctx, db_rows,
                                                     expected_attrs)
    timings = server_timing.current()
    if timings is not None:
        timings.served = True
        timings.listed += len(db_rows)
    return instance_list, (cells_lister.cells_failed +
                           cells_lister.cells_timed_out)
