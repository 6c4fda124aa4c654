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

"""GET /servers/detail across cells: nova's own path, ours, and the floor.

One process, the same MariaDB data, the three paths run alternately on
every point::

    python benchmarks/bench_listing.py --cells 1,2,5,10 \\
        --limits 100,200,500,1000 --drivers pymysql,mysqldb --repeat 5 \\
        --out benchmarks/results/

(``python benchmarks/bench_listing.py --quick`` is a small smoke run;
``pip install -r benchmarks/requirements.txt`` adds mysqlclient,
matplotlib and pyinstrument, which are checked before anything touches
the server. ``--tune-server`` raises the server's buffer pool so the
50 x 10,000 world is served from memory: it changes GLOBAL variables of
the server the URL names, prints the old and new values and the
statements that set them back, and sets them back at the end unless
``--keep-tuning``.)

**Databases.** A run drops the benchmark databases it created when it
ends (also on failure); ``--keep`` keeps them for the next run, which
reuses a world whose row counts are right. Databases that existed before
the run are left alone, and so are other runs' worlds made meanwhile.
``--cleanup`` drops the databases of the worlds the other options name
(``--cells``, ``--per-cell``, ``--deleted``, or ``--quick``: what a run
with the same options made) and exits; a database another connection
is using (another user's running benchmark) is left, and said.

**Data.** Per world (cell count x instances per cell x deleted rows per
live one) an API database, cell0 and N cell databases named
``ncsbench_<cells>c_<per_cell>_<deleted>_api``/``_cell0``/``_cellN`` on
``--server``; nova's schema from nova's alembic migrations (copied table
by table to the other cells), cell mappings registered, instances shaped
as nova writes them (instances, instance_extra with the Flavor JSON,
info_cache with a NetworkInfo JSON, system_metadata, metadata,
instance_mappings), bulk loaded by ``benchmarks/seed_fast.py``. A world
whose row counts are right is reused, so a rerun does not reseed.

**Paths.** Same filters (``deleted=False``: an admin listing all
projects), same default sort (``created_at desc, id desc``, then ``uuid
asc``), same limit, marker and cells for all three:

(a) *nova*: ``nova.compute.instance_list.get_instance_objects_sorted``
    with the expected_attrs of ``ServersController._get_servers`` for
    detail at the newest microversion (``compute.API.get_all`` adds
    ``metadata, info_cache, security_groups`` to the view builder's
    list), ``InstanceList.fill_faults()`` as ``_get_servers`` does, then
    ``ViewBuilder.detail`` on a ``fakes.HTTPRequest`` (admin) and
    ``jsonutils.dump_as_bytes``. Everything database and object related
    is nova's real code, on real engines. The only stub is neutron:
    ``security_group_api.get_instances_security_groups_bindings`` (the
    view's one call to an external service) returns ``default`` for
    every server. nova runs in native threading mode, as nova-api does by
    default since 2026.1.
(b) *ours*: ``nova_cellsched.records.list_instances`` with
    ``fields=DETAIL_FIELDS``, then ``nova_cellsched.records.codec.dumps``
    of the records (orjson when installed, as ``benchmarks/requirements.txt``
    does).
(c) *floor*: what any lister must at least do to answer, with the same
    driver and no SQLAlchemy: fetch exactly the rows of the answer. An
    oracle learns, untimed, how many of them each cell holds (from the
    naive raw merge below, not from our code); the timed run asks each
    of those cells, in parallel on an open DB-API connection, for exactly
    that many rows with the detail columns and the flavor and
    network_info blobs joined in and the metadata as JSON, in one
    statement as ours reads them, and heap-merges. It fetches; it does not
    parse, build records or encode.
(d) *naive*: raw SQL as nova's strategy asks: every cell for ``limit``
    rows, a heap merge, then the blobs and metadata of the survivors (the
    2018 report's query). For reference; ``--no-naive`` skips it.

(a) and (b) must return the same uuids in the same order, and so must
(c) and (d), on every point; the run aborts otherwise.

**Drivers.** ``pymysql`` is nova's default. For ``mysqldb`` every URL
(API database, cell mappings as nova targets them, our engines) is opened
with ``mysql+mysqldb``: nova gets rewritten cell mappings and its own
per-driver engine cache, ours gets ``EngineCache(prefer_mysqldb=True)``.

**Output.** Per point the medians over ``--repeat`` runs and the ratios
nova/ours and ours/floor; our 2018-style timings (total, setup, gather,
merge, view, per cell). ``--out DIR`` writes ``listing.json`` (every
sample), ``listing.md`` and ``listing.png``. ``--profile`` profiles ours
at 10 cells / limit 1000 (all threads, cProfile, plus pyinstrument of the
caller) into ``DIR/profile_*``.

``--pkg DIR`` puts DIR first on ``sys.path`` so a modified copy of
``nova_cellsched`` is measured instead of the installed one.
"""

import os
import sys

# Native threads, as nova-api runs by default: decided before anything
# could import eventlet.
os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')


def _early_pkg_path() -> None:
    for index, arg in enumerate(sys.argv):
        if arg == '--pkg' and index + 1 < len(sys.argv):
            sys.path.insert(0, os.path.abspath(sys.argv[index + 1]))
        elif arg.startswith('--pkg='):
            sys.path.insert(0, os.path.abspath(arg.split('=', 1)[1]))


_early_pkg_path()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, HERE)
try:
    import nova_cellsched  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(1, os.path.dirname(HERE))

from nova import monkey_patch  # noqa: E402

# Unless the process chose already (the test run imports this module;
# on nova 31 to 33 it runs nova in eventlet mode, see tests/__init__.py,
# and nova 33 refuses to switch: oslo_service BackendAlreadySelected).
# nova 31 has no patch(): importing nova.monkey_patch chose.
if hasattr(monkey_patch, 'patch') and not monkey_patch.is_patched():
    monkey_patch.patch()

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import cProfile  # noqa: E402
import gc  # noqa: E402
import heapq  # noqa: E402
import io  # noqa: E402
import logging as std_logging  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from nova.api.openstack import api_version_request  # noqa: E402
from nova.api.openstack.compute.views import servers as views_servers  # noqa
from nova.compute import instance_list as nova_instance_list  # noqa: E402
import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.db.api import api as api_db_api  # noqa: E402
from nova.db.main import api as main_db_api  # noqa: E402
from nova.network import security_group_api  # noqa: E402
from nova import objects  # noqa: E402
from nova import rpc as nova_rpc  # noqa: E402
from nova.tests.unit.api.openstack import fakes  # noqa: E402
from oslo_db.sqlalchemy import enginefacade  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402
import sqlalchemy as sa  # noqa: E402

