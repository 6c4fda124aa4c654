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

"""A new operator's path (issue 41): each edge, as they met it.

The command runs as a process of its own, as an operator runs it, on a
small SQLite demo world built once by ``nova-cellsched demo``. A driver
"not installed" is one the process cannot import: the command runs
under ``python -c`` with the module's ``sys.modules`` entry set to None
(what Python's import system reads as "not found"), or genuinely
missing (mysqlclient, not in the test requirements). Databases that do
not answer are loopback ports (no traffic leaves the host).
"""

import concurrent.futures
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


from nova_cellsched.demo import api as demo_api
from tests import base
from tests.fixtures import db
from tests.functional.test_cli import COMMAND
from tests.functional import test_demo_api

#: ``nova-cellsched`` in a process where the modules of argv[1] (comma
#: separated) cannot be imported.
WITHOUT = '''
import sys
for name in sys.argv.pop(1).split(','):
    sys.modules[name] = None
from nova_cellsched.cmd.cellsched import console_main
sys.argv[0] = 'nova-cellsched'
sys.exit(console_main())
'''


def run(*args, cwd=None, timeout=180, without=None):
    """``nova-cellsched *args``: (exit code, stdout, stderr, seconds)."""
    env = dict(os.environ)
    env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
    command = list(COMMAND)
    if without:
        command = [sys.executable, '-c', WITHOUT, ','.join(without)]
    start = time.monotonic()
    proc = subprocess.run(command + list(args), cwd=cwd, env=env,
                          capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, text=True)
    return (proc.returncode, proc.stdout, proc.stderr,
            time.monotonic() - start)


def write_conf(directory, name, api_url, cells_default='',
               cells_projects='', extra=''):
    path = os.path.join(directory, name)
    with open(path, 'w') as handle:
        handle.write('[DEFAULT]\ntransport_url = fake://\n'
                     '[api_database]\nconnection = %s\n'
                     '[cellsched]\ncells_default = %s\n'
                     'cells_projects = %s\n%s' % (
                         api_url, cells_default, cells_projects, extra))
    return path


def silent_port(test, accept_queue_full):
    """A loopback port whose server never speaks; closed at cleanup.

    With *accept_queue_full*, its queue of accepted connections is full,
    so the kernel drops further handshakes and a connect stalls, as to
    an unroutable address; else the connect completes and the database
    handshake waits for a greeting that never comes.
    """
    server = socket.socket()
    test.addCleanup(server.close)
    server.bind(('127.0.0.1', 0))
    server.listen(0 if accept_queue_full else 8)
    port = server.getsockname()[1]
    if accept_queue_full:
        for _ in range(3):
            filler = socket.socket()
            test.addCleanup(filler.close)
            filler.setblocking(False)
            try:
                filler.connect(('127.0.0.1', port))
            except BlockingIOError:
                pass
        time.sleep(0.2)
    return port


