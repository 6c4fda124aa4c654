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

"""Who sees cell names in Server-Timing: nova's policy, the operator's file.

One nova deployment from nova's functional fixtures (API, conductor,
scheduler, two cells with a fake compute each, nova's placement),
nova-api loading an ``api-paste.ini`` with the ``cellsched`` filter,
nova's real policy engine reading a policy file of the test's.

Regression: every project member got the slowest cell's name and time
and the names of the down cells (``gather;desc="slowest cell2 248.2
ms"``), which nova shows to admins only; and then still the phase
durations, a debugging aid nova keeps for admins (server diagnostics).
Now only an admin gets the header, with cells; an operator who opens it
to readers gives them the phase durations alone; the operator's
``policy.yaml`` changes either, from the next request.
"""

from nova.tests.functional import integrated_helpers  # noqa: F401 isort:skip

import logging
import os
import time

import fixtures
from nova import context as nova_context
from nova import objects
from nova import policy as nova_policy
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.api import client as api_client
from nova.tests.functional import fixtures as func_fixtures
from oslo_serialization import jsonutils

from tests.fixtures import releases

releases.skip_module_unless_nova_api_part()

from nova_cellsched.api.middleware import policies  # noqa: E402
from nova_cellsched.api.middleware import server_timing  # noqa: E402
from tests import base  # noqa: E402
from tests.fixtures import nova_api  # noqa: E402
from tests.fixtures import server_timing_grammar as timing_grammar  # noqa: E402

MEMBER_PROJECT = 'b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6'
PHASE_METRICS = {'total', 'other'} | set(server_timing.PHASES)


class PolicyFileFixture(nova_fixtures.RealPolicyFixture):
    """nova's real policy, with an operator's policy file the test writes.

    nova's enforcer re-reads the file when it changes, as in nova-api.
    """

    def _prepare_policy(self):
        self.policy_file = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'policy.yaml')
        self.writes = 0
        self.write({})

    def write(self, rules):
        with open(self.policy_file, 'w') as handle:
            jsonutils.dump(rules, handle)
        # A later mtime than any earlier write, whatever the file
        # system's timestamp granularity.
        self.writes += 1
        stamp = time.time() + 10 * self.writes
        os.utime(self.policy_file, (stamp, stamp))


