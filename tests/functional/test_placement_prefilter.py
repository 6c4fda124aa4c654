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

"""The placement pre-filter and ``sync-aggregates`` on real nova 34.

Same machinery as :mod:`tests.functional.test_project_cell_filter` (API,
conductor, scheduler, fake computes, nova's in-process placement), with a
big cell and two small ones, started in this order::

    cell1  big1 big2 big3   cells_default
    cell2  small1 small2    dedicated:      cells_projects = cell2:MAPPED
    cell3  c3a c3b          named nowhere:  disabled for new servers

Placement's order of candidates is unspecified (usually provider creation
order, but not in every run: one CI rehearsal offered small1 first). The
tests pin it to host-name order, so with ``[scheduler]
max_placement_results = 1`` placement offers big1 first, the case issue 12
reproduced: without the pre-filter a project of a small cell starves,
with it placement only offers the project's cells.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching.
from nova.tests.functional import integrated_helpers  # noqa: F401,I001

import os
import threading
import time
import urllib.parse

import fixtures
from nova import context as nova_context
from nova.db.main import api as main_db_api
from nova import objects
from nova.policies import base as base_policies
from nova.policies import servers as servers_policies
from nova.scheduler.client import report
from nova.scheduler import host_manager
from oslo_config import cfg
import requests
import testscenarios

from nova_cellsched import cells as cells_mod
from nova_cellsched import conf as conf_mod
from nova_cellsched.scheduler import aggregate_sync
from tests.fixtures import scheduler_state
from tests.functional import test_project_cell_filter as base

MAPPED = base.MAPPED
UNMAPPED = base.UNMAPPED
OTHER = 'c0ffee00c0ffee00c0ffee00c0ffee00'
FOREIGN = 'f0f0f0f0-0000-4000-8000-000000000001'


class PrefilterTestBase(base.MultiCellTestBase):
    """Seven hosts in three cells; aggregates synced before each test."""

    HOSTS = {'big1': 'cell1', 'big2': 'cell1', 'big3': 'cell1',
             'small1': 'cell2', 'small2': 'cell2',
             'c3a': 'cell3', 'c3b': 'cell3'}

    def setUp(self):
        super().setUp()
        self.placement_api = aggregate_sync.Placement(
            report.SchedulerReportClient())
        self.cell_uuids = {name: cm.uuid
                           for name, cm in self.cell_mappings.items()}
        self.node_uuids = {host: self._get_provider_uuid_by_host(host)
                           for host in self.HOSTS}
        self._pin_candidate_order()

    def _pin_candidate_order(self):
        """Placement offers candidates in host-name order (big1 first)."""
        from placement.objects import research_context

        original = research_context.RequestWideSearchContext.limit_results
        names = {uuid: host for host, uuid in self.node_uuids.items()}

        def host_of(request):
            rp = request.resource_requests[0].resource_provider
            return names.get(rp.root_provider_uuid, rp.root_provider_uuid)

        def limit_results(context, alloc_request_objs, summary_objs):
            return original(context, sorted(alloc_request_objs, key=host_of),
                            summary_objs)

        self.useFixture(fixtures.MonkeyPatch(
            'placement.objects.research_context.RequestWideSearchContext.'
            'limit_results', limit_results))

    def _prefilter(self, enabled):
        self.flags(placement_prefilter=enabled, group='cellsched')

    def _limit(self, count):
        self.flags(max_placement_results=count, group='scheduler')

    def _sync(self, **kwargs):
        return aggregate_sync.sync(self.placement_api,
                                   cells_mod.load_cell_mappings(), **kwargs)

    def _members(self, cell_name):
        uuids = self.placement_api.members(self.cell_uuids[cell_name])
        return {self._host_of_node(u) for u in uuids}

    def _node_uuid(self, host):
        return self.node_uuids[host]

    def _host_of_node(self, uuid):
        return next(h for h, u in self.node_uuids.items() if u == uuid)

    # -- drift: nodes out of their cell aggregate ---------------------------

    def _put(self, host, aggs):
        """Set *host*'s node aggregates to ``aggs(present aggregates)``."""
        uuid = self._node_uuid(host)
        present, generation = self.placement_api.aggregates_of(uuid)
        self.assertTrue(self.placement_api.set_aggregates(
            uuid, aggs(present), generation))

    def _watched(self, **kwargs):
        """A :class:`WatchedClient` on placement, and a Placement on it.

        The client counts requests and may delay or fail them.
        """
        watched = WatchedClient(self.placement_api.client, **kwargs)
        return watched, aggregate_sync.Placement(watched)

    def _out_of_sync(self):
        """Synced, then small1 missing from cell2's aggregate (an add) and
        c3b deleted but in cell3's (a removal).
        """
        self._sync()
        self._put('small1', lambda p: p - {self.cell_uuids['cell2']})
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(ctxt,
                                      self.cell_mappings['cell3']) as cctxt:
            objects.ComputeNode.get_by_uuid(
                cctxt, self._node_uuid('c3b')).destroy()

    def _required_aggregates_logged(self, *cell_names):
        """True when placement was asked for exactly these cells' hosts."""
        wanted = 'member_of=' + urllib.parse.quote('in:' + ','.join(
            sorted(self.cell_uuids[n] for n in cell_names)), safe='')
        return wanted + '&' in self.stdlog.logger.output