class OperatorPathTest(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.top = tempfile.mkdtemp(prefix='ncs-operator-')
        cls.addClassCleanup(shutil.rmtree, cls.top, True)
        cls.world = os.path.join(cls.top, 'world')
        code, _out, err, _s = run('demo', '--cells', '2', '--instances',
                                  '20', '--dir', cls.world, cwd=cls.top)
        assert code == 0, err
        cls.conf = os.path.join(cls.world, 'nova.conf')
        with open(cls.conf) as handle:
            cls.api_url = next(
                line.split('=', 1)[1].strip() for line in handle
                if line.startswith('connection') and '_api' in line)

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(dir=self.top)

    def assertOneErrorLine(self, code, result, *quoted):
        got, out, err, _seconds = result
        self.assertEqual(code, got, result)
        self.assertEqual('', out, result)
        lines = err.splitlines()
        self.assertEqual(1, len(lines), result)
        self.assertTrue(lines[0].startswith('nova-cellsched: error: '),
                        result)
        for text in quoted:
            self.assertIn(text, lines[0], result)

    # Item 3: a missing database driver names its package.

    def test_missing_api_database_driver_names_the_package(self):
        cases = [
            ('mysql+pymysql://nova:pw@127.0.0.1:1/nova_api', ['pymysql'],
             'its driver module pymysql is not installed',
             '-m pip install PyMySQL'),
            ('postgresql://nova:pw@127.0.0.1:1/nova_api', ['psycopg2'],
             'its driver module psycopg2 is not installed',
             '-m pip install psycopg2-binary'),
            ('mysql://nova:pw@127.0.0.1:1/nova_api', ['MySQLdb'],
             'its driver module MySQLdb is not installed',
             '-m pip install mysqlclient'),
        ]
        for url, missing, *quoted in cases:
            conf = write_conf(self.tmp, 'missing.conf', url, 'cell1')
            for command in (['list'], ['check'],
                            ['explain', '--project', 'p']):
                self.assertOneErrorLine(
                    2, run('--config-file', conf, *command,
                           without=missing),
                    '[api_database] connection %s' % url.replace(
                        ':pw@', ':***@'), *quoted)

    def test_missing_cell_database_driver_names_the_package(self):
        """check's warning on a used cell says what to install."""
        cell = db.add_cell_mapping(
            self.api_url, 'pgcell',
            'postgresql://nova:pw@127.0.0.1:1/cell')
        self.addCleanup(db.remove_cell_mapping, self.api_url, cell)
        conf = write_conf(self.tmp, 'pg.conf', self.api_url,
                          'cell1,pgcell')
        code, out, err, _s = run('--config-file', conf, 'check',
                                 without=['psycopg2'])
        self.assertEqual(0, code, (out, err))
        self.assertIn('cell pgcell (%s) is used by [cellsched] '
                      'cells_default or cells_projects but its database '
                      'does not answer: ModuleNotFoundError: ' % cell, err)
        self.assertIn('its driver module psycopg2 is not installed', err)
        self.assertIn('-m pip install psycopg2-binary', err)
        self.assertNotIn('Traceback', err)

    def test_mysqlclient_is_not_installed_here(self):
        """The mysql:// case above is a module really missing here."""
        if importlib.util.find_spec('MySQLdb') is not None:
            self.skipTest('mysqlclient is installed')
        conf = write_conf(self.tmp, 'mysqldb.conf',
                          'mysql://nova@127.0.0.1:1/nova_api')
        self.assertOneErrorLine(2, run('--config-file', conf, 'list'),
                                '-m pip install mysqlclient')

    # Item 5: a database that does not answer costs the commands' bound.

    def test_api_database_that_never_answers_fails_within_the_bound(self):
        """5 s for the connect and its handshake, then one line, exit 3.

        PyMySQL waited 10 s for a connect (an unroutable address) and
        without end for the greeting of a server that accepts and never
        speaks; libpq without end for either.
        """
        cases = []
        for queue_full in (True, False):
            port = silent_port(self, queue_full)
            for scheme in ('mysql+pymysql', 'postgresql'):
                cases.append('%s://nova:pw@127.0.0.1:%d/nova_api'
                             % (scheme, port))
        runs = []
        for n, url in enumerate(cases):
            conf = write_conf(self.tmp, 'silent%d.conf' % n, url, 'cell1')
            runs += [(url, ['--config-file', conf, command])
                     for command in ('list', 'check')]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(
                lambda args: run(*args, timeout=60),
                [args for _url, args in runs]))
        for (url, _args), result in zip(runs, results):
            self.assertEqual(3, result[0], (url, result))
            error = [line for line in result[2].splitlines()
                     if line.startswith('nova-cellsched: error:')]
            self.assertEqual(1, len(error), (url, result))
            self.assertIn('cannot read the nova API database at %s: '
                          'no answer within 5 seconds' % url.replace(
                              ':pw@', ':***@'), error[0])
            self.assertNotIn('Traceback', result[2])
            # The bound plus start-up, with a generous margin.
            self.assertLess(result[3], 30, (url, result))

    def test_operators_timeout_is_kept(self):
        """A connect_timeout the operator set is the one used."""
        port = silent_port(self, True)
        conf = write_conf(
            self.tmp, 'own.conf',
            'mysql+pymysql://nova@127.0.0.1:%d/nova_api' % port, 'cell1',
            extra='[api_database]\nconnection_parameters = '
                  'connect_timeout=1&read_timeout=1\n')
        code, _out, err, _seconds = run('--config-file', conf, 'check')
        self.assertEqual(3, code, err)
        self.assertIn('(timed out)', err)
        self.assertNotIn('within 5 seconds', err)

    # Item 6: explain names the cells that do not resolve.

    def test_explain_names_unknown_cells(self):
        conf = write_conf(self.tmp, 'typos.conf', self.api_url,
                          'cell1,cel2', 'cell99:P')
        code, out, err, _s = run('--config-file', conf, 'explain',
                                 '--project', 'P', '-f', 'json')
        self.assertEqual(1, code, err)
        problems = [line for line in err.splitlines()
                    if line.startswith('problem: ')]
        self.assertEqual(2, len(problems), err)
        self.assertIn("problem: unknown cell 'cell99': named in "
                      'cells_projects but no cell mapping has this name',
                      problems[0])
        self.assertIn("problem: project has no usable cell 'P'", problems[1])
        self.assertIn('project P may use no cell', err)
        self.assertNotIn('cel2', err)
        rows = {r['Cell']: r for r in json.loads(out)}
        self.assertEqual(('', 'no'), (rows['cell99']['UUID'],
                                      rows['cell99']['New servers']))
        self.assertIn('unknown cell', rows['cell99']['Why'])
        self.assertEqual({'no'}, {r['New servers'] for r in rows.values()})

        # An unmapped project gets cell1; cel2 is named all the same.
        code, out, err, _s = run('--config-file', conf, 'explain',
                                 '--project', 'Q', '-f', 'json')
        self.assertEqual(1, code, err)
        self.assertIn("problem: unknown cell 'cel2': named in "
                      'cells_default', err)
        self.assertNotIn('cell99', err)
        rows = {r['Cell']: r['New servers'] for r in json.loads(out)}
        self.assertEqual('yes', rows['cell1'])
        self.assertEqual('no', rows['cel2'])

        # Options without problems for the project: exit 0, as before.
        code, _out, err, _s = run(
            '--config-file', write_conf(self.tmp, 'ok.conf', self.api_url,
                                        'cell1', 'cell99:P'),
            'explain', '--project', 'Q')
        self.assertEqual(0, code, err)
        self.assertNotIn('problem', err)

    # Item 7: the command's output on stdout, in order; diagnostics on
    # stderr; files written are named.

    def test_demo_output_is_on_stdout_in_order(self):
        """``demo > file`` keeps the table, timings and next steps."""
        world = os.path.join(self.tmp, 'again')
        code, out, err, _s = run('demo', '--cells', '1', '--instances', '5',
                                 '--dir', world, cwd=self.tmp)
        self.assertEqual(0, code, err)
        parts = ['Built 2 cells (cell0 included)', '| Cell  | Database',
                 '\nListed ', '| Total ms |', 'Trace: %s (open in '
                 % os.path.join(world, 'trace.json'),
                 'Stats: %s' % os.path.join(world, 'stats.json'),
                 'Next, try:\n', ' check\n']
        where = [out.find(part) for part in parts]
        self.assertNotIn(-1, where, out)
        self.assertEqual(sorted(where), where, out)
        # Progress only, on stderr.
        self.assertTrue(err.startswith('Building the demo in '), err)
        for part in ('Listed', 'Next, try', 'Trace', 'Built', '| Cell'):
            self.assertNotIn(part, err)

        # For programs (-f json), stdout is the rows alone.
        code, out, err, _s = run('demo', '--cells', '1', '--instances', '5',
                                 '--dir', world, '-f', 'json', cwd=self.tmp)
        self.assertEqual(0, code, err)
        self.assertEqual(['cell0', 'cell1'],
                         [r['Cell'] for r in json.loads(out)])
        self.assertIn('Reused 2 cells', err)
        self.assertIn('Next, try:', err)

    def test_list_names_the_files_it_writes(self):
        trace = os.path.join(self.tmp, 'trace.json')
        stats = os.path.join(self.tmp, 'stats.json')
        code, out, err, _s = run('--config-file', self.conf, 'list',
                                 '--limit', '3', '-f', 'json', '--trace',
                                 'trace.json', '--stats', 'stats.json',
                                 cwd=self.tmp)
        self.assertEqual(0, code, err)
        self.assertEqual(3, len(json.loads(out)))
        self.assertIn('Trace: %s (open in https://ui.perfetto.dev or '
                      'chrome://tracing)\n' % trace, err)
        self.assertIn('Stats: %s\n' % stats, err)
        for path in (trace, stats):
            self.assertTrue(os.path.isfile(path), path)


