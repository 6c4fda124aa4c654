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

"""``nova-cellsched check --selftest`` as an operator runs it.

The command's own process, with a nova.conf in a temporary directory:
the static check of the installed nova and the self-test (both listers
on private in-memory databases) run there, not in nova-api.
"""

import os
import subprocess

import fixtures

from tests import base
from tests.functional.test_cli import COMMAND
from tests.functional.test_cli import Run
from tests.functional.test_cli import write_conf


class CheckSelftestTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.env = dict(os.environ)
        self.env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)

    def run_check(self, conf, *extra):
        argv = ['--config-file', conf, 'check', '--selftest'] + list(extra)
        proc = subprocess.run(COMMAND + argv, cwd=self.tmp, env=self.env,
                              capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        return Run(argv, proc.returncode, proc.stdout, proc.stderr)

    def test_this_nova_passes_both(self):
        conf = write_conf(self.tmp, 'nova.conf', api_url='sqlite://',
                          cell0_url='sqlite://')
        run = self.run_check(conf, '-f', 'json')
        self.assertEqual(0, run.code, run)
        rows = {row['Check']: row for row in run.json()}
        self.assertEqual(['installed nova', 'self-test'], sorted(rows))
        self.assertEqual('ok', rows['installed nova']['Result'], run)
        self.assertTrue(rows['installed nova']['Detail'].startswith(
            'nova 34.'), run)
        self.assertEqual('ok', rows['self-test']['Result'], run)
        self.assertNotIn('problem:', run.err)

    def test_without_database_connection_one_line_exit_2(self):
        conf = write_conf(self.tmp, 'nova.conf', api_url='sqlite://')
        run = self.run_check(conf)
        self.assertEqual(2, run.code, run)
        self.assertEqual(
            ["nova-cellsched: error: --selftest needs nova.conf's "
             "[database] connection (nova's instance queries pick their "
             'operators by its scheme); got none: give the nova-api '
             'nova.conf with --config-file'], run.err.splitlines())

    def test_with_api_paste_one_line_exit_2(self):
        conf = write_conf(self.tmp, 'nova.conf', api_url='sqlite://',
                          cell0_url='sqlite://')
        run = self.run_check(conf, '--api-paste', 'api-paste.ini')
        self.assertEqual(2, run.code, run)
        self.assertEqual(['nova-cellsched: error: --selftest and '
                          '--api-paste are two checks: give one'],
                         run.err.splitlines())
