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

"""What a new operator meets first (issue 29): each edge, as they met it.

The command runs as a process of its own on a small SQLite demo world
built once by ``nova-cellsched demo`` with stderr a pipe (not a
terminal), as in a log or CI.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import fixtures

from nova_cellsched.demo import api as demo_api
from tests import base
from tests.functional.test_cli import COMMAND

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def run(*args, cwd=None, timeout=180):
    """``nova-cellsched *args``: (exit code, stdout, stderr).

    The output as written: no newline translation (a ``\r`` stays).
    """
    env = dict(os.environ)
    env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
    proc = subprocess.run(COMMAND + list(args), cwd=cwd, env=env,
                          capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return (proc.returncode, proc.stdout.decode(), proc.stderr.decode())


class CliEdgesTest(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.top = tempfile.mkdtemp(prefix='ncs-edges-')
        cls.addClassCleanup(shutil.rmtree, cls.top, True)
        cls.world = os.path.join(cls.top, 'world')
        cls.built = run('demo', '--cells', '1', '--instances', '40',
                        '--dir', cls.world, cwd=cls.top)
        cls.conf = os.path.join(cls.world, 'nova.conf')

    def assertOneErrorLine(self, code, result, *quoted):
        got, out, err = result
        self.assertEqual(code, got, result)
        self.assertEqual('', out, result)
        lines = err.splitlines()
        self.assertEqual(1, len(lines), result)
        self.assertTrue(lines[0].startswith('nova-cellsched: error: '),
                        result)
        for text in quoted:
            self.assertIn(text, lines[0], result)

    # Item 9: no shell of cliff's, no suggestion of its commands.

    def test_no_command_prints_the_commands_and_exits_2(self):
        for args in ([], ['--config-file', self.conf]):
            code, out, err = run(*args)
            self.assertEqual(2, code, (args, out, err))
            self.assertEqual('', out)
            self.assertTrue(err.startswith('usage: nova-cellsched '), err)
            for name in ('check', 'demo', 'explain', 'list',
                         'sync-aggregates'):
                self.assertRegex(err, r'\n  %s +\w' % name)
            self.assertEqual('nova-cellsched: error: a command is required '
                             '(nova-cellsched --help shows every option)',
                             err.splitlines()[-1])

    def test_unknown_command_is_one_error_line(self):
        self.assertOneErrorLine(
            2, run('xyzzy'), "unknown command 'xyzzy'",
            'check, demo, explain, list, sync-aggregates')
        code, _out, err = run('lsit')
        self.assertEqual(2, code)
        self.assertNotIn('complete', err)

    # Item 10.

    def test_demo_progress_is_one_line_a_step_off_a_terminal(self):
        code, _out, err = self.built
        self.assertEqual(0, code, err)
        self.assertNotIn('\r', err)
        self.assertIn('\n  Seeding cell1: 40/40 instances\n', err)
        self.assertEqual(1, err.count('Seeding cell1'), err)

    def test_empty_project_is_refused(self):
        self.assertOneErrorLine(
            2, run('--config-file', self.conf, 'explain', '--project', ''),
            "invalid project ''")
        self.assertOneErrorLine(
            2, run('--config-file', self.conf, 'list', '--project', ' '),
            "invalid project ' '", '--all-projects')

    def test_mistyped_sqlite_api_database_creates_no_file(self):
        typo = os.path.join(self.world, 'cellsched_demo_apii.db')
        with open(self.conf) as handle:
            text = handle.read()
        conf = os.path.join(self.top, 'typo.conf')
        with open(conf, 'w') as handle:
            handle.write(text.replace('cellsched_demo_api.db',
                                      'cellsched_demo_apii.db'))
        self.assertOneErrorLine(3, run('--config-file', conf, 'list'),
                                'no such SQLite file %s' % typo)
        self.assertFalse(os.path.exists(typo))

    def test_wrong_filter_factory_is_one_problem(self):
        directory = self.useFixture(fixtures.TempDir()).path
        path = demo_api.paste_with_filter(directory)
        with open(path) as handle:
            text = handle.read()
        with open(path, 'w') as handle:
            handle.write(text.replace('nova_cellsched.api:filter_factory',
                                      'nova_cellsched.api:filterfactory'))
        code, _out, err = run('check', '--api-paste', path)
        self.assertEqual(1, code, err)
        factory = [line for line in err.splitlines()
                   if 'paste.filter_factory = ' in line]
        self.assertEqual(['problem: [filter:cellsched] has '
                          'paste.filter_factory = '
                          'nova_cellsched.api:filterfactory, expected '
                          'nova_cellsched.api:filter_factory'], factory)
        # Each pipeline says its cellsched is not ours, not that it is
        # missing.
        self.assertEqual(2, err.count('its cellsched is not the cellsched '
                                      'filter'), err)
        self.assertEqual(len(set(err.splitlines())), len(err.splitlines()))

    def test_help_texts_have_no_rst_markup(self):
        for name in ('check', 'demo', 'explain', 'list', 'sync-aggregates'):
            code, out, err = run('help', name)
            self.assertEqual(0, code, err)
            self.assertNotIn('``', out, name)
        self.assertIn('At most --workers placement requests',
                      ' '.join(run('sync-aggregates', '--help')[1].split()))

    def test_long_table_names_power_states_json_keeps_numbers(self):
        code, out, err = run('--config-file', self.conf, 'list', '--long',
                             '-f', 'json')
        self.assertEqual(0, code, err)
        numbers = {r['uuid']: r['power_state'] for r in json.loads(out)}
        self.assertTrue({1, 4} <= set(numbers.values()), numbers)
        code, out, err = run('--config-file', self.conf, 'list', '--long',
                             '-c', 'uuid', '-c', 'power_state', '-f',
                             'csv')
        self.assertEqual(0, code, err)
        names = dict(line.replace('"', '').split(',')
                     for line in out.splitlines()[1:])
        # csv is a machine format: nova's numbers; the table names them.
        self.assertEqual({u: str(n) for u, n in numbers.items()}, names)
        code, out, err = run('--config-file', self.conf, 'list', '--long')
        self.assertEqual(0, code, err)
        column = [cells.split('|')[5].strip() for cells in out.splitlines()
                  if re.match(r'^\| [0-9a-f]{8}-', cells)]
        names = {1: 'Running', 4: 'Shutdown', 0: 'NOSTATE', 3: 'Paused',
                 6: 'Crashed', 7: 'Suspended'}
        self.assertEqual(sorted(names[n] for n in numbers.values()),
                         sorted(column))

    def test_placement_unreachable_is_one_error_line(self):
        conf = os.path.join(self.top, 'placement.conf')
        with open(self.conf) as handle:
            text = handle.read()
        with open(conf, 'w') as handle:
            handle.write(text + '\n[placement]\nauth_type = password\n'
                         'auth_url = http://127.0.0.1:9/identity\n'
                         'username = nova\npassword = x\n'
                         'project_name = service\n'
                         'user_domain_name = Default\n'
                         'project_domain_name = Default\n')
        self.assertOneErrorLine(
            3, run('--config-file', conf, 'sync-aggregates'),
            'cannot reach the placement API')

    def test_clean_removes_the_nova_conf_of_the_dropped_databases(self):
        directory = os.path.join(self.top, 'clean')
        code, _out, err = run('demo', '--cells', '1', '--instances', '5',
                              '--dir', directory, '--prefix', 'other',
                              cwd=self.top)
        self.assertEqual(0, code, err)
        conf = os.path.join(directory, 'nova.conf')
        # Another prefix's databases: its nova.conf stays.
        code, _out, err = run('demo', '--clean', '--yes', '--dir',
                              directory, cwd=self.top)
        self.assertEqual(0, code, err)
        self.assertTrue(os.path.exists(conf))
        code, _out, err = run('demo', '--clean', '--yes', '--dir',
                              directory, '--prefix', 'other', cwd=self.top)
        self.assertEqual(0, code, err)
        self.assertFalse(os.path.exists(conf))
        self.assertIn('Removed %s (it named the dropped databases).'
                      % conf, err)

    # Item 11.

    def test_importing_the_filter_prints_nothing(self):
        env = dict(os.environ, PYTHONPATH=TOP)
        proc = subprocess.run(
            [sys.executable, '-c', 'import nova_cellsched.filters'],
            env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual('', proc.stderr)
