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

"""oslo.policy's tools show the Server-Timing rules, from setup.cfg.

The entry points are those setup.cfg declares, as pip installs them
(an ``entry_points.txt`` in a ``.dist-info``), so the tools run as an
operator's do, whatever the venv's install of the package holds.
"""

import configparser
import os
import pathlib
import subprocess
import sys

import fixtures

from tests.fixtures import releases

releases.skip_module_unless_nova_api_part()

from nova_cellsched.api.middleware import policies  # noqa: E402
from tests import base  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
GROUPS = ('oslo.policy.policies', 'oslo.policy.enforcer')


class PolicyEntryPointsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        setup = configparser.ConfigParser()
        setup.read(ROOT / 'setup.cfg')
        dist = pathlib.Path(self.tmp, 'nova_cellsched-0.0.0.dist-info')
        dist.mkdir()
        (dist / 'METADATA').write_text(
            'Metadata-Version: 2.1\nName: nova-cellsched\nVersion: 0.0.0\n')
        points = configparser.ConfigParser()
        for group in GROUPS:
            points[group] = dict(
                line.split(' = ') for line in
                setup['entry_points'][group].strip().splitlines())
        with open(dist / 'entry_points.txt', 'w') as handle:
            points.write(handle)
        self.env = dict(os.environ, XDG_CACHE_HOME=self.tmp + '/cache',
                        PYTHONPATH=os.pathsep.join(
                            [self.tmp, str(ROOT)] + sys.path[1:]))

    def run_tool(self, tool, *args):
        script = pathlib.Path(sys.executable).parent / tool
        done = subprocess.run([str(script), *args], env=self.env,
                              cwd=self.tmp, capture_output=True, text=True,
                              timeout=300)
        self.assertEqual(0, done.returncode, done.stderr)
        return done.stdout

    def test_sample_generator_documents_both_rules(self):
        sample = self.run_tool('oslopolicy-sample-generator',
                               '--namespace', 'nova-cellsched')
        self.assertIn('#"%s": "rule:context_is_admin"'
                      % policies.SERVER_TIMING, sample)
        self.assertIn('#"%s": "rule:context_is_admin"'
                      % policies.SERVER_TIMING_CELLS, sample)
        self.assertIn('GET  /servers/detail', sample)

    def test_policy_generator_has_nova_rules_and_ours(self):
        """The enforcer entry point is nova's enforcer plus these rules."""
        effective = self.run_tool('oslopolicy-policy-generator',
                                  '--namespace', 'nova-cellsched')
        self.assertIn('"os_compute_api:servers:index": '
                      '"rule:project_reader_or_admin"', effective)
        self.assertIn('"%s": "rule:context_is_admin"'
                      % policies.SERVER_TIMING_CELLS, effective)
