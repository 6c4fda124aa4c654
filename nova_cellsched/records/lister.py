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

"""Cross-cell instance listing: :func:`list_instances`.

The contract: for every query in the supported subset that nova's own
``nova.compute.instance_list.get_instances_sorted`` answers, the same
instances come back in the same order, markers included. What differs is
how:

1. every cell's first batch is queried at once, each in its own worker
   thread that runs the query to completion (no lazy generators); the
   workers of a round start together once all are submitted;
2. a batch carries the joined data its fields need in the same
   statement: the flavor and network info blobs LEFT JOINed, the user
   metadata aggregated to JSON by a correlated subquery, so a cell costs
   one worker, one connection and one round trip per round;
3. a cell is asked again, in a parallel round with the other such
   cells, only while its last row still comes before the limit-th row
   fetched so far (see :func:`gather.refetch_sizes`); then the batches
   are heap-merged by a key function, and only the surviving rows'
   blobs are parsed, each just before its record is built;
4. each cell is held to a deadline on its futures, and a cell that fails
   or times out is reported in the result with its original exception.

Each phase is timed (see :mod:`nova_cellsched.listing.timing`). The
listing is a :class:`.cross_cell.CrossCellLister` (the rounds, the
marker lookup, the budgets, shared with nova-api's lister) whose hooks
read the cells with this lister's own SQL.
"""

import concurrent.futures
import contextlib
import dataclasses
import datetime
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_log import log as logging
from oslo_utils import strutils
from oslo_utils import timeutils
import sqlalchemy as sa

from nova_cellsched import cells as cells_mod
from nova_cellsched import conf as conf_mod
from nova_cellsched import exception
from nova_cellsched import gather
from nova_cellsched.listing import batches
from nova_cellsched.listing import cross_cell
from nova_cellsched.listing import order
from nova_cellsched.listing import profiling
from nova_cellsched.listing import rounds
from nova_cellsched.listing import sorting
from nova_cellsched.listing import timing
from nova_cellsched.records import fields as record_fields
from nova_cellsched.records import query as instance_query

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf_mod.register_opts(CONF)

#: Sort keys a caller may use: those of nova's API (microversion 2.75+).
ALLOWED_SORT_KEYS = sorting.API_SORT_KEYS

#: Fields every record has.
BASE_FIELDS = record_fields.BASE_FIELDS
#: The fields of ``nova-cellsched list --long`` (what nova's detail view
#: shows an operator).
DETAIL_FIELDS = record_fields.DETAIL_FIELDS


def check_text(value: Any) -> str:
    """*value* if nova's utf8 columns could hold it, else ValueError.

    nova's tables are utf8 (3 bytes per character at most) on MySQL: a
    character beyond U+FFFF cannot be stored, and comparing with one makes
    MariaDB fail the whole query. Text that is not valid UTF-8 (a lone
    surrogate from undecodable command line bytes) cannot be sent at all.
    """
    if not isinstance(value, str):
        raise TypeError('not text: %r' % (value,))
    try:
        value.encode('utf-8')
    except UnicodeEncodeError:
        raise ValueError('not valid UTF-8 text')
    if any(ord(ch) > 0xFFFF for ch in value):
        raise ValueError('characters beyond U+FFFF cannot be in a nova '
                         'database')
    return value


def _regex(value: str) -> str:
    """A regular expression, checked as nova-api checks its ``regex``.

    nova-api's query parameter schemas reject a value ``re.compile``
    refuses (HTTP 400); so does the lister.
    """
    text = check_text(value)
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError('not a regular expression: %s' % exc) from exc
    return text


def _text_list(value: str | Iterable[str | None]) -> tuple[str | None, ...]:
    if isinstance(value, str):
        return tuple(check_text(v.strip()) for v in value.split(',')
                     if v.strip())
    return tuple(v if v is None else check_text(v) for v in value)


def _time(value: str | datetime.datetime) -> datetime.datetime:
    if not isinstance(value, datetime.datetime):
        value = timeutils.parse_isotime(check_text(value))
    # Naive UTC, as nova stores times; an aware time at the edge of the
    # calendar cannot be moved to UTC (OverflowError, caught by the caller).
    normal: datetime.datetime = timeutils.normalize_time(value)
    return normal


def _bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    flag: bool = strutils.bool_from_string(value, strict=True)
    return flag


