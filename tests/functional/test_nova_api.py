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

"""nova-api with and without the cellsched filter: the same answers.

One nova deployment from nova's functional fixtures (API, conductor,
scheduler, three cells with a fake compute each, nova's placement),
nova-api loading an ``api-paste.ini`` with the ``cellsched`` filter.
Every request is made twice, ``[cellsched] api_lister`` off (nova's own
lister) and on, and the two bodies are compared byte for byte: GET
/servers and /servers/detail at the microversions where the list
changed, with paging walked to the end, sort keys and directions, and
filters.

The deployment is built once and shared by the tests of
:class:`NovaApiListingTest` that run in one test process (testresources:
this module's ``load_tests``): booting its twelve servers took about a
third of each test when every test built its own. A test that changes
the deployment (deleting servers) marks it dirty, and the next test gets
a new one; options a test sets are put back at its end.

Where nova fails or is wrong, the test says so and asserts the correct
answer instead: nova's merge compares sort values with ``<``, so a NULL
in a sort key of rows from two cells fails with a TypeError (HTTP 500),
and its per-cell "local marker" lookup (``instance_get_by_sort_filters``)
ignores NULL, so pages after a marker lose or repeat rows.
"""

from nova.tests.functional import integrated_helpers  # noqa: F401 isort:skip

import datetime
import itertools
import logging
import os
import urllib.parse

import fixtures
from nova.api.openstack import api_version_request
import nova.conf
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import conf as nova_conf_fixture
from nova.tests.functional.api import client as api_client
from nova.tests.functional import fixtures as func_fixtures
from oslo_serialization import jsonutils
import testresources
import testtools
import testtools.content

import nova_cellsched.api as cellsched_api
from nova_cellsched.api.view import render
from nova_cellsched import compat
from tests import base
from tests.fixtures import nova_api
from tests.fixtures import server_timing_grammar as timing_grammar

OTHER_PROJECT = 'a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5'
#: Servers booted per cell (cell1..cell3); one more fails into cell0.
PER_CELL = {'cell1': 4, 'cell2': 3, 'cell3': 2}
MICROVERSIONS = ('2.1', '2.16', '2.26', '2.47', '2.69', '2.73', '2.96',
                 '2.100', 'latest')
#: Sorts whose keys have no NULL here (nova answers them right).
SORTS = (
    (),
    (('display_name', 'asc'),),
    (('display_name', 'desc'),),
    (('created_at', 'asc'),),
    (('uuid', 'desc'),),
    (('vm_state', 'desc'), ('created_at', 'asc')),
    (('display_name', 'asc'), ('uuid', 'asc')),
)
#: Sorts on keys that are NULL in rows of several cells.
NULL_SORTS = (
    (('launched_at', 'desc'),),
    (('launched_at', 'asc'),),
    (('key_name', 'asc'),),
    (('task_state', 'desc'), ('display_name', 'asc')),
    (('host', 'asc'), ('display_name', 'desc')),
)
#: Detail fields holding the value of a sort key.
FIELD = {'launched_at': 'OS-SRV-USG:launched_at', 'key_name': 'key_name',
         'task_state': 'OS-EXT-STS:task_state', 'display_name': 'name',
         'host': 'OS-EXT-SRV-ATTR:host'}


def _query(params):
    return urllib.parse.urlencode(params, doseq=True)


def load_tests(loader, tests, pattern):
    """The module's tests, ordered so that they share one deployment.

    A test that changes the deployment (:attr:`NovaApiListingTest.DIRTIES`)
    runs after the others, so that one deployment serves them all.
    """
    ordered = sorted(
        testtools.iterate_tests(tests),
        key=lambda case: getattr(case, '_testMethodName', '') in getattr(
            case, 'DIRTIES', ()))
    return testresources.OptimisingTestSuite(ordered)