class PlacementPrefilterTest(testscenarios.WithScenarios, PrefilterTestBase):
    """The pre-filter: starvation gone, ProjectCellFilter's rules kept.

    Once per form of the default cells (``[cellsched]
    placement_prefilter_form``): required (member_of) and forbidden
    aggregates.
    """

    scenarios = [('member_of', dict(form='member_of')),
                 ('forbidden', dict(form='forbidden'))]

    def setUp(self):
        super().setUp()
        self.flags(placement_prefilter_form=self.form, group='cellsched')
        self._sync()

    def _default_cells_logged(self, allowed, others):
        """True when placement was asked for the default cells *allowed*
        in this test's form (forbidding *others* in the forbidden form).
        """
        if self.form == 'member_of':
            return self._required_aggregates_logged(*allowed)
        wanted = 'member_of=' + urllib.parse.quote('!in:' + ','.join(
            sorted(self.cell_uuids[n] for n in others)), safe='')
        return wanted in self.stdlog.logger.output

    def test_prefilter_is_registered_once(self):
        """The scheduler building the filter put the pre-filter in nova's list.
        """
        from nova.scheduler import request_filter as nova_request_filter

        names = [f.__name__ for f in nova_request_filter.ALL_REQUEST_FILTERS]
        self.assertEqual(1, names.count('require_cell_aggregates'))

    def test_dedicated_small_cell_starves_without_prefilter_not_with(self):
        """The issue's reproduction, then the fix, in one running cloud.

        Placement offers one candidate (big1, cell1): the project of
        cell2 gets NoValidHost twice although cell2 is empty. With the
        option on (no restart) its next boots land in cell2.
        """
        self._limit(1)
        self._prefilter(False)
        for _ in range(2):
            self.assertNoValidHost(self._boot(MAPPED, expected_state='ERROR'))

        self._prefilter(True)
        servers = self._boot_many(MAPPED, 2)
        self.assertEqual({'cell2'}, self._cells_of(servers))
        self.assertTrue(self._required_aggregates_logged('cell2'))

    def test_unmapped_project_small_default_cell_starves_without_prefilter(
            self):
        """Unmapped projects in a small default cell next to a big one.

        cell1 (three hosts, created first) is dedicated to another
        project, cell2 is the default: without the pre-filter unmapped
        projects get NoValidHost, with it they land in cell2.
        """
        self._set_cells(default=['cell2'], projects='cell1:' + OTHER)
        self._limit(1)
        self._prefilter(False)
        self.assertNoValidHost(self._boot(UNMAPPED, expected_state='ERROR'))

        self._prefilter(True)
        servers = self._boot_many(UNMAPPED, 2)
        self.assertEqual({'cell2'}, self._cells_of(servers))
        self.assertTrue(self._default_cells_logged(['cell2'],
                                                   ['cell1', 'cell3']))
        self.assertEqual({'cell1'}, self._cells_of([self._boot(OTHER)]))

    def test_many_boots_land_in_allowed_cells(self):
        """Ten boots in a row, placement asked for one candidate each."""
        self._limit(1)
        self._prefilter(True)
        mapped, unmapped = [], []
        for _ in range(5):
            mapped.append(self._boot(MAPPED))
            unmapped.append(self._boot(UNMAPPED))
        self.assertEqual({'cell2'}, self._cells_of(mapped))
        self.assertEqual({'cell1'}, self._cells_of(unmapped))
        self.assertTrue(self._default_cells_logged(['cell1'],
                                                   ['cell2', 'cell3']))

    def test_one_allowed_cell_host_states_read_from_that_cell_only(self):
        """Placement asked for one cell: nova reads that cell's hosts.

        nova's HostManager reads the services of every cell unless the
        request names a cell; the pre-filter names the one cell placement
        may return hosts of. The default cells asked in the forbidden
        form (and everything without the pre-filter) read every cell.
        """
        read = []
        real = host_manager.HostManager._get_computes_for_cells

        def spy(manager, context, cells, compute_uuids):
            read.append(sorted(cm.name for cm in cells))
            return real(manager, context, cells, compute_uuids)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.host_manager.HostManager._get_computes_for_cells',
            spy))
        self._prefilter(False)
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))
        self.assertGreater(len(read.pop()), 1)
        self._prefilter(True)
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))
        self.assertEqual([['cell2']], read)
        del read[:]
        self.assertEqual('cell1', self._cell_of(self._boot(UNMAPPED)))
        if self.form == 'member_of':
            self.assertEqual([['cell1']], read)
        else:
            self.assertEqual(1, len(read))
            self.assertGreater(len(read[0]), 1)

    def test_project_without_cells_fails_before_placement(self):
        """An empty allowed set is NoValidHost and a line naming both."""
        self._prefilter(True)
        self._set_cells(default=['cell1'],
                        projects='nosuchcell:%s' % base.LOST)
        self.assertNoValidHost(self._boot(base.LOST,
                                          expected_state='ERROR'))
        self.assertIn('Project %s may use no cell' % base.LOST,
                      self.stdlog.logger.output)
        self.assertIn("cells_projects='nosuchcell:%s'" % base.LOST,
                      self.stdlog.logger.output)

    def test_same_cell_moves_in_disabled_cell(self):
        """A cell disabled after the build keeps its servers' moves.

        For a move pinned to cell3 (in neither option) the pre-filter
        forbids the other cells' aggregates: resize and cold migration
        stay in cell3.
        """
        self._prefilter(True)
        self._set_cells(default=['cell3'], projects='cell2:' + MAPPED)
        server = self._boot(UNMAPPED)
        self.assertEqual('cell3', self._cell_of(server))
        self._set_cells(default=['cell1'], projects='cell2:' + MAPPED)
        logged = len(self.stdlog.logger.output)

        source = server['OS-EXT-SRV-ATTR:host']
        server = self._resize_server(server, base.FLAVOR_SMALL)
        self.assertEqual('cell3', self._cell_of(server))
        self.assertNotEqual(source, server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)

        source = server['OS-EXT-SRV-ATTR:host']
        server = self._migrate_server(server)
        self.assertEqual('cell3', self._cell_of(server))
        self.assertNotEqual(source, server['OS-EXT-SRV-ATTR:host'])
        self._confirm_resize(server)
        forbidden = 'member_of=' + urllib.parse.quote('!in:' + ','.join(
            sorted(self.cell_uuids[n] for n in ('cell1', 'cell2'))),
            safe='')
        queries = [line for line in
                   self.stdlog.logger.output[logged:].splitlines()
                   if 'GET /placement/allocation_candidates?' in line]
        self.assertEqual(2, len(queries), queries)
        for query in queries:
            self.assertIn(forbidden, query)
        self.assertEqual('cell1', self._cell_of(self._boot(UNMAPPED)))

    def test_cross_cell_resize_goes_to_the_project_cells(self):
        """A cross-cell resize is placed like a new server of the project.

        The server is built in cell3 while cell3 is the project's cell;
        the project then moves to cell2, and an admin's cross-cell
        resize lands in cell2, asked of placement as cell2's aggregate.
        """
        self.policy.set_rules({servers_policies.CROSS_CELL_RESIZE:
                               base_policies.RULE_ADMIN_API},
                              overwrite=False)
        self._prefilter(True)
        self._set_cells(default=['cell1'], projects='cell3:' + MAPPED)
        server = self._boot(MAPPED)
        self.assertEqual('cell3', self._cell_of(server))
        self._set_cells(default=['cell1'], projects='cell2:' + MAPPED)

        self.admin_api.post_server_action(
            server['id'], {'resize': {'flavorRef': base.FLAVOR_SMALL}})
        server = self._wait_for_state_change(server, 'VERIFY_RESIZE')
        self.assertEqual('cell2', self._cell_of(server))
        self.assertTrue(self._required_aggregates_logged('cell2'))

    def test_sighup_applies_mapping_and_option_to_prefilter(self):
        """A SIGHUP'd nova.conf changes the pre-filter's next request."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')

        def write(projects, prefilter):
            with open(path, 'w') as handle:
                handle.write('[cellsched]\ncells_default = cell1\n'
                             'cells_projects = %s\nplacement_prefilter = '
                             '%s\n' % (projects, prefilter))

        write('cell2:' + MAPPED, 'true')
        # The overrides of self.flags() live in the option group object,
        # which register_opts shares between ConfigOpts: drop them so the
        # file's values are the ones in force.
        for name in ('cells_default', 'cells_projects',
                     'placement_prefilter'):
            base.CONF.clear_override(name, group='cellsched')
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf(['--config-file', path], default_config_files=[])
        self.addCleanup(conf.reset)
        # The scheduler reads this ConfigOpts instead of nova's CONF: its
        # next request builds the shared policy from it and registers the
        # mutate hook on it, as ProjectCellFilter() does at start.
        for module in ('state', 'request_filter'):
            self.useFixture(fixtures.MonkeyPatch(
                'nova_cellsched.scheduler.%s.CONF' % module, conf))
        self.useFixture(scheduler_state.FreshPolicy())
        self._limit(1)
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))

        write('cell3:' + MAPPED, 'true')
        conf.mutate_config_files()
        self.assertEqual('cell3', self._cell_of(self._boot(MAPPED)))

        # Off: placement is asked without member_of (which host it then
        # offers depends on placement's order, so the outcome is not
        # asserted).
        write('cell2:' + MAPPED, 'false')
        conf.mutate_config_files()
        logged = len(self.stdlog.logger.output)
        server = self._api_for(MAPPED).post_server({'server': (
            self._build_server(flavor_id=base.FLAVOR_TINY,
                               networks='none'))})
        self._wait_for_server_parameter(
            server, {'OS-EXT-STS:task_state': None})
        queries = [line for line in
                   self.stdlog.logger.output[logged:].splitlines()
                   if 'GET /placement/allocation_candidates?' in line]
        self.assertEqual(1, len(queries), queries)
        self.assertNotIn('member_of', queries[0])

    def test_combines_with_tenant_and_az_aggregates(self):
        """Cells, nova's tenant aggregates and AZs all hold at once.

        Tenant aggregate {big1, small1, small2}, AZ az1 {big1, small2,
        c3a}, project cells {small1, small2}: only small2 satisfies all
        three, and placement is asked for all three at once.
        """
        self.flags(limit_tenants_to_placement_aggregate=True,
                   group='scheduler')
        tenant = self._create_aggregate('tenant')
        self.admin_api.post_aggregate_action(tenant, {'set_metadata': {
            'metadata': {'filter_tenant_id': MAPPED}}})
        az = self._create_aggregate('az', availability_zone='az1')
        for agg, hosts in ((tenant, ('big1', 'small1', 'small2')),
                           (az, ('big1', 'small2', 'c3a'))):
            for host in hosts:
                self.admin_api.post_aggregate_action(
                    agg, {'add_host': {'host': host}})
        self._limit(1)

        def boot(expected_state='ACTIVE'):
            body = self._build_server(flavor_id=base.FLAVOR_TINY,
                                      networks='none', az='az1')
            server = self._api_for(MAPPED).post_server({'server': body})
            return self._wait_for_state_change(server, expected_state)

        self._prefilter(True)
        servers = [boot() for _ in range(3)]
        self.assertEqual(['small2'] * 3,
                         [s['OS-EXT-SRV-ATTR:host'] for s in servers])
        self.assertTrue(self._required_aggregates_logged('cell2'))
        for agg in (tenant, az):
            uuid = self.admin_api.api_get(
                'os-aggregates/%s' % agg).body['aggregate']['uuid']
            self.assertIn('member_of=in%%3A%s' % uuid,
                          self.stdlog.logger.output)
        # The sync left nova's aggregates alone, and theirs left ours.
        self.assertEqual({'small1', 'small2'}, self._members('cell2'))
        self.assertEqual([], self._sync())


class PrefilterNamedHostAndMoveTest(PrefilterTestBase):
    """Forced and requested hosts, and same-cell moves, with the pre-filter.

    The aggregates are synced, then a compute node is added that is in
    no cell aggregate yet (``sync-aggregates`` has not run since): the
    node must still be usable wherever nova itself already restricts the
    request, with ProjectCellFilter still deciding where nova runs it.
    The admin's project is mapped nowhere: its cell is cell1.
    """

    def setUp(self):
        super().setUp()
        self._sync()
        self._prefilter(True)

    def _start_unsynced(self, host, cell_name):
        self._start_compute(host, cell_name=cell_name)
        self.assertEqual(set(), self.placement_api.aggregates_of(
            self._get_provider_uuid_by_host(host))[0])

    def _admin_boot(self, expected_state='ACTIVE', **kwargs):
        body = self._build_server(flavor_id=base.FLAVOR_TINY,
                                  networks='none', **kwargs)
        server = self.admin_api.post_server({'server': body})
        return self._wait_for_state_change(server, expected_state)

    def _placement_queries(self, since):
        return [line for line in
                self.stdlog.logger.output[since:].splitlines()
                if 'GET /placement/allocation_candidates?' in line]

    def _service_id(self, host):
        return self.admin_api.get_services(
            host=host, binary='nova-compute')[0]['id']

    def test_forced_host_not_yet_synced_lands_there(self):
        """availability_zone='nova:host' reaches a node in no aggregate.

        nova asks placement for that node alone (in_tree); the pre-filter
        adds nothing, as ProjectCellFilter is skipped for forced hosts.
        """
        self._start_unsynced('big4', 'cell1')
        logged = len(self.stdlog.logger.output)
        server = self._admin_boot(az='nova:big4')
        self.assertEqual('big4', server['OS-EXT-SRV-ATTR:host'])
        queries = self._placement_queries(logged)
        self.assertEqual(1, len(queries), queries)
        self.assertIn('in_tree=', queries[0])
        self.assertNotIn('member_of', queries[0])

    def test_forced_host_bypasses_the_cells_as_all_filters(self):
        """An admin may force a host of a cell the project may not use.

        Forced hosts skip every host filter in nova, ProjectCellFilter
        included; with the pre-filter on they still land (cell3 is named
        in neither option), while unforced boots stay in cell1.
        """
        server = self._admin_boot(az='nova:c3a')
        self.assertEqual('c3a', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('cell1', self._cell_of(self._admin_boot()))

    def test_requested_host_not_yet_synced_lands_there(self):
        """host= (2.74) reaches a node in no aggregate of an allowed cell.

        A requested host, unlike a forced one, goes through the host
        filters: one in a cell the project may not use still gets
        NoValidHost, from ProjectCellFilter.
        """
        self._start_unsynced('big4', 'cell1')
        server = self._admin_boot(host='big4')
        self.assertEqual('big4', server['OS-EXT-SRV-ATTR:host'])

        refused = self._admin_boot(expected_state='ERROR', host='c3a')
        self.assertNoValidHost(refused)
        passed_none = [line for line in
                       self.stdlog.logger.output.splitlines()
                       if 'No host passed: project' in line]
        self.assertEqual(1, len(passed_none), passed_none)
        self.assertIn("may use cells ['%s']" % self.cell_uuids['cell1'],
                      passed_none[0])

    def test_cold_migration_to_a_host_not_yet_synced(self):
        """migrate --host to a new node of the server's own cell."""
        server = self._boot(UNMAPPED)
        self.assertEqual('cell1', self._cell_of(server))
        self._start_unsynced('big4', 'cell1')
        server = self._migrate_server(server, host='big4')
        self.assertEqual('big4', server['OS-EXT-SRV-ATTR:host'])
        self._confirm_resize(server)

    def test_evacuation_to_a_host_not_yet_synced(self):
        """evacuate --host to a new node of the server's own cell.

        (Evacuated servers are stopped since API 2.95.)
        """
        server = self._boot(UNMAPPED)
        source = server['OS-EXT-SRV-ATTR:host']
        self.assertEqual('cell1', self._cell_of(server))
        self._start_unsynced('big4', 'cell1')
        self.computes[source].stop()
        self.admin_api.put_service(self._service_id(source),
                                   {'forced_down': True})
        server = self._evacuate_server(
            server, extra_post_args={'host': 'big4'}, expected_host='big4',
            expected_state='SHUTOFF')
        self.assertEqual('cell1', self._cell_of(server))

    def test_same_cell_move_finds_a_node_not_yet_synced(self):
        """A pinned move without a target fails open for its own cell.

        The server is in cell3 (then disabled here); the other synced
        node of cell3 is disabled, so a new node in no aggregate is the
        only place to go. The pre-filter forbids the other cells'
        aggregates instead of requiring cell3's, so placement still
        leaves cell1's and cell2's nodes out.
        """
        self._set_cells(default=['cell3'], projects='cell2:' + MAPPED)
        server = self._boot(UNMAPPED)
        self.assertEqual('cell3', self._cell_of(server))
        self._set_cells(default=['cell1'], projects='cell2:' + MAPPED)
        other = ({'c3a', 'c3b'} - {server['OS-EXT-SRV-ATTR:host']}).pop()
        self.admin_api.put_service(self._service_id(other),
                                   {'status': 'disabled'})
        self._start_unsynced('c3c', 'cell3')

        logged = len(self.stdlog.logger.output)
        server = self._migrate_server(server)
        self.assertEqual('c3c', server['OS-EXT-SRV-ATTR:host'])
        queries = self._placement_queries(logged)
        self.assertEqual(1, len(queries), queries)
        forbidden = 'member_of=' + urllib.parse.quote('!in:' + ','.join(
            sorted(self.cell_uuids[n] for n in ('cell1', 'cell2'))),
            safe='')
        self.assertIn(forbidden, queries[0])
        self.assertNotIn('member_of=in', queries[0])


