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

"""nova-scheduler's periodic sync of the cell aggregates, on real nova 34.

The world of :mod:`tests.functional.test_placement_prefilter` (three
cells, seven hosts, nova's placement): a compute node started in a cell
joins its aggregate by the periodic sync alone; placement failures, an
unreadable cell and an unreadable API database are logged and the next
run converges; two syncs at once converge and never remove a node
wrongly; a storm of generation conflicts is bounded.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching.
from nova.tests.functional import integrated_helpers  # noqa: F401,I001

import contextlib
import threading
import time
import uuid as uuid_lib

import fixtures
from nova import context as nova_context
from nova.db.main import api as main_db_api
from nova import objects
from nova.scheduler.client import report
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import fixtures as func_fixtures
import sqlalchemy as sa
from sqlalchemy import pool as sa_pool

from cellsched_tools import cloud
from nova_cellsched import cells as cells_mod
from nova_cellsched import compat
from nova_cellsched.scheduler import aggregate_sync
from nova_cellsched.scheduler import aggregates
from nova_cellsched.scheduler import periodic_sync
from tests.fixtures import db
from tests.fixtures import scheduler_state
from tests.fixtures import worlds
from tests.functional import test_placement_prefilter as prefilter

MAPPED = prefilter.MAPPED
FOREIGN = prefilter.FOREIGN


class PeriodicSyncTest(prefilter.PrefilterTestBase):
    """The periodic sync against nova's placement and cell databases."""

    def setUp(self):
        super().setUp()
        if not compat.is_on('guard'):
            # A run turns the I/O bound of the cell reads on.
            self.addCleanup(compat.restore, ['guard'])

    def _worker(self, placement=None, **kwargs):
        placement = placement or self.placement_api
        return periodic_sync.PeriodicSync(
            periodic_sync.CONF, placement=lambda: placement, **kwargs)

    def _assert_converged(self):
        self.assertEqual({'big1', 'big2', 'big3'}, self._members('cell1'))
        self.assertEqual({'small1', 'small2'}, self._members('cell2'))
        self.assertEqual({'c3a'}, self._members('cell3'))

    def _disable(self, host):
        service = self.admin_api.get_services(
            host=host, binary='nova-compute')[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})

    # -- a new compute node, by the periodic sync alone --------------------

    def test_new_compute_node_becomes_a_candidate_within_an_interval(self):
        """Start a compute in cell2 with the sync running every second:
        after one run its node is in cell2's aggregate and a server of
        the project dedicated to cell2 lands on it. Measures how long it
        took (reported, not asserted).
        """
        self._sync()
        self._prefilter(True)
        # Only the new node can take the project's servers.
        self._disable('small1')
        self._disable('small2')
        # The scheduler's periodic sync is off: turn it on by SIGHUP.
        worker = periodic_sync.get()
        self.assertFalse(worker.running)
        self.flags(aggregate_sync_interval=1, group='cellsched')
        scheduler_state.sighup(periodic_sync.CONF)
        self.assertTrue(worker.running)

        created = time.monotonic()
        self._start_compute('small3', cell_name='cell2')
        small3 = self._get_provider_uuid_by_host('small3')
        runs = worker.runs
        with worker.ran:
            self.assertTrue(worker.ran.wait_for(
                lambda: worker.runs > runs and worker.last is not None and
                small3 in self.placement_api.members(
                    self.cell_uuids['cell2']), timeout=120))
        in_aggregate = time.monotonic() - created
        server = self._boot(MAPPED)
        self.assertEqual('small3', server['OS-EXT-SRV-ATTR:host'])
        self.assertTrue(self._required_aggregates_logged('cell2'))
        self.addDetail('seconds_until_in_aggregate', _text(
            '%.2f (interval 1 s)' % in_aggregate))

    def test_node_not_synced_gets_no_server_of_its_cells_project(self):
        """The same new node without the periodic sync: NoValidHost."""
        self._sync()
        self._prefilter(True)
        self._disable('small1')
        self._disable('small2')
        self._start_compute('small3', cell_name='cell2')
        self.assertFalse(periodic_sync.get().running)
        self.assertNoValidHost(self._boot(MAPPED, expected_state='ERROR'))

    # -- faults --------------------------------------------------------------

    def test_placement_5xx_for_one_run_then_converges(self):
        """A 503 on every member list: error logged, nothing written; the
        next run (placement back) converges.
        """
        self._out_of_sync()
        failing = [True]
        watched, placement = self._watched(
            fail=lambda method, path: 503 if failing[0] else None)
        worker = self._worker(placement)

        first = worker.run_once()

        self.assertFalse(first.ok)
        self.assertIn('503', first.error)
        self.assertEqual([], watched.writes())
        self.assertIn('Periodic sync of the cell aggregates failed: ',
                      self.stdlog.logger.output)
        self.assertEqual({'c3a', 'c3b'}, self._members('cell3'))
        failing[0] = False
        second = worker.run_once()
        self.assertTrue(second.ok, second)
        self._assert_converged()

    def test_placement_5xx_while_writing_removes_nothing(self):
        """Writes answered 500: the removal is not started; next run
        converges.
        """
        self._out_of_sync()
        failing = [True]
        watched, placement = self._watched(
            fail=lambda method, path: 500 if failing[0] and
            method == 'put' else None)
        worker = self._worker(placement)

        first = worker.run_once()

        self.assertIn('placement failed during the sync', first.error)
        self.assertEqual({'c3a', 'c3b'}, self._members('cell3'))
        self.assertEqual(1, len(watched.writes()))
        failing[0] = False
        self.assertTrue(worker.run_once().ok)
        self._assert_converged()

    def test_placement_unreachable_then_back(self):
        """Placement down (connection refused): logged, next run syncs."""
        self._out_of_sync()
        from keystoneauth1 import exceptions as ks_exc
        down = [True]
        real = self.placement_api.client

        class Down:
            def __getattr__(self, name):
                if down[0]:
                    def refuse(*args, **kwargs):
                        raise ks_exc.ConnectFailure('connection refused')
                    return refuse
                return getattr(real, name)

        worker = self._worker(aggregate_sync.Placement(Down()))
        first = worker.run_once()
        self.assertIn('cannot reach the placement API', first.error)
        self.assertEqual({'c3a', 'c3b'}, self._members('cell3'))
        down[0] = False
        self.assertTrue(worker.run_once().ok)
        self._assert_converged()

    def test_unreadable_cell_left_alone_others_synced(self):
        """cell3's database fails: its aggregate stays, cell2 is fixed."""
        self._out_of_sync()
        ctxt = nova_context.get_admin_context()

        def rename(old, new):
            with nova_context.target_cell(
                    ctxt, self.cell_mappings['cell3']) as cctxt:
                engine = main_db_api.get_engine(context=cctxt)
                with engine.begin() as connection:
                    connection.exec_driver_sql(
                        'ALTER TABLE %s RENAME TO %s' % (old, new))

        rename('compute_nodes', 'compute_nodes_x')
        worker = self._worker()
        result = worker.run_once()
        rename('compute_nodes_x', 'compute_nodes')

        self.assertIsNone(result.error)
        self.assertEqual(1, len(result.failures))
        self.assertIn('cannot read the cell database',
                      result.failures[0].result)
        self.assertIn('Periodic sync of the cell aggregates: cell cell3 ',
                      self.stdlog.logger.output)
        self.assertEqual({'c3a', 'c3b'}, self._members('cell3'))
        self.assertEqual({'small1', 'small2'}, self._members('cell2'))
        self.assertTrue(worker.run_once().ok)
        self._assert_converged()

    def test_emptied_cell_database_never_empties_its_aggregate(self):
        """cell2's database suddenly lists no compute node (a restored or
        wrong database): every run holds cell2, logging an ERROR naming
        it and the counts, and leaves its aggregate whole, while cell3's
        deleted node still leaves (1 of 2 members, within the default
        share). Once the right database is back, the project dedicated
        to cell2 gets a host with the pre-filter at once.
        """
        self._out_of_sync()
        self._put('small1', lambda p: p | {self.cell_uuids['cell2']})
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(ctxt,
                                      self.cell_mappings['cell2']) as cctxt:
            engine = main_db_api.get_engine(context=cctxt)
            table = sa.Table('compute_nodes', sa.MetaData(),
                             autoload_with=engine)
            with engine.begin() as connection:
                connection.execute(table.update().values(deleted=table.c.id))
        worker = self._worker()
        for _ in range(2):
            result = worker.run_once()
            self.assertIsNone(result.error)
            self.assertEqual(
                [('hold cell', 'failed: held')],
                [(r.action, r.result[:len('failed: held')])
                 for r in result.failures])
        cell2 = self.cell_uuids['cell2']
        self.assertIn(
            'ERROR [nova_cellsched.scheduler.periodic_sync] Periodic sync of '
            'the cell aggregates: cell cell2 (%s): failed: held: the sync '
            'would remove 2 of the 2 members of the placement aggregate of '
            'cell cell2 (%s)' % (cell2, cell2), self.stdlog.logger.output)
        self.assertEqual({'small1', 'small2'}, self._members('cell2'))
        self.assertEqual({'c3a'}, self._members('cell3'))
        # The right database back: the project of cell2 gets a host at
        # once, no sync needed.
        with engine.begin() as connection:
            connection.execute(table.update().values(deleted=0))
        self._prefilter(True)
        self.assertIn(self._boot(MAPPED)['OS-EXT-SRV-ATTR:host'],
                      {'small1', 'small2'})

    def test_swapped_cell_mappings_hold_both_cells(self):
        """cell1 and cell2 mapped to each other's databases (a restored
        API database, a typo in two ``nova-manage cell_v2 update_cell``):
        the periodic sync and plan() hold both, logging each cell's
        ERROR naming the other, and change no aggregate; a server of the
        project dedicated to cell2 still lands in cell2 once the mappings
        are right again.
        """
        self._sync()
        ctxt = nova_context.get_admin_context()
        mappings = {name: objects.CellMapping.get_by_uuid(
            ctxt, self.cell_uuids[name]) for name in ('cell1', 'cell2')}
        urls = {name: cm.database_connection
                for name, cm in mappings.items()}

        def point(first, second):
            for name, url in (('cell1', first), ('cell2', second)):
                mappings[name].database_connection = url
                mappings[name].save()

        # A freshly started scheduler: no cell engine cached yet.
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELL_CACHE', {}))
        point(urls['cell2'], urls['cell1'])
        self.addCleanup(point, urls['cell1'], urls['cell2'])
        cells = cells_mod.load_cell_mappings()
        state = aggregate_sync.read_cells(self.placement_api, cells)
        self.assertEqual({self._node_uuid(h) for h in ('small1', 'small2')},
                         set(state.nodes[self.cell_uuids['cell1']]))

        planned = aggregates.plan(state.nodes, state.members)

        self.assertEqual({self.cell_uuids['cell1'], self.cell_uuids['cell2']},
                         set(planned.held))
        self.assertEqual([], planned.changes)
        worker = self._worker()
        result = worker.run_once()
        self.assertIsNone(result.error)
        self.assertEqual([('hold cell', 'failed: held')] * 2,
                         [(r.action, r.result[:len('failed: held')])
                          for r in result.failures])
        for name, count, other in (('cell1', 3, 'cell2'),
                                   ('cell2', 2, 'cell1')):
            self.assertIn(
                'ERROR [nova_cellsched.scheduler.periodic_sync] Periodic '
                'sync of the cell aggregates: cell %s (%s): failed: held: '
                'the sync would remove %d of the %d members of the '
                'placement aggregate of cell %s (%s) (every one: %d of them '
                'to cell %s (%s), whose database lists them' % (
                    name, self.cell_uuids[name], count, count, name,
                    self.cell_uuids[name], count, other,
                    self.cell_uuids[other]), self.stdlog.logger.output)
        self.assertEqual({'big1', 'big2', 'big3'}, self._members('cell1'))
        self.assertEqual({'small1', 'small2'}, self._members('cell2'))
        point(urls['cell1'], urls['cell2'])
        nova_context.CELL_CACHE.clear()
        self.assertTrue(worker.run_once().ok)
        self._prefilter(True)
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))

    def test_api_database_unreadable_is_logged(self):
        def broken():
            raise OSError('API database gone')

        worker = self._worker(cell_mappings=broken)
        result = worker.run_once()
        self.assertIn('cannot read the cell mappings from the API database '
                      '(OSError: API database gone)', result.error)
        self.assertIn('API database gone', self.stdlog.logger.output)

    # -- several syncs at once ---------------------------------------------

    def test_two_concurrent_syncs_converge(self):
        """Two schedulers' syncs overlap on the same changes, with another
        writer adding a foreign aggregate in between: both end without a
        failure, every cell is exact, the foreign aggregate stays.
        """
        self._out_of_sync()
        self._put('big1', lambda p: p | {self.cell_uuids['cell2']})
        # Another writer gets in once before each provider's first write.
        real_set = aggregate_sync.Placement.set_aggregates
        raced = set()
        race_lock = threading.Lock()

        def racing_set(placement, provider, aggs, generation):
            with race_lock:
                first = provider not in raced
                raced.add(provider)
            while first:
                # The other writer retries its conflicts too.
                present, gen = placement.aggregates_of(provider)
                first = not real_set(placement, provider,
                                     present | {FOREIGN}, gen)
            return real_set(placement, provider, aggs, generation)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.aggregate_sync.Placement.'
            'set_aggregates', racing_set))
        workers = []
        for _ in range(2):
            _watched, placement = self._watched(hold=0.02)
            workers.append(self._worker(placement))
        results = [None, None]

        def run(index):
            results[index] = workers[index].run_once()

        threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)

        for result in results:
            self.assertIsNotNone(result)
            self.assertTrue(result.ok, result)
        self._assert_converged()
        for host in ('small1', 'c3b', 'big1'):
            aggs, _gen = self.placement_api.aggregates_of(
                self._node_uuid(host))
            self.assertIn(FOREIGN, aggs)
        self.assertTrue(self._worker().run_once().ok)
        self.assertEqual([], self._worker().run_once().rows)

    def test_read_nodes_lists_what_nova_lists(self):
        """The uuids and creation times ComputeNodeList.get_all gives for
        the nodes nova's compute services made, cell by cell; a
        destroyed node is in neither.
        """
        gone = self._node_uuid('c3b')
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(ctxt,
                                      self.cell_mappings['cell3']) as cctxt:
            objects.ComputeNode.get_by_uuid(cctxt, gone).destroy()
        listed = set()
        for name in ('cell1', 'cell2', 'cell3'):
            cell_mapping = self.cell_mappings[name]
            with nova_context.target_cell(ctxt, cell_mapping) as cctxt:
                expected = {str(node.uuid): node.created_at for node in
                            objects.ComputeNodeList.get_all(cctxt)}

            nodes = aggregate_sync.read_nodes(cell_mapping)

            self.assertEqual(set(expected), set(nodes), name)
            self.assertEqual(expected, dict(nodes.created_at), name)
            listed |= nodes
        self.assertNotIn(gone, listed)
        self.assertEqual({self._node_uuid(host) for host in self.HOSTS} -
                         {gone}, listed)

    def test_sync_never_removes_a_node_another_sync_added_meanwhile(self):
        """Sync A reads cell2's nodes; small3 is created and sync B adds
        it; A must not take it out (it reads the aggregate before the
        nodes, so it never saw small3 in the aggregate).
        """
        self._sync()
        cells = cells_mod.load_cell_mappings()
        added = []

        def nodes_then_new_node(cell_mapping):
            nodes = aggregate_sync.read_nodes(cell_mapping)
            if cell_mapping.name == 'cell2' and not added:
                self._start_compute('small3', cell_name='cell2')
                added.append(self._get_provider_uuid_by_host('small3'))
                rows = aggregate_sync.sync(self.placement_api, cells)
                self.assertEqual([(added[0], 'add', 'done')],
                                 [(r.provider, r.action, r.result)
                                  for r in rows])
            return nodes

        rows = aggregate_sync.sync(self.placement_api, cells,
                                   nodes_of=nodes_then_new_node)

        self.assertEqual([], [r for r in rows if r.action == 'remove'])
        self.assertIn(added[0], self.placement_api.members(
            self.cell_uuids['cell2']))

    # -- another writer, all the time --------------------------------------

    def test_conflict_storm_is_bounded_and_reported(self):
        """Every write loses to another writer: each provider is tried
        ATTEMPTS times with a pause between tries, the sync stops after
        CONFLICT_GIVE_UPS providers gave up, and the run logs it.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.aggregate_sync.CONFLICT_GIVE_UPS', 3))
        real_set = aggregate_sync.Placement.set_aggregates

        def always_beaten(placement, provider, aggs, generation):
            present, gen = placement.aggregates_of(provider)
            real_set(placement, provider, present, gen)
            return real_set(placement, provider, aggs, generation)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.aggregate_sync.Placement.'
            'set_aggregates', always_beaten))
        self.flags(aggregate_sync_workers=1, group='cellsched')
        watched, placement = self._watched()
        pauses = []
        placement.sleep = pauses.append
        worker = self._worker(placement)

        result = worker.run_once()

        by_result = sorted(row.result for row in result.rows)
        gave_up = [r for r in result.rows
                   if r.result.startswith(aggregate_sync.CONFLICTED)]
        not_started = [r for r in result.rows if r.result ==
                       aggregate_sync.NOT_STARTED_CONFLICTS]
        self.assertEqual(3, len(gave_up), by_result)
        self.assertEqual(7 - 3, len(not_started), by_result)
        # ATTEMPTS writes per provider tried (each after one of the other
        # writer's, through the same client), none for the others.
        per_provider = {}
        for method, path in watched.calls:
            if path.endswith('/aggregates') and method == 'put':
                per_provider[path] = per_provider.get(path, 0) + 1
        self.assertEqual([2 * aggregate_sync.ATTEMPTS] * 3,
                         sorted(per_provider.values()))
        # A pause before every retry, growing, bounded.
        self.assertEqual(3 * (aggregate_sync.ATTEMPTS - 1), len(pauses))
        self.assertTrue(all(0 < p <= aggregate_sync.CONFLICT_PAUSE_MAX
                            for p in pauses), pauses)
        self.assertIn('not made because of generation conflicts',
                      self.stdlog.logger.output)
        # The storm over, the next run converges.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.aggregate_sync.Placement.'
            'set_aggregates', real_set))
        self.assertTrue(worker.run_once().ok)
        self.assertEqual({'small1', 'small2'}, self._members('cell2'))

    # -- cost ----------------------------------------------------------------

    def _bulk_nodes(self, cell_name, count):
        """*count* compute_nodes rows in *cell_name*, with providers."""
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(
                ctxt, self.cell_mappings[cell_name]) as cctxt:
            engine = main_db_api.get_engine(context=cctxt)
        table = sa.Table('compute_nodes', sa.MetaData(), autoload_with=engine)
        rows = []
        for _ in range(count):
            node = str(uuid_lib.uuid4())
            rows.append(db.compute_node_row(table, node,
                                            'bulk-' + node[:8]))
            resp = self.placement_api.client.post(
                '/resource_providers', {'uuid': node, 'name': node},
                version='1.20', global_request_id=None)
            self.assertEqual(200, resp.status_code, resp.text)
        with engine.begin() as conn:
            conn.execute(table.insert(), rows)

    def test_no_change_run_cost_at_300_providers(self):
        """300 providers in three cells, in sync: a run reads each cell's
        aggregate once and writes nothing. Reports the time of the first
        (adding) run and of no-change runs (median of 5), not asserted.
        """
        for cell_name in ('cell1', 'cell2', 'cell3'):
            self._bulk_nodes(cell_name, 98)   # + the 7 started hosts: 301
        # Writes one at a time: placement's in-memory SQLite database of
        # the fixture answers concurrent writers "database is locked".
        self.flags(aggregate_sync_workers=1, group='cellsched')
        worker = self._worker()
        started = time.monotonic()
        first = worker.run_once()
        first_s = time.monotonic() - started
        self.assertTrue(first.ok, first)
        self.assertEqual(301, len(first.rows))

        self.flags(aggregate_sync_workers=8, group='cellsched')
        watched, placement = self._watched()
        worker = self._worker(placement)
        times = []
        for _ in range(5):
            started = time.monotonic()
            result = worker.run_once()
            times.append(time.monotonic() - started)
            self.assertEqual([], result.rows)
            self.assertTrue(result.ok)
        self.assertEqual([], watched.writes())
        self.assertEqual(5 * 3, len(watched.calls))
        times.sort()
        report = ('301 providers, 3 cells: first run (301 adds) %.2f s; '
                  'no-change run median %.1f ms (min %.1f, max %.1f)'
                  % (first_s, times[2] * 1000, times[0] * 1000,
                     times[-1] * 1000))
        self.addDetail('cost', _text(report))

    # -- how long a node has been missing ----------------------------------

    def test_check_and_periodic_say_how_long_a_node_is_missing(self):
        """check: at most since its creation (cell database); the periodic
        sync: at least since it first found it missing (its memory).
        """
        self._sync()
        self._put('small1', lambda p: p - {self.cell_uuids['cell2']})
        found = aggregate_sync.problems(self.placement_api,
                                        cells_mod.load_cell_mappings())
        self.assertEqual(1, len(found), found)
        self.assertIn('compute node %s of cell cell2' %
                      self._node_uuid('small1'), found[0])
        self.assertRegex(found[0], r'\(missing for at most \d+ s: the cell '
                         r'database says the node was created at '
                         r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)')

        # A node whose provider is gone cannot be added: the periodic
        # sync remembers since when it found it missing.
        small1 = self._node_uuid('small1')
        resp = self.placement_api.client.delete(
            '/resource_providers/%s' % small1, version='1.19',
            global_request_id=None)
        self.assertEqual(204, resp.status_code, resp.text)
        now = [1000.0]
        worker = self._worker(wall=lambda: now[0])
        self.assertFalse(worker.run_once().ok)
        now[0] += 600
        self.assertFalse(worker.run_once().ok)
        self.assertIn('missing for at least 10 min: this scheduler\'s '
                      'periodic sync first found it missing at 1970-01-01 '
                      '00:16:40 UTC', self.stdlog.logger.output)


class FrozenCellPeriodicSyncTest(db.FunctionalTestCase):
    """The periodic sync with a cell database that stops answering.

    MariaDB cell databases (a CellWorld, compute nodes seeded as rows)
    and nova's placement fixture; ``[cellsched] list_cell_timeout`` is
    2 s. cell1 is frozen by a session holding ``LOCK TABLES`` on all its
    tables, as ``Cloud.frozen_cell`` does.
    """

    CELL_TIMEOUT = 2.0

    def setUp(self):
        super().setUp()
        self.world = self.useFixture(worlds.CellWorld(db.MYSQL_URL, [
            ('cell0', worlds.Population(instances=1, error_only=True)),
            ('cell1', worlds.Population(instances=2, hosts=3)),
            ('cell2', worlds.Population(instances=2, hosts=3))]))
        # nova's placement, reached through nova's report client as
        # nova's own functional tests reach it.
        self.useFixture(nova_fixtures.OpenStackSDKFixture())
        self.placement = self.useFixture(func_fixtures.PlacementFixture())
        self.cfg.config(list_cell_timeout=self.CELL_TIMEOUT,
                        group='cellsched')
        if not compat.is_on('guard'):
            self.addCleanup(compat.restore, ['guard'])
        self.logged = self.useFixture(fixtures.FakeLogger())
        self.api = aggregate_sync.Placement(report.SchedulerReportClient())
        for name in ('cell1', 'cell2'):
            for node in self._nodes(name):
                self._provider(node)

    def _engine(self, name):
        engine = sa.create_engine(self.world.url_of(name),
                                  poolclass=sa_pool.NullPool)
        self.addCleanup(engine.dispose)
        return engine, sa.Table('compute_nodes', sa.MetaData(),
                                autoload_with=engine)

    def _nodes(self, name):
        engine, table = self._engine(name)
        with engine.connect() as conn:
            return {str(row[0]) for row in conn.execute(
                sa.select(table.c.uuid).where(table.c.deleted == 0))}

    def _provider(self, node):
        resp = self.placement.api.post(
            '/resource_providers', {'uuid': node, 'name': node},
            version='1.20')
        self.assertEqual(200, resp.status, resp.body)

    def _add_node(self, name):
        """A new compute node of *name*: its row, then its provider."""
        engine, table = self._engine(name)
        node = str(uuid_lib.uuid4())
        with engine.begin() as conn:
            conn.execute(table.insert().values(
                **db.compute_node_row(table, node, 'new-' + node[:8])))
        self._provider(node)
        return node

    def _frozen(self, name):
        """Lock every table of *name*'s database until the cleanup (or
        the returned thaw) runs (:func:`cellsched_tools.cloud.frozen`).
        """
        stack = contextlib.ExitStack()
        stack.enter_context(cloud.frozen(self.world.url_of(name)))
        self.addCleanup(stack.close)
        return stack.close

    def _members(self, name):
        return set(self.api.members(self.world.uuid_of(name)))

    def test_new_node_joins_its_aggregate_while_another_cell_is_frozen(self):
        """cell1 frozen: the run ends within its bound, cell2's new node
        joins cell2's aggregate, cell1's aggregate keeps every member, a
        WARNING names cell1 (name and uuid, no URL), and no thread stays
        on the frozen database; thawed, the next run is clean.
        """
        worker = periodic_sync.PeriodicSync(
            periodic_sync.CONF, placement=lambda: self.api)
        self.assertTrue(worker.run_once().ok)
        cell1 = self.world.uuid_of('cell1')
        members1 = self._members('cell1')
        self.assertEqual(self._nodes('cell1'), members1)
        new = self._add_node('cell2')
        thaw = self._frozen('cell1')

        started = time.monotonic()
        result = worker.run_once()
        took = time.monotonic() - started

        self.assertIsNone(result.error)
        self.assertEqual([('cell1 (%s)' % cell1, 'skip cell')],
                         [(r.cell, r.action) for r in result.failures])
        self.assertEqual([(new, 'add', aggregate_sync.DONE)],
                         [(r.provider, r.action, r.result)
                          for r in result.rows if r.provider])
        self.assertIn(new, self._members('cell2'))
        self.assertEqual(members1, self._members('cell1'))
        self.assertIn('Cannot read the compute nodes of cell cell1 (%s), '
                      'its aggregate is left as it is: ' % cell1,
                      self.logged.output)
        self.assertNotIn(self.world.url_of('cell1').rsplit('/', 1)[1],
                         self.logged.output)
        # The bound the issue asks for, with a generous margin.
        self.assertLess(took, self.CELL_TIMEOUT + 20.0)
        self.addDetail('run_seconds_with_a_frozen_cell', _text(
            '%.2f (list_cell_timeout %.0f s)' % (took, self.CELL_TIMEOUT)))
        # The read of the frozen cell ends with its I/O bound, frozen
        # or not.
        deadline = time.monotonic() + 20.0
        while (any(t.name == 'cellsched-sync-cell'
                   for t in threading.enumerate()) and
               time.monotonic() < deadline):
            time.sleep(0.1)
        self.assertEqual([], [t.name for t in threading.enumerate()
                              if t.name == 'cellsched-sync-cell'])
        thaw()
        again = worker.run_once()
        self.assertTrue(again.ok, again)
        self.assertEqual([], again.rows)


def _text(value):
    from testtools import content
    return content.text_content(value)