class _Deployment(base.NovaTestCase, integrated_helpers.InstanceHelperMixin):
    """nova with the filter, three cells and the servers listed.

    Not a test: :class:`DeploymentManager` sets it up (nova's functional
    fixtures, as a test's ``setUp`` would) and cleans it up when the
    tests that share it are done.
    """

    NUMBER_OF_CELLS = 3

    def deployment(self):
        """The method the instance is named after; never run."""

    def setUp(self):
        self.useFixture(nova_api.CellschedInNovaApi(fence=False))
        super().setUp()
        self.flags(compute_driver='fake.MediumFakeDriver')
        # As nova-api runs by default ('error' in nova's tests makes
        # nova's own 2.69 down-cell detail answer fail its schema).
        self.flags(response_validation='warn', group='api')
        self.useFixture(nova_fixtures.RealPolicyFixture())
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.useFixture(func_fixtures.PlacementFixture())
        self.useFixture(nova_fixtures.AllServicesCurrent())
        self.api_fixture = self.useFixture(
            nova_fixtures.OSAPIFixture(api_version='v2.1'))
        self.admin_api = self.api_fixture.admin_api
        self.admin_api.microversion = 'latest'
        self.api = self.admin_api
        self.start_service('conductor')
        self.start_service('scheduler')
        for n in range(1, 4):
            self._start_compute('host%d' % n, cell_name='cell%d' % n)
        self.other_api = api_client.TestOpenStackClient(
            'other', self.api_fixture.base_url, project_id=OTHER_PROJECT,
            roles=['reader', 'member'])
        self.servers = self._boot_servers()
        self.servers += self._view_lookups()

    def _boot_servers(self):
        """Servers in every cell (and cell0), two projects, tags, NULLs."""
        servers = []
        network = [{'uuid': self.neutron.network_1['id']}]
        # Named: _build_server's default is the first flavor listed,
        # which is 'huge' below when its random id sorts first.
        self.flavor_id = next(f['id'] for f in self.admin_api.get_flavors()
                              if f['name'] == 'm1.tiny')
        for n, (cell, count) in enumerate(sorted(PER_CELL.items()), 1):
            for i in range(count):
                api = self.other_api if i == 1 else self.admin_api
                api.microversion = 'latest'
                server = self._build_server(
                    name='srv-%s-%d' % ('abcab'[i], n), networks=network,
                    flavor_id=self.flavor_id,
                    az='nova:host%d' % n if api is self.admin_api else None)
                created = api.post_server({'server': server})
                servers.append(self._wait_for_state_change(created,
                                                           'ACTIVE'))
        # One server that cannot be scheduled lands in cell0 (ERROR,
        # no host, never launched).
        flavor = self.admin_api.post_flavor({'flavor': {
            'name': 'huge', 'ram': 32768, 'vcpus': 1, 'disk': 1}})
        big = self._build_server(name='srv-huge', flavor_id=flavor['id'],
                                 networks=network)
        servers.append(self._wait_for_state_change(
            self.admin_api.post_server({'server': big}), 'ERROR'))
        for server in servers[:-1:3]:
            self.admin_api.put_server_tags(server['id'], ['red'])
        # Servers with several tags: nova's tags-any JOIN has a row per
        # matching tag.
        for server, tags in zip(servers[1:5], (['red', 'blue', 'green'],
                                               ['blue', 'green'],
                                               ['red', 'blue'],
                                               ['green', 'red'])):
            self.admin_api.put_server_tags(server['id'], tags)
        self._null_launched_at([s['id'] for s in servers[1:6:2]])
        return servers

    def _view_lookups(self):
        """Servers the view's lookups read more of (:mod:`..api.view`).

        In cell1, a server with scheduler hints and two volumes; in
        cell3, one in a server group that is then deleted (nova looks
        the group up and drops its hint) with one volume.
        """
        network = [{'uuid': self.neutron.network_1['id']}]
        self.admin_api.microversion = 'latest'
        hinted = self.admin_api.post_server({
            'server': self._build_server(name='srv-hints', networks=network,
                                         flavor_id=self.flavor_id,
                                         az='nova:host1'),
            'os:scheduler_hints': {'cellsched_rack': 'r12',
                                   'cellsched_list': ['b', 'a']}})
        group = self.admin_api.post_server_groups(
            {'name': 'grp', 'policy': 'soft-affinity'})
        grouped = self.admin_api.post_server({
            'server': self._build_server(name='srv-group', networks=network,
                                         flavor_id=self.flavor_id,
                                         az='nova:host3'),
            'os:scheduler_hints': {'group': group['id']}})
        servers = [self._wait_for_state_change(s, 'ACTIVE')
                   for s in (hinted, grouped)]
        self.api.microversion = 'latest'
        self._attach_volumes(servers[0], [
            'c5e1d1a4-0000-4000-8000-00000000000b',
            'c5e1d1a4-0000-4000-8000-00000000000a'])
        self._attach_volumes(servers[1], [
            'c5e1d1a4-0000-4000-8000-00000000000c'])
        self.admin_api.delete_server_group(group['id'])
        return servers

    def _null_launched_at(self, uuids):
        """NULL ``launched_at`` (as for a server that never launched)."""
        ctxt = nova_context.get_admin_context()
        for uuid in uuids:
            mapping = objects.InstanceMapping.get_by_instance_uuid(ctxt, uuid)
            with nova_context.target_cell(ctxt, mapping.cell_mapping) as cc:
                inst = objects.Instance.get_by_uuid(cc, uuid)
                inst.launched_at = None
                inst.save()