class WatchedClient:
    """nova's real report client, with the requests a sync makes counted.

    :ivar most: the most requests ever in flight at once.
    :ivar calls: (method, path) of every request, in order.
    :param hold: seconds each request waits before it is sent, so that
        requests a sync runs in parallel do overlap.
    :param fail: (method, path) -> a status placement seems to answer
        instead of sending the request (a placement fault).
    """

    def __init__(self, client, hold=0.0, fail=None):
        self.client = client
        self.hold = hold
        self.fail = fail or (lambda method, path: None)
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.calls = []

    def _call(self, method, path, *args, **kwargs):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.calls.append((method, path))
        try:
            time.sleep(self.hold)
            status = self.fail(method, path)
            if status is not None:
                resp = requests.Response()
                resp.status_code = status
                resp._content = b'placement is failing'
                return resp
            return getattr(self.client, method)(path, *args, **kwargs)
        finally:
            with self.lock:
                self.now -= 1

    def get(self, path, *args, **kwargs):
        return self._call('get', path, *args, **kwargs)

    def put(self, path, *args, **kwargs):
        return self._call('put', path, *args, **kwargs)

    def writes(self):
        return [call for call in self.calls if call[0] != 'get']


class SyncAggregatesTest(PrefilterTestBase):
    """aggregate_sync.sync against nova's placement and cell databases."""

    def _rows(self, rows):
        return sorted((r.cell.split(' ')[0], self._host_of_node(r.provider)
                       if r.provider else '', r.action, r.result)
                      for r in rows)

    def test_creates_then_nothing_to_do(self):
        """The first sync fills every cell aggregate; a second does nothing.
        """
        rows = self._sync()
        self.assertEqual(sorted((cell, host, 'add', 'done')
                                for host, cell in self.HOSTS.items()),
                         self._rows(rows))
        for cell in ('cell1', 'cell2', 'cell3'):
            self.assertEqual({h for h, c in self.HOSTS.items() if c == cell},
                             self._members(cell))
        self.assertEqual([], self._sync())

    def test_dry_run_changes_nothing(self):
        rows = self._sync(dry_run=True)
        self.assertEqual(7, len(rows))
        self.assertEqual({'dry run'}, {r.result for r in rows})
        self.assertEqual(set(), self._members('cell1'))
        self.assertEqual(7, len(self._sync()))

    def test_removes_moved_and_deleted_nodes_keeps_foreign(self):
        """A node in the wrong cell aggregate and a deleted node leave it;
        aggregates that are not a cell's stay.
        """
        self._sync()
        self._put('big1', lambda p: p | {self.cell_uuids['cell2'], FOREIGN})
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(ctxt,
                                      self.cell_mappings['cell3']) as cctxt:
            node = objects.ComputeNode.get_by_uuid(cctxt,
                                                   self._node_uuid('c3b'))
            node.destroy()

        rows = self._sync()

        self.assertEqual([('cell2', 'big1', 'remove', 'done'),
                          ('cell3', 'c3b', 'remove', 'done')],
                         self._rows(rows))
        aggs, _gen = self.placement_api.aggregates_of(self._node_uuid('big1'))
        self.assertEqual({self.cell_uuids['cell1'], FOREIGN}, aggs)
        self.assertEqual({'c3a'}, self._members('cell3'))

    def test_survives_generation_conflict(self):
        """A concurrent write between read and write is retried, and kept.
        """
        placement = self.placement_api
        real_set = placement.set_aggregates
        raced = []

        def racing_set(provider, aggs, generation):
            if not raced:
                # Another writer (nova-compute, nova-api) gets in first.
                raced.append(provider)
                present, gen = placement.aggregates_of(provider)
                self.assertTrue(real_set(provider, present | {FOREIGN}, gen))
            return real_set(provider, aggs, generation)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.aggregate_sync.Placement.'
            'set_aggregates', lambda _self, *a: racing_set(*a)))
        rows = self._sync()
        self.assertEqual({'done'}, {r.result for r in rows})
        aggs, _gen = placement.aggregates_of(raced[0])
        self.assertIn(FOREIGN, aggs)
        self.assertEqual(3, len(self._members('cell1')))

    def test_unreadable_cell_is_reported_and_left_alone(self):
        """A cell whose database fails is a failed row; nothing removed."""
        self._sync()
        self._rename_nodes_table('compute_nodes', 'compute_nodes_x')
        self.addCleanup(self._rename_nodes_table, 'compute_nodes_x',
                        'compute_nodes')

        rows = self._sync()

        self.assertEqual(1, len(rows))
        self.assertTrue(rows[0].failed)
        self.assertEqual(self.cell_uuids['cell3'], rows[0].aggregate)
        self.assertIn('cannot read the cell database', rows[0].result)
        self.assertEqual({'c3a', 'c3b'}, self._members('cell3'))
        self.assertIn('cannot read the compute nodes of cell cell3',
                      '\n'.join(aggregate_sync.problems(
                          self.placement_api,
                          cells_mod.load_cell_mappings())))

    def test_never_more_requests_in_flight_than_workers(self):
        """Cells are read and providers written in parallel, bounded."""
        watched, placement = self._watched(hold=0.02)

        rows = aggregate_sync.sync(placement, cells_mod.load_cell_mappings(),
                                   workers=3)

        self.assertEqual(7, len(rows))
        self.assertEqual({'done'}, {r.result for r in rows})
        self.assertLessEqual(watched.most, 3)
        self.assertGreaterEqual(watched.most, 2)
        self.assertEqual(7, len(watched.writes()))

    def test_no_change_sync_only_reads_each_cell_aggregate(self):
        """In sync: one request per cell (its aggregate's members), no
        write, no per-provider read.
        """
        self._sync()
        watched, placement = self._watched()

        rows = aggregate_sync.sync(placement, cells_mod.load_cell_mappings())

        self.assertEqual([], rows)
        self.assertEqual([], watched.writes())
        self.assertEqual(
            sorted(('get', '/resource_providers?member_of=%s' % uuid)
                   for name, uuid in self.cell_uuids.items()
                   if name != 'cell0'),
            sorted(watched.calls))

    def test_placement_5xx_while_reading_writes_nothing(self):
        """A member list answered 503: exit 3, no write at all."""
        self._out_of_sync()
        watched, placement = self._watched(
            fail=lambda method, path: 503 if 'member_of' in path and
            self.cell_uuids['cell3'] in path else None)

        exc = self.assertRaises(
            aggregate_sync.PlacementFailed, aggregate_sync.sync,
            placement, cells_mod.load_cell_mappings())

        self.assertEqual(3, exc.exit_code)
        self.assertIn('503', str(exc))
        self.assertEqual([], watched.writes())
        self.assertEqual({'c3a', 'c3b'}, self._members('cell3'))
        self.assertEqual({'small2'}, self._members('cell2'))

    def test_placement_5xx_while_writing_removes_nothing(self):
        """A write answered 500 stops the sync before any removal."""
        self._out_of_sync()
        watched, placement = self._watched(
            fail=lambda method, path: 500 if method == 'put' else None)

        exc = self.assertRaises(
            aggregate_sync.SyncFailed, aggregate_sync.sync,
            placement, cells_mod.load_cell_mappings())

        self.assertEqual(3, exc.exit_code)
        self.assertEqual(
            [('cell2', 'small1', 'add'), ('cell3', 'c3b', 'remove')],
            sorted((r.cell.split(' ')[0], self._host_of_node(r.provider),
                    r.action)
                   for r in exc.rows))
        self.assertTrue(all(r.failed for r in exc.rows))
        self.assertIn(aggregate_sync.NOT_STARTED,
                      [r.result for r in exc.rows])
        # Only the addition was tried; c3b is still in cell3's aggregate.
        self.assertEqual(
            [('put', '/resource_providers/%s/aggregates'
              % self._node_uuid('small1'))], watched.writes())
        self.assertEqual({'c3a', 'c3b'}, self._members('cell3'))
        # The next run converges.
        self.assertEqual({'done'}, {r.result for r in self._sync()})
        self.assertEqual({'c3a'}, self._members('cell3'))
        self.assertEqual({'small1', 'small2'}, self._members('cell2'))

    def _rename_nodes_table(self, old, new):
        """Rename a table of cell3's database (a real read failure)."""
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(ctxt,
                                      self.cell_mappings['cell3']) as cctxt:
            engine = main_db_api.get_engine(context=cctxt)
            with engine.begin() as connection:
                connection.exec_driver_sql(
                    'ALTER TABLE %s RENAME TO %s' % (old, new))

    def test_check_problems(self):
        """check names missing nodes, strays and cells with no aggregate."""
        found = aggregate_sync.problems(self.placement_api,
                                        cells_mod.load_cell_mappings())
        self.assertEqual(3, len(found), found)
        self.assertTrue(all('no placement aggregate' in p for p in found))
        self._sync()
        self.assertEqual([], aggregate_sync.problems(
            self.placement_api, cells_mod.load_cell_mappings()))
        self._put('big1', lambda p: p | {self.cell_uuids['cell2']})
        self._put('small1', lambda p: p - {self.cell_uuids['cell2']})
        found = aggregate_sync.problems(self.placement_api,
                                        cells_mod.load_cell_mappings())
        self.assertEqual(2, len(found), found)
        self.assertIn('compute node %s of cell cell2' %
                      self._node_uuid('small1'), found[0])
        self.assertIn('resource provider %s is in the placement aggregate '
                      'of cell cell2' % self._node_uuid('big1'), found[1])

