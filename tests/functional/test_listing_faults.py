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

"""list_instances on real databases: faults, selection, filters, details.

One MariaDB world (cell0 and three cells, live and soft-deleted rows) is
built once for the class and shared by its tests; a test that changes it
(an extra cell mapping, a table lock, a deleted metadata row) undoes the
change in its cleanup. The PostgreSQL test builds its own world with the
same seed, so both servers hold the same instances.

Nothing here asserts on elapsed time: a hung cell is recognised by its
status and error type, parallelism by thread ids, and threads that must
end are waited for with a bounded poll.
"""

import datetime
import json
import threading
import time
import uuid as uuid_lib

from nova.compute import vm_states
from nova import context as nova_context
from oslo_serialization import jsonutils
import pymysql
import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url

from nova_cellsched import exception
from nova_cellsched import gather
from nova_cellsched.listing import timing
from nova_cellsched import records as cli_lister
from nova_cellsched.records import query as instance_query
from tests.fixtures import db
from tests.fixtures import worlds

INSTANCES = instance_query.INSTANCES
CELL_NAMES = ('cell0', 'cell1', 'cell2', 'cell3')
#: Fields needing no joined data (no details phase).
NO_JOINS = ('uuid', 'display_name', 'host', 'cell_name')


def world_spec(names=CELL_NAMES):
    """The cells of the shared world (same seed on every server)."""
    specs = {
        'cell0': worlds.Population(instances=8, deleted_per_instance=1,
                                 error_only=True),
        'cell1': worlds.Population(instances=40, deleted_per_instance=1,
                                 hosts=4),
        'cell2': worlds.Population(instances=40, deleted_per_instance=1,
                                 hosts=4),
        'cell3': worlds.Population(instances=30, deleted_per_instance=1,
                                 hosts=4),
    }
    return [(name, specs[name]) for name in names]


def wait_until(predicate, timeout=45.0, interval=0.1):
    """Poll *predicate* until true or *timeout*; return its last value.

    Bounds a wait for something that happens on its own (a thread
    ending); it never asserts on how long that took.
    """
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(interval)


class BarrierEngines(instance_query.EngineCache):
    """An EngineCache whose first *parties* lookups meet at a barrier.

    Each cell worker looks up its engine once before querying; the
    barrier only opens when *parties* workers are inside ``get`` at the
    same time, which a serial lister can never achieve (it breaks after
    *timeout* and the cells fail).
    """

    def __init__(self, parties, timeout=20.0, **kwargs):
        super().__init__(**kwargs)
        self.barrier = threading.Barrier(parties, timeout=timeout)
        self._left = parties
        self._count_lock = threading.Lock()

    def get(self, url):
        with self._count_lock:
            meet = self._left > 0
            self._left -= 1
        if meet:
            self.barrier.wait()
        return super().get(url)


