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

"""On demand: both listers on a private throw-away database.

Run by ``nova-cellsched check --selftest`` (in the command's own
process) and by the tests; never by nova-api, whose filter relies on
the relied-on sources' tested versions (:mod:`nova_cellsched.compat`)
alone: while it runs the self-test changes process-wide state (below),
which a serving process must not.

:func:`run` builds three in-memory SQLite databases from nova's models
(``models.BASE.metadata.create_all``), writes a few servers into one of
them with nova's own DB API (``instance_create`` with metadata, system
metadata, info cache, instance_extra and security groups;
``instance_tag_set``; ``instance_destroy``; ``service_create``), with
NULL sort values, equal ``created_at`` values, a deleted metadata row,
servers without an info cache or instance_extra row, and copies each
server's rows, ids unchanged, into one of the two others ("cells").

Each case is then listed twice: by nova, with its DB API and ORM joins
on the whole database in the order nova's lister asks for
(``InstanceSortContext``), the marker and limit applied to that list;
and by the replacement (``get_instances_sorted`` of
:mod:`.instance_list`, with :mod:`.keyset` and :mod:`.rows`) across the
two cells in batches of two rows, so that every page after the first is
a keyset page. Both are built into objects by nova's
``_make_instance_list`` and must be equal, in order, field by field
(and nova's own ``get_instances_sorted`` must agree too where it is
right: an order without NULLs). Any difference or error is a problem,
which ``check --selftest`` prints (exit code 1).

What it can reach: only its own databases. Its cells exist only in
nova's ``CELL_CACHE`` under random uuids, with their own engines
(without ``[database]`` options, so no ``slave_connection``) and an
in-memory URL; the untargeted context points at an empty in-memory
database; for its markers ``InstanceMapping.get_by_instance_uuid``
answers its own uuids and asks nova for any other while it runs. What
it changes of the process while it runs, and gives back after: the
garbage collector is off, nova's ``CELL_CACHE`` has its cells, that
class attribute of ``InstanceMapping`` is its own, ``[cellsched]
api_lister`` is overridden to true, the ``keyset`` part is on. It runs
in its own thread, and :func:`run` stops waiting after :data:`TIMEOUT`
seconds; the problem then says what it was doing (making its
databases, writing its servers, which case, closing), and a WARNING
gives its stack.
"""

from collections.abc import Callable, Iterator, Sequence
import contextlib
import copy
import datetime
import functools
import gc
import sys
import threading
import time
import traceback
from typing import Any

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: Seconds :func:`run` waits for the self-test before giving up.
TIMEOUT = 10.0

#: Servers written (ids 1..N; odd ids in the first cell, even in the other).
SERVERS = 10

#: Rows per batch the replacement is asked for: every cell needs pages.
BATCH = 2

#: expected_attrs of GET /servers, and of /servers/detail at the latest
#: microversion (nova-api passes duplicates too).
ATTRS = (
    ['metadata', 'info_cache', 'security_groups'],
    ['metadata', 'info_cache', 'security_groups', 'flavor', 'info_cache',
     'metadata', 'services', 'system_metadata', 'tags', 'trusted_certs'],
)

#: (sort keys, sort dirs): nova's default and orders on NULL-able keys.
SORTS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    ((), ()),
    (('launched_at',), ('asc',)),
    (('key_name', 'display_name'), ('desc', 'asc')),
    (('host',), ('desc',)),
    (('task_state', 'created_at'), ('asc', 'desc')),
)


def canonical(primitive: Any) -> Any:
    """An Instance primitive with its unordered parts in a stable order.

    Each object's change set, and a server's tags and compute services:
    nova joins them without an order, so two loads get them in whatever
    order the database's plan gives. Used to compare the objects of two
    listers (here and in the tests).
    """
    if isinstance(primitive, dict):
        if primitive.get('nova_object.name') in ('ServiceList', 'TagList'):
            data = primitive['nova_object.data']
            primitive = dict(primitive, **{'nova_object.data': dict(
                data, objects=sorted(data['objects'], key=repr))})
        return {key: (sorted(value) if key == 'nova_object.changes'
                      else canonical(value))
                for key, value in primitive.items()}
    if isinstance(primitive, list):
        return [canonical(item) for item in primitive]
    return primitive


