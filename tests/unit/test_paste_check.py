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

"""Which pipelines of an api-paste.ini serve server lists, and with what.

Small hand-written files for the shapes nova's own file does not have
(tests/functional/test_cli_api_paste.py runs the command on nova's).
"""

import os
import textwrap

import fixtures

from nova_cellsched.cmd import paste_check
from tests import base

HEAD = """
[composite:osapi_compute]
use = call:nova.api.openstack.urlmap:urlmap_factory
/: versions
/v2.1/+: api

[app:versions]
paste.app_factory = nova.api.openstack.compute.versions:Versions.factory

[app:compute]
paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory

[filter:cellsched]
paste.filter_factory = nova_cellsched.api:filter_factory

[filter:faultwrap]
paste.filter_factory = nova.api.openstack:FaultWrapper.factory
"""


class InspectTestCase(base.TestCase):

    def inspect(self, text):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'api-paste.ini')
        with open(path, 'w') as f:
            f.write(textwrap.dedent(HEAD) + textwrap.dedent(text))
        return paste_check.inspect(path)

    def test_filter_before_an_inner_composite_wraps_its_pipelines(self):
        """A pipeline ending in a composite: its filters count inside."""
        report = self.inspect("""
            [pipeline:api]
            pipeline = cellsched inner

            [composite:inner]
            use = call:nova.api.auth:pipeline_factory_v21
            keystone = faultwrap compute
            """)
        self.assertEqual([], report.problems)
        [pipeline] = report.pipelines
        self.assertEqual(('cellsched', 'faultwrap', 'compute'),
                         pipeline.names)
        self.assertEqual('1 of 3, before faultwrap', pipeline.position)
        self.assertEqual('/v2.1/+', pipeline.served_at)

    def test_app_reached_without_pipeline_lacks_the_filter(self):
        """The URL map naming the app itself: a pipeline of one, no filter.
        """
        report = self.inspect("""
            [composite:api]
            use = call:nova.api.openstack.urlmap:urlmap_factory
            /: compute
            """)
        [pipeline] = report.pipelines
        self.assertEqual(('composite:api', '/'),
                         (pipeline.section, pipeline.key))
        self.assertEqual(('compute',), pipeline.names)
        self.assertEqual('/v2.1/+', pipeline.served_at)
        self.assertIn('[composite:api] /: the cellsched filter is not in '
                      'this pipeline', report.problems[0])

    def test_filter_app_on_the_way_is_a_note_not_a_guess(self):
        """[filter-app:...] is not followed: said, and nothing found."""
        report = self.inspect("""
            [filter-app:api]
            paste.filter_factory = nova_cellsched.api:filter_factory
            next = compute
            """)
        self.assertEqual([], report.pipelines)
        self.assertIn('[filter-app:api] (filter-app) was not followed',
                      report.notes[0])
        self.assertIn("no pipeline ends in nova's compute application",
                      report.problems[0])

    def test_pipeline_nova_api_does_not_reach_is_not_a_problem(self):
        """Only pipelines under [composite:osapi_compute] must have it."""
        report = self.inspect("""
            [composite:api]
            use = call:nova.api.auth:pipeline_factory_v21
            keystone = faultwrap cellsched compute

            [composite:spare]
            use = call:nova.api.auth:pipeline_factory_v21
            keystone = faultwrap compute
            """)
        self.assertEqual([], report.problems)
        spare = [p for p in report.pipelines if p.section == 'composite:spare']
        self.assertEqual(1, len(spare))
        self.assertFalse(spare[0].used)

    def test_here_is_interpolated_as_paste_deploy_does(self):
        """%(here)s and [DEFAULT] values resolve before matching."""
        report = self.inspect("""
            [DEFAULT]
            factory = nova_cellsched.api:filter_factory
            [filter:listing]
            paste.filter_factory = %(factory)s
            [composite:api]
            use = call:nova.api.auth:pipeline_factory_v21
            keystone = faultwrap listing compute
            """)
        self.assertEqual([], report.problems)
        self.assertEqual(1, report.pipelines[0].filter_at)

    def test_wrong_factory_under_the_filter_name_is_a_problem(self):
        report = self.inspect("""
            [filter:cellsched2]
            paste.filter_factory = nova_cellsched.api:filter_factroy
            [composite:api]
            use = call:nova.api.auth:pipeline_factory_v21
            keystone = faultwrap cellsched2 compute
            """)
        self.assertIn('the cellsched filter is not in this pipeline',
                      report.problems[0])