import nova_cellsched  # noqa: E402
from nova_cellsched import cells as cells_mod  # noqa: E402
from nova_cellsched import conf as conf_mod  # noqa: E402
from nova_cellsched.listing import sorting  # noqa: E402
from nova_cellsched.listing.timing import natural_key  # noqa: E402
from nova_cellsched import records  # noqa: E402
from nova_cellsched.records import codec  # noqa: E402
from nova_cellsched.records import fields as record_fields  # noqa: E402
from nova_cellsched.records import query as instance_query  # noqa: E402

import reporting  # noqa: E402
import runinfo  # noqa: E402
import seed_fast  # noqa: E402

CONF = nova.conf.CONF
DRIVERS = {'pymysql': 'mysql+pymysql', 'mysqldb': 'mysql+mysqldb'}
MAX_VERSION = api_version_request._MAX_API_VERSION
#: What nova's path passes as expected_attrs (filled by NovaPath).
EXPECTED_ATTRS: list[str] = []


class Abort(Exception):
    """The paths disagree: the benchmark must not report numbers."""


def driver_url(url: str, driver: str) -> str:
    return str(sa.engine.url.make_url(url).set(
        drivername=DRIVERS[driver]).render_as_string(hide_password=False))


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 2)


# --------------------------------------------------------------------------
# nova's path


def _fake_sg_bindings(context: Any, servers: Any,
                      detailed: bool = False) -> dict[str, Any]:
    """Neutron stand-in: every server is in the ``default`` group."""
    return {server['id']: [{'name': 'default'}] for server in servers}


class NovaPath:
    """nova 34's GET /servers/detail pipeline minus the WSGI stack."""

    def __init__(self, world: dict[str, Any], driver: str) -> None:
        self.driver = driver
        api_url = driver_url(world['api_url'], driver)
        self.facade = enginefacade.transaction_context()
        self.facade.configure(**api_db_api._get_db_conf(
            CONF.api_database, connection=api_url))
        self._restore = api_db_api.context_manager.patch_factory(
            self.facade._factory)
        CONF.set_override('connection', driver_url(world['cells'][0][2],
                                                   driver), 'database')
        ctx = nova_context.get_admin_context()
        mappings = objects.CellMappingList.get_all(ctx)
        for cm in mappings:
            cm.database_connection = driver_url(cm.database_connection,
                                                driver)
            cm.obj_reset_changes()
        # nova caches the cell list and one engine per cell uuid: this
        # driver gets its own of both.
        nova_context.CELLS = mappings
        nova_context.CELL_CACHE = {}
        for cm in mappings:
            with nova_context.target_cell(ctx, cm):
                pass
        self.view_builder = views_servers.ViewBuilder()
        version = api_version_request.APIVersionRequest(MAX_VERSION)
        expected = []
        # ServersController._get_servers, is_detail=True
        for attr, since in (('services', '2.16'), ('tags', '2.26'),
                            ('trusted_certs', '2.63'),
                            ('system_metadata', '2.73')):
            if version >= api_version_request.APIVersionRequest(since):
                expected.append(attr)
        expected = self.view_builder.get_show_expected_attrs(expected)
        # compute.API.get_all
        self.expected_attrs = ['metadata', 'info_cache',
                               'security_groups'] + expected
        EXPECTED_ATTRS[:] = self.expected_attrs

    def close(self) -> None:
        for db_conn, _mq in nova_context.CELL_CACHE.values():
            try:
                db_conn.writer.get_engine().dispose()
            except Exception:  # noqa: S110,BLE001 - best effort
                pass
        nova_context.CELL_CACHE = {}
        nova_context.CELLS = []
        self._restore()
        try:
            self.facade.writer.get_engine().dispose()
        except Exception:  # noqa: S110,BLE001 - best effort
            pass

    def run(self, limit: int, marker: str | None) -> dict[str, Any]:
        query = '/v2.1/servers/detail?all_tenants=1&limit=%d' % limit
        if marker:
            query += '&marker=' + marker
        req = fakes.HTTPRequest.blank(query, version=MAX_VERSION,
                                      use_admin_context=True)
        context = req.environ['nova.context']
        t0 = time.perf_counter()
        instances, down = nova_instance_list.get_instance_objects_sorted(
            context.elevated(), {'deleted': False}, limit, marker,
            list(self.expected_attrs), None, None)
        t1 = time.perf_counter()
        instances._context = context
        instances.fill_faults()
        t2 = time.perf_counter()
        body = self.view_builder.detail(req, instances)
        t3 = time.perf_counter()
        payload = jsonutils.dump_as_bytes(body)
        t4 = time.perf_counter()
        if down:
            raise Abort('nova lost cells: %s' % down)
        return {'total': t4 - t0, 'objects': t1 - t0, 'faults': t2 - t1,
                'view': t3 - t2, 'json': t4 - t3, 'bytes': len(payload),
                'uuids': [s['id'] for s in body['servers']]}


# --------------------------------------------------------------------------
# ours


class OursPath:
    def __init__(self, world: dict[str, Any], driver: str) -> None:
        self.engines = instance_query.EngineCache(
            io_timeout=60, prefer_mysqldb=(driver == 'mysqldb'))

    def close(self) -> None:
        self.engines.dispose()

    def run(self, limit: int, marker: str | None) -> dict[str, Any]:
        ctx = nova_context.get_admin_context()
        t0 = time.perf_counter()
        result = records.list_instances(
            ctx, limit=limit, marker=marker, fields=records.DETAIL_FIELDS,
            engines=self.engines)
        t1 = time.perf_counter()
        payload = codec.dumps({'servers': result.instances})
        t2 = time.perf_counter()
        if not result.complete:
            raise Abort('ours lost cells: %s' % [
                (f.cell.label, f.describe()) for f in result.failures])
        t = result.timings
        return {'total': t2 - t0, 'list': t1 - t0, 'json': t2 - t1,
                'bytes': len(payload), 'setup': t.setup,
                'gather': t.gather, 'merge': t.merge, 'view': t.view,
                'rows_fetched': sum(c.rows for c in t.cells),
                'timings': t.as_dict(),
                'uuids': [r['uuid'] for r in result.instances]}


# --------------------------------------------------------------------------
# the floor, and the naive raw path


_INSTANCE_WHERE = (
    "i.deleted = 0 AND (i.vm_state != 'soft-delete' OR i.vm_state IS NULL) "
    "AND (i.hidden = 0 OR i.hidden IS NULL)")
