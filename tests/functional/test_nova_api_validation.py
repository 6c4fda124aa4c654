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

"""nova-api's server-list response validation, fast path on and off.

One nova deployment from nova's functional fixtures (two cells with a
fake compute each, a server that failed into cell0 with a fault),
nova-api loading an ``api-paste.ini`` with the ``cellsched`` filter.
``[cellsched] api_fast_validation`` off is nova's own response
validation; on, the filter's. Requests are made both ways and the
answers compared byte for byte, the real bodies of every response
schema's microversion range are given to the verdict comparison of
:mod:`tests.fixtures.schema_bodies`, and a view that returns a bad field shows
that ``warn`` and ``error`` behave as nova's.
"""

from nova.tests.functional import integrated_helpers  # noqa: F401 isort:skip

import fixtures
from nova.api.openstack import api_version_request
from nova.api.openstack.compute.views import servers as views_servers
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import fixtures as func_fixtures
from oslo_serialization import jsonutils
from testtools.content import text_content

from nova_cellsched.api.validation import validator as validation
from nova_cellsched import compat
from nova_cellsched.compat import core as compat_core
from tests import base
from tests.fixtures import nova_api
from tests.fixtures import schema_bodies

MICROVERSIONS = ('2.1', '2.16', '2.26', '2.47', '2.69', '2.73', '2.96',
                 '2.100', 'latest')
PATHS = ('/servers', '/servers/detail')


def _at_least(version, minimum):
    return (api_version_request.APIVersionRequest(version) >=
            api_version_request.APIVersionRequest(minimum))