def _int(value: str | int) -> int:
    if isinstance(value, bool):
        raise TypeError('not an integer: %r' % value)
    return int(value)


#: Supported filters and how a text value (command line) is read.
FILTERS: Mapping[str, Callable[[Any], Any]] = {
    'project_id': check_text, 'user_id': check_text, 'host': check_text,
    'node': _regex, 'image_ref': check_text, 'key_name': _regex,
    'availability_zone': _regex,
    'uuid': _text_list, 'vm_state': _text_list, 'task_state': _text_list,
    'display_name': _regex, 'instance_type_id': _int,
    'changes-since': _time, 'changes-before': _time,
    'deleted': _bool, 'soft_deleted': _bool,
}


def normalize_filters(filters: Mapping[str, Any] | None
                      ) -> dict[str, Any]:
    """Validate *filters* and convert text values.

    ``deleted`` defaults to False (live instances only); an explicit
    ``deleted=None`` lists live and deleted instances, as nova's DB API
    does without the filter.

    :raises InvalidListRequest: unknown filter or unreadable value.
    """
    out: dict[str, Any] = {}
    for name, value in (filters or {}).items():
        reader = FILTERS.get(name)
        if reader is None:
            raise exception.InvalidListRequest(
                'filter', name, 'one of %s' % ', '.join(sorted(FILTERS)))
        if value is None:
            if name == 'deleted':
                out[name] = None
            continue
        try:
            out[name] = reader(value)
        except (ValueError, TypeError, OverflowError) as exc:
            raise exception.InvalidListRequest(
                'filter value', '%s=%s' % (name, value),
                'a value of the right type (%s)' % exc) from exc
    out.setdefault('deleted', False)
    return out


@dataclasses.dataclass(frozen=True)
class Cell:
    """A cell to list, from its nova cell mapping."""

    uuid: str
    name: str | None
    database_connection: str = dataclasses.field(repr=False)

    @property
    def label(self) -> str:
        return self.name or self.uuid


@dataclasses.dataclass(frozen=True)
class CellFailure:
    """A cell whose instances are missing from a result, and why.

    :ivar status: ``failed`` or ``timed out``.
    :ivar error: the original exception (a :class:`gather.CellTimeout`
        for a timeout).
    """

    cell: Cell
    status: str
    error: BaseException

    def describe(self) -> str:
        """``Type: message`` on one line."""
        return gather.describe_error(self.error)


@dataclasses.dataclass(frozen=True)
class ListResult:
    """The answer of :func:`list_instances`.

    :ivar instances: records (dicts) in the global order.
    :ivar failures: cells that failed or timed out; their instances are
        missing.
    :ivar cells: the cells that were queried.
    :ivar timings: where the time went.
    :ivar limit: the limit asked for, or None.
    """

    instances: tuple[Mapping[str, Any], ...]
    failures: tuple[CellFailure, ...]
    cells: tuple[Cell, ...]
    timings: timing.Timings
    limit: int | None = None

    @property
    def complete(self) -> bool:
        """True when every cell answered."""
        return not self.failures

    @property
    def next_marker(self) -> str | None:
        """The marker for the next page, None after the last page."""
        if self.limit is None or len(self.instances) < self.limit:
            return None
        return str(self.instances[-1]['uuid'])


def select_cells(context: Any, wanted: Sequence[Any] | None = None
                 ) -> list[Cell]:
    """The cells to list: all (cell0 included), or the *wanted* ones.

    :param wanted: cell names, uuids, or nova CellMapping objects.
    :raises InvalidListRequest: a name or uuid matching no cell, or a
        name matching several.
    """
    cells_mod.register_objects()
    if wanted is not None and all(
            isinstance(w, objects.CellMapping) for w in wanted):
        mappings = list(wanted)
    else:
        everything = cells_mod.load_cell_mappings(context)
        if wanted is None:
            mappings = everything
        else:
            mappings = []
            for ref in wanted:
                ref_text = str(ref).strip()
                found = [cm for cm in everything
                         if ref_text in (cm.uuid, cm.name)]
                if len(found) != 1:
                    raise exception.InvalidListRequest(
                        'cell', ref_text,
                        'the name or uuid of exactly one cell (%s)' % (
                            ', '.join(sorted(
                                '%s=%s' % (cm.name, cm.uuid)
                                for cm in everything)))
                        if not found else
                        'a unique name; %d cells are named %r, use a uuid'
                        % (len(found), ref_text))
                if found[0] not in mappings:
                    mappings.append(found[0])
    return [Cell(cm.uuid, cm.name, cm.database_connection)
            for cm in mappings]