class DeploymentManager(testresources.TestResourceManager):
    """Makes and cleans up a :class:`_Deployment`."""

    def make(self, dependency_resources):
        deployment = _Deployment('deployment')
        try:
            deployment.setUp()
        except BaseException:
            self.clean(deployment)
            raise
        return deployment

    def clean(self, resource):
        """Run the deployment's cleanups, last first, all of them."""
        errors = []
        while resource._cleanups:
            function, args, kwargs = resource._cleanups.pop()
            try:
                function(*args, **kwargs)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


DEPLOYMENT = DeploymentManager()


class NovaApiListingTest(testresources.ResourcedTestCase,
                         base.TestCase):
    """GET /servers with the filter off and on, in three cells."""

    resources = [('deployment', DEPLOYMENT)]
    #: The tests that change the deployment (and mark it dirty).
    DIRTIES = frozenset({
        'test_deleted_servers_the_same',
        'test_a_project_without_cell_mappings_is_listed_in_every_cell'})

    def setUp(self):
        super().setUp()
        world = self.deployment
        self.admin_api = world.admin_api
        self.other_api = world.other_api
        self.servers = world.servers
        self._flags_before: dict[tuple[str, str | None], object] = {}
        # Each test starts where the deployment left its clients.
        self.admin_api.microversion = 'latest'
        self.addOnException(self._attach_nova_log)

    def _attach_nova_log(self, exc_info):
        """nova's log of the shared deployment, on a failure."""
        self.addDetail('nova-log', testtools.content.text_content(
            self.deployment.stdlog.logger.output))

    def flags(self, **kw):
        """Set options for this test; their values are put back after it.

        The deployment outlives the test, so nova's ``flags`` (whose
        overrides stay until the deployment's cleanup) is not used.
        """
        group = kw.pop('group', None)
        conf = nova.conf.CONF
        for name, value in kw.items():
            if (name, group) not in self._flags_before:
                # Once per option: its value before the test.
                before = getattr(conf[group] if group else conf, name)
                self._flags_before[name, group] = before
                self.addCleanup(conf.set_override, name, before, group)
            conf.set_override(name, value, group)

    # Making requests

    def _get(self, api, url, lister_on, version):
        self.flags(api_lister=lister_on, group='cellsched')
        api.microversion = version
        before = cellsched_api.served()
        rendered = render.USED.snapshot()
        response = api.api_request(url)
        after = cellsched_api.served()
        parts = urllib.parse.urlsplit(url)
        if (lister_on and response.status_code == 200 and
                nova.conf.CONF.cellsched.api_render_rows and
                parts.path in ('/servers', '/servers/detail') and
                jsonutils.loads(response.content)['servers'] and
                not {'ip', 'ip6'} & set(urllib.parse.parse_qs(parts.query))):
            # Ours: the body was rendered from the rows, by the renderer
            # or (a microversion it does not know) by nova's view. (An
            # empty list and an IP filter's list are nova's view's.)
            now = render.USED.snapshot()
            self.assertEqual(
                1, sum(now[k] - rendered[k] for k in now), url)
            self.assertEqual(self.expect_rendered(version),
                             now['rendered'] - rendered['rendered'], url)
        # The listing went through the lister the option names (or
        # failed before listing).
        served = 'cellsched' if lister_on else 'nova'
        other = 'nova' if lister_on else 'cellsched'
        self.assertEqual(before[other], after[other], url)
        if response.status_code == 200 and '/servers' in url:
            self.assertGreater(after[served], before[served], url)
        return response

    def _both(self, url, version, api=None):
        """(nova's response, ours) for *url*."""
        api = api or self.admin_api
        return (self._get(api, url, False, version),
                self._get(api, url, True, version))

    def assertSameAnswer(self, url, version, api=None):
        nova, ours = self._both(url, version, api)
        self.assertEqual(nova.status_code, ours.status_code,
                         '%s at %s: nova %s, ours %s'
                         % (url, version, nova.text[:300], ours.text[:300]))
        self.assertEqual(nova.content, ours.content,
                         '%s at %s' % (url, version))
        return ours

    def _walk(self, path, params, version, lister_on, limit=2,
              api=None):
        """Every page of *path* by limit/marker: the servers in order."""
        api = api or self.admin_api
        found, marker = [], None
        for _ in range(50):
            page = dict(params, limit=limit)
            if marker:
                page['marker'] = marker
            response = self._get(api, '%s?%s' % (path, _query(page)),
                                 lister_on, version)
            self.assertEqual(200, response.status_code, response.text)
            servers = jsonutils.loads(response.content)['servers']
            found.extend(servers)
            if len(servers) < limit:
                return found
            marker = servers[-1]['id']
        self.fail('more than 50 pages')

    def expect_rendered(self, version):
        """1 if the renderer knows *version* (else nova's view renders)."""
        known = api_version_request.APIVersionRequest(render.MAX_VERSION)
        asked = (api_version_request.max_api_version() if version ==
                 'latest' else api_version_request.APIVersionRequest(
                     version))
        return int(asked <= known)

    # The tests

    def test_every_microversion_lists_the_same(self):
        """Index and detail, unpaged, at every microversion that matters."""
        for version in MICROVERSIONS:
            for path in ('/servers', '/servers/detail'):
                for params in ({}, {'all_tenants': 1}):
                    body = self.assertSameAnswer(
                        '%s?%s' % (path, _query(params)), version)
                    if params:
                        self.assertEqual(
                            len(self.servers),
                            len(jsonutils.loads(body.content)['servers']))

    def test_sorted_and_paged_the_same(self):
        """Sorts without NULLs, unpaged and walked two at a time."""
        for version in ('2.1', 'latest'):
            for sort in SORTS:
                params = {'all_tenants': 1,
                          'sort_key': [k for k, _d in sort],
                          'sort_dir': [d for _k, d in sort]}
                self.assertSameAnswer(
                    '/servers/detail?%s' % _query(params), version)
                self.assertEqual(
                    self._walk('/servers/detail', params, version, False),
                    self._walk('/servers/detail', params, version, True))

    def test_filters_the_same(self):
        """Filters of nova's API (admin and project member)."""
        first = self.servers[0]
        changes = (datetime.datetime.now(datetime.timezone.utc) -
                   datetime.timedelta(hours=1)).isoformat()
        filters = [
            {'all_tenants': 1, 'project_id': OTHER_PROJECT},
            {'all_tenants': 1, 'status': 'ERROR'},
            {'all_tenants': 1, 'status': 'ACTIVE'},
            {'all_tenants': 1, 'name': 'srv-a'},
            {'all_tenants': 1, 'name': '^srv-.-2$'},
            {'all_tenants': 1, 'host': 'host2'},
            {'all_tenants': 1, 'changes-since': changes},
            {'all_tenants': 1, 'ip': '192.168.1.'},
            {'all_tenants': 1, 'uuid': first['id']},
            {'all_tenants': 1, 'deleted': 'false'},
        ]
        for params in filters:
            for version in ('2.1', 'latest'):
                self.assertSameAnswer(
                    '/servers/detail?%s' % _query(params), version)
        for params in ({'all_tenants': 1, 'tags': 'red'},
                       {'all_tenants': 1, 'not-tags': 'red'},
                       {'all_tenants': 1, 'tags-any': 'red,blue'}):
            self.assertSameAnswer('/servers?%s' % _query(params), '2.26')
        # A member, and a reader (nova's other role that may list), see
        # their own project, in both.
        reader_api = api_client.TestOpenStackClient(
            'reader', self.deployment.api_fixture.base_url,
            project_id=OTHER_PROJECT, roles=['reader'])
        for api in (self.other_api, reader_api):
            for version in ('2.1', '2.73', 'latest'):
                body = self.assertSameAnswer('/servers/detail', version,
                                             api=api)
                self.assertEqual(
                    {OTHER_PROJECT},
                    {s['tenant_id']
                     for s in jsonutils.loads(body.content)['servers']})

    def test_tag_filters_paged_the_same(self):
        """Every tag filter, unpaged, in pages of 1 to 3 and walked.

        nova filters ``tags-any`` with a JOIN on tags (``tags`` with one
        per tag): a server with several of the tags is several rows in
        SQL. Each server is listed once and counts once against the
        limit, in both listers. The filters take turns at 2.26 and the
        newest microversion (what a microversion changes in the body is
        :meth:`test_every_microversion_lists_the_same`'s).
        """
        filters = [{'tags': 'red'}, {'tags': 'red,blue'},
                   {'tags-any': 'red,blue,green'}, {'tags-any': 'blue,green'},
                   {'not-tags': 'red,blue'}, {'not-tags-any': 'red,green'},
                   {'tags': 'blue', 'tags-any': 'red,green'},
                   {'tags-any': 'red,blue', 'not-tags': 'green'}]
        for params, version in zip(filters, itertools.cycle(('2.26',
                                                             'latest'))):
            params = dict(params, all_tenants=1)
            for limit in (None, 1, 3):
                page = dict(params, limit=limit) if limit else params
                self.assertSameAnswer(
                    '/servers/detail?%s' % _query(page), version)
            walked = self._walk('/servers/detail', params, version, True)
            self.assertEqual(
                self._walk('/servers/detail', params, version, False),
                walked, params)
            ids = [s['id'] for s in walked]
            self.assertEqual(len(set(ids)), len(ids), params)
        everything = self._walk('/servers', {'all_tenants': 1,
                                             'tags-any': 'red,blue,green'},
                                '2.26', True, limit=1000)
        self.assertEqual(6, len(everything))

    def test_deleted_servers_the_same(self):
        """Deleted and mixed listings, after nova deleted two servers.

        nova's delete soft-deletes a server's instance_extra, info cache
        and metadata rows with it; ``deleted=true`` lists deleted
        servers, ``changes-since`` live and deleted ones together.
        """
        # The next test gets a deployment of its own.
        self.addCleanup(DEPLOYMENT.dirtied, self.deployment)
        self.admin_api.microversion = 'latest'
        for server in self.servers[1:3]:
            self.deployment._delete_server(server)
        changes = (datetime.datetime.now(datetime.timezone.utc) -
                   datetime.timedelta(hours=1)).isoformat()
        for params in ({'all_tenants': 1, 'deleted': 'true'},
                       {'deleted': 'true'},
                       {'all_tenants': 1, 'changes-since': changes},
                       {'all_tenants': 1, 'changes-since': changes,
                        'tags-any': 'red,blue'}):
            for version in ('2.1', '2.26', 'latest'):
                for limit in (None, 1, 3):
                    page = dict(params, limit=limit) if limit else params
                    self.assertSameAnswer(
                        '/servers/detail?%s' % _query(page), version)
                self.assertEqual(
                    self._walk('/servers/detail', params, version, False),
                    self._walk('/servers/detail', params, version, True))
        body = self.assertSameAnswer(
            '/servers/detail?all_tenants=1&deleted=true', 'latest')
        listed = jsonutils.loads(body.content)['servers']
        self.assertEqual({s['id'] for s in self.servers[1:3]},
                         {s['id'] for s in listed})

    def test_a_project_without_cell_mappings_is_listed_in_every_cell(self):
        """``[api] instance_list_per_project_cells``, no mappings: all cells.

        nova's lister asks every cell when a project has no instance
        mappings (``CrossCellLister``: ``if self.cells``), and so must
        ours. Regression: an empty list of cells listed no cell at all.
        """
        self.addCleanup(DEPLOYMENT.dirtied, self.deployment)
        ctxt = nova_context.get_admin_context()
        mine = objects.InstanceMappingList.get_by_project_id(
            ctxt, OTHER_PROJECT)
        self.assertGreater(len(mine), 1)
        for mapping in mine:
            mapping.destroy()
        self.assertEqual([], objects.CellMappingList.get_by_project_id(
            ctxt, OTHER_PROJECT).objects)
        self.flags(instance_list_per_project_cells=True, group='api')
        for version in ('2.1', 'latest'):
            for path in ('/servers', '/servers/detail'):
                body = self.assertSameAnswer(path, version,
                                             api=self.other_api)
                self.assertEqual(
                    len(mine), len(jsonutils.loads(body.content)['servers']))

    def test_bad_input_gets_nova_errors(self):
        """A bad marker, sort key, limit or filter: nova's own error."""
        urls = [
            '/servers?marker=%s' % 'not-a-server',
            '/servers?marker=00000000-0000-0000-0000-000000000000',
            '/servers?sort_key=nosuchkey',
            '/servers?sort_key=display_name&sort_dir=sideways',
            '/servers?limit=-1',
            '/servers?limit=abc',
            '/servers/detail?changes-since=yesterday',
            '/servers/detail?all_tenants=1&limit=0',
        ]
        for url in urls:
            for version in ('2.1', 'latest'):
                self.assertSameAnswer(url, version)

    def test_down_cell_the_same(self):
        """A cell down: skipped at 2.1, minimal constructs at 2.69."""
        cell2 = [cm for cm in objects.CellMappingList.get_all(
            nova_context.get_admin_context()) if cm.name == 'cell2']
        with nova_fixtures.DownCellFixture(cell2):
            for version in ('2.1', '2.69', 'latest'):
                for path in ('/servers', '/servers/detail'):
                    body = self.assertSameAnswer(
                        path + '?all_tenants=1', version)
                    listed = jsonutils.loads(body.content)['servers']
                    self.assertEqual(len(self.servers) - (
                        PER_CELL['cell2'] if version == '2.1' else 0),
                        len(listed))
            # Paging or sorting at 2.69: the down cell is skipped.
            self.assertSameAnswer(
                '/servers/detail?all_tenants=1&limit=3', '2.69')
            self.flags(list_records_by_skipping_down_cells=False,
                       group='api')
            nova, ours = self._both('/servers?all_tenants=1', '2.1')
            self.assertEqual(500, nova.status_code)
            self.assertEqual(nova.content, ours.content)

    def test_view_lookups_read_lean_and_answer_the_same(self):
        """Faults, volumes and request specs read by us, bodies nova's.

        With the ``api_view_*`` options on, a served detail list reads
        the faults (cell0's server has one) and the volumes per cell
        (two on one
        server, in nova's order) and, from 2.96, the zones and hints
        from the specs' JSON; the spec of a server whose group was
        deleted is built by nova (which drops the group hint). Off:
        nova's lookups, the same bodies.
        """
        from nova_cellsched.api.view import lookups as view
        # nova 31 and 32 read faults through the list's context, not
        # cell by cell: nothing to narrow, nova's own fill_faults runs.
        per_cell = render.gates().faults_per_cell
        for lean in (True, False):
            self.flags(api_view_bdms=lean, api_view_request_specs=lean,
                       api_view_faults=lean, group='cellsched')
            for version in ('2.1', '2.69', '2.96', '2.100', 'latest'):
                before = view.USED.snapshot()
                body = self.assertSameAnswer(
                    '/servers/detail?all_tenants=1', version)
                used = {k: v - before[k]
                        for k, v in view.USED.snapshot().items()}
                # Ours only (nova's lister served the other request);
                # every server has a spec, srv-group's is nova's.
                specs = lean and version in ('2.96', '2.100', 'latest')
                self.assertEqual(
                    {'bdms': int(lean), 'faults': int(lean and per_cell),
                     'request_specs': (len(self.servers) - 1) * specs,
                     'request_specs_nova': int(specs), 'rows': 0},
                    used, version)
                servers = {s['name']: s for s in
                           jsonutils.loads(body.content)['servers']}
                volumes = servers['srv-hints'][
                    'os-extended-volumes:volumes_attached']
                self.assertEqual(2, len(volumes))
                if version in ('2.100', 'latest'):
                    self.assertEqual(
                        {'cellsched_rack': ['r12'],
                         'cellsched_list': ['b', 'a']},
                        servers['srv-hints']['scheduler_hints'])
                    self.assertEqual(
                        {}, servers['srv-group']['scheduler_hints'])
        self.assertSameAnswer('/servers?all_tenants=1', 'latest')

    def test_microversions_the_renderer_does_not_know_go_to_nova(self):
        """Above ``render.MAX_VERSION``, nova's objects and view answer.

        As when a new nova release adds a microversion: the renderer is
        told it knows only up to 2.26 here, so 2.47 and later lists are
        built by nova's view from nova's objects (the listing's same
        rows), and the bodies are still nova's.
        """
        from nova_cellsched.api.view import lookups as view
        self.useFixture(fixtures.MockPatchObject(render, 'MAX_VERSION',
                                                 '2.26'))
        before = view.USED.snapshot()['rows']
        for version in ('2.26', '2.47', '2.96', 'latest'):
            for path in ('/servers', '/servers/detail'):
                self.assertSameAnswer(path + '?all_tenants=1', version)
        self.assertSameAnswer('/servers/detail?limit=3', 'latest')
        # The listing read the renderer's columns only; nova's view got
        # whole rows, read again (2.47, 2.96, latest, the page; twice
        # each: index and detail but the page).
        self.assertEqual(7, view.USED.snapshot()['rows'] - before)

    def test_a_cell_failing_to_give_rows_again_fails_the_request(self):
        """A cell failing between the listing and nova's view: a 500.

        Rows left to nova's view are read whole again from their
        cells; a cell that fails then is named in the log, the list is
        not answered, and the next request is answered again.
        """
        from oslo_db import exception as db_exc

        from nova_cellsched.api.view import lookups as view
        self.useFixture(fixtures.MockPatchObject(render, 'MAX_VERSION',
                                                 '2.26'))
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        cell2 = [cm for cm in objects.CellMappingList.get_all(
            nova_context.get_admin_context()) if cm.name == 'cell2'][0]
        rows = view._PerCell.rows.__func__

        def failing(cls, cctxt, by_cell, columns_to_join):
            if cctxt.cell_uuid == cell2.uuid:
                raise db_exc.DBConnectionError('cell2 is gone')
            return rows(cls, cctxt, by_cell, columns_to_join)

        with fixtures.MockPatchObject(view._PerCell, 'rows',
                                      classmethod(failing)):
            response = self._get(self.admin_api,
                                 '/servers/detail?all_tenants=1', True,
                                 '2.47')
        self.assertEqual(500, response.status_code)
        self.assertIn('listed servers of cell %s' % cell2.uuid,
                      logs.output)
        self.assertIn('DBConnectionError: cell2 is gone', logs.output)
        self.assertSameAnswer('/servers/detail?all_tenants=1', '2.47')

    def test_api_render_rows_off_is_nova_view(self):
        """``api_render_rows = False``: nova's objects and view."""
        self.flags(api_render_rows=False, group='cellsched')
        before = render.USED.snapshot()
        for version in ('2.1', 'latest'):
            for path in ('/servers', '/servers/detail'):
                self.assertSameAnswer(path + '?all_tenants=1', version)
        self.assertEqual(before, render.USED.snapshot())

    def test_a_listing_runs_down_the_layers(self):
        """GET /servers/detail runs through the parts in one direction.

        Every call between the package's modules in every thread of the
        request (the listing workers restarted inside the watch): none
        goes from ``compat`` up into a part (the nova-api parts, the
        scheduler, the listers), and the modules and the edges between
        the parts are attached (the contributor guide's request path).
        """
        from nova_cellsched.api.hooks import pool
        from tests.fixtures import request_path

        for version in ('2.1', 'latest'):
            self.admin_api.microversion = version
            pool.shutdown()
            with request_path.RequestPath() as path:
                self.admin_api.api_get('/servers/detail?all_tenants=1')
            pool.shutdown()
            self.addDetail('request-path-%s' % version,
                           testtools.content.text_content(path.summary()))
            self.assertEqual([], path.up_from_compat(), version)
            self.assertIn('nova_cellsched.api.view.render', path.modules)

    def test_api_lister_off_is_nova(self):
        """``api_lister = False``: nova's lister serves; on again: ours."""
        self.flags(api_lister=False, group='cellsched')
        before = cellsched_api.served()
        self.admin_api.api_get('/servers/detail?all_tenants=1')
        after = cellsched_api.served()
        self.assertEqual(before['cellsched'], after['cellsched'])
        self.assertEqual(before['nova'] + 1, after['nova'])
        self.flags(api_lister=True, group='cellsched')
        self.admin_api.api_get('/servers/detail?all_tenants=1')
        self.assertEqual(after['cellsched'] + 1,
                         cellsched_api.served()['cellsched'])

    def test_served_lists_say_where_the_time_went(self):
        """A Server-Timing header on served lists, and a log line.

        Per W3C's grammar, the phases adding up to the total, the
        slowest cell named; not on other responses, nor with the option
        off or nova's lister serving; the log line names each cell and a
        down one.
        """
        logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.api', level=logging.DEBUG))
        cells = {cm.name for cm in objects.CellMappingList.get_all(
            nova_context.get_admin_context())}
        for path in ('/servers?all_tenants=1',
                     '/servers/detail?all_tenants=1&limit=3'):
            response = self._get(self.admin_api, path, True, 'latest')
            metrics = timing_grammar.parse(
                response.headers['Server-Timing'])
            # No validation phase where the release validates no
            # server-list response (nova 31 and 32: the part is off).
            self.assertEqual(['total', 'gather', 'merge', 'objects', 'view'] +
                             (['validation'] if compat.is_on('validation')
                              else []) + ['other'], list(metrics))
            total = float(metrics['total']['dur'])
            self.assertLessEqual(
                sum(float(m['dur']) for name, m in metrics.items()
                    if name != 'total'), total + 0.05 * len(metrics))
            slowest = metrics['gather']['desc'].split()[1]
            self.assertIn(slowest, cells)
        self.assertIn('Listed ', logs.output)
        for name in cells:
            self.assertIn(name + ' ', logs.output)

        flavors = self.admin_api.api_request('/flavors')
        self.assertNotIn('Server-Timing', flavors.headers)
        nova_lister = self._get(self.admin_api, '/servers', False, 'latest')
        self.assertNotIn('Server-Timing', nova_lister.headers)
        self.flags(api_server_timing=False, group='cellsched')
        off = self._get(self.admin_api, '/servers', True, 'latest')
        self.assertNotIn('Server-Timing', off.headers)

        cell2 = [cm for cm in objects.CellMappingList.get_all(
            nova_context.get_admin_context()) if cm.name == 'cell2']
        with nova_fixtures.DownCellFixture(cell2):
            self._get(self.admin_api, '/servers?all_tenants=1', True, '2.1')
        self.assertIn('down: cell2', logs.output)

    # Where nova is wrong

    def _expected_order(self, sort):
        """Every server, in the order *sort* defines (NULL lowest)."""
        detail = jsonutils.loads(self._get(
            self.admin_api, '/servers/detail?all_tenants=1', True,
            'latest').content)['servers']

        def key(server):
            parts = []
            for name, direction in sort:
                value = server[FIELD[name]]
                rank = 0 if value is None else 1
                if direction == 'desc':
                    parts.append(_Reversed((rank, value or '')))
                else:
                    parts.append((rank, value or ''))
            return parts + [server['id']]

        return [s['id'] for s in sorted(detail, key=key)]

    def test_null_sort_values_nova_fails_ours_answers(self):
        """NULL sort values in several cells: nova 500, ours the order.

        nova's RecordSortContext.compare_records compares values with
        ``<``: None against a datetime (or None) raises TypeError.
        """
        for sort in NULL_SORTS:
            params = {'all_tenants': 1,
                      'sort_key': [k for k, _d in sort],
                      'sort_dir': [d for _k, d in sort]}
            url = '/servers/detail?%s' % _query(params)
            nova, ours = self._both(url, 'latest')
            self.assertEqual(500, nova.status_code, (sort, nova.text))
            self.assertEqual(200, ours.status_code, (sort, ours.text))
            self.assertEqual(
                self._expected_order(sort),
                [s['id'] for s in jsonutils.loads(ours.content)['servers']],
                sort)
            # Paging after a marker gives the same order, nothing lost
            # or repeated.
            walked = self._walk('/servers/detail', params, 'latest', True,
                                limit=3)
            self.assertEqual(self._expected_order(sort),
                             [s['id'] for s in walked], sort)


class CellschedInNovaApiFixtureTest(base.TestCase):
    """The test fixture leaves nothing behind."""

    def test_paste_file_lives_as_long_as_the_fixture(self):
        """nova reads the filtered api-paste.ini; it is gone at cleanup.

        Was a leak: every test process left a ``cellsched-paste-*``
        directory in /tmp.
        """
        fixture = nova_api.CellschedInNovaApi()
        fixture.setUp()
        try:
            conf = nova_conf_fixture.ConfFixture(nova.conf.CONF)
            conf.setUp()
            try:
                paste = nova.conf.CONF.wsgi.api_paste_config
                with open(paste) as handle:
                    self.assertIn('[filter:cellsched]', handle.read())
            finally:
                conf.cleanUp()
        finally:
            fixture.cleanUp()
        self.assertFalse(os.path.exists(paste), paste)
        self.assertFalse(os.path.exists(os.path.dirname(paste)), paste)


class _Reversed:
    """Sorts its value in reverse (for descending keys of mixed types)."""

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        return other.value < self.value

    def __eq__(self, other):
        return self.value == other.value
