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

"""Multi-cell functional tests of ``ProjectCellFilter``.

Everything runs in process with nova's functional machinery: the API
(wsgi-intercept), conductor, scheduler and fake computes, a placement
fixture, an API database and one database per cell. Three cells, one
compute host in each::

    cell1 (host1)  the default cell: cells_default = cell1
    cell2 (host2)  dedicated:        cells_projects = cell2:MAPPED
    cell3 (host3)  named nowhere:    disabled for new servers

Servers are booted through the API by per-project API clients, and the
cell a server landed in is read back from its host
(``OS-EXT-SRV-ATTR:host``) and the host mappings the test created.

Nova's default RAMWeigher spreads servers over the emptiest hosts, so
without the filter consecutive boots would visit every cell (see
``test_empty_options_filter_is_inert``); a run of boots that stays in one
cell is the filter's doing.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching,
# which must happen before the rest of nova (and oslo) is imported.
from nova.tests.functional import integrated_helpers  # isort: skip

import os
import sys

import nova.conf
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.api import client as api_client
from nova.tests.functional import fixtures as func_fixtures

# Registers the [cellsched] options on nova's CONF.
from nova_cellsched.scheduler import host_filter as cellsched_filters
from nova_cellsched.scheduler import state
from tests import base
from tests.fixtures import scheduler_state

CONF = nova.conf.CONF

FILTER_PATH = '%s.%s' % (cellsched_filters.ProjectCellFilter.__module__,
                         cellsched_filters.ProjectCellFilter.__name__)

# Keystone style project ids.
MAPPED = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'    # cells_projects -> cell2
UNMAPPED = '5b1e0a9f2c8d4e8fa1b2c3d4e5f60718'  # named nowhere -> default
LOST = '9a8b7c6d5e4f40312e1d0c9b8a7f6e5d'      # mapped to an unknown cell

FLAVOR_TINY = '1'   # m1.tiny: 1 vcpu, 512 MB, 1 GB
FLAVOR_SMALL = '2'  # m1.small: 1 vcpu, 2048 MB, 20 GB

# host -> cell of the computes every test starts.
HOSTS = {'host1': 'cell1', 'host2': 'cell2', 'host3': 'cell3'}


class MultiCellTestBase(
        base.NovaTestCase, integrated_helpers.PlacementInstanceHelperMixin):
    """A real multi-cell nova with ProjectCellFilter enabled; no tests.

    :attr:`HOSTS` (host -> cell name) are started in order;
    :meth:`_before_services` sets what the services read at start.
    """

    NUMBER_OF_CELLS = 3
    HOSTS = HOSTS
    microversion = 'latest'

    def _before_services(self):
        """Set flags the scheduler reads at start (hook for subclasses)."""

    def setUp(self):
        super().setUp()
        # The scheduler started below builds the process's policy.
        self.useFixture(scheduler_state.FreshPolicy())
        # Everything the scheduler and the API read at start is set before
        # they start; the filter reads its options on every request.
        api_paste = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
        self.assertTrue(os.path.exists(api_paste), api_paste)
        self.flags(api_paste_config=api_paste, group='wsgi')
        self.flags(compute_driver='fake.MediumFakeDriver')
        self.flags(
            available_filters=list(CONF.filter_scheduler.available_filters) +
            [FILTER_PATH],
            enabled_filters=list(CONF.filter_scheduler.enabled_filters) +
            ['ProjectCellFilter'],
            group='filter_scheduler')
        self._set_cells(default=['cell1'], projects='cell2:' + MAPPED)

        self.policy = self.useFixture(nova_fixtures.RealPolicyFixture())
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.glance = self.useFixture(nova_fixtures.GlanceFixture(self))
        self.cinder = self.useFixture(nova_fixtures.CinderFixture(self))
        self.placement = self.useFixture(func_fixtures.PlacementFixture()).api
        self.useFixture(nova_fixtures.AllServicesCurrent())
        self.notifier = self.useFixture(
            nova_fixtures.NotificationFixture(self))

        self.api_fixture = self.useFixture(
            nova_fixtures.OSAPIFixture(api_version='v2.1'))
        self.admin_api = self.api_fixture.admin_api
        self.admin_api.microversion = self.microversion
        # The helpers of integrated_helpers use self.api for moves, images
        # and flavors: the admin may do all of them for any project.
        self.api = self.admin_api

        self._before_services()
        self.start_service('conductor')
        self.scheduler_service = self.start_service('scheduler')
        self.cell_filter = self._running_cell_filter()
        for host, cell_name in self.HOSTS.items():
            self._start_compute(host, cell_name=cell_name)

        self._project_apis = {}

    # Helpers

    def _running_cell_filter(self):
        """The ProjectCellFilter instance of the running scheduler."""
        host_manager = self.scheduler_service.manager.host_manager
        found = [f for f in host_manager.enabled_filters
                 if isinstance(f, cellsched_filters.ProjectCellFilter)]
        self.assertEqual(1, len(found), host_manager.enabled_filters)
        return found[0]

    def _set_cells(self, default=(), projects=''):
        """Set both [cellsched] options, as a SIGHUP'd nova.conf would."""
        self.flags(cells_default=list(default), cells_projects=projects,
                   group='cellsched')
        scheduler_state.sighup(state.CONF)

    def _api_for(self, project_id):
        """A member (non-admin) API client of *project_id*."""
        if project_id not in self._project_apis:
            api = api_client.TestOpenStackClient(
                'fake', self.api_fixture.base_url, project_id=project_id,
                roles=['reader', 'member'])
            api.microversion = self.microversion
            self._project_apis[project_id] = api
        return self._project_apis[project_id]

    def _boot(self, project_id, expected_state='ACTIVE',
              flavor_id=FLAVOR_TINY):
        """Boot one server as *project_id*; return it as the admin sees it.

        Waits for *expected_state*; for ERROR also for the fault.
        """
        body = self._build_server(flavor_id=flavor_id, networks='none')
        server = self._api_for(project_id).post_server({'server': body})
        server = self._wait_for_state_change(server, expected_state)
        self.assertEqual(project_id, server['tenant_id'])
        return server

    def _boot_many(self, project_id, count):
        return [self._boot(project_id) for _ in range(count)]

    def _cell_of(self, server):
        """Name of the cell of *server*'s host."""
        host = server['OS-EXT-SRV-ATTR:host']
        self.assertIsNotNone(host, 'server %s has no host' % server['id'])
        return self.host_mappings[host].cell_mapping.name

    def _cells_of(self, servers):
        return {self._cell_of(server) for server in servers}

    def assertNoValidHost(self, server):
        self.assertEqual('ERROR', server['status'])
        self.assertIn('No valid host', server['fault']['message'])
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])