class _Listing(cross_cell.CrossCellLister):
    """One :func:`list_instances` call: the hooks on the lister's own SQL.

    Cells are reached through *engines* (one connection, one statement
    per batch, :class:`.query.BatchQuery`), in *executor*'s threads; the
    rows stay the driver's tuples. Every phase goes to *recorder*.
    """

    def __init__(self, context: Any, cells: Sequence[Cell],
                 spec: sorting.SortSpec, filters: Mapping[str, Any],
                 fields: tuple[str, ...],
                 engines: instance_query.EngineCache,
                 recorder: timing.Recorder,
                 cell_timeout: float | None,
                 trace_info: Mapping[str, Any] | None = None) -> None:
        super().__init__(context, spec, cell_timeout)
        self.cells = {c.uuid: c for c in cells}
        self.filters = filters
        self.fields = fields
        self.engines = engines
        #: The workers, from :meth:`start`.
        self.executor: concurrent.futures.Executor | None = None
        self.recorder = recorder
        self.trace_info = trace_info
        self.columns = record_fields.instance_columns(fields, spec.keys)
        kinds = record_fields.joined_kinds(fields)
        self.query = instance_query.BatchQuery(self.columns, filters, spec,
                                               joined=kinds)
        self.uuid_at = self.columns.index('uuid')
        # Where the joined data a batch carries sits in its rows.
        self.joined_at = {kind: len(self.columns) + at
                          for at, kind in enumerate(self.query.joined)}
        # Rows stay the driver's tuples (SQLAlchemy Row objects): a dict
        # per row cost as much CPU as fetching it.
        self._key = spec.key_function(self.columns)

    def start_workers(self, executor: concurrent.futures.Executor) -> None:
        """Listing starts: *executor*'s workers, budgets and deadline.

        One allowance per cell, charged only with that cell's own work,
        and one deadline for the whole wait, tasks still queued for a
        worker included.
        """
        self.executor = executor
        self.start(list(self.cells))

    # The hooks.

    def key(self, row: Any) -> Any:
        return self._key(row)

    def values_of(self, row: Any) -> Sequence[Any]:
        return self.spec.values_of(row, self.columns)

    def submit(self) -> Callable[..., 'concurrent.futures.Future[Any]']:
        if self.executor is None:
            raise RuntimeError('no workers: call start_workers() first')
        return self.executor.submit

    def span(self, name: str, **info: Any
             ) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return self.recorder.span(name, **info)

    def read_marker(self, cell_mapping: Any, marker: str
                    ) -> tuple[Any, ...]:
        """The marker's sort values, read in this thread (no bound)."""
        url = cell_mapping.database_connection
        try:
            with self.engines.get(url).connect() as conn:
                row = conn.execute(instance_query.select_marker(
                    marker, self.spec)).first()
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            raise exception.CellsFailed(
                {cell_mapping.uuid: 'cannot read the marker instance: %s'
                 % exc}) from exc
        if row is None:
            raise exception.MarkerNotFound(marker)
        return tuple(row)

    def fetch_round(self, calls: Mapping[str, tuple[Sequence[Any] | None,
                                                    int | None]]
                    ) -> dict[str, gather.Outcome[Any]]:
        return self.run_round({
            uuid: (self.fetch, (self.cells[uuid], start, size))
            for uuid, (start, size) in calls.items()})

    # The workers' side.

    def _connect(self, cell: Cell) -> sa.Connection:
        with self.recorder.span('connect', cell.uuid):
            return self.engines.get(cell.database_connection).connect()

    def run_round(self, jobs: Mapping[str, tuple[Callable[..., Any],
                                                   tuple[Any, ...]]]
                  ) -> dict[str, gather.Outcome[Any]]:
        """Run ``work(*args, submitted)`` per cell, each within its budget.

        See :func:`gather.run_round`.
        """
        now = self.recorder.now()
        return self.in_cells({
            uuid: (work, args + (now,))
            for uuid, (work, args) in jobs.items()}, self.budgets)

    def _started(self, cell: Cell, submitted: float) -> None:
        self.recorder.add('wait', submitted, self.recorder.now(), cell.uuid)
        profiling.join(self.trace_info)

    def fetch(self, cell: Cell, after: Sequence[Any] | None,
              limit: int | None, submitted: float) -> 'Batch':
        """Worker: one batch of *cell*, run to completion here.

        The rows are tuples of :attr:`columns` followed by the joined
        data (blobs, metadata JSON): one statement, so a cell costs one
        worker, one connection and one round trip per round, whatever
        the fields.
        """
        self._started(cell, submitted)
        with self._connect(cell) as conn:
            query, params = self.query(conn.dialect.name, after, limit)
            with self.recorder.span('execute', cell.uuid):
                result = conn.execute(query, params)
            with self.recorder.span('fetch', cell.uuid) as span:
                rows: list[Any] = list(result.all())
                span['rows'] = len(rows)
            fetched = len(rows)
            if 'flavor' in self.joined_at:
                # Only the instance_extra join can repeat an instance.
                rows = _unique_rows(rows, self.uuid_at)
        return Batch(rows, fetched)