class DemoApiPortTest(base.TestCase):
    """``demo --api`` names its port, and the ``--port`` that keeps it."""

    def setUp(self):
        super().setUp()
        problem = demo_api.uwsgi_missing()
        if problem:
            self.skipTest(problem)
        self.tmp = tempfile.mkdtemp(prefix='ncs-port-')
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def serve(self, *args):
        """Run ``demo --api *args`` until it serves; stop it; its lines."""
        demo = test_demo_api.Demo(
            self.tmp, '--cells', '1', '--instances', '5', '--dir',
            os.path.join(self.tmp, 'world'), *args)
        self.addCleanup(demo.kill)
        demo.wait_for('Ctrl-C stops nova-api.', test_demo_api.READY_TIMEOUT)
        os.killpg(demo.process.pid, signal.SIGTERM)
        self.assertEqual(0, demo.finish(test_demo_api.STOP_BOUND),
                         demo.output())
        return demo.lines

    def test_port_is_printed_with_how_to_keep_it(self):
        lines = self.serve()
        port = int(re.search(r'nova-api serves http://127\.0\.0\.1:(\d+)/',
                             '\n'.join(lines)).group(1))
        self.assertIn('Port: %d, a free one chosen for this run (another '
                      'each run): --port %d asks for this one again.'
                      % (port, port), lines)
        # Run again with the --port it printed: nova-api serves there.
        lines = self.serve('--port', str(port))
        self.assertIn('nova-api serves http://127.0.0.1:%d/v2.1' % port,
                      '\n'.join(lines))
        self.assertIn('Port: %d (--port %d).' % (port, port), lines)