class ProjectCellFilterMultiCellTest(MultiCellTestBase):
    """ProjectCellFilter in a real three-cell nova deployment."""

    def test_mapped_project_lands_only_in_its_cell(self):
        """A project named in cells_projects for cell2 gets cell2 only.

        Four boots in a row all become ACTIVE on cell2's host, although the
        weigher would move on to the emptier hosts of cell1 and cell3, and
        cell1 is a default cell.
        """
        servers = self._boot_many(MAPPED, 4)

        self.assertEqual(['ACTIVE'] * 4, [s['status'] for s in servers])
        self.assertEqual(['host2'] * 4,
                         [s['OS-EXT-SRV-ATTR:host'] for s in servers])
        self.assertEqual({'cell2'}, self._cells_of(servers))

    def test_unmapped_project_lands_only_in_default_cells(self):
        """A project named nowhere gets the cells_default cells only.

        Neither cell2, dedicated to another project, nor cell3, named
        nowhere, receives any of its servers.
        """
        servers = self._boot_many(UNMAPPED, 4)

        self.assertEqual(['ACTIVE'] * 4, [s['status'] for s in servers])
        self.assertEqual({'cell1'}, self._cells_of(servers))

    def test_nothing_lands_in_disabled_cell(self):
        """A cell in neither option receives no new server of any project.

        Mapped and unmapped projects boot alternately until cell3's host is
        by far the emptiest, and still no server is placed on it.
        """
        servers = []
        for _ in range(3):
            servers.append(self._boot(UNMAPPED))
            servers.append(self._boot(MAPPED))

        self.assertEqual(['ACTIVE'] * 6, [s['status'] for s in servers])
        self.assertNotIn('host3',
                         [s['OS-EXT-SRV-ATTR:host'] for s in servers])
        self.assertEqual({'cell1', 'cell2'}, self._cells_of(servers))
        # The admin's view of every project agrees: cell3 is empty.
        everything = self.admin_api.get_servers(
            search_opts={'all_tenants': 1})
        self.assertEqual(6, len(everything))
        self.assertNotIn('cell3', self._cells_of(everything))

    def test_resize_and_migrate_stay_in_cell_disabled_after_boot(self):
        """A server keeps working in a cell disabled after it was built.

        The server is built in cell3 while cell3 is a default cell; then
        the options change at runtime so that cell3 is in neither. A
        same-cell resize and a same-cell cold migration (the conductor
        pins the instance's cell) both still find a host in cell3 and
        succeed, and a new server no longer goes there.
        """
        self._start_compute('host3b', cell_name='cell3')
        self._set_cells(default=['cell3'], projects='cell2:' + MAPPED)
        server = self._boot(UNMAPPED)
        self.assertEqual('cell3', self._cell_of(server))

        # cell3 is now disabled for new servers.
        self._set_cells(default=['cell1'], projects='cell2:' + MAPPED)

        # Resize: not to the same host (allow_resize_to_same_host is
        # False), so to the other host of cell3.
        source = server['OS-EXT-SRV-ATTR:host']
        server = self._resize_server(server, FLAVOR_SMALL)
        self.assertEqual('VERIFY_RESIZE', server['status'])
        self.assertEqual('cell3', self._cell_of(server))
        self.assertNotEqual(source, server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual('m1.small', server['flavor']['original_name'])
        self.assertEqual('cell3', self._cell_of(server))

        # Cold migration, back to the first host of cell3.
        source = server['OS-EXT-SRV-ATTR:host']
        server = self._migrate_server(server)
        self.assertEqual('VERIFY_RESIZE', server['status'])
        self.assertEqual('cell3', self._cell_of(server))
        self.assertNotEqual(source, server['OS-EXT-SRV-ATTR:host'])
        server = self._confirm_resize(server)
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual('cell3', self._cell_of(server))

        # Meanwhile the same project's new servers go to cell1 only.
        self.assertEqual('cell1', self._cell_of(self._boot(UNMAPPED)))

    def test_runtime_option_change_applies_to_next_boot(self):
        """New option values apply to the next boot, without a restart.

        The scheduler keeps running with the same filter instance; only the
        options change, as a SIGHUP would change them.
        """
        self.assertEqual('cell1', self._cell_of(self._boot(UNMAPPED)))
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))

        # The default cell moves to cell3.
        self._set_cells(default=['cell3'], projects='cell2:' + MAPPED)
        self.assertEqual('cell3', self._cell_of(self._boot(UNMAPPED)))
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))

        # The mapped project moves to cell1.
        self._set_cells(default=['cell3'], projects='cell1:' + MAPPED)
        self.assertEqual('cell1', self._cell_of(self._boot(MAPPED)))
        self.assertEqual('cell3', self._cell_of(self._boot(UNMAPPED)))

        # The project is unmapped again: it follows cells_default.
        self._set_cells(default=['cell2'])
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))
        self.assertEqual('cell2', self._cell_of(self._boot(UNMAPPED)))

        self.assertIs(self.cell_filter, self._running_cell_filter())

    def test_malformed_runtime_value_keeps_last_good_mapping(self):
        """A new value that does not parse is ignored, not half applied.

        The last good mapping stays in force, and a later good value
        applies again.
        """
        # A pair without a colon: malformed.
        self._set_cells(default=['cell3'], projects='cell2')
        self.assertEqual('cell1', self._cell_of(self._boot(UNMAPPED)))
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))

        self._set_cells(default=['cell3'], projects='cell1:' + MAPPED)
        self.assertEqual('cell3', self._cell_of(self._boot(UNMAPPED)))
        self.assertEqual('cell1', self._cell_of(self._boot(MAPPED)))

    def test_project_mapped_to_unknown_cell_gets_no_valid_host(self):
        """A project whose only cell does not exist gets NoValidHost.

        It does not fall back to the default cells, which still have room:
        an unmapped project's server boots in cell1 right after.
        """
        self._set_cells(default=['cell1'],
                        projects='cell2:%s,nosuchcell:%s' % (MAPPED, LOST))

        server = self._boot(LOST, expected_state='ERROR')

        self.assertNoValidHost(server)
        self.assertEqual('cell1', self._cell_of(self._boot(UNMAPPED)))
        self.assertEqual('cell2', self._cell_of(self._boot(MAPPED)))

    def test_project_with_unknown_and_known_cell_uses_known_one(self):
        """An unknown cell next to a real one only loses the unknown one."""
        self._set_cells(default=['cell1'],
                        projects='nosuchcell:%s,cell3:%s' % (LOST, LOST))

        servers = self._boot_many(LOST, 2)

        self.assertEqual({'cell3'}, self._cells_of(servers))

    def test_empty_options_filter_is_inert(self):
        """With both options empty every cell is used, cell3 included.

        Three boots of one project land on the three hosts, one per cell,
        as nova's weigher alone decides.
        """
        self._set_cells(default=[], projects='')

        servers = self._boot_many(UNMAPPED, 3)

        self.assertEqual(['ACTIVE'] * 3, [s['status'] for s in servers])
        self.assertEqual({'cell1', 'cell2', 'cell3'},
                         self._cells_of(servers))

    def test_cells_named_by_uuid(self):
        """A cell uuid works wherever a cell name does.

        cells_projects names cell3 by its dashed uuid, cells_default names
        cell2 by its undashed upper case uuid.
        """
        cell2_uuid = self.cell_mappings['cell2'].uuid
        cell3_uuid = self.cell_mappings['cell3'].uuid
        self._set_cells(default=[cell2_uuid.replace('-', '').upper()],
                        projects='%s:%s' % (cell3_uuid, MAPPED))

        mapped = self._boot_many(MAPPED, 2)
        unmapped = self._boot_many(UNMAPPED, 2)

        self.assertEqual({'cell3'}, self._cells_of(mapped))
        self.assertEqual({'cell2'}, self._cells_of(unmapped))

    def test_multi_create_stays_in_project_cells(self):
        """Every server of a multi-create request lands in the project's cell.

        The filter runs once per request; the later servers of the request
        are placed among the hosts it let through for the first.
        """
        body = self._build_server(flavor_id=FLAVOR_TINY, networks='none')
        body.update(min_count=3, max_count=3, return_reservation_id=True)
        reservation = self._api_for(MAPPED).post_server({'server': body})

        servers = self.admin_api.get_servers(search_opts={
            'all_tenants': 1,
            'reservation_id': reservation['reservation_id']})
        self.assertEqual(3, len(servers))
        servers = [self._wait_for_state_change(s, 'ACTIVE') for s in servers]
        self.assertEqual({'cell2'}, self._cells_of(servers))