class ListingFaultsTest(db.FunctionalTestCase):
    """Faults, cell selection, filters and details on MariaDB cells."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        problem = db.server_available(db.MYSQL_URL)
        if problem is not None:
            raise AssertionError('MariaDB at %s is needed: %s'
                                 % (db.MYSQL_URL, problem))
        world = worlds.CellWorld(db.MYSQL_URL, world_spec())
        world.setUp()
        cls.addClassCleanup(world.cleanUp)
        cls.world = world
        cls.live = world.all_uuids()
        cls.everything = world.all_uuids(live_only=False)

    def setUp(self):
        super().setUp()
        self.ctx = nova_context.get_admin_context()

    # helpers ------------------------------------------------------------

    def all_live(self, names=CELL_NAMES):
        return set().union(*(self.live[n] for n in names))

    def sql(self, query, names=CELL_NAMES):
        """Rows of *query* run on each cell database, by cell name."""
        out = {}
        for name in names:
            engine = self.world.engines.get(self.world.url_of(name))
            with engine.connect() as conn:
                out[name] = [tuple(r) for r in conn.execute(query)]
        return out

    def sql_uuids(self, *where, names=CELL_NAMES):
        rows = self.sql(sa.select(INSTANCES.c.uuid).where(*where), names)
        return {r[0] for cell_rows in rows.values() for r in cell_rows}

    def listed(self, ctx=None, **kwargs):
        kwargs.setdefault('engines', self.world.engines)
        result = cli_lister.list_instances(ctx or self.ctx, **kwargs)
        self.assertTrue(result.complete, result.failures)
        uuids = [r['uuid'] for r in result.instances]
        self.assertEqual(len(uuids), len(set(uuids)), 'duplicates')
        return result, set(uuids)

    def add_cell_mapping(self, name, url, cell_uuid=None):
        """Insert a cell mapping (names may repeat); removed at cleanup."""
        cell_uuid = db.add_cell_mapping(self.world.api_url, name, url,
                                        cell_uuid)
        self.addCleanup(self.remove_cell_mapping, cell_uuid)
        return cell_uuid

    def remove_cell_mapping(self, cell_uuid):
        db.remove_cell_mapping(self.world.api_url, cell_uuid)

    def lock_instances_table(self, cell_name):
        """LOCK TABLES instances WRITE from another session.

        Unlocked at cleanup; returns the unlock function (safe to call
        twice).
        """
        url = sa_url.make_url(self.world.url_of(cell_name))
        conn = pymysql.connect(host=url.host, port=url.port or 3306,
                               user=url.username, password=url.password or '',
                               database=url.database, autocommit=True)
        state = {'open': True}

        def unlock():
            if state['open']:
                state['open'] = False
                try:
                    with conn.cursor() as cursor:
                        cursor.execute('UNLOCK TABLES')
                finally:
                    conn.close()

        self.addCleanup(unlock)
        with conn.cursor() as cursor:
            cursor.execute('LOCK TABLES instances WRITE')
        return unlock

    # tests ----------------------------------------------------------------

    def test_down_cell_is_reported_with_its_original_error(self):
        """A cell at a closed port: the rest is listed, the cell reported.

        skip_down_cells=True (nova's default) answers with the live cells
        and the failure; False raises CellsFailed naming the cell, and so
        does [api] list_records_by_skipping_down_cells = false.
        """
        down_uuid = self.add_cell_mapping(
            'down', 'mysql+pymysql://root@127.0.0.1:1/nothing')

        result = cli_lister.list_instances(self.ctx,
                                           engines=self.world.engines)
        self.assertFalse(result.complete)
        self.assertEqual(self.all_live(),
                         {r['uuid'] for r in result.instances})
        self.assertEqual(len(self.all_live()), len(result.instances))
        self.assertIn(down_uuid, [c.uuid for c in result.cells])
        self.assertEqual(1, len(result.failures), result.failures)
        failure = result.failures[0]
        self.assertEqual(('down', down_uuid, 'failed'),
                         (failure.cell.name, failure.cell.uuid,
                          failure.status))
        # The original exception object, not a description of it.
        self.assertIsInstance(failure.error, sa.exc.OperationalError)
        self.assertIsInstance(failure.error.orig, pymysql.err.OperationalError)
        self.assertEqual(2003, failure.error.orig.args[0])
        self.assertTrue(failure.describe().startswith(
            'OperationalError: (2003'), failure.describe())
        by_cell = {c.cell_uuid: c for c in result.timings.cells}
        self.assertEqual('failed', by_cell[down_uuid].status)
        self.assertEqual(0, by_cell[down_uuid].rows)
        self.assertEqual(
            {'ok'}, {c.status for u, c in by_cell.items() if u != down_uuid})

        exc = self.assertRaises(
            exception.CellsFailed, cli_lister.list_instances, self.ctx,
            skip_down_cells=False, engines=self.world.engines)
        self.assertEqual(['down'], list(exc.failures))
        self.assertIn('down', str(exc))
        self.assertIn('2003', exc.failures['down'])

        self.cfg.config(list_records_by_skipping_down_cells=False,
                        group='api')
        exc = self.assertRaises(
            exception.CellsFailed, cli_lister.list_instances, self.ctx,
            engines=self.world.engines)
        self.assertEqual(['down'], list(exc.failures))
        # Asking for the live cells only works in strict mode too.
        result, uuids = self.listed(cells=['cell1', 'cell2'],
                                    skip_down_cells=False)
        self.assertEqual(self.all_live(['cell1', 'cell2']), uuids)

    def test_hung_cell_times_out_and_its_worker_ends_on_its_own(self):
        """A locked instances table: that cell times out, others answer.

        The worker blocked on the lock is left running by the lister and
        ends by the driver's read timeout (EngineCache io_timeout), even
        while the lock is still held; after UNLOCK the same engines give
        a complete listing and the thread count is back to its baseline.
        """
        baseline = threading.active_count()
        engines = instance_query.EngineCache(io_timeout=4)
        self.addCleanup(engines.dispose)
        hung = self.world.uuid_of('cell2')
        unlock = self.lock_instances_table('cell2')

        # No joined fields: see test_hung_cell_leaves_time_for_details.
        result = cli_lister.list_instances(self.ctx, cell_timeout=2,
                                        fields=NO_JOINS, engines=engines)
        self.assertEqual(1, len(result.failures), result.failures)
        failure = result.failures[0]
        self.assertEqual(('cell2', 'timed out'),
                         (failure.cell.name, failure.status))
        self.assertIsInstance(failure.error, gather.CellTimeout)
        self.assertEqual(2, failure.error.seconds)
        others = ['cell0', 'cell1', 'cell3']
        self.assertEqual(self.all_live(others),
                         {r['uuid'] for r in result.instances})
        self.assertEqual({'cell0', 'cell1', 'cell3'},
                         {r['cell_name'] for r in result.instances})
        statuses = {c.cell_name: c.status for c in result.timings.cells}
        self.assertEqual({'cell0': 'ok', 'cell1': 'ok', 'cell2': 'timed out',
                          'cell3': 'ok'}, statuses)

        # The worker of cell2 got a connection and is stuck in execute.
        hung_threads = {s.thread_id for s in result.timings.spans
                        if s.cell == hung and s.name == 'connect'}
        self.assertEqual(1, len(hung_threads), result.timings.spans)
        self.assertNotIn(threading.get_native_id(), hung_threads)

        def hung_thread_gone():
            alive = {t.native_id for t in threading.enumerate()}
            return not hung_threads & alive

        # Still locked: only the driver's read timeout can end it.
        self.assertTrue(wait_until(hung_thread_gone),
                        'the worker blocked on the locked cell never ended')
        unlock()

        result, uuids = self.listed(cell_timeout=30, engines=engines)
        self.assertEqual(self.all_live(), uuids)
        self.assertTrue(
            wait_until(lambda: threading.active_count() <= baseline),
            'threads left behind: %d > baseline %d: %s' % (
                threading.active_count(), baseline,
                [t.name for t in threading.enumerate()]))

    def test_hung_cell_leaves_time_for_details(self):
        """One hung cell does not use up the time of the healthy ones.

        The first gather waits for the hung cell until its budget is
        spent; the healthy cells were charged only for their own
        queries, so their joined details (flavor_name is a default field)
        are still fetched and only the hung cell is reported.
        """
        engines = instance_query.EngineCache(io_timeout=4)
        self.addCleanup(engines.dispose)
        self.lock_instances_table('cell2')

        result = cli_lister.list_instances(self.ctx, cell_timeout=2,
                                        engines=engines)
        self.assertEqual(self.all_live(['cell0', 'cell1', 'cell3']),
                         {r['uuid'] for r in result.instances})
        self.assertEqual(['cell2'], [f.cell.name for f in result.failures])
        self.assertNotIn(None, [r['flavor_name'] for r in result.instances])

    def test_cell_selection_and_rejected_requests(self):
        """cell0 by default; subsets by name or uuid; bad cell or marker."""
        result, uuids = self.listed()
        self.assertEqual(set(CELL_NAMES), {c.name for c in result.cells})
        self.assertEqual(self.all_live(), uuids)
        cell0 = [r for r in result.instances if r['cell_name'] == 'cell0']
        self.assertEqual(self.live['cell0'], {r['uuid'] for r in cell0})
        self.assertTrue(cell0)
        for record in cell0:
            self.assertEqual((vm_states.ERROR, None, worlds.CELL0_UUID),
                             (record['vm_state'], record['host'],
                              record['cell_uuid']))

        result, uuids = self.listed(
            cells=['cell1', self.world.uuid_of('cell3')])
        self.assertEqual(['cell1', 'cell3'],
                         sorted(c.name for c in result.cells))
        self.assertEqual(self.all_live(['cell1', 'cell3']), uuids)
        self.assertEqual({'cell1', 'cell3'},
                         {r['cell_name'] for r in result.instances})
        # A cell named twice (by name and by uuid) is listed once.
        result, uuids = self.listed(
            cells=['cell2', self.world.uuid_of('cell2')])
        self.assertEqual(['cell2'], [c.name for c in result.cells])
        self.assertEqual(self.live['cell2'], uuids)

        exc = self.assertRaises(exception.InvalidListRequest,
                                cli_lister.list_instances, self.ctx,
                                cells=['no-such-cell'],
                                engines=self.world.engines)
        self.assertEqual(('cell', 'no-such-cell'), (exc.argument, exc.value))
        self.assertIn('cell1=%s' % self.world.uuid_of('cell1'), str(exc))

        exc = self.assertRaises(exception.InvalidListRequest,
                                cli_lister.list_instances, self.ctx,
                                marker=str(uuid_lib.uuid4()),
                                engines=self.world.engines)
        self.assertEqual('marker', exc.argument)

        # nova does not require unique cell names; a shared one is refused.
        twins = [self.add_cell_mapping('twin', self.world.url_of('cell1'))
                 for _ in range(2)]
        exc = self.assertRaises(exception.InvalidListRequest,
                                cli_lister.list_instances, self.ctx,
                                cells=['twin'], engines=self.world.engines)
        self.assertEqual(('cell', 'twin'), (exc.argument, exc.value))
        self.assertIn('2 cells are named', str(exc))
        result, uuids = self.listed(cells=[twins[0]])
        self.assertEqual(self.live['cell1'], uuids)

    def test_non_admin_context_sees_only_its_own_project(self):
        """Even when its filters ask for another project."""
        for mine, other in ((self.world.projects[0], self.world.projects[1]),
                            (self.world.projects[2], self.world.projects[0])):
            ctx = nova_context.RequestContext(
                user_id='someone', project_id=mine, is_admin=False)
            expected = self.sql_uuids(INSTANCES.c.project_id == mine,
                                      INSTANCES.c.deleted == 0)
            self.assertTrue(expected)
            for filters in (None, {'project_id': other},
                            {'project_id': other, 'deleted': None}):
                result, uuids = self.listed(ctx, filters=filters)
                if filters and 'deleted' in filters:
                    self.assertEqual(
                        self.sql_uuids(INSTANCES.c.project_id == mine),
                        uuids, filters)
                else:
                    self.assertEqual(expected, uuids, filters)
                self.assertEqual({mine}, {r['project_id']
                                          for r in result.instances})
        # A non-admin without a project sees its own user's instances.
        user = self.sql(sa.select(INSTANCES.c.user_id).limit(1),
                        ['cell1'])['cell1'][0][0]
        ctx = nova_context.RequestContext(user_id=user, project_id=None,
                                          is_admin=False)
        result, uuids = self.listed(ctx, filters={'user_id': 'other-user'})
        self.assertEqual(self.sql_uuids(INSTANCES.c.user_id == user,
                                        INSTANCES.c.deleted == 0), uuids)
        self.assertTrue(uuids)

    def test_filters_match_sql(self):
        """host, vm_state list, uuid list, name regex, deleted, time."""
        live = INSTANCES.c.deleted == 0
        host = sorted(h for (h,) in self.sql(
            sa.select(INSTANCES.c.host).where(live).distinct(),
            ['cell3'])['cell3'])[0]
        cases = [
            ({'host': host}, [live, INSTANCES.c.host == host]),
            ({'vm_state': [vm_states.STOPPED, vm_states.ERROR]},
             [live, INSTANCES.c.vm_state.in_(['stopped', 'error'])]),
            # The text form of the command line reads the same.
            ({'vm_state': 'stopped, error'},
             [live, INSTANCES.c.vm_state.in_(['stopped', 'error'])]),
            # Regular expressions, as nova matches the name.
            ({'display_name': '-0001'},
             [live, INSTANCES.c.display_name.op('REGEXP')('-0001')]),
            ({'display_name': '^vm-cell1-0000[1-3]$'},
             [live, INSTANCES.c.display_name.in_(
                 ['vm-cell1-00001', 'vm-cell1-00002', 'vm-cell1-00003'])]),
            # LIKE's wildcards are plain characters.
            ({'display_name': 'vm-%'}, [sa.false()]),
            ({'deleted': True}, [INSTANCES.c.deleted != 0]),
            ({'deleted': 'true', 'host': host},
             [INSTANCES.c.deleted != 0, INSTANCES.c.host == host]),
            ({'deleted': None}, []),
            ({'project_id': self.world.projects[3],
              'vm_state': [vm_states.ACTIVE]},
             [live, INSTANCES.c.project_id == self.world.projects[3],
              INSTANCES.c.vm_state == 'active']),
        ]
        # uuids of several cells, one of them soft-deleted (not listed).
        deleted = sorted(self.everything['cell1'] - self.live['cell1'])[0]
        picked = [sorted(self.live[n])[i] for n in CELL_NAMES
                  for i in (0, 3)] + [deleted]
        cases.append(({'uuid': picked},
                      [live, INSTANCES.c.uuid.in_(picked)]))
        cases.append(({'uuid': ','.join(picked[:3])},
                      [live, INSTANCES.c.uuid.in_(picked[:3])]))
        # changes-since: the median updated_at, given with a timezone.
        stamps = sorted(t for rows in self.sql(
            sa.select(INSTANCES.c.updated_at).where(live)).values()
            for (t,) in rows)
        since = stamps[len(stamps) // 2].replace(microsecond=0)
        cases.append(({'changes-since': since.isoformat() + 'Z'},
                      [live, INSTANCES.c.updated_at >= since]))
        cases.append((
            {'changes-since': (since + datetime.timedelta(hours=2))
             .replace(tzinfo=datetime.timezone(datetime.timedelta(hours=2)))},
            [live, INSTANCES.c.updated_at >= since]))
        for filters, where in cases:
            expected = self.sql_uuids(*where)
            result, uuids = self.listed(filters=filters)
            self.assertEqual(expected, uuids, filters)
        # The cases are not vacuous.
        self.assertGreater(len(self.sql_uuids(INSTANCES.c.deleted != 0)),
                           len(self.all_live()) // 2)
        self.assertEqual(self.sql_uuids(INSTANCES.c.deleted != 0),
                         set().union(*self.everything.values())
                         - self.all_live())
        self.assertEqual(8, len(self.sql_uuids(live,
                                               INSTANCES.c.uuid.in_(picked))))

        exc = self.assertRaises(exception.InvalidListRequest,
                                cli_lister.list_instances, self.ctx,
                                filters={'flavor': 'm1.tiny'},
                                engines=self.world.engines)
        self.assertEqual('filter', exc.argument)
        exc = self.assertRaises(exception.InvalidListRequest,
                                cli_lister.list_instances, self.ctx,
                                filters={'deleted': 'maybe'},
                                engines=self.world.engines)
        self.assertEqual('filter value', exc.argument)

    def test_detail_fields_match_the_cell_databases(self):
        """flavor, addresses and metadata as stored by nova, per instance."""
        # One metadata row of a sampled instance is soft-deleted: it must
        # not be shown.
        metadata = instance_query.METADATA
        rows = self.sql(sa.select(metadata.c.id, metadata.c.instance_uuid)
                        .where(metadata.c.deleted == 0)
                        .order_by(metadata.c.id).limit(1), ['cell1'])
        (meta_id, meta_uuid), = rows['cell1']
        self._set_metadata_deleted('cell1', meta_id, meta_id)
        self.addCleanup(self._set_metadata_deleted, 'cell1', meta_id, 0)

        result, uuids = self.listed(fields=cli_lister.DETAIL_FIELDS)
        self.assertEqual(self.all_live(), uuids)
        records = {r['uuid']: r for r in result.instances}
        samples = {name: sorted(self.live[name])[:3] for name in CELL_NAMES}
        samples['cell1'].append(meta_uuid)
        checked_meta = 0
        for name, sampled in samples.items():
            stored = self._stored_details(name, sampled)
            for uuid in sampled:
                record = records[uuid]
                flavor, network_info, meta, columns = stored[uuid]
                self.assertEqual(flavor['name'], record['flavor_name'])
                self.assertEqual(
                    {k: flavor[k] for k in ('name', 'vcpus', 'memory_mb',
                                            'root_gb', 'ephemeral_gb',
                                            'swap')},
                    record['flavor'])
                self.assertEqual((columns['vcpus'], columns['memory_mb']),
                                 (record['flavor']['vcpus'],
                                  record['flavor']['memory_mb']))
                self.assertEqual(meta, record['metadata'], uuid)
                checked_meta += bool(meta)
                self.assertEqual(self._expected_addresses(network_info),
                                 self._listed_addresses(record['addresses']),
                                 uuid)
                for column in ('display_name', 'host', 'vm_state',
                               'image_ref', 'key_name', 'locked',
                               'progress'):
                    self.assertEqual(columns[column], record[column],
                                     (uuid, column))
                self.assertEqual(name, record['cell_name'])
                self.assertNotIn('user_data', record)
                self.assertNotIn('key_data', record)
            if name == 'cell0':
                self.assertEqual([{}] * len(sampled),
                                 [records[u]['addresses'] for u in sampled])
                self.assertEqual({'ERROR'},
                                 {records[u]['status'] for u in sampled})
        self.assertGreater(checked_meta, 0)
        deleted_key = self.sql(
            sa.select(metadata.c.key).where(metadata.c.id == meta_id),
            ['cell1'])['cell1'][0][0]
        self.assertNotIn(deleted_key, records[meta_uuid]['metadata'])

    def _set_metadata_deleted(self, cell, row_id, value):
        table = instance_query.METADATA
        engine = sa.create_engine(self.world.url_of(cell))
        try:
            with engine.begin() as conn:
                conn.execute(table.update().where(table.c.id == row_id)
                             .values(deleted=value))
        finally:
            engine.dispose()

    def _stored_details(self, cell, uuids):
        """uuid -> (flavor fields, network_info, metadata, columns)."""
        extra = instance_query.EXTRA
        cache = instance_query.INFO_CACHE
        metadata = instance_query.METADATA
        out = {}
        engine = sa.create_engine(self.world.url_of(cell))
        try:
            with engine.connect() as conn:
                for uuid in uuids:
                    blob = conn.execute(sa.select(extra.c.flavor).where(
                        extra.c.instance_uuid == uuid)).scalar_one()
                    flavor = jsonutils.loads(blob)['cur']['nova_object.data']
                    nw_blob = conn.execute(
                        sa.select(cache.c.network_info).where(
                            cache.c.instance_uuid == uuid)).scalar_one()
                    meta = {k: v for k, v in conn.execute(
                        sa.select(metadata.c.key, metadata.c.value).where(
                            metadata.c.instance_uuid == uuid,
                            metadata.c.deleted == 0))}
                    columns = conn.execute(sa.select(INSTANCES).where(
                        INSTANCES.c.uuid == uuid)).mappings().one()
                    out[uuid] = (flavor, json.loads(nw_blob or '[]'), meta,
                                 dict(columns))
        finally:
            engine.dispose()
        return out

    @staticmethod
    def _expected_addresses(network_info):
        """label -> sorted (addr, version, type, mac), from the raw JSON."""
        out = {}
        for vif in network_info:
            network = vif['network']
            entries = out.setdefault(network['label'], [])
            for subnet in network['subnets']:
                for ip in subnet['ips']:
                    entries.append((ip['address'], subnet['version'],
                                    'fixed', vif['address']))
                    for fip in ip.get('floating_ips') or ():
                        entries.append((fip['address'], subnet['version'],
                                        'floating', vif['address']))
        return {label: sorted(e) for label, e in out.items()}

    @staticmethod
    def _listed_addresses(addresses):
        return {label: sorted((a['addr'], a['version'],
                               a['OS-EXT-IPS:type'],
                               a['OS-EXT-IPS-MAC:mac_addr']) for a in addrs)
                for label, addrs in addresses.items()}

    def test_trace_has_worker_spans_per_cell_on_parallel_threads(self):
        """One span per worker phase per cell; one thread per cell."""
        parties = len(CELL_NAMES)
        engines = BarrierEngines(parties, io_timeout=30)
        self.addCleanup(engines.dispose)
        # The barrier only opens when every cell's worker is in flight at
        # once: a serial lister would fail the cells after 20 seconds.
        result, uuids = self.listed(fields=['uuid', 'display_name'],
                                    max_workers=parties, engines=engines)
        self.assertEqual(self.all_live(), uuids)

        trace = timing.chrome_trace(result.timings)
        trace = json.loads(json.dumps(trace))  # JSON-able as written
        events = [e for e in trace['traceEvents'] if e['ph'] == 'X']
        names = {self.world.uuid_of(n): n for n in CELL_NAMES}
        worker = [e for e in events if e['cat'] == 'cell']
        counts = {}
        for event in worker:
            cell = event['args']['cell_uuid']
            phase = event['name'].split(' ', 1)[0]
            self.assertEqual('%s %s' % (phase, names[cell]), event['name'])
            counts[(phase, cell)] = counts.get((phase, cell), 0) + 1
        self.assertEqual({(p, c): 1 for p in timing.WORKER_PHASES
                          for c in names}, counts)
        for event in events:
            self.assertGreaterEqual(event['dur'], 0)
            self.assertGreaterEqual(event['ts'], 0)
        caller = {e['name'] for e in events if e['cat'] == 'listing'}
        self.assertLessEqual({'setup', 'gather', 'merge', 'view'}, caller)

        tids = {}
        for event in worker:
            tids.setdefault(event['args']['cell_uuid'], set()).add(
                event['tid'])
        self.assertEqual([1] * parties, [len(t) for t in tids.values()])
        per_cell = {c: t.pop() for c, t in tids.items()}
        self.assertEqual(parties, len(set(per_cell.values())), per_cell)
        self.assertNotIn(threading.get_native_id(), per_cell.values())
        thread_names = {e['tid'] for e in trace['traceEvents']
                        if e['ph'] == 'M' and e['name'] == 'thread_name'}
        self.assertLessEqual(set(per_cell.values()), thread_names)

        stats = result.timings.as_dict()
        self.assertEqual(
            {n: len(self.live[n]) for n in CELL_NAMES},
            {c['name']: c['rows'] for c in stats['cells']})
        self.assertEqual({'ok'}, {c['status'] for c in stats['cells']})

        # With a one-thread pool every cell runs on that one thread.
        result, _uuids = self.listed(fields=['uuid'], max_workers=1)
        tids = {s.thread_id for s in result.timings.spans
                if s.name in timing.WORKER_PHASES}
        self.assertEqual(1, len(tids))

    def test_postgresql_orders_nulls_as_nova_does_there(self):
        """Nullable sort keys on PostgreSQL: NULL highest, as nova's query.

        nova's cell query leaves the NULL order to the database
        (oslo.db's ``paginate_query``): lowest on MariaDB, highest on
        PostgreSQL. Both worlds are seeded alike, so they hold the same
        instances. cell0's have no host, and in both worlds every fifth
        instance of cell1 loses its host (as a server that never reached
        one), so a cell holds NULL and non-NULL values of the key;
        task_state is NULL for most instances of every cell. Within one
        cell (where nova's merge meets no NULL of another cell and
        answers) the command line's and the API's listers give nova's
        order on either server (sorted by host where NULL comes first,
        see :meth:`_assert_one_cell_is_novas`); across the cells, NULL
        is lowest on MariaDB and highest on PostgreSQL, inside each
        cell's query as well as in the merge, and pages with markers
        crossing the NULL boundaries give the same order.
        """
        names = ('cell0', 'cell1', 'cell2')
        orders = [(['host'], ['asc']), (['host'], ['desc']),
                  (['task_state', 'host'], ['desc', 'asc']),
                  (['task_state', 'host'], ['asc', 'desc'])]
        self._drop_some_hosts(self.world, restore=True)
        for keys, dirs in orders:
            result, _uuids = self.listed(cells=list(names), sort_keys=keys,
                                         sort_dirs=dirs,
                                         fields=['uuid', 'host',
                                                 'task_state'])
            self.assertEqual(
                self._expected_order(result.instances, keys, dirs),
                [r['uuid'] for r in result.instances], (keys, dirs))
        self._assert_one_cell_is_novas(self.world, ['host'], ['asc'])

        problem = db.server_available(db.POSTGRESQL_URL)
        self.assertIsNone(problem, 'PostgreSQL is needed by this test')
        pg = self.useFixture(worlds.CellWorld(db.POSTGRESQL_URL,
                                          world_spec(names)))
        self.assertEqual({n: self.live[n] for n in names}, pg.all_uuids())
        self._drop_some_hosts(pg)
        self._assert_one_cell_is_novas(pg, ['host'], ['desc'])
        for keys, dirs in orders:
            what = list(zip(keys, dirs))
            result = cli_lister.list_instances(
                self.ctx, sort_keys=keys, sort_dirs=dirs,
                fields=['uuid', 'host', 'task_state', 'cell_name'],
                engines=pg.engines)
            self.assertTrue(result.complete, result.failures)
            self.assertEqual(['cell0', 'cell1', 'cell2'],
                             sorted(c.name for c in result.cells))
            got = [r['uuid'] for r in result.instances]
            self.assertEqual(self._expected_order(
                result.instances, keys, dirs, nulls_high=True), got, what)
            # The API's lister, all cells: the same order.
            self.assertEqual(got, self._api_uuids(pg, keys, dirs), what)
            # The data does test NULLs inside one cell, both ways.
            for key in keys:
                values = {r['cell_name']: set() for r in result.instances}
                for record in result.instances:
                    values[record['cell_name']].add(record[key] is None)
                self.assertEqual({True, False}, values['cell1'], key)
            nulls = [r['host'] is None for r in result.instances]
            if keys == ['host']:
                count = nulls.count(True)
                self.assertGreater(count, len(self.live['cell0']))
                expected = ([False] * (len(nulls) - count) + [True] * count)
                if dirs == ['desc']:
                    expected.reverse()
                self.assertEqual(expected, nulls, what)
            # Keyset pages across the NULL boundaries: the same order,
            # from the command line's lister and the API's.
            pages, marker = [], None
            while True:
                page = cli_lister.list_instances(
                    self.ctx, sort_keys=keys, sort_dirs=dirs,
                    fields=['uuid'], limit=9, marker=marker,
                    engines=pg.engines)
                self.assertTrue(page.complete, page.failures)
                pages += [r['uuid'] for r in page.instances]
                marker = page.next_marker
                if marker is None:
                    break
            self.assertEqual(got, pages, what)
            pages = []
            while True:
                page_uuids = self._api_uuids(
                    pg, keys, dirs, limit=9,
                    marker=pages[-1] if pages else None)
                pages += page_uuids
                if len(page_uuids) < 9:
                    break
            self.assertEqual(got, pages, what)

    def _api_uuids(self, world, keys, dirs, names=None, limit=None,
                   marker=None):
        """uuids from the API's lister (``get_instances_sorted``)."""
        from nova import objects

        from nova_cellsched.api.hooks import instance_list as api_instance_list
        from nova_cellsched import compat
        if not compat.is_on('keyset'):
            # The API lister's batches page by sort values through it.
            compat.install(['keyset'])
            self.addCleanup(compat.restore, ['keyset'])
        self.cfg.config(connection=world.url_of('cell1'), group='database')
        mappings = [cm for cm in objects.CellMappingList.get_all(self.ctx)
                    if names is None or cm.name in names]
        lister, rows = api_instance_list.get_instances_sorted(
            self.ctx, {'deleted': False}, limit, marker, [], keys, dirs,
            cell_mappings=mappings, batch_size=7)
        found = [r['uuid'] for r in rows]
        self.assertEqual([], lister.cells_failed + lister.cells_timed_out)
        return found

    def _assert_one_cell_is_novas(self, world, keys, dirs):
        """cell1 alone: nova's lister, the CLI's and the API's agree.

        Only where NULL comes first (ascending on MariaDB, descending on
        PostgreSQL): nova asks a cell for batches until one is empty,
        each after the last row of the one before, and oslo.db's
        ``paginate_query`` skips a NULL marker value, so after a last
        row with a NULL key nova repeats rows.
        """
        from nova.compute import instance_list as nova_instance_list
        from nova import objects
        self.cfg.config(connection=world.url_of('cell1'), group='database')
        cell1 = [cm for cm in objects.CellMappingList.get_all(self.ctx)
                 if cm.name == 'cell1']
        _lister, records = nova_instance_list.get_instances_sorted(
            self.ctx, {'deleted': False}, None, None, [], list(keys),
            list(dirs), cell_mappings=cell1, batch_size=1000)
        nova = [r['uuid'] for r in records]
        result = cli_lister.list_instances(
            self.ctx, cells=['cell1'], sort_keys=keys, sort_dirs=dirs,
            fields=['uuid'], engines=world.engines)
        what = (world.server_url, keys, dirs)
        self.assertEqual(nova, [r['uuid'] for r in result.instances], what)
        self.assertEqual(nova, self._api_uuids(world, keys, dirs,
                                               names=['cell1']), what)

    @staticmethod
    def _expected_order(records, keys, dirs, nulls_high=False):
        """uuids sorted in Python: NULL lowest (or highest), then uuid."""
        ordered = sorted(records, key=lambda r: r['uuid'])
        for key, direction in reversed(list(zip(keys, dirs))):
            ordered.sort(key=lambda r: ((r[key] is None) == nulls_high,
                                        r[key] or ''),
                         reverse=direction == 'desc')
        return [r['uuid'] for r in ordered]

    def _drop_some_hosts(self, world, restore=False):
        """host = NULL for every fifth instance of cell1 (by name)."""
        which = sa.or_(INSTANCES.c.display_name.like('%0'),
                       INSTANCES.c.display_name.like('%5'))
        engine = world.engines.get(world.url_of('cell1'))
        with engine.begin() as conn:
            saved = list(conn.execute(sa.select(
                INSTANCES.c.id, INSTANCES.c.host).where(which)))
            conn.execute(INSTANCES.update().where(which).values(host=None))
        self.assertTrue(saved)

        def put_back():
            with engine.begin() as conn:
                for row_id, host in saved:
                    conn.execute(INSTANCES.update().where(
                        INSTANCES.c.id == row_id).values(host=host))

        if restore:
            self.addCleanup(put_back)