#: What a worker got from a cell for one batch: tuples of the listing's
#: columns and joined data, in order, and how many rows the database
#: returned (a repeated joined row counts).
Batch = rounds.Batch


def _unique_rows(rows: list[Any], uuid_at: int) -> list[Any]:
    """*rows* without repeats of an instance.

    instance_extra has no unique key on the instance uuid: were an
    instance to have two live rows, the LEFT JOIN would return it twice,
    next to each other (same sort values).
    """
    out: list[Any] = []
    last = None
    for row in rows:
        uuid = row[uuid_at]
        if uuid != last:
            out.append(row)
            last = uuid
    return out


#: The one marker lookup of both listers (:func:`.cross_cell.marker_cell`).
marker_cell = cross_cell.marker_cell


_DEFAULT_ENGINES: instance_query.EngineCache | None = None
_DEFAULT_ENGINES_LOCK = threading.Lock()


def default_engines() -> instance_query.EngineCache:
    """The process-wide engine cache (connection pools survive calls)."""
    global _DEFAULT_ENGINES
    with _DEFAULT_ENGINES_LOCK:
        if _DEFAULT_ENGINES is None:
            group = CONF[conf_mod.GROUP_NAME]
            _DEFAULT_ENGINES = instance_query.EngineCache(
                io_timeout=group.list_cell_timeout,
                prefer_mysqldb=group.list_prefer_mysqldb)
        return _DEFAULT_ENGINES