# id is unique within a cell: the per-cell order needs no uuid, and without
# it MariaDB reads instances_deleted_created_at_idx (deleted, created_at,
# +id) in order instead of sorting.
_ORDER = 'ORDER BY i.created_at DESC, i.id DESC LIMIT %s'
_AFTER = ('(i.created_at < %s OR (i.created_at = %s AND i.id < %s) OR '
          '(i.created_at = %s AND i.id = %s AND i.uuid > %s))')


class RawPath:
    """Raw DB-API with the benchmark's driver: no SQLAlchemy, no objects.

    One persistent connection and one thread per cell, opened before the
    clock starts. Subclasses decide how many rows each cell is asked for.
    """

    def __init__(self, world: dict[str, Any], driver: str) -> None:
        self.driver = driver
        self.spec = sorting.SortSpec.build()
        self.columns = record_fields.instance_columns(records.DETAIL_FIELDS,
                                              self.spec.keys)
        self.cells = [(name, uuid, url) for name, uuid, url
                      in world['cells']]
        self.conns = {uuid: self._connect(url)
                      for _name, uuid, url in self.cells}
        self.api = self._connect(world['api_url'])
        cursor = self.api.cursor()
        cursor.execute('SELECT id, uuid FROM cell_mappings')
        self.cell_by_id = {r[0]: r[1] for r in cursor.fetchall()}
        cursor.close()
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=len(self.cells))
        self.cols = ', '.join('i.`%s`' % c for c in self.columns)
        self.i_created = self.columns.index('created_at')
        self.i_id = self.columns.index('id')
        self.i_uuid = self.columns.index('uuid')

    def _connect(self, url: str) -> Any:
        parsed = sa.engine.url.make_url(url)
        kwargs = {'host': parsed.host, 'port': parsed.port or 3306,
                  'user': parsed.username, 'database': parsed.database,
                  'charset': 'utf8mb4', 'autocommit': True}
        if parsed.password:
            kwargs['password'] = parsed.password
        if self.driver == 'mysqldb':
            import MySQLdb
            return MySQLdb.connect(**kwargs)
        import pymysql
        return pymysql.connect(**kwargs)

    def close(self) -> None:
        self.pool.shutdown()
        for conn in list(self.conns.values()) + [self.api]:
            conn.close()

    def _rows(self, uuid: str, sql: str,
              params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        cursor = self.conns[uuid].cursor()
        cursor.execute(sql, params)
        rows = list(cursor.fetchall())
        cursor.close()
        return rows

    def _metadata(self, uuid: str, uuids: list[str]
                  ) -> list[tuple[Any, ...]]:
        return self._rows(
            uuid, 'SELECT instance_uuid, `key`, value FROM '
            'instance_metadata WHERE deleted = 0 AND instance_uuid IN (%s)'
            % ', '.join(['%s'] * len(uuids)), tuple(uuids))

    def marker_values(self, marker: str | None) -> tuple[Any, ...] | None:
        """created_at, id and uuid of the marker (via its mapping)."""
        if not marker:
            return None
        cursor = self.api.cursor()
        cursor.execute('SELECT cell_id FROM instance_mappings '
                       'WHERE instance_uuid = %s', (marker,))
        cell_uuid = self.cell_by_id[cursor.fetchone()[0]]
        cursor.close()
        return tuple(self._rows(
            cell_uuid, 'SELECT created_at, id, uuid FROM instances '
            'WHERE uuid = %s', (marker,))[0])

    def select(self, joined: bool, after: tuple[Any, ...] | None,
               count: int) -> tuple[str, tuple[Any, ...]]:
        """The per-cell SELECT: the detail columns, maybe joined data.

        *joined*: the blobs, and the metadata as JSON as ours reads it.
        """
        cols, source = self.cols, 'instances i'
        if joined:
            cols += (', e.flavor, c.network_info, (SELECT JSON_OBJECTAGG('
                     'm.`key`, m.value) FROM instance_metadata m WHERE '
                     'm.instance_uuid = i.uuid AND m.deleted = 0 AND '
                     'm.`key` IS NOT NULL)')
            source += (
                ' LEFT JOIN instance_extra e ON e.instance_uuid = i.uuid '
                'AND e.deleted = 0 LEFT JOIN instance_info_caches c ON '
                'c.instance_uuid = i.uuid AND c.deleted = 0')
        where = _INSTANCE_WHERE
        params: tuple[Any, ...] = ()
        if after is not None:
            created, row_id, uuid = after
            where += ' AND ' + _AFTER
            params = (created, created, row_id, created, row_id, uuid)
        return ('SELECT %s FROM %s WHERE %s %s' % (cols, source, where,
                                                    _ORDER),
                params + (count,))

    def key(self, item: tuple[tuple[Any, ...], str]) -> tuple[Any, ...]:
        row = item[0]
        return (-row[self.i_created].timestamp(), -row[self.i_id],
                row[self.i_uuid])

    def limit_per_cell_merge(self, limit: int, marker: str | None
                             ) -> tuple[list[tuple[tuple[Any, ...], str]],
                                        int]:
        """Ask every cell for *limit* rows (columns only) and merge them.

        :returns: the first *limit* (row, cell uuid) and the rows fetched.
        """
        after = self.marker_values(marker)
        sql, params = self.select(False, after, limit)
        futures = {uuid: self.pool.submit(self._rows, uuid, sql, params)
                   for _name, uuid, _url in self.cells}
        runs = [[(row, cell_uuid) for row in future.result()]
                for cell_uuid, future in futures.items()]
        merged = list(heapq.merge(*runs, key=self.key))[:limit]
        return merged, sum(len(r) for r in runs)


class FloorPath(RawPath):
    """The floor: only the rows the answer needs, in one query per cell.

    An oracle: :meth:`prepare` learns, outside the timed run, how many
    rows of the answer each cell holds (by the naive raw merge, which does
    not use our code). The timed run then asks every cell, in parallel,
    for exactly that many rows with their flavor and network_info blobs
    joined in and their metadata as JSON (one statement, as ours reads
    them), then heap-merges. No SQLAlchemy, no parsing, no records, no
    JSON encoding: what any lister must at least fetch, with this driver,
    to answer.
    """

    def __init__(self, world: dict[str, Any], driver: str) -> None:
        super().__init__(world, driver)
        self.plan: dict[str, int] = {}

    def prepare(self, limit: int, marker: str | None) -> None:
        naive, _fetched = self.limit_per_cell_merge(limit, marker)
        self.plan = {}
        for _row, cell_uuid in naive:
            self.plan[cell_uuid] = self.plan.get(cell_uuid, 0) + 1

    def run(self, limit: int, marker: str | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        after = self.marker_values(marker)
        futures = {uuid: self.pool.submit(
            self._rows, uuid, *self.select(True, after, count))
            for uuid, count in self.plan.items()}
        runs = [[(row, cell_uuid) for row in future.result()]
                for cell_uuid, future in futures.items()]
        t1 = time.perf_counter()
        merged = list(heapq.merge(*runs, key=self.key))[:limit]
        t2 = time.perf_counter()
        return {'total': t2 - t0, 'gather': t1 - t0, 'merge': t2 - t1,
                'rows_fetched': sum(len(r) for r in runs),
                'uuids': [row[self.i_uuid] for row, _cell in merged]}


class NaivePath(RawPath):
    """Raw SQL as nova's strategy would send it: ``limit`` rows per cell.

    Every cell is asked for ``limit`` rows (the query of the 2018 report;
    at 10 cells 90% of them are thrown away by the merge), then the blobs
    and metadata of the survivors. Reported for reference, next to the
    floor.
    """

    def _details(self, uuid: str, uuids: list[str]) -> int:
        blobs = self._rows(
            uuid, 'SELECT e.instance_uuid, e.flavor, c.network_info '
            'FROM instance_extra e LEFT JOIN instance_info_caches c ON '
            'c.instance_uuid = e.instance_uuid AND c.deleted = 0 '
            'WHERE e.deleted = 0 AND e.instance_uuid IN (%s)'
            % ', '.join(['%s'] * len(uuids)), tuple(uuids))
        return len(blobs) + len(self._metadata(uuid, uuids))

    def run(self, limit: int, marker: str | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        merged, fetched = self.limit_per_cell_merge(limit, marker)
        t1 = time.perf_counter()
        by_cell: dict[str, list[str]] = {}
        for row, cell_uuid in merged:
            by_cell.setdefault(cell_uuid, []).append(row[self.i_uuid])
        details = [self.pool.submit(self._details, cell_uuid, uuids)
                   for cell_uuid, uuids in by_cell.items()]
        joined = sum(f.result() for f in details)
        t2 = time.perf_counter()
        return {'total': t2 - t0, 'gather': t1 - t0, 'details': t2 - t1,
                'rows_fetched': fetched, 'joined_rows': joined,
                'uuids': [row[self.i_uuid] for row, _cell in merged]}


# --------------------------------------------------------------------------
# running


def configure_nova(server: str) -> None:
    CONF([], project='nova', default_config_files=[])
    conf_mod.register_opts(CONF)
    cells_mod.register_messaging_opts()
    objects.register_all()
    CONF.set_override('transport_url', 'fake://')
    # A placeholder until a world is chosen; NovaPath sets the real one.
    CONF.set_override('connection', server + 'mysql', 'api_database')
    CONF.set_override('connection', server + 'mysql', 'database')
    main_db_api.configure(CONF)
    # compute.API() (built by the view builder) creates RPC clients: give
    # it oslo.messaging's in-process fake transport. No message is sent.
    nova_rpc.init(CONF)
    security_group_api.get_instances_security_groups_bindings = (
        _fake_sg_bindings)
    std_logging.getLogger('nova').setLevel(std_logging.WARNING)
    # oslo.cache looks for its memcache backend once and logs its absence.
    std_logging.getLogger('stevedore').setLevel(std_logging.CRITICAL)


def pick_marker(world: dict[str, Any], limit: int) -> str:
    """An instance in the middle of the first page of this limit."""
    engines = instance_query.EngineCache(io_timeout=60)
    try:
        result = records.list_instances(
            nova_context.get_admin_context(), limit=limit,
            engines=engines)
    finally:
        engines.dispose()
    return str(result.instances[len(result.instances) // 2]['uuid'])


def median(values: list[float]) -> float:
    return statistics.median(values)


def run_point(paths: dict[str, Any], limit: int, marker: str | None,
              repeat: int, point: dict[str, Any],
              log: Any) -> dict[str, Any]:
    # The floor learns how many rows each cell holds (untimed).
    for path in paths.values():
        if hasattr(path, 'prepare'):
            path.prepare(limit, marker)
    # Warm up each path once (connections, caches), and check them.
    results = {name: path.run(limit, marker) for name, path in
               paths.items()}
    reference = results['ours']['uuids']
    for name, result in results.items():
        if result['uuids'] != reference:
            first = next((i for i, (a, b) in enumerate(
                zip(result['uuids'], reference)) if a != b),
                min(len(result['uuids']), len(reference)))
            raise Abort(
                'at %s: %s returned %d uuids, ours %d; first difference at '
                'position %d: %s vs %s' % (
                    point, name, len(result['uuids']), len(reference),
                    first, result['uuids'][first:first + 3],
                    reference[first:first + 3]))
    if not reference:
        raise Abort('at %s: nothing listed' % point)
    samples: dict[str, list[dict[str, Any]]] = {n: [] for n in paths}
    names = list(paths)
    for rep in range(repeat):
        # Alternate, rotating who goes first.
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            gc.collect()
            result = paths[name].run(limit, marker)
            if result['uuids'] != reference:
                raise Abort('at %s: %s changed its answer on repeat %d'
                            % (point, name, rep))
            del result['uuids']
            samples[name].append(result)
    out: dict[str, Any] = dict(point)
    out['returned'] = len(reference)
    # Other work on the machine shows here (2 cores are shared).
    out['loadavg_1min'] = os.getloadavg()[0]
    for name, runs in samples.items():
        keys = [k for k, v in runs[0].items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[name] = {k: median([r[k] for r in runs]) for k in keys}
        out[name]['samples'] = [r['total'] for r in runs]
    ours_runs = samples['ours']
    # Keep the timings of the median run of ours.
    mid = sorted(ours_runs, key=lambda r: r['total'])[len(ours_runs) // 2]
    out['ours']['timings'] = mid['timings']
    out['nova_over_ours'] = (out['nova']['total'] / out['ours']['total']
                             if 'nova' in out else None)
    out['ours_over_floor'] = (out['ours']['total'] / out['floor']['total']
                              if 'floor' in out else None)
    log(format_point(out))
    return out


def format_point(p: dict[str, Any]) -> str:
    parts = ['%2d cells x %5d/cell del %-2d %-7s limit %4d%s:' % (
        p['cells'], p['per_cell'], p['deleted'], p['driver'], p['limit'],
        ' marker' if p['marker'] else '')]
    for name in ('nova', 'ours', 'floor', 'naive'):
        if name in p:
            parts.append('%s %8.1f ms' % (name, p[name]['total'] * 1000))
    if p.get('nova_over_ours'):
        parts.append('nova/ours %5.1fx' % p['nova_over_ours'])
    if p.get('ours_over_floor'):
        parts.append('ours/floor %4.2fx' % p['ours_over_floor'])
    o = p['ours']
    parts.append('[ours: setup %.1f gather %.1f merge %.1f view %.1f '
                 'json %.1f, %d rows fetched]' % (
                     o['setup'] * 1000, o['gather'] * 1000,
                     o['merge'] * 1000, o['view'] * 1000, o['json'] * 1000,
                     o['rows_fetched']))
    return ' '.join(parts)


class ThreadProfiler:
    """cProfile in every thread (the caller and the cell workers)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _thread_hook(self, *args: Any) -> None:
        # Called once in each new thread; enable() replaces this hook for
        # that thread only.
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def __enter__(self) -> 'ThreadProfiler':
        threading.setprofile(self._thread_hook)
        main = cProfile.Profile()
        self.profiles.append(main)
        main.enable()
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.setprofile(None)
        for profile in self.profiles:
            try:
                profile.disable()
            except Exception:  # noqa: S110,BLE001 - other thread's
                pass

    def stats(self) -> pstats.Stats:
        stream = io.StringIO()
        stats = pstats.Stats(self.profiles[0], stream=stream)
        for profile in self.profiles[1:]:
            try:
                stats.add(profile)
            except TypeError:  # a thread that recorded nothing
                pass
        return stats


def profile_ours(world: dict[str, Any], driver: str, limit: int,
                 out_dir: str, runs: int, log: Any,
                 name: str = 'listing') -> dict[str, str]:
    ours = OursPath(world, driver)
    files = {}
    try:
        ours.run(limit, None)
        profiler = ThreadProfiler()
        # Threads of a listing are new every call: the hook catches them.
        with profiler:
            for _ in range(runs):
                ours.run(limit, None)
        stats = runinfo.scrub_stats(profiler.stats())
        base = os.path.join(out_dir, '%s_profile_ours_%dc_limit%d_%s' % (
            name, len(world['cells']) - 1, limit, driver))
        stats.dump_stats(base + '.pstats')
        # Published files: no local paths (runinfo.scrub_stats above,
        # strip_dirs() and runinfo.scrub below).
        with open(base + '.txt', 'w') as handle:
            handle.write('cProfile of %d runs of ours (all threads: the '
                         'caller and every cell worker), driver %s\n\n'
                         % (runs, driver))
            for order in ('tottime', 'cumulative'):
                stream = io.StringIO()
                s = pstats.Stats(base + '.pstats', stream=stream)
                s.strip_dirs().sort_stats(order).print_stats(45)
                handle.write('==== sorted by %s ====\n' % order)
                handle.write(stream.getvalue())
        files['cprofile'] = base + '.txt'
        try:
            import pyinstrument
        except ImportError:
            log('pyinstrument not installed: caller-thread profile skipped')
        else:
            profiler2 = pyinstrument.Profiler(interval=0.0005)
            profiler2.start()
            for _ in range(runs):
                ours.run(limit, None)
            profiler2.stop()
            with open(base + '.pyinstrument.txt', 'w') as handle:
                handle.write(runinfo.scrub(profiler2.output_text(
                    unicode=True, show_all=False)))
            files['pyinstrument'] = base + '.pyinstrument.txt'
    finally:
        ours.close()
    log('profile of ours (%s) written: %s' % (driver, files))
    return files


#: What ``--tune-server`` sets, when the server's value is lower.
TUNED = {'innodb_buffer_pool_size': 10 * 2 ** 30, 'max_connections': 1000}


def _set_globals(server: str, values: dict[str, int], log: Any,
                 note: str) -> None:
    engine = sa.create_engine(server, isolation_level='AUTOCOMMIT')
    try:
        with engine.connect() as conn:
            for name, value in values.items():
                conn.execute(sa.text('SET GLOBAL %s = %d' % (name, value)))
                log('SET GLOBAL %s = %d (%s)' % (name, value, note))
    finally:
        engine.dispose()


def tune_server(server: str, log: Any) -> dict[str, int]:
    """Raise the server's globals in :data:`TUNED`; return the old values.

    The 50 x 10,000 world is about 4 GB: with MariaDB's default 128 MiB
    buffer pool every listing would read from disk, which is not what a
    production cell database does. innodb_buffer_pool_size goes to
    10 GiB and max_connections to 1000 (three paths keep pools to 51
    cells) with SET GLOBAL, which changes the whole server (every user
    of it) until :func:`restore_server` or a restart. Old and new values
    are printed, with the statements that set them back by hand.
    """
    engine = sa.create_engine(server, isolation_level='AUTOCOMMIT')
    try:
        with engine.connect() as conn:
            current = {name: int(conn.execute(sa.text(
                'SHOW GLOBAL VARIABLES LIKE :n'), {'n': name}).first()[1])
                for name in TUNED}
    finally:
        engine.dispose()
    old = {name: value for name, value in current.items()
           if value < TUNED[name]}
    for name, value in current.items():
        if name not in old:
            log('--tune-server: %s is %d already, left as it is'
                % (name, value))
    for name, value in old.items():
        log('--tune-server: %s %d -> %d' % (name, value, TUNED[name]))
    _set_globals(server, {n: TUNED[n] for n in old}, log, 'GLOBAL, for '
                 'every user of the server until set back or restarted')
    if old:
        log('--tune-server: set back at the end of the run (unless '
            '--keep-tuning); by hand: %s' % '; '.join(
                'SET GLOBAL %s = %d' % kv for kv in old.items()))
    return old


def restore_server(server: str, old: dict[str, int], log: Any) -> None:
    """Set the globals :func:`tune_server` changed back to *old*."""
    _set_globals(server, old, log, 'set back')


def server_settings(server: str, log: Any) -> dict[str, Any]:
    """The server settings that matter to the results, for the report."""
    engine = sa.create_engine(server, isolation_level='AUTOCOMMIT')
    try:
        with engine.connect() as conn:
            def var(name: str) -> Any:
                return conn.execute(sa.text(
                    'SHOW VARIABLES LIKE :n'), {'n': name}).first()[1]
            data = conn.execute(sa.text(
                "SELECT COALESCE(SUM(data_length + index_length), 0) FROM "
                "information_schema.tables WHERE table_schema LIKE "
                "'ncsbench%'")).scalar_one()
            settings = {
                'version': var('version'),
                'innodb_buffer_pool_size': int(var(
                    'innodb_buffer_pool_size')),
                'max_connections': int(var('max_connections')),
                'benchmark_data_bytes': int(data)}
            if settings['innodb_buffer_pool_size'] < settings[
                    'benchmark_data_bytes']:
                log('WARNING: innodb_buffer_pool_size (%d) is smaller than '
                    'the benchmark databases (%d bytes): queries may read '
                    'from disk; see --tune-server'
                    % (settings['innodb_buffer_pool_size'],
                       settings['benchmark_data_bytes']))
            return settings
    finally:
        engine.dispose()


def write_markdown(path: str, report: dict[str, Any]) -> None:
    points = report['points']
    lines = ['# Cross-cell GET /servers/detail: nova vs ours vs floor', '',
             'nova %s, SQLAlchemy %s, Python %s, MariaDB %s, %s CPU(s); '
             'medians of %d runs per path, the paths alternating; times in '
             'ms. Generated by `%s`.' % (
                 report['nova'], report['sqlalchemy'], report['python'],
                 report['server']['version'], report['cpus'],
                 report['repeat'], report['command']), '',
             'Sort `created_at desc, id desc` (+ `uuid asc`), admin, all '
             'projects, `deleted=False`; nova = get_instance_objects_sorted '
             '+ fill_faults + ViewBuilder.detail + JSON (neutron security '
             'groups stubbed), ours = list_instances(fields=DETAIL_FIELDS) '
             '+ JSON, floor = raw DB-API per cell in parallel fetching '
             'exactly the rows of the answer with their blobs and metadata '
             '(fetch only), naive = raw DB-API asking every cell for '
             '`limit` rows, then the blobs of the survivors.', '',
             'Columns: *cells* (cell databases besides cell0), *per cell* '
             '(live instances per cell), *deleted x* (soft-deleted rows '
             'per live one), *driver* (pymysql, or mysqldb: mysqlclient), '
             '*limit* (page size), *marker* (yes: the page after a marker '
             'in the middle of the first page); *nova*, *ours*, *floor*, '
             '*naive*: median ms of each path; *nova/ours*, *ours/floor*: '
             'ratios of those medians; *rows fetched*: rows each path read '
             'from the cells. nova phases: ms in each step of nova\'s '
             'pipeline (median run). Ours: *setup* (cell mappings, '
             'marker), *gather* (waiting for the cells\' batches), '
             '*merge*, *view* (parsing and records), *JSON*. Per cell: '
             'rows and batches fetched, ms waiting for a worker, '
             'connecting (pool checkout), executing and fetching.',
             '', '## All points', '',
             '| cells | per cell | deleted x | driver | limit | marker | '
             'nova | ours | floor | naive | nova/ours | ours/floor | '
             'rows fetched ours / floor / naive |',
             '|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|'
             '---:|']
    for p in points:
        naive = p.get('naive')
        lines.append('| %d | %d | %d | %s | %d | %s | %s | %.1f | %.1f | '
                     '%s | %s | %.2f | %d / %d / %s |' % (
                         p['cells'], p['per_cell'], p['deleted'],
                         p['driver'], p['limit'],
                         'yes' if p['marker'] else '',
                         '%.1f' % (p['nova']['total'] * 1000)
                         if 'nova' in p else '-',
                         p['ours']['total'] * 1000,
                         p['floor']['total'] * 1000,
                         '%.1f' % (naive['total'] * 1000) if naive else '-',
                         '%.1f' % p['nova_over_ours']
                         if p.get('nova_over_ours') else '-',
                         p['ours_over_floor'],
                         p['ours']['rows_fetched'],
                         p['floor']['rows_fetched'],
                         '%d' % naive['rows_fetched'] if naive else '-'))
    lines += ['', '## nova phases', '',
              '| cells | per cell | deleted x | driver | limit | marker | '
              'total | get_instance_objects_sorted | fill_faults | '
              'ViewBuilder.detail | JSON |',
              '|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|']
    for p in points:
        if 'nova' not in p:
            continue
        n = p['nova']
        lines.append('| %d | %d | %d | %s | %d | %s | %.1f | %.1f | %.1f |'
                     ' %.1f | %.1f |' % (
                         p['cells'], p['per_cell'], p['deleted'],
                         p['driver'], p['limit'],
                         'yes' if p['marker'] else '', n['total'] * 1000,
                         n['objects'] * 1000, n['faults'] * 1000,
                         n['view'] * 1000, n['json'] * 1000))
    lines += ['', '## Ours, 2018-style (median run per point)', '',
              '| cells | per cell | deleted x | driver | limit | marker | '
              'total | setup | gather | merge | view | JSON | rows fetched |',
              '|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|'
              '---:|']
    for p in points:
        o = p['ours']
        lines.append('| %d | %d | %d | %s | %d | %s | %.1f | %.1f | %.1f | '
                     '%.1f | %.1f | %.1f | %d |' % (
                         p['cells'], p['per_cell'], p['deleted'],
                         p['driver'], p['limit'],
                         'yes' if p['marker'] else '', o['total'] * 1000,
                         o['setup'] * 1000, o['gather'] * 1000,
                         o['merge'] * 1000,
                         o['view'] * 1000, o['json'] * 1000,
                         o['rows_fetched']))
    key_points = [p for p in points if p['cells'] in (10, 50) and
                  p['limit'] == max(pp['limit'] for pp in points) and
                  not p['marker'] and p['deleted'] == 0]
    for p in key_points:
        lines += ['', '### Per cell: %d cells x %d, %s, limit %d' % (
            p['cells'], p['per_cell'], p['driver'], p['limit']), '',
            '| cell | rows | batches | wait | connect | execute | fetch |',
            '|---|---:|---:|---:|---:|---:|---:|']
        for c in sorted(p['ours']['timings']['cells'],
                        key=lambda c: natural_key(c['name'] or '')):
            s = c['seconds']
            lines.append('| %s | %d | %d | %.1f | %.1f | %.1f | %.1f |' % (
                c['name'], c['rows'], c['batches'], s['wait'] * 1000,
                s['connect'] * 1000, s['execute'] * 1000,
                s['fetch'] * 1000))
    lines += ['', '## Targets', '']
    lines += report.get('targets', ['(not evaluated on this run)'])
    if report.get('notes'):
        lines += ['', '## Notes', ''] + ['* ' + n for n in report['notes']]
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')


def evaluate_targets(points: list[dict[str, Any]]) -> list[str]:
    out = []

    def find(**kw: Any) -> dict[str, Any] | None:
        for p in points:
            if all(p.get(k) == v for k, v in kw.items()):
                return p
        return None

    for driver in DRIVERS:
        p = find(cells=10, limit=1000, driver=driver, deleted=0,
                 marker=None, per_cell=1000)
        if p and p.get('nova_over_ours'):
            out.append('* 10 cells, limit 1000, %s: nova/ours %.1fx '
                       '(target >= 20x: %s); ours/floor %.2fx (target <= '
                       '1.5x: %s)' % (
                           driver, p['nova_over_ours'],
                           'met' if p['nova_over_ours'] >= 20 else
                           'NOT met', p['ours_over_floor'],
                           'met' if p['ours_over_floor'] <= 1.5 else
                           'NOT met'))
            o = p['ours']
            output = o['view'] + o['json']
            out.append('  * of ours\' %.1f ms, %.1f ms are the view and JSON '
                       '(parsing the blobs, building and encoding the '
                       'records: work the fetch-only floor does not do, '
                       'and alone %.2fx the floor); ours without them: '
                       '%.2fx the floor' % (
                           o['total'] * 1000, output * 1000,
                           output / p['floor']['total'],
                           (o['total'] - output) / p['floor']['total']))
        for per_cell in sorted({q['per_cell'] for q in points}):
            a = find(cells=10, limit=1000, driver=driver, deleted=0,
                     marker=None, per_cell=per_cell)
            b = find(cells=50, limit=1000, driver=driver, deleted=0,
                     marker=None, per_cell=per_cell)
            if a and b:
                ratio = b['ours']['total'] / a['ours']['total']
                out.append('* %s, %d/cell: ours at 50 cells / 10 cells, '
                           'limit 1000: %.2fx (target <= 2x: %s)' % (
                               driver, per_cell, ratio,
                               'met' if ratio <= 2 else 'NOT met'))
        a = find(cells=10, limit=1000, driver=driver, deleted=0,
                 marker=None, per_cell=1000)
        b = find(cells=10, limit=1000, driver=driver, deleted=10,
                 marker=None, per_cell=1000)
        if a and b:
            ratio = b['ours']['total'] / a['ours']['total']
            out.append('* %s: ours with 10x soft-deleted rows / without, '
                       '10 cells, limit 1000: %.2fx (target <= 1.2x: %s)'
                       % (driver, ratio, 'met' if ratio <= 1.2 else
                          'NOT met'))
    # What an operator sees: nova on its default driver, ours with
    # [cellsched] list_prefer_mysqldb = true and mysqlclient installed.
    a = find(cells=10, limit=1000, driver='pymysql', deleted=0, marker=None,
             per_cell=1000)
    b = find(cells=10, limit=1000, driver='mysqldb', deleted=0, marker=None,
             per_cell=1000)
    if a and b and 'nova' in a:
        ratio = a['nova']['total'] / b['ours']['total']
        out.append('* 10 cells, limit 1000: nova on PyMySQL (its default) '
                   '/ ours with list_prefer_mysqldb (mysqlclient): %.1fx '
                   '(target >= 20x: %s)' % (
                       ratio, 'met' if ratio >= 20 else 'NOT met'))
    return out


def write_chart(path: str, points: list[dict[str, Any]]) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    plain = [p for p in points if not p['marker'] and p['deleted'] == 0]
    drivers = [d for d in DRIVERS if any(p['driver'] == d for p in plain)]
    limits = sorted({p['limit'] for p in plain})
    if not drivers or not limits:
        return
    fig, axes = plt.subplots(1, len(drivers), figsize=(7 * len(drivers), 5),
                             squeeze=False, sharey=True)
    colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
    styles = {'nova': '-', 'ours': '--', 'floor': ':'}
    for ax, driver in zip(axes[0], drivers):
        for index, limit in enumerate(limits):
            chosen: dict[int, dict[str, Any]] = {}
            for p in plain:
                if p['driver'] == driver and p['limit'] == limit:
                    # Smallest per-cell size for a cell count.
                    if (p['cells'] not in chosen or
                            p['per_cell'] < chosen[p['cells']]['per_cell']):
                        chosen[p['cells']] = p
            xs = sorted(chosen)
            for name, style in styles.items():
                ys = [chosen[x][name]['total'] * 1000 for x in xs
                      if name in chosen[x]]
                if len(ys) != len(xs):
                    continue
                ax.plot(xs, ys, style, marker='o', markersize=3,
                        color=colors[index % len(colors)],
                        label='%s, limit %d' % (name, limit))
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xticks(sorted({p['cells'] for p in plain}))
        ax.get_xaxis().set_major_formatter(
            matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel('cells (+ cell0)')
        ax.set_ylabel('GET /servers/detail, ms (median)')
        ax.set_title('driver %s: nova (solid), ours (dashed), floor '
                     '(dotted)' % driver, fontsize=9)
        ax.grid(True, which='both', alpha=0.3)
        ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(',') if x]  # noqa: E731
    parser.add_argument('--server', default=os.environ.get(
        'NOVA_CELLSCHED_TEST_MYSQL_URL',
        'mysql+pymysql://root@127.0.0.1:3306/'))
    parser.add_argument('--cells', type=ints, default=[1, 2, 5, 10, 50])
    parser.add_argument('--limits', type=ints,
                        default=[100, 200, 500, 1000])
    parser.add_argument('--drivers', default='pymysql,mysqldb',
                        type=lambda s: [d for d in s.split(',') if d])
    parser.add_argument('--deleted', type=ints, default=[0],
                        help='soft-deleted rows per live instance, e.g. '
                        '0,10')
    parser.add_argument('--deleted-cells', type=ints, default=None,
                        help='cell counts that get the deleted>0 worlds '
                        '(default: all of --cells)')
    parser.add_argument('--per-cell', type=int, default=1000)
    parser.add_argument('--marker', action=argparse.BooleanOptionalAction,
                        default=False,
                        help='also run each point with a marker in the '
                        'middle of the first page')
    parser.add_argument('--marker-cells', type=ints, default=None,
                        help='cell counts for the marker points (default '
                        'all)')
    parser.add_argument('--no-nova', action='store_true',
                        help='skip nova (ours and floor only)')
    parser.add_argument('--no-naive', action='store_true',
                        help='skip the naive raw path (limit rows per '
                        'cell)')
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--quick', action='store_true',
                        help='smoke run: 2 cells, limits 100,1000, '
                        'pymysql, 2 repeats')
    parser.add_argument('--seed-workers', type=int, default=2)
    parser.add_argument('--tune-server', action='store_true',
                        help='SET GLOBAL innodb_buffer_pool_size = 10 GiB '
                        'and max_connections = 1000 where lower: changes '
                        'the whole server; old values printed and set '
                        'back at the end')
    parser.add_argument('--keep-tuning', action='store_true',
                        help='with --tune-server: leave the raised values '
                        'in place at the end')
    seed_fast.add_database_args(parser)
    reporting.add_output_arguments(parser, name='listing',
                                   what='and NAME.png, the chart')
    parser.add_argument('--profile', action='store_true',
                        help='profile ours at 10 cells / limit 1000 into '
                        '--out')
    parser.add_argument('--profile-runs', type=int, default=10)
    parser.add_argument('--pkg', default=None,
                        help='directory holding a nova_cellsched to '
                        'measure instead of the installed one')
    args = parser.parse_args(argv)
    if args.quick:
        args.cells, args.limits = [2], [100, 1000]
        args.drivers, args.repeat = ['pymysql'], 2
    for driver in args.drivers:
        if driver not in DRIVERS:
            parser.error('unknown driver %r' % driver)
    return args


def requirements(args: argparse.Namespace) -> dict[str, str]:
    """Module -> what it is needed for, for this run's options."""
    needed = {'MySQLdb': 'mysqlclient: the seeder (LOAD DATA)'}
    if args.out and not args.cleanup:
        needed['matplotlib'] = 'matplotlib: the chart of --out'
    return needed


def worlds_of(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """``(cells, per_cell, deleted)`` of every world the options name."""
    worlds = []
    for cells in args.cells:
        for deleted in args.deleted:
            if (deleted and args.deleted_cells is not None and
                    cells not in args.deleted_cells):
                continue
            worlds.append((cells, args.per_cell, deleted))
    return worlds


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, write_markdown)
    reporting.require('bench_listing.py', {} if args.cleanup
                      else requirements(args))
    if args.cleanup:
        seed_fast.cleanup(args.server, worlds_of(args))
        return 0
    with reporting.cleanly() as stack:
        stack.enter_context(seed_fast.databases_of_this_run(
            args.server, args.keep, worlds_of(args)))
        if args.tune_server:
            tuned = tune_server(args.server, print)
            if tuned and not args.keep_tuning:
                stack.callback(restore_server, args.server, tuned, print)
        return _main(args, argv)


def _main(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The run itself; :func:`main` checks, tunes and cleans up."""
    out_dir = args.out
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    log_lines: list[str] = []

    def log(text: str) -> None:
        print(text, flush=True)
        log_lines.append(text)

    configure_nova(args.server)
    server = server_settings(args.server, log)
    log('MariaDB %(version)s, innodb_buffer_pool_size %(innodb_buffer_pool_'
        'size)d, max_connections %(max_connections)d' % server)
    log('nova_cellsched from %s' % os.path.dirname(nova_cellsched.__file__))
    worlds = worlds_of(args)
    points: list[dict[str, Any]] = []
    notes = [
        'nova path: the only stub is neutron (security groups of the '
        'detail view return `default`); request_specs are not seeded, so '
        'the view\'s RequestSpec lookup (2.96+) finds none.',
        'nova runs in native threading mode (nova-api\'s default in nova '
        '34), with its default cell_worker_thread_pool_size.',
        'floor: an oracle that knows, from an untimed raw run, how many '
        'rows of the answer each cell holds, and fetches exactly those, '
        'their blobs joined in and their metadata as JSON: one statement '
        'per cell, in parallel, on open connections; it neither parses nor '
        'encodes. Ours must find those counts, parses flavor and '
        'network_info JSON, builds records and encodes JSON.',
        'naive: raw SQL asking every cell for `limit` rows, as nova\'s '
        'own strategy asks (the 2018 report\'s query).',
        'microversion %s for nova\'s view.' % MAX_VERSION,
    ]
    seeding = []
    try:
        for cells, per_cell, deleted in worlds:
            started = time.perf_counter()
            world = seed_fast.ensure_world(
                args.server, cells, per_cell, deleted,
                workers=args.seed_workers, progress=log)
            seeding.append({'world': world['prefix'],
                            'reused': world['reused'],
                            'seconds': time.perf_counter() - started,
                            'cells': world['seeded']})
            for driver in args.drivers:
                paths: dict[str, Any] = {}
                if not args.no_nova:
                    paths['nova'] = NovaPath(world, driver)
                else:
                    # ours still reads the cell mappings through nova.
                    paths['_api'] = NovaPath(world, driver)
                paths['ours'] = OursPath(world, driver)
                paths['floor'] = FloorPath(world, driver)
                if not args.no_naive:
                    paths['naive'] = NaivePath(world, driver)
                api_only = paths.pop('_api', None)
                try:
                    markers = [None]
                    if args.marker and (args.marker_cells is None or
                                        cells in args.marker_cells):
                        markers.append('middle')
                    for limit in args.limits:
                        for marker_kind in markers:
                            marker = (pick_marker(world, limit)
                                      if marker_kind else None)
                            point = {'cells': cells, 'per_cell': per_cell,
                                     'deleted': deleted, 'driver': driver,
                                     'limit': limit, 'marker': marker}
                            points.append(run_point(paths, limit, marker,
                                                    args.repeat, point,
                                                    log))
                    if (args.profile and out_dir and cells == 10 and
                            deleted == 0):
                        profile_ours(world, driver, 1000, out_dir,
                                     args.profile_runs, log, args.name)
                finally:
                    for path in paths.values():
                        path.close()
                    if api_only is not None:
                        api_only.close()
    except Abort as exc:
        log('ABORT: the paths disagree: %s' % exc)
        return 1
    targets = evaluate_targets(points)
    for line in targets:
        log(line)
    report = dict(runinfo.run_info('bench_listing.py', argv), **{
        'server': server, 'repeat': args.repeat,
        'microversion': MAX_VERSION,
        'nova_expected_attrs': EXPECTED_ATTRS, 'points': points,
        'seeding': seeding,
        'targets': targets, 'notes': notes,
    })
    paths = reporting.write_results(report, name=args.name, out=out_dir,
                                    json_path=args.json,
                                    write_markdown=write_markdown,
                                    indent=1, sort_keys=False, default=str)
    if out_dir:
        paths.append(os.path.join(out_dir, args.name + '.png'))
        write_chart(paths[-1], points)
    if paths:
        log('wrote %s' % ', '.join(paths))
    return 0


if __name__ == '__main__':
    sys.exit(main())