class ServerTimingPolicyTest(base.NovaTestCase,
                             integrated_helpers.InstanceHelperMixin):
    """A member gets no header; an admin's names cells; policy decides."""

    NUMBER_OF_CELLS = 2

    def setUp(self):
        self.useFixture(nova_api.CellschedInNovaApi(must_list=True))
        super().setUp()
        self.flags(compute_driver='fake.MediumFakeDriver')
        # As nova-api runs by default ('error' in nova's tests makes
        # nova's own 2.69 down-cell detail answer fail its schema).
        self.flags(response_validation='warn', group='api')
        self.policy = self.useFixture(PolicyFileFixture())
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.useFixture(func_fixtures.PlacementFixture())
        self.useFixture(nova_fixtures.AllServicesCurrent())
        api_fixture = self.useFixture(
            nova_fixtures.OSAPIFixture(api_version='v2.1'))
        self.admin_api = api_fixture.admin_api
        self.api = self.admin_api
        self.member_api = api_client.TestOpenStackClient(
            'member', api_fixture.base_url, project_id=MEMBER_PROJECT,
            roles=['reader', 'member'])
        self.start_service('conductor')
        self.start_service('scheduler')
        for n in range(1, 3):
            self._start_compute('host%d' % n, cell_name='cell%d' % n)
        self.cells = {cm.name: cm for cm in objects.CellMappingList.get_all(
            nova_context.get_admin_context())}
        network = [{'uuid': self.neutron.network_1['id']}]
        flavor = next(f['id'] for f in self.admin_api.get_flavors()
                      if f['name'] == 'm1.tiny')
        self.member_api.microversion = 'latest'
        for n in range(1, 3):
            # An admin's server in each cell; the member's anywhere.
            for api, az in ((self.admin_api, 'nova:host%d' % n),
                            (self.member_api, None)):
                api.microversion = 'latest'
                self._wait_for_state_change(api.post_server({
                    'server': self._build_server(
                        name='srv-%d' % n, networks=network,
                        flavor_id=flavor, az=az)}), 'ACTIVE')
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.api', level=logging.DEBUG))

    def _timing(self, api, path, version='latest'):
        """The parsed Server-Timing header of a 200 listing (or None)."""
        api.microversion = version
        response = api.api_request(path)
        self.assertEqual(200, response.status_code, response.text)
        value = response.headers.get('Server-Timing')
        return None if value is None else timing_grammar.parse(value)

    def assertNoCells(self, metrics):
        """The phases' durations alone: no cell named, timed or counted."""
        self.assertIsNotNone(metrics)
        self.assertTrue(set(metrics) <= PHASE_METRICS, metrics)
        self.assertIn('gather', metrics)
        for name, params in metrics.items():
            self.assertEqual(['dur'], list(params), (name, metrics))

    def assertSlowestCellNamed(self, metrics):
        words = metrics['gather']['desc'].split()
        self.assertEqual('slowest', words[0], metrics)
        self.assertIn(words[1], self.cells, metrics)
        self.assertEqual('ms', words[3], metrics)

    def test_member_gets_no_header_admin_gets_phases_and_cells(self):
        """nova's defaults: the debugging header for admins only."""
        for path in ('/servers', '/servers/detail?limit=1'):
            self.assertIsNone(self._timing(self.member_api, path))
        admin = self._timing(self.admin_api, '/servers?all_tenants=1')
        self.assertSlowestCellNamed(admin)
        self.assertTrue(set(admin) <= PHASE_METRICS, admin)
        # The rules are in nova's enforcer with these defaults.
        registered = nova_policy._ENFORCER.registered_rules
        for name in (policies.SERVER_TIMING, policies.SERVER_TIMING_CELLS):
            self.assertEqual('rule:context_is_admin',
                             registered[name].check_str)
            self.assertIsNone(registered[name].deprecated_rule)
        # Opened to project readers, a member gets the phases alone.
        self.policy.write(
            {policies.SERVER_TIMING: 'rule:project_reader_or_admin'})
        for path in ('/servers', '/servers/detail?limit=1'):
            self.assertNoCells(self._timing(self.member_api, path))
        # The log line is the operator's: it names every cell.
        for name in ('cell1', 'cell2'):
            self.assertIn(name + ' ', self.logs.output)

    def test_down_cell_is_not_named_to_a_member(self):
        """At 2.69 a member sees UNKNOWN servers, never which cell."""
        self.policy.write(
            {policies.SERVER_TIMING: 'rule:project_reader_or_admin'})
        with nova_fixtures.DownCellFixture([self.cells['cell2']]):
            member = self._timing(self.member_api, '/servers/detail',
                                  '2.69')
            admin = self._timing(self.admin_api,
                                 '/servers?all_tenants=1', '2.69')
        self.assertNoCells(member)
        self.assertIn('down cell2', admin['gather']['desc'])
        self.assertIn('down: cell2', self.logs.output)

    def test_operator_policy_file_decides(self):
        """The file's rules apply from the next request, no restart."""
        self.policy.write({policies.SERVER_TIMING: 'role:reader',
                           policies.SERVER_TIMING_CELLS: 'role:member'})
        self.assertSlowestCellNamed(
            self._timing(self.member_api, '/servers'))

        self.policy.write({policies.SERVER_TIMING: 'rule:context_is_admin'})
        self.assertIsNone(self._timing(self.member_api, '/servers'))
        self.assertSlowestCellNamed(
            self._timing(self.admin_api, '/servers?all_tenants=1'))

        self.policy.write({policies.SERVER_TIMING_CELLS: '!'})
        self.assertNoCells(
            self._timing(self.admin_api, '/servers?all_tenants=1'))
        self.assertIsNone(self._timing(self.member_api, '/servers'))

    def test_after_nova_resets_its_enforcer(self):
        """A new enforcer (nova.policy.reset) gets the rules again."""
        nova_policy.reset()
        self.assertIsNone(self._timing(self.member_api, '/servers'))
        self.assertSlowestCellNamed(
            self._timing(self.admin_api, '/servers?all_tenants=1'))