def list_instances(context: Any, *, cells: Sequence[Any] | None = None,
                   filters: Mapping[str, Any] | None = None,
                   sort_keys: Sequence[str] | None = None,
                   sort_dirs: Sequence[str] | None = None,
                   limit: int | None = None, marker: str | None = None,
                   fields: Sequence[str] | None = None,
                   cell_timeout: float | None = None,
                   skip_down_cells: bool | None = None,
                   max_workers: int | None = None,
                   engines: instance_query.EngineCache | None = None
                   ) -> ListResult:
    """List instances across cells, in nova's global order.

    :param context: a nova RequestContext. A non-admin context only sees
        its own project (or, without a project, its own user).
    :param cells: cell names, uuids or CellMapping objects; default every
        cell of the API database, cell0 included.
    :param filters: see :data:`FILTERS`; ``deleted`` defaults to False.
    :param sort_keys: keys from :data:`ALLOWED_SORT_KEYS`; default
        ``created_at, id`` descending. ``uuid asc`` always ends the order.
    :param sort_dirs: ``asc``/``desc`` per key.
    :param limit: at most this many records; None for all.
    :param marker: uuid of the last instance of the previous page.
    :param fields: record fields, default :data:`BASE_FIELDS`; see
        :data:`DETAIL_FIELDS`.
    :param cell_timeout: seconds each cell may take in all; default
        ``[cellsched] list_cell_timeout``.
    :param skip_down_cells: return what the live cells have when some
        fail (True), or raise :class:`CellsFailed` (False); default nova's
        ``[api] list_records_by_skipping_down_cells``.
    :param max_workers: threads to query cells with; default
        ``[cellsched] list_max_workers``.
    :param engines: connection pools to use; default a process-wide cache.
    :raises InvalidListRequest: a bad argument (nothing was queried).
    :raises CellsFailed: cells failed and *skip_down_cells* is False.
    """
    started = timeutils.StopWatch()
    started.start()
    trace_info = profiling.caller_info(CONF)
    recorder = timing.Recorder(
        tracer=profiling.trace if trace_info else None)
    group = CONF[conf_mod.GROUP_NAME]
    if limit is not None and (isinstance(limit, bool) or
                              not isinstance(limit, int) or
                              not 1 <= limit <= sys.maxsize):
        raise exception.InvalidListRequest(
            'limit', limit, 'a positive integer up to %d' % sys.maxsize)
    for argument, text in [('marker', marker)] + [
            ('cell', c) for c in cells or () if isinstance(c, str)]:
        if text is not None:
            try:
                check_text(text)
            except (ValueError, TypeError) as exc:
                raise exception.InvalidListRequest(
                    argument, text, 'a name or uuid (%s)' % exc) from exc
    spec = sorting.SortSpec.build(sort_keys, sort_dirs,
                                  allowed=ALLOWED_SORT_KEYS)
    wanted_fields = record_fields.check_fields(fields)
    norm_filters = normalize_filters(filters)
    if not context.is_admin:
        # As nova's DB API: a user sees only their own project.
        if context.project_id:
            norm_filters['project_id'] = context.project_id
        elif context.user_id:
            norm_filters['user_id'] = context.user_id
        else:
            raise exception.InvalidListRequest(
                'context', 'non-admin, no project, no user',
                'an admin context, or one with a project or user id')
    if skip_down_cells is None:
        skip_down_cells = CONF.api.list_records_by_skipping_down_cells
    cell_timeout = (group.list_cell_timeout if cell_timeout is None
                    else cell_timeout)
    engines = engines or default_engines()

    with recorder.span('setup'):
        target_cells = select_cells(context, cells)
        # NULL where nova's queries put it on these cells' databases.
        spec = spec.with_nulls_high(sorting.nulls_high_for(
            order.backend_of(c.database_connection)
            for c in target_cells))
        state = _Listing(context, target_cells, spec, norm_filters,
                         wanted_fields, engines, recorder, cell_timeout,
                         trace_info)
        after = state.marker_values(marker) if marker else None
    batch_size = batches.first_batch_size(limit, len(target_cells))

    workers = max(1, min(len(target_cells) or 1,
                         max_workers or group.list_max_workers))
    # The standard library's pool: on shutdown it wakes its idle workers
    # at once, where futurist's notice only after a second idle, which the
    # command line paid at exit on every call.
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                          thread_name_prefix='cellsched')
    state.start_workers(executor)
    try:
        records = _run(state, after, batch_size, limit)
    finally:
        executor.shutdown(wait=False)

    failures = tuple(
        CellFailure(state.cells[uuid], outcome.status,
                    outcome.error or RuntimeError('unknown failure'))
        for uuid, outcome in sorted(state.failures.items()))
    for failure in failures:
        LOG.warning('Cell %(cell)s %(status)s and is missing from the '
                    'listing: %(error)s',
                    {'cell': failure.cell.label, 'status': failure.status,
                     'error': failure.describe()})
    if failures and not skip_down_cells:
        raise exception.CellsFailed(
            {f.cell.label: f.describe() for f in failures})

    total = started.elapsed()
    timings = timing.summarize(
        recorder.spans(), total,
        {c.uuid: c.name for c in target_cells},
        {f.cell.uuid: (f.status, f.describe()) for f in failures})
    for fmt, args in timing.log_lines(timings):
        LOG.debug(fmt, args)
    return ListResult(instances=tuple(records), failures=failures,
                      cells=tuple(target_cells), timings=timings,
                      limit=limit)


def _run(state: _Listing, after: Sequence[Any] | None, batch_size: int,
         limit: int | None) -> list[dict[str, Any]]:
    """Gather, merge (:func:`.rounds.run`), build records."""
    recorder = state.recorder
    cells = list(state.cells.values())
    page = state.page([c.uuid for c in cells], after, batch_size,
                      batch_size, limit, batches.batches_grow())
    with recorder.span('view', rows=len(page.picked)):
        names = {c.uuid: c.name for c in cells}
        return record_fields.build_records(
            [(cell_uuid, row) for _key, cell_uuid, row in page.picked],
            state.columns, state.fields, names, state.joined_at)


def admin_context() -> Any:
    """A nova admin context (lists every project)."""
    return nova_context.get_admin_context()