class NovaApiValidationTest(base.NovaTestCase,
                            integrated_helpers.InstanceHelperMixin):
    """GET /servers validated by nova's decorators and by the filter."""

    NUMBER_OF_CELLS = 2

    def setUp(self):
        lacks = compat_core.lacking('validation')
        if lacks is not None:
            # nova 31 and 32: no response schemas on the server lists,
            # no verdict to compare (the part is off, nova's stays).
            self.skipTest(lacks)
        self.useFixture(nova_api.CellschedInNovaApi(
            fence=False, check_validation=False))
        super().setUp()
        self.flags(compute_driver='fake.MediumFakeDriver')
        self.useFixture(nova_fixtures.RealPolicyFixture())
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.useFixture(func_fixtures.PlacementFixture())
        self.useFixture(nova_fixtures.AllServicesCurrent())
        api_fixture = self.useFixture(
            nova_fixtures.OSAPIFixture(api_version='v2.1'))
        self.api = api_fixture.admin_api
        self.api.microversion = 'latest'
        self.start_service('conductor')
        self.start_service('scheduler')
        for n in (1, 2):
            self._start_compute('host%d' % n, cell_name='cell%d' % n)
        network = [{'uuid': self.neutron.network_1['id']}]
        for n in (1, 2):
            server = self._build_server(name='srv-%d' % n,
                                        networks=network,
                                        az='nova:host%d' % n)
            created = self.api.post_server({'server': server})
            self._wait_for_state_change(created, 'ACTIVE')
        self.api.put_server_tags(created['id'], ['red'])
        flavor = self.api.post_flavor({'flavor': {
            'name': 'huge', 'ram': 32768, 'vcpus': 1, 'disk': 1}})
        big = self._build_server(name='srv-huge', flavor_id=flavor['id'],
                                 networks=network)
        self._wait_for_state_change(
            self.api.post_server({'server': big}), 'ERROR')
        self.assertTrue(compat.is_on('validation'))

    def _get(self, url, version, fast):
        self.flags(api_fast_validation=fast, group='cellsched')
        self.api.microversion = version
        before = validation.validated()
        response = self.api.api_request(url, check_response_status=False)
        after = validation.validated()
        if fast:
            self.assertEqual(before['off'], after['off'])
        else:
            self.assertEqual(before['fast'], after['fast'])
        return response, {k: after[k] - before[k] for k in after}

    def _both(self, url, version):
        nova, _ = self._get(url, version, False)
        ours, counted = self._get(url, version, True)
        self.assertEqual(nova.status_code, ours.status_code,
                         '%s at %s: %s' % (url, version, ours.text[:300]))
        self.assertEqual(nova.content, ours.content,
                         '%s at %s' % (url, version))
        return ours, counted

    def test_same_answers_fast_and_nova_at_nine_microversions(self):
        """Index and detail, every microversion that matters, bad query
        parameters: byte for byte nova's answers, and every listing
        validated by the compiled validator alone.
        """
        for version in MICROVERSIONS:
            for path in PATHS:
                for query in ('', '?all_tenants=1', '?limit=1'):
                    response, counted = self._both(path + query, version)
                    self.assertEqual(200, response.status_code)
                    self.assertEqual(1, counted['fast'], counted)
                    self.assertEqual(0, counted['nova_accepted'], counted)
                    # nova's view gives plain JSON types: validated as
                    # it is, never serialized for validation.
                    self.assertEqual(0, counted['serialized'],
                                     (path, query, version, counted))
        for url in ('/servers?limit=-1', '/servers?limit=abc',
                    '/servers?sort_key=nosuchkey',
                    '/servers/detail?changes-since=yesterday',
                    '/servers/detail?all_tenants=1&limit=0',
                    '/servers/detail?not_a_filter=1'):
            for version in ('2.1', '2.75', 'latest'):
                response, counted = self._both(url, version)
                if response.status_code == 400:
                    self.assertEqual(0, sum(counted.values()), counted)

    def _schema_versions(self, method):
        """(schema, the first microversion of its range) of *method*."""
        for schema, low, high in schema_bodies.response_schemas(method):
            yield schema, low

    def test_real_responses_of_every_schema_same_verdict_as_nova(self):
        """The real bodies of each response schema's range (and a down
        cell's at 2.69 and later), mutated: nova's verdict on each.
        """
        counts = schema_bodies.new_counts()
        mismatches = []
        cell2 = [cm for cm in objects.CellMappingList.get_all(
            nova_context.get_admin_context()) if cm.name == 'cell2']
        for method, path in zip(validation.METHODS, PATHS):
            for schema, version in self._schema_versions(method):
                bodies = []
                # Paged: the body has servers_links too.
                response, counted = self._get(
                    path + '?all_tenants=1&limit=2', version, True)
                self.assertEqual(200, response.status_code)
                self.assertEqual(1, counted['fast'], (path, version))
                bodies.append(jsonutils.loads(response.content))
                if _at_least(version, '2.69'):
                    with nova_fixtures.DownCellFixture(cell2):
                        response, counted = self._get(
                            path + '?all_tenants=1', version, True)
                    body = jsonutils.loads(response.content)
                    if response.status_code == 200:
                        bodies.append(body)
                for body in bodies:
                    # One server of each shape (ERROR with a fault, an
                    # active one, a down cell's): mutations of one are
                    # those of its kind.
                    shapes = {}
                    for server in body['servers']:
                        shapes.setdefault(tuple(sorted(server)), server)
                    body['servers'] = list(shapes.values())
                schema_bodies.verdicts(schema, bodies, counts, mismatches)
        self.assertEqual([], mismatches)
        self.addDetail('verdict-equivalence', text_content(
            'real responses: %d (schema, body) pairs: %s'
            % (sum(counts.values()), dict(counts.most_common()))))
        self.assertGreater(counts['valid'], 16)
        self.assertGreater(counts['minItems'], 0)

    def _bad_view(self, field, value):
        """nova's view, with *field* of the first server set to *value*."""
        for name in ('index', 'detail'):
            original = getattr(views_servers.ViewBuilder, name)

            def bad(self, *args, _original=original, **kwargs):
                response = _original(self, *args, **kwargs)
                if response['servers']:
                    response['servers'][0][field] = value
                return response
            self.useFixture(fixtures.MonkeyPatch(
                'nova.api.openstack.compute.views.servers.ViewBuilder.'
                + name, bad))

    def _logged(self, url, version, fast):
        logger = self.useFixture(fixtures.FakeLogger(
            name='nova.api.validation', level='ERROR'))
        response, counted = self._get(url, version, fast)
        return response, counted, logger.output

    def test_a_body_nova_rejects_warn_logs_error_refuses_as_nova(self):
        """A bad field from the view: ``warn`` logs nova's message and
        returns the body; ``error`` answers what nova answers.
        """
        self._bad_view('id', 'not-a-uuid')
        for version in ('2.1', '2.47', 'latest'):
            for path in PATHS:
                url = path + '?all_tenants=1'
                self.flags(response_validation='warn', group='api')
                nova, _, nova_log = self._logged(url, version, False)
                ours, counted, our_log = self._logged(url, version, True)
                self.assertEqual(200, ours.status_code)
                self.assertEqual(nova.content, ours.content)
                self.assertEqual(1, counted['nova_rejected'])
                self.assertIn('Schema failed to validate', our_log)
                # nova's message: the first and the last line of the
                # logged traceback (the frames between differ).
                self.assertEqual(nova_log.splitlines()[0],
                                 our_log.splitlines()[0])
                self.assertEqual(nova_log.strip().splitlines()[-1],
                                 our_log.strip().splitlines()[-1])
                self.assertIn('ValidationError', our_log.splitlines()[-1])

                self.flags(response_validation='error', group='api')
                nova, _ = self._get(url, version, False)
                ours, counted = self._get(url, version, True)
                self.assertEqual(nova.status_code, ours.status_code)
                self.assertEqual(nova.content, ours.content)
                self.assertEqual(400, ours.status_code)
                self.assertEqual(1, counted['nova_rejected'])