def _describe(exc: BaseException) -> str:
    """``Type: first line of the message`` (SQL errors carry the query)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ''
    if len(text) > 200:
        text = text[:200] + '...'
    return '%s: %s' % (type(exc).__name__, text)


def _first_difference(theirs: Any, ours: Any, path: str = '') -> str | None:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key in sorted(set(theirs) | set(ours), key=str):
            found = _first_difference(theirs.get(key), ours.get(key),
                                      '%s.%s' % (path, key))
            if found:
                return found
        return None
    if (isinstance(theirs, list) and isinstance(ours, list) and
            len(theirs) == len(ours)):
        for index, (left, right) in enumerate(zip(theirs, ours)):
            found = _first_difference(left, right, '%s[%d]' % (path, index))
            if found:
                return found
        return None
    if theirs != ours:
        return '%s: nova %.120r, ours %.120r' % (path or '.', theirs, ours)
    return None


class _World:
    """The private databases and what points at them."""

    def __init__(self) -> None:
        from nova import context as nova_context
        from nova import objects
        from oslo_utils import uuidutils

        objects.register_all()
        self._managers: list[Any] = []
        self._cache_keys: list[str] = []
        self.project = uuidutils.generate_uuid(dashed=False)
        self.other_project = uuidutils.generate_uuid(dashed=False)
        # Untargeted calls land in an empty database of our own.
        self.ctx = nova_context.RequestContext(
            'cellsched-selftest', self.project, is_admin=True)
        self.ctx.db_connection = self._manager()
        self.whole, self.whole_cell = self._cell('whole')
        self.first, self.first_cell = self._cell('first')
        self.second, self.second_cell = self._cell('second')
        self.mappings: dict[str, Any] = {}

    def _manager(self) -> Any:
        from oslo_db.sqlalchemy import enginefacade

        manager = enginefacade.transaction_context()
        # Not nova's create_context_manager: it copies [database]
        # (slave_connection included) into every cell's manager.
        manager.configure(connection='sqlite://')
        self._managers.append(manager)
        return manager

    def _cell(self, name: str) -> tuple[Any, Any]:
        from nova import context as nova_context
        from nova.db.main import models
        from nova import objects
        from oslo_utils import uuidutils

        manager = self._manager()
        engine = manager.writer.get_engine()
        models.BASE.metadata.create_all(engine)
        cell = objects.CellMapping(
            uuid=uuidutils.generate_uuid(), name='cellsched-selftest-' + name,
            database_connection='sqlite://', transport_url='none:///',
            disabled=False)
        nova_context.CELL_CACHE[cell.uuid] = (manager, None)
        self._cache_keys.append(cell.uuid)
        return engine, cell

    def close(self) -> None:
        from nova import context as nova_context

        for key in self._cache_keys:
            nova_context.CELL_CACHE.pop(key, None)
        for manager in self._managers:
            with contextlib.suppress(Exception):
                manager.dispose_pool()

    def seed(self) -> None:
        """Servers as nova writes them, then each copied to its cell."""
        from nova.compute import task_states
        from nova.compute import vm_states
        from nova import context as nova_context
        from nova.db.main import api as db
        from oslo_utils import uuidutils

        with nova_context.target_cell(self.ctx, self.whole_cell) as cctxt:
            start = datetime.datetime(2025, 1, 1)
            for host in ('host1', 'host2'):
                db.service_create(cctxt, {
                    'host': host, 'binary': 'nova-compute',
                    'topic': 'compute', 'report_count': 0})
            uuids = []
            for index in range(SERVERS):
                uuid = uuidutils.generate_uuid()
                uuids.append(uuid)
                db.instance_create(cctxt, {
                    'id': index + 1, 'uuid': uuid,
                    'project_id': (self.project, self.other_project)[
                        index % 2 and index != 5],
                    'user_id': 'cellsched-selftest',
                    'display_name': 'srv-%d' % (index % 4),
                    'hostname': 'srv-%d' % index,
                    # Pairs created in the same second: id decides.
                    'created_at': start + datetime.timedelta(
                        seconds=index // 2),
                    'launched_at': (None if index % 3 == 0 else
                                    start + datetime.timedelta(hours=index)),
                    'key_name': None if index % 2 else 'key-%d' % (index % 3),
                    'host': None if index % 4 == 0 else 'host%d' % (
                        index % 2 + 1),
                    'node': None if index % 4 == 0 else 'node%d' % index,
                    'vm_state': (vm_states.ERROR if index % 4 == 0
                                 else vm_states.ACTIVE),
                    'task_state': (task_states.REBOOTING if index % 3 == 1
                                   else None),
                    'memory_mb': 512, 'vcpus': 1, 'root_gb': 1,
                    'launch_index': 0, 'locked': False, 'hidden': False,
                    'metadata': {'role': 'r%d' % index, 'spare': 'x'},
                    'system_metadata': {'image_os': 'linux%d' % index},
                    'info_cache': {'network_info': '[]'},
                    'extra': {'flavor': _flavor_json()},
                    'security_groups': ['default'],
                })
            for uuid in uuids[1:8:3]:
                db.instance_tag_set(cctxt, uuid, ['red', 'blue'])
            db.instance_tag_set(cctxt, uuids[2], ['red'])
            db.instance_metadata_delete(cctxt, uuids[3], 'spare')
            db.instance_info_cache_delete(cctxt, uuids[4])
            db.instance_destroy(cctxt, uuids[6])
            db.instance_destroy(cctxt, uuids[9])
        self._without_extra(uuids[5])
        self._split()
        for index, uuid in enumerate(uuids):
            self.mappings[uuid] = (self.first_cell if index % 2 == 0
                                   else self.second_cell)
        self.uuids = uuids

    def _without_extra(self, uuid: str) -> None:
        from nova.db.main import models

        table = models.InstanceExtra.__table__
        with self.whole.begin() as conn:
            conn.execute(table.delete().where(table.c.instance_uuid == uuid))

    def _split(self) -> None:
        """Each server's rows into its cell (odd ids first), ids kept.

        Every table nova's writers touched, through untyped columns: the
        values go as the driver gives them, nothing converted on the way.
        """
        from nova.db.main import models
        import sqlalchemy as sa

        owners = ('instance_uuid', 'resource_id')
        with self.whole.connect() as source, \
                self.first.begin() as first, \
                self.second.begin() as second:
            cell_of = {uuid: id_ % 2 for uuid, id_ in source.execute(
                sa.select(sa.column('uuid'), sa.column('id')).select_from(
                    sa.table('instances')))}
            for table in models.BASE.metadata.sorted_tables:
                names = [column.name for column in table.columns]
                plain = sa.table(table.name,
                                 *[sa.column(name) for name in names])
                rows = [row._asdict() for row in source.execute(
                    sa.select(*plain.columns))]
                if not rows:
                    continue
                owner = ('uuid' if table.name == 'instances' else
                         next((n for n in owners if n in names), None))
                for conn, side in ((first, 1), (second, 0)):
                    mine = [row for row in rows if owner is None or
                            cell_of.get(row[owner]) == side]
                    if mine:
                        conn.execute(plain.insert(), mine)


@functools.cache
def _flavor_json() -> str:
    from nova import objects
    from oslo_serialization import jsonutils

    flavor = objects.Flavor(
        id=1, flavorid='1', name='m1.tiny', vcpus=1, memory_mb=512,
        root_gb=1, ephemeral_gb=0, swap=0, rxtx_factor=1.0, vcpu_weight=0,
        disabled=False, is_public=True, extra_specs={}, description=None,
        created_at=None, updated_at=None, deleted_at=None, deleted=False)
    return str(jsonutils.dumps({'cur': flavor.obj_to_primitive(),
                                'old': None, 'new': None}))


@contextlib.contextmanager
def _markers_in(mappings: dict[str, Any]) -> Iterator[None]:
    """``InstanceMapping.get_by_instance_uuid`` knows the private uuids.

    Any other uuid is nova's own lookup, unchanged.
    """
    from nova import objects

    cls = objects.InstanceMapping
    descriptor = cls.__dict__['get_by_instance_uuid']
    nova_lookup = cls.get_by_instance_uuid

    def get_by_instance_uuid(klass: Any, context: Any,
                             instance_uuid: str) -> Any:
        cell = mappings.get(instance_uuid)
        if cell is None:
            return nova_lookup(context, instance_uuid)
        return klass(context, instance_uuid=instance_uuid,
                     cell_mapping=cell, project_id=context.project_id)

    setattr(cls, 'get_by_instance_uuid', classmethod(get_by_instance_uuid))
    try:
        yield
    finally:
        setattr(cls, 'get_by_instance_uuid', descriptor)


@contextlib.contextmanager
def _replacement_on() -> Iterator[None]:
    """The replacement lists (``[cellsched] api_lister``), uncounted.

    With ``api_lister = false`` (a reload of the workers can turn it on
    later)
    it is overridden to true for the self-test, then given back: the
    override it had, or none.
    """
    import nova.conf
    from oslo_config import cfg

    from nova_cellsched.api.hooks import instance_list

    from nova_cellsched import conf as conf_mod

    conf = nova.conf.CONF
    group = conf_mod.GROUP_NAME
    forced = not conf[group].api_lister
    overridden = forced and conf.get_location(
        'api_lister', group).location == cfg.Locations.set_override
    if forced:
        conf.set_override('api_lister', True, group)
    served = getattr(instance_list, 'SERVED', None)
    if served is not None:
        instance_list.SERVED = type(served)()
    try:
        yield
    finally:
        if served is not None:
            instance_list.SERVED = served
        if overridden:
            conf.set_override('api_lister', False, group)
        elif forced:
            conf.clear_override('api_lister', group)


class _Progress:
    """What a self-test is doing, set by its thread, read by :func:`run`."""

    def __init__(self) -> None:
        self.doing = 'waiting for a self-test given up on earlier to end'

    def __call__(self, doing: str) -> None:
        self.doing = doing


def _stack_of(worker: threading.Thread) -> str:
    """Where *worker* is now (its stack), or '' if it cannot be seen.

    A native thread's frame is in :func:`sys._current_frames`; under
    eventlet's monkey patching a thread is a greenlet, whose id is its
    ``ident``.
    """
    frame = sys._current_frames().get(worker.ident or -1)
    if frame is None:
        try:
            import greenlet
        except ImportError:
            return ''
        for candidate in gc.get_objects():
            if (isinstance(candidate, greenlet.greenlet) and
                    id(candidate) == worker.ident):
                frame = candidate.gr_frame
                break
    if frame is None:
        return ''
    return ''.join(traceback.format_stack(frame))


class _Cancelled(Exception):
    """:func:`run` stopped waiting: do not start another case."""


class _Cases:
    """The comparisons, on a seeded :class:`_World`."""

    def __init__(self, world: _World, replacement: Callable[..., Any],
                 cancelled: threading.Event, progress: _Progress) -> None:
        self.cancelled = cancelled
        self.progress = progress
        self.world = world
        self.replacement = replacement
        self._reference: dict[Any, list[Any]] = {}
        self.problems: list[str] = []
        self.compared = 0

    def _nova_rows(self, ctx: Any, filters: dict[str, Any],
                   cols: list[str], keys: Sequence[str],
                   dirs: Sequence[str]) -> list[Any]:
        """nova's rows on the whole database: one query, its order."""
        from nova.compute import instance_list as nova_instance_list
        from nova import context as nova_context
        from nova.db.main import api as db

        key = (id(ctx), repr(filters), tuple(cols), tuple(keys), tuple(dirs))
        if key not in self._reference:
            sort_ctx = nova_instance_list.InstanceSortContext(
                list(keys), list(dirs))
            with nova_context.target_cell(ctx, self.world.whole_cell) as cc:
                self._reference[key] = list(
                    db.instance_get_all_by_filters_sort(
                        cc, copy.deepcopy(filters), limit=None, marker=None,
                        columns_to_join=list(cols),
                        sort_keys=sort_ctx.sort_keys,
                        sort_dirs=sort_ctx.sort_dirs))
        return self._reference[key]

    def _objects(self, ctx: Any, rows: Sequence[Any],
                 attrs: list[str]) -> list[Any]:
        from nova import objects
        from nova.objects import instance as instance_obj

        built = instance_obj._make_instance_list(
            ctx, objects.InstanceList(), list(rows), list(attrs))
        # A primitive holds each object's changes, nested ones included.
        return [canonical(inst.obj_to_primitive()) for inst in built]

    def compare(self, label: str, ctx: Any, filters: dict[str, Any],
                attrs: list[str], sort: tuple[tuple[str, ...],
                                              tuple[str, ...]],
                limit: int | None = None, marker: str | None = None,
                nova_lister: bool = False, whole: bool = True) -> None:
        """One listing both ways; a problem if they differ.

        :param whole: compare the objects field by field; else only which
            servers, in which order (cheaper: for the orders and markers).
        """
        from nova.objects import instance as instance_obj

        from nova_cellsched import compat

        if self.cancelled.is_set():
            raise _Cancelled()
        keys, dirs = sort
        cols = instance_obj._expected_cols(list(attrs))
        rows = self._nova_rows(ctx, filters, cols, keys, dirs)
        if marker is not None:
            uuids = [row['uuid'] for row in rows]
            rows = rows[uuids.index(marker) + 1:] if marker in uuids else []
        if limit is not None:
            rows = rows[:limit]
        theirs = (self._objects(ctx, rows, attrs) if whole
                  else [row['uuid'] for row in rows])
        what = '%s (sort %s %s, limit %s, marker %s)' % (
            label, list(keys), list(dirs), limit,
            'set' if marker else 'none')
        self.progress('listing %s' % what)
        try:
            lister, found = self.replacement(
                ctx, copy.deepcopy(filters), limit, marker, list(cols),
                list(keys), list(dirs),
                cell_mappings=[self.world.first_cell,
                               self.world.second_cell],
                batch_size=BATCH)
            found = list(found)
            ours = (self._objects(ctx, found, attrs) if whole
                    else [row['uuid'] for row in found])
            down = list(lister.cells_failed) + list(lister.cells_timed_out)
        except Exception as exc:
            self.problems.append('self-test %s: the replacement failed: '
                                 '%s' % (what, _describe(exc)))
            return
        self.compared += 1
        if down:
            self.problems.append('self-test %s: cells reported down: %s'
                                 % (what, down))
        elif len(theirs) != len(ours):
            self.problems.append(
                'self-test %s: nova lists %d servers, the replacement %d'
                % (what, len(theirs), len(ours)))
        else:
            difference = _first_difference(theirs, ours)
            if difference:
                self.problems.append('self-test %s: servers differ at %s'
                                     % (what, difference))
        if nova_lister:
            _lister, nova_found = (
                compat.original('nova.compute.instance_list',
                                'get_instances_sorted')(
                    ctx, copy.deepcopy(filters), limit, marker, list(cols),
                    list(keys), list(dirs),
                    cell_mappings=[self.world.whole_cell]))
            by_nova = self._objects(ctx, list(nova_found), attrs)
            difference = _first_difference(by_nova, theirs)
            if difference:
                self.problems.append(
                    "self-test %s: nova's lister and nova's DB API differ "
                    'at %s' % (what, difference))

    def run(self) -> None:
        from nova import context as nova_context

        world = self.world
        ctx = world.ctx
        live = {'deleted': False}
        detail = ATTRS[1]
        self.compare('default order', ctx, live, detail, SORTS[0],
                     limit=4, nova_lister=True)
        for sort in SORTS[1:]:
            self.compare('all servers', ctx, live, [], sort, whole=False)
        # After a marker whose sort value is NULL (lowest: first in
        # ascending order, last in descending), and one that is not.
        for sort, null in ((SORTS[1], True), (SORTS[3], True),
                           (SORTS[2], False)):
            rows = self._nova_rows(ctx, live, [], *sort)
            marker = next(row['uuid'] for row in rows[:-1]
                          if (row[sort[0][0]] is None) == null)
            self.compare('after a marker', ctx, live, [], sort, limit=3,
                         marker=marker, whole=False)
        self.compare('deleted included', ctx, {}, ATTRS[0], SORTS[1])
        self.compare('tagged', ctx, {'deleted': False, 'tags': ['red']},
                     detail, SORTS[2], limit=2)
        # nova joins tags for tags-any: a server with both tags is two
        # SQL rows, one instance (keyset.one_row_per_instance).
        self.compare('any of the tags', ctx,
                     {'deleted': False, 'tags-any': ['red', 'blue']},
                     detail, SORTS[2], limit=2)
        self.compare('any of the tags, all', ctx,
                     {'deleted': False, 'tags-any': ['blue', 'red']},
                     [], SORTS[1], whole=False)
        project = nova_context.RequestContext(
            'cellsched-selftest', world.project, is_admin=False)
        project.db_connection = ctx.db_connection
        self.compare('a project', project, live, detail, SORTS[3], limit=3)


def _nova_pools() -> list[Any]:
    """nova's thread pools of this process (its cell worker pool...)."""
    from nova_cellsched.compat import adapter

    return adapter.nova_pools()


def _stop_pools_started(before: list[Any]) -> None:
    """Stop the worker pools the self-test started, nova's and ours.

    Nothing of it must outlive it: the process that ran it (the
    command's, a test's) starts its pools on first use, as without it.
    """
    from nova_cellsched.api.hooks import pool
    from nova_cellsched.compat import adapter

    pool.shutdown()
    if not before and _nova_pools():
        # nova's own call before forking workers: every pool stopped,
        # each started again on its next use.
        adapter.reset_nova_pools()


#: One self-test at a time (one given up on may still be running).
_RUNNING = threading.Lock()


def _run_in_thread(problems: list[str], replacement: Callable[..., Any],
                   cancelled: threading.Event, timeout: float,
                   progress: _Progress) -> None:
    """The self-test; fills *problems* (one entry at least on error)."""
    if not _RUNNING.acquire(timeout=timeout):
        problems.append('self-test could not run: a previous one given up '
                        'on is still running')
        return
    try:
        _self_test(problems, replacement, cancelled, progress)
    finally:
        _RUNNING.release()


def _self_test(problems: list[str], replacement: Callable[..., Any],
               cancelled: threading.Event, progress: _Progress) -> None:
    import nova.conf

    if not nova.conf.CONF.database.connection:
        # nova's instance query picks its regular expression operator by
        # this URL's scheme, and fails without one.
        problems.append('self-test could not run: [database] connection '
                        "is not set (nova's instance queries need it)")
        return
    world = None
    try:
        progress('making its databases')
        world = _World()
        progress('writing its servers')
        world.seed()
        cases = _Cases(world, replacement, cancelled, progress)
        with _markers_in(world.mappings), _replacement_on():
            cases.run()
        problems.extend(cases.problems)
        if not cases.problems and not cases.compared:
            problems.append('self-test compared nothing')
    except _Cancelled:
        pass
    except Exception as exc:
        LOG.debug('The self-test could not run', exc_info=True)
        problems.append('self-test could not run: %s' % _describe(exc))
    finally:
        if world is not None:
            progress('closing its databases')
            world.close()
        progress('done')


def run(replacement: Callable[..., Any] | None = None,
        timeout: float = TIMEOUT) -> tuple[list[str], float]:
    """List both ways on private databases; (problems, seconds taken).

    :param replacement: the ``get_instances_sorted`` to test (default:
        the one the ``lister`` part puts into nova).
    :param timeout: seconds to wait; after that the self-test is a
        problem (its thread, on its private databases, is left to end).

    :mod:`.keyset`'s stand-in is in place while it runs, and is taken
    out again after unless it was there before. The behaviours the
    parts rely on of libraries (:func:`.compat.checks.library_problems`:
    SQLAlchemy's ``Query``, oslo's serialization) are checked first;
    their problems are the self-test's too.
    """
    from nova_cellsched import compat
    from nova_cellsched.compat import checks

    if replacement is None:
        from nova_cellsched.api.hooks import instance_list
        replacement = instance_list.get_instances_sorted
    problems: list[str] = []
    started = time.monotonic()
    libraries = checks.library_problems()
    cancelled = threading.Event()
    pools = _nova_pools()
    # Its objects die with it: no collection of the whole process (nova
    # has loaded plenty) midway; the next one, after, frees them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        # The replacement pages through keyset's stand-in (without it,
        # it would read the same first rows again and again).
        with compat.temporarily('keyset'):
            progress = _Progress()
            worker = threading.Thread(target=_run_in_thread,
                                      args=(problems, replacement, cancelled,
                                            timeout, progress),
                                      name='cellsched-selftest', daemon=True)
            worker.start()
            worker.join(timeout)
    finally:
        if collecting:
            gc.enable()
    elapsed = time.monotonic() - started
    if not worker.is_alive():
        _stop_pools_started(pools)
    if len(problems) > 5:
        problems[5:] = ['and %d more self-test problems'
                        % (len(problems) - 5)]
    if worker.is_alive():
        cancelled.set()
        LOG.warning('The self-test did not finish within %(timeout)g s; it '
                    'was %(doing)s, at:\n%(stack)s',
                    {'timeout': timeout, 'doing': progress.doing,
                     'stack': _stack_of(worker) or '(not seen)'})
        return (libraries +
                ['self-test did not finish within %g s (it was %s)'
                 % (timeout, progress.doing)], elapsed)
    return libraries + list(problems), elapsed
