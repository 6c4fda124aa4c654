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

"""``nova-cellsched`` as an operator runs it: a process, a nova.conf, real
databases.

Every test runs the installed console script in a subprocess (the same
native-threads start-up as in production) against a nova.conf written in
a temporary directory. The databases are CellWorld fixtures shared by a
class: SQLite files for ``check``/``explain`` and the configuration
errors, MariaDB for ``list``. A test that adds cell mappings removes
them in its cleanup. Independent invocations run concurrently to keep
the wall time down.
"""

import concurrent.futures
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import textwrap
import time
import uuid as uuid_lib

import fixtures
from nova import context as nova_context
import sqlalchemy as sa

from nova_cellsched.cmd import cellsched
from nova_cellsched.cmd import list_cmd
from nova_cellsched.listing import timing
from nova_cellsched import records as cli_lister
from nova_cellsched.records import query as instance_query
from tests.fixtures import db
from tests.fixtures import worlds

ENTRY_POINT = os.path.join(os.path.dirname(sys.executable), 'nova-cellsched')
COMMAND = ([ENTRY_POINT] if os.path.exists(ENTRY_POINT) else
           [sys.executable, '-m', 'nova_cellsched.cmd.cellsched'])
SECRET = 'Sup3rS3cret'
SECRET_URL = 'mysql+pymysql://nova:%s@127.0.0.1:1/x' % SECRET
MASKED_URL = 'mysql+pymysql://nova:***@127.0.0.1:1/x'
INSTANCES = instance_query.INSTANCES


class Run:
    """One finished ``nova-cellsched`` process."""

    def __init__(self, args, code, out, err):
        self.args, self.code, self.out, self.err = args, code, out, err

    def __repr__(self):
        return ('nova-cellsched %s -> exit %s\n--- stdout:\n%s\n--- stderr:'
                '\n%s' % (' '.join(self.args), self.code, self.out[-3000:],
                          self.err[-3000:]))

    def json(self):
        return json.loads(self.out)

    def table(self):
        """The rows of stdout's first cliff table as dicts (header -> text).

        (The demo prints its listing's timing tables after its own.)
        """
        lines = []
        for line in self.out.splitlines():
            if line.startswith('|'):
                lines.append(line)
            elif lines and not line.startswith('+'):
                break
        split = [[c.strip() for c in line.strip()[1:-1].split('|')]
                 for line in lines]
        return [dict(zip(split[0], row)) for row in split[1:]]


def write_conf(directory, name, api_url=None, cell0_url=None,
               cells_default='', cells_projects='', extra=''):
    """A nova.conf for the command; None api_url leaves the option out."""
    text = '[DEFAULT]\ntransport_url = fake://\n'
    if api_url is not None:
        text += '[api_database]\nconnection = %s\n' % api_url
    if cell0_url is not None:
        text += '[database]\nconnection = %s\n' % cell0_url
    text += ('[cellsched]\ncells_default = %s\ncells_projects = %s\n'
             'list_cell_timeout = 30\n' % (cells_default, cells_projects))
    text += extra
    path = os.path.join(directory, name)
    with open(path, 'w') as handle:
        handle.write(text)
    return path


class CliTestCase(db.FunctionalTestCase):
    """Runs the command; one world per class, built in setUpClass."""

    WORLD_URL = db.MYSQL_URL
    CELLS = ()

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        problem = db.server_available(db.MYSQL_URL)
        if problem is not None:
            raise AssertionError('MariaDB at %s is needed: %s'
                                 % (db.MYSQL_URL, problem))
        world = worlds.CellWorld(cls.WORLD_URL, cls.CELLS)
        world.setUp()
        cls.addClassCleanup(world.cleanUp)
        cls.world = world
        cls.live = world.all_uuids()

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.env = dict(os.environ)
        # The command chooses nova's threading mode itself.
        self.env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)

    def cli(self, *args, conf=None):
        return self.cli_many([args], conf=conf)[0]

    def cli_many(self, arg_lists, conf=None):
        """Run several invocations concurrently; return their Runs."""
        def one(args):
            argv = list(args)
            if conf is not None:
                argv = ['--config-file', conf] + argv
            try:
                proc = subprocess.run(COMMAND + argv, cwd=self.tmp,
                                      env=self.env, capture_output=True,
                                      text=True, timeout=180,
                                      stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired as exc:
                return Run(argv, 'timeout', exc.stdout or '',
                           exc.stderr or '')
            return Run(argv, proc.returncode, proc.stdout, proc.stderr)

        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(one, arg_lists))

    @staticmethod
    def cli_pool_map(function, items):
        """*function* over *items* concurrently, results in order."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(function, items))

    def assertExit(self, code, run):
        self.assertEqual(code, run.code, run)
        self.assertNotIn('Traceback', run.err, run)
        self.assertNotIn('Traceback', run.out, run)

    def all_live(self, names=None):
        names = names or list(self.live)
        return set().union(*(self.live[n] for n in names))

    def add_cell_mapping(self, name, url):
        """Insert a cell mapping (names may repeat); removed at cleanup."""
        cell_uuid = db.add_cell_mapping(self.world.api_url, name, url)
        self.addCleanup(db.remove_cell_mapping, self.world.api_url,
                        cell_uuid)
        return cell_uuid

class CheckExplainCliTest(CliTestCase):
    """check, explain and configuration errors on a SQLite world."""

    WORLD_URL = 'sqlite:///replaced-by-the-fixture'
    CELLS = [
        ('cell0', worlds.Population(instances=4, error_only=True)),
        ('cell1', worlds.Population(instances=15)),
        ('cell2', worlds.Population(instances=15)),
        ('cell3', worlds.Population(instances=10)),
    ]

    def setUp(self):
        super().setUp()
        self.projects = self.world.projects
        # cell1 default, cell2 for two projects, cell3 named nowhere.
        self.conf = write_conf(
            self.tmp, 'nova.conf', self.world.api_url,
            self.world.url_of('cell0'), cells_default='cell1',
            cells_projects='cell2:%s;%s' % tuple(self.projects[:2]))

    def test_check_clean_mapping(self):
        """Exit 0; every cell with its role; the JSON form is the same."""
        table, as_json = self.cli_many([['check'], ['check', '-f', 'json']],
                                       conf=self.conf)
        self.assertExit(0, table)
        self.assertExit(0, as_json)
        self.assertNotIn('problem', table.err)
        expected = {
            'cell0': ('00000000-0000-0000-0000-000000000000',
                      'cell0 (failed builds only)'),
            'cell1': (self.world.uuid_of('cell1'), 'default'),
            'cell2': (self.world.uuid_of('cell2'),
                      'dedicated to 2 project(s)'),
            'cell3': (self.world.uuid_of('cell3'), 'disabled here'),
        }
        rows = table.table()
        self.assertEqual(expected, {r['Cell']: (r['UUID'], r['Role'])
                                    for r in rows})
        self.assertEqual(sorted(expected), [r['Cell'] for r in rows])
        for row in rows:
            self.assertEqual(('False', ''), (row['Disabled in nova'],
                                             row['Problems']))
            self.assertEqual(self.world.url_of(row['Cell']),
                             row['Database'])
        records = as_json.json()
        self.assertEqual(list(cellsched.CHECK_COLUMNS), list(rows[0]))
        self.assertEqual(list(cellsched.CHECK_COLUMNS), list(records[0]))
        self.assertEqual(expected, {r['Cell']: (r['UUID'], r['Role'])
                                    for r in records})
        self.assertEqual({False}, {r['Disabled in nova'] for r in records})

    def test_check_notes_a_quota_count_that_asks_the_cells(self):
        """nova's default counting asks every cell at each boot: a note
        says so and what to set; nothing when no cell is asked. A note
        is advice, not a problem: the exit code stays 0.
        """
        counted = {
            'default': '',
            'placement': '[quota]\ncount_usage_from_placement = True\n',
            'unified': '[quota]\ndriver = nova.quota.UnifiedLimitsDriver\n',
        }
        confs = [write_conf(self.tmp, '%s.conf' % name, self.world.api_url,
                            self.world.url_of('cell0'),
                            cells_default='cell1', extra=extra)
                 for name, extra in counted.items()]
        runs = self.cli_many([['--config-file', c, 'check'] for c in confs])
        for run in runs:
            self.assertExit(0, run)
        notes = [[line for line in run.err.splitlines()
                  if 'count_usage_from_placement' in line] for run in runs]
        self.assertEqual(1, len(notes[0]), runs[0])
        self.assertTrue(notes[0][0].startswith(
            'note: [quota] count_usage_from_placement is False: '), notes)
        self.assertIn("nova's 60 s", notes[0][0])
        self.assertEqual([[], []], notes[1:])

    def test_check_and_explain_show_cells_in_natural_order(self):
        """cell2 before cell10, as an operator counts; names sort last."""
        for name in ('cell10', 'cell-a'):
            self.add_cell_mapping(name, self.world.url_of('cell1'))
        check, explain = self.cli_many(
            [['check', '-f', 'json'],
             ['explain', '--project', self.projects[5], '-f', 'json']],
            conf=self.conf)
        self.assertExit(0, check)
        self.assertExit(0, explain)
        order = ['cell0', 'cell1', 'cell2', 'cell3', 'cell10', 'cell-a']
        self.assertEqual(order, [r['Cell'] for r in check.json()])
        self.assertEqual(order, [r['Cell'] for r in explain.json()])

    def test_explain_dedicated_and_unmapped_projects(self):
        """The yes/no column and the reasons, per cell."""
        dedicated, unmapped = self.cli_many(
            [['explain', '--project', self.projects[0], '-f', 'json'],
             ['explain', '--project', self.projects[5], '-f', 'json']],
            conf=self.conf)
        self.assertExit(0, dedicated)
        self.assertExit(0, unmapped)

        def answers(run):
            return {r['Cell']: (r['New servers'], r['Why'])
                    for r in run.json()}

        got = answers(dedicated)
        self.assertEqual({'cell0': 'no', 'cell1': 'no', 'cell2': 'yes',
                          'cell3': 'no'},
                         {c: yn for c, (yn, _why) in got.items()})
        self.assertIn('dedicated to the project', got['cell2'][1])
        self.assertIn('named in cells_projects and this cell is not one of '
                      'its cells', got['cell1'][1])
        self.assertIn('cell0 has no hosts', got['cell0'][1])

        got = answers(unmapped)
        self.assertEqual({'cell0': 'no', 'cell1': 'yes', 'cell2': 'no',
                          'cell3': 'no'},
                         {c: yn for c, (yn, _why) in got.items()})
        self.assertIn('in cells_default', got['cell1'][1])
        self.assertIn('dedicated to other projects', got['cell2'][1])
        self.assertIn('named in neither cells_default nor cells_projects',
                      got['cell3'][1])
        # Only the placement pre-filter's line, no problem.
        self.assertEqual('placement pre-filter off ([cellsched] '
                         'placement_prefilter): new servers require '
                         'member_of=in:%s\n' % self.world.uuid_of('cell1'),
                         unmapped.err)

    def test_problems_down_cell_and_masked_passwords(self):
        """Unknown and ambiguous names exit 1; a password is never shown.

        Two mappings named 'twin', a cell whose URL holds a password (at
        a closed port), and a project mapped to an unknown cell. check
        exits 1 listing the problems; explain shows the lost project may
        use no cell; list exits 1 but prints the live cells' instances;
        the password is in no output and no file, '***' is shown.
        """
        self.add_cell_mapping('twin', 'mysql+pymysql://root@127.0.0.1:1/t')
        self.add_cell_mapping('twin', 'mysql+pymysql://root@127.0.0.1:1/t')
        secret_uuid = self.add_cell_mapping('secret', SECRET_URL)
        lost = self.projects[4]
        conf = write_conf(
            self.tmp, 'problems.conf', self.world.api_url,
            cells_default='cell1,twin',
            cells_projects='cell2:%s,nosuchcell:%s' % (self.projects[0],
                                                       lost))
        stats = os.path.join(self.tmp, 'stats.json')
        trace = os.path.join(self.tmp, 'trace.json')
        check, explain, listed = self.cli_many(
            [['check'], ['explain', '--project', lost, '-f', 'json'],
             ['list', '-f', 'json', '--stats', stats, '--trace', trace]],
            conf=conf)

        self.assertExit(1, check)
        problems = [line for line in check.err.splitlines()
                    if line.startswith('problem: ')]
        self.assertEqual(3, len(problems), check)
        joined = '\n'.join(problems)
        self.assertIn("unknown cell 'nosuchcell'", joined)
        self.assertIn("ambiguous cell name 'twin'", joined)
        self.assertIn("project has no usable cell '%s'" % lost, joined)
        rows = check.table()
        by_cell = {}
        for row in rows:
            by_cell.setdefault(row['Cell'], []).append(row)
        self.assertEqual(MASKED_URL, by_cell['secret'][0]['Database'])
        self.assertEqual(secret_uuid, by_cell['secret'][0]['UUID'])
        self.assertEqual(['disabled here'] * 2,
                         [r['Role'] for r in by_cell['twin']
                          if r['UUID']])
        self.assertIn('ambiguous cell name',
                      [r['Role'] for r in by_cell['twin']])
        self.assertIn('unknown cell',
                      [r['Role'] for r in by_cell['nosuchcell']])
        self.assertIn('***', check.out)

        # explain names the unknown cell that leaves the project none.
        self.assertExit(1, explain)
        answers = {r['Cell']: r['New servers'] for r in explain.json()}
        self.assertEqual({'no'}, set(answers.values()))
        self.assertIn('secret', answers)
        self.assertIn('nosuchcell', answers)
        self.assertIn('project %s may use no cell' % lost, explain.err)
        self.assertIn("problem: unknown cell 'nosuchcell'", explain.err)

        self.assertExit(1, listed)
        self.assertEqual(self.all_live(),
                         {r['uuid'] for r in listed.json()})
        self.assertEqual(len(self.all_live()), len(listed.json()))
        with open(stats) as handle:
            stats_text = handle.read()
        with open(trace) as handle:
            trace_text = handle.read()
        cells = {c['name']: c for c in json.loads(stats_text)['cells']}
        self.assertEqual('failed', cells['secret']['status'])
        self.assertIn('2003', cells['secret']['error'])
        self.assertFalse(json.loads(stats_text)['complete'])
        self.assertIn('traceEvents', json.loads(trace_text))
        self.assertIn('secret', listed.err)

        for where, text in [('check out', check.out),
                            ('check err', check.err),
                            ('explain out', explain.out),
                            ('explain err', explain.err),
                            ('list out', listed.out),
                            ('list err', listed.err),
                            ('stats', stats_text), ('trace', trace_text)]:
            self.assertNotIn(SECRET, text, where)

    def test_bad_configuration_exits_2_unreachable_api_exits_3(self):
        """One line quoting the bad part; exit 3 when the API DB is down."""
        malformed = write_conf(
            self.tmp, 'malformed.conf', self.world.api_url,
            cells_default='cell1',
            cells_projects='cell2:%s,cell3' % self.projects[0])
        no_api = write_conf(self.tmp, 'no-api.conf', None,
                            cells_default='cell1')
        unreachable = write_conf(
            self.tmp, 'unreachable.conf',
            'mysql+pymysql://nova:%s@127.0.0.1:1/nova_api' % SECRET,
            cells_default='cell1',
            # A service's retry settings; the command must not use them.
            extra='[api_database]\nmax_retries = 10\nretry_interval = 10\n')
        runs = self.cli_many([
            ['--config-file', malformed, 'check'],
            ['--config-file', no_api, 'list'],
            ['--config-file', unreachable, 'check'],
            ['--config-file', unreachable, 'list'],
        ])
        for run in runs[:2]:
            self.assertExit(2, run)
            lines = run.err.splitlines()
            self.assertEqual(1, len(lines), run)
            self.assertTrue(lines[0].startswith('nova-cellsched: error: '),
                            run)
            self.assertEqual('', run.out, run)
        self.assertIn("[cellsched] cells_projects: 'cell3'", runs[0].err)
        self.assertIn('[api_database] connection is not set', runs[1].err)
        self.assertIn('no-api.conf', runs[1].err)
        for run in runs[2:]:
            self.assertExit(3, run)
            self.assertIn(
                'nova-cellsched: error: cannot read the nova API database '
                'at mysql+pymysql://nova:***@127.0.0.1:1/nova_api', run.err)
            self.assertIn('[api_database] connection', run.err)
            self.assertNotIn(SECRET, run.err + run.out)
            self.assertEqual('', run.out, run)
            # One connection attempt, not oslo.db's service retry loop,
            # and one line.
            self.assertNotIn('SQL connection failed', run.err)
            self.assertEqual(1, len(run.err.splitlines()), run)
            self.assertNotIn('Background on this error', run.err)


    def assertOneErrorLine(self, code, run, *parts):
        """Exit *code*, nothing on stdout, one error line holding *parts*."""
        self.assertExit(code, run)
        self.assertEqual('', run.out, run)
        lines = run.err.splitlines()
        self.assertEqual(1, len(lines), run)
        self.assertTrue(lines[0].startswith('nova-cellsched: error: '), run)
        for part in parts:
            self.assertIn(part, lines[0], run)

    def test_check_refuses_options_that_stop_the_services(self):
        """Every [cellsched] option, read by the services' own rules.

        Values nova-scheduler or nova-api refuse (it would not start or
        a request would fail) are exit 2 with the option, its value, the
        file and what it accepts; check never says "nothing to fix" on
        them, and no command runs with them.
        """
        cases = [
            ('aggregate_sync_interval', 'soon', 'expected -1 (off, the '
             'default), 0 (every 60 seconds) or a positive number of '
             'seconds'),
            ('placement_prefilter_form', 'sometimes',
             'expected one of auto, member_of, forbidden'),
            ('list_max_workers', '0', 'expected an integer of at least 1'),
            ('cell_cache_ttl', '-5', 'expected an integer of at least 0'),
            ('list_cell_timeout', 'abc',
             'expected a number of at least 0.1'),
            ('api_lister', 'maybe', 'expected true or false'),
        ]
        confs = [write_conf(self.tmp, '%s.conf' % name, self.world.api_url,
                            cells_default='cell1',
                            extra='%s = %s\n' % (name, value))
                 for name, value, _allowed in cases]
        runs = self.cli_many([['--config-file', c, 'check'] for c in confs]
                             + [['--config-file', confs[4], 'list']])
        for (name, value, allowed), path, run in zip(cases, confs, runs):
            self.assertOneErrorLine(
                2, run, "[cellsched] %s = '%s' in %s is not valid: "
                % (name, value, path), allowed)
            self.assertNotIn('LocationInfo', run.err)
        self.assertOneErrorLine(
            2, runs[-1], "[cellsched] list_cell_timeout = 'abc' in %s is "
            "not valid: could not convert string to float: 'abc'; expected "
            "a number of at least 0.1" % confs[4])

    def test_check_warns_of_a_used_cell_whose_database_is_down(self):
        """A cell in the options whose database does not answer: a
        warning naming the cell, never its URL; the exit code stays 0.
        """
        # A server that accepts connections and never speaks: the probe's
        # timeout (5 s) ends the wait.
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind(('127.0.0.1', 0))
        silent.listen(8)
        down = self.add_cell_mapping('downcell', SECRET_URL)
        frozen = self.add_cell_mapping(
            'frozencell', 'mysql+pymysql://nova:%s@127.0.0.1:%d/x'
            % (SECRET, silent.getsockname()[1]))
        self.add_cell_mapping('unusedcell', SECRET_URL)
        conf = write_conf(self.tmp, 'down.conf', self.world.api_url,
                          cells_default='cell1,downcell',
                          cells_projects='frozencell:p1')
        started = time.monotonic()
        run = self.cli('check', conf=conf)
        elapsed = time.monotonic() - started
        self.assertExit(0, run)
        warnings = [line for line in run.err.splitlines()
                    if line.startswith('warning: ')]
        self.assertEqual(2, len(warnings), run)
        self.assertIn('cell downcell (%s) is used by [cellsched] '
                      'cells_default or cells_projects but its database '
                      'does not answer: OperationalError: (2003' % down,
                      warnings[0])
        self.assertIn('cell frozencell (%s) is used by [cellsched] '
                      'cells_default or cells_projects but its database '
                      'does not answer: ' % frozen, warnings[1])
        # The probe's bound (5 s, plus start-up and the rest of check),
        # not the driver's default of no timeout.
        self.assertLess(elapsed, 60, run)
        self.assertNotIn(SECRET, run.err + run.out)
        self.assertNotIn('mysql+pymysql', run.err)

    def test_bad_input_is_one_error_line_exit_2_also_with_debug(self):
        """Files that cannot be read, a log file that cannot be opened:
        exit 2, one line naming the file; --debug changes nothing.
        """
        good = write_conf(self.tmp, 'good.conf', self.world.api_url,
                          cells_default='cell1')
        latin1 = os.path.join(self.tmp, 'latin1.conf')
        with open(latin1, 'wb') as handle:
            handle.write(b'[DEFAULT]\n# caf\xe9\n[api_database]\n'
                         b'connection = sqlite://\n')
        conf_dir = os.path.join(self.tmp, 'conf.d')
        os.mkdir(conf_dir)
        with open(os.path.join(conf_dir, 'bad.conf'), 'wb') as handle:
            handle.write(b'[cellsched]\n# \xff\n')
        cases = [
            (['--config-file', self.tmp, 'check'],
             ['cannot read the configuration file %s: Is a directory'
              % self.tmp, '--config-dir']),
            (['--config-file', latin1, 'check'],
             ['%s is not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8'
              % latin1]),
            (['--config-file', good, '--config-dir', conf_dir, 'list'],
             ['%s is not UTF-8 text' % os.path.join(conf_dir, 'bad.conf')]),
            (['--config-file', good, '--log-file', '/nonexistent/x.log',
              'check'],
             ['cannot open the log file /nonexistent/x.log given with '
              '--log-file: No such file or directory']),
            (['--config-file', good, 'list', '--limit', '0'], []),
        ]
        runs = self.cli_many([argv for argv, _parts in cases] +
                             [['--debug'] + argv for argv, _parts in cases])
        for (argv, parts), run, debug_run in zip(cases * 2, runs,
                                                  runs[len(cases):]):
            self.assertOneErrorLine(2, run, *parts)
            self.assertOneErrorLine(2, debug_run, *parts)
            self.assertEqual(run.err, debug_run.err)

    def test_demo_on_an_unreachable_server_is_one_line(self):
        """demo --connection to a server that does not answer: exit 3,
        one error line with the URL masked, no SQLAlchemy link.
        """
        url = 'mysql+pymysql://root:%s@127.0.0.1:1/' % SECRET
        build, clean = self.cli_many([
            ['demo', '--connection', url, '--cells', '1', '--instances',
             '1', '--dir', os.path.join(self.tmp, 'demo')],
            ['demo', '--connection', url, '--clean', '--yes', '--dir',
             os.path.join(self.tmp, 'demo')]])
        for run in (build, clean):
            self.assertExit(3, run)
            errors = [line for line in run.err.splitlines()
                      if 'error' in line]
            self.assertEqual(1, len(errors), run)
            self.assertTrue(errors[0].startswith(
                'nova-cellsched: error: cannot reach the database server '
                'of --connection mysql+pymysql://root:***@127.0.0.1:1/: '
                'OperationalError: (2003'), run)
            self.assertNotIn('sqlalche.me', run.err)
            self.assertNotIn(SECRET, run.err + run.out)


class ListCliTest(CliTestCase):
    """``list`` on MariaDB cells."""

    CELLS = [
        ('cell0', worlds.Population(instances=6, deleted_per_instance=1,
                                  error_only=True)),
        ('cell1', worlds.Population(instances=30, deleted_per_instance=1,
                                  hosts=4)),
        ('cell2', worlds.Population(instances=30, deleted_per_instance=1,
                                  hosts=4)),
    ]

    def setUp(self):
        super().setUp()
        self.conf = write_conf(self.tmp, 'nova.conf', self.world.api_url,
                               self.world.url_of('cell0'),
                               cells_default='cell1')
        self.ctx = nova_context.get_admin_context()

    def library_order(self, **kwargs):
        result = cli_lister.list_instances(
            self.ctx, engines=self.world.engines, **kwargs)
        self.assertTrue(result.complete, result.failures)
        return [r['uuid'] for r in result.instances]

    def test_console_script_pauses_the_collector_for_start_up_only(self):
        """The console script starts without the cyclic collector.

        ``console_main`` pauses it while nova.conf is read (nova is
        imported then) and turns it back on, start-up's objects frozen
        out of its sight, before the listing runs; what is left at the
        end is frozen too. ``main`` called in a process of its own
        leaves the collector alone.
        """
        script = textwrap.dedent('''
            import gc, json, sys
            from nova_cellsched.cmd import cellsched, list_cmd, nova_setup
            seen = {}
            load_config = nova_setup.load_config
            def spy_config(args):
                seen['config'] = gc.isenabled()
                return load_config(args)
            take_action = list_cmd.ListInstances.take_action
            def spy_list(self, parsed_args):
                seen['list'] = [gc.isenabled(), gc.get_freeze_count()]
                return take_action(self, parsed_args)
            nova_setup.load_config = spy_config
            list_cmd.ListInstances.take_action = spy_list
            argv = ['--config-file', sys.argv[2], 'list', '-f', 'json']
            if sys.argv[1] == 'main':
                seen['code'] = cellsched.main(argv)
            else:
                sys.argv = ['nova-cellsched'] + argv
                seen['code'] = cellsched.console_main()
            seen['end'] = [gc.isenabled(), gc.get_freeze_count()]
            sys.stderr.write('RESULT %s\\n' % json.dumps(seen))
        ''')

        def run(mode):
            proc = subprocess.run(
                [sys.executable, '-c', script, mode, self.conf],
                cwd=self.tmp, env=self.env, text=True, capture_output=True,
                timeout=180, stdin=subprocess.DEVNULL)
            lines = [line for line in proc.stderr.splitlines()
                     if line.startswith('RESULT ')]
            self.assertEqual(1, len(lines), proc.stderr[-3000:])
            seen = json.loads(lines[0][len('RESULT '):])
            self.assertEqual(0, seen['code'], proc.stderr[-3000:])
            return seen

        main, console = self.cli_pool_map(run, ['main', 'console'])
        # main(): the collector on throughout, nothing frozen.
        self.assertEqual({'code': 0, 'config': True, 'list': [True, 0],
                          'end': [True, 0]}, main)
        # console_main(): off while nova.conf is read, on (start-up
        # frozen) for the listing, everything frozen at the end.
        self.assertFalse(console['config'])
        enabled, frozen = console['list']
        self.assertTrue(enabled)
        self.assertGreater(frozen, 0)
        self.assertEqual(True, console['end'][0])
        self.assertGreater(console['end'][1], frozen)

    def test_list_formats(self):
        """Table and --long: every live instance once, in order.

        The short JSON form is checked by the paging test.
        """
        table, long_json, long_table = self.cli_many([
            ['list'], ['list', '--long', '-f', 'json', '--limit', '5'],
            ['list', '--long', '--limit', '3']], conf=self.conf)
        for run in (table, long_json, long_table):
            self.assertExit(0, run)
        expected = self.library_order()
        self.assertEqual(self.all_live(), set(expected))

        rows = table.table()
        self.assertEqual(list(list_cmd.SHORT_FIELDS), list(rows[0]))
        self.assertEqual(expected, [r['uuid'] for r in rows])
        for uuid in expected:
            self.assertEqual(1, table.out.count(uuid), uuid)

        records = long_json.json()
        self.assertEqual(expected[:5], [r['uuid'] for r in records])
        for record in records:
            self.assertEqual(list(cli_lister.DETAIL_FIELDS), list(record))
            self.assertIsInstance(record['addresses'], dict)
            self.assertIsInstance(record['metadata'], dict)
            self.assertEqual(record['flavor_name'], record['flavor']['name'])
        rows = long_table.table()
        # A readable table, like openstack server list --long; JSON has
        # every field.
        self.assertEqual(list(list_cmd.LONG_TABLE_FIELDS), list(rows[0]))
        self.assertLess(len(list_cmd.LONG_TABLE_FIELDS),
                        len(cli_lister.DETAIL_FIELDS))
        self.assertEqual(expected[:3], [r['uuid'] for r in rows])
        for row, record in zip(rows, records):
            # net=ip, ip in tables; a missing value is empty, not None.
            self.assertRegex(row['addresses'], r'^net0=10\.[\d.]+, ')
            self.assertIn(', 2001:db8:', row['addresses'])
            self.assertEqual(record['flavor']['name'], row['flavor_name'])
            self.assertEqual(record['task_state'] or '', row['task_state'])
        self.assertNotIn('None', long_table.out)

    def test_paging_sorting_cells_and_filters(self):
        """--limit/--marker pages, --sort, --cell and --filter."""
        host = sorted(r['host'] for r in cli_lister.list_instances(
            self.ctx, cells=['cell2'], fields=['uuid', 'host'],
            engines=self.world.engines).instances)[0]
        runs = self.cli_many([
            ['list', '--sort', 'display_name:asc', '-f', 'json',
             '-c', 'uuid', '-c', 'display_name'],
            ['list', '--cell', 'cell1', '--cell', worlds.CELL0_UUID,
             '-f', 'json', '-c', 'uuid', '-c', 'cell_name'],
            ['list', '--filter', 'host=%s' % host, '--filter',
             'vm_state=active,stopped,paused,error,shelved_offloaded',
             '-f', 'json'],
            ['list', '--filter', 'deleted=true', '--cell', 'cell2',
             '-f', 'value', '-c', 'uuid'],
        ], conf=self.conf)
        for run in runs:
            self.assertExit(0, run)
        by_name, subset, by_host, deleted = runs

        records = by_name.json()
        self.assertEqual(self.library_order(sort_keys=['display_name'],
                                            sort_dirs=['asc']),
                         [r['uuid'] for r in records])
        names = [r['display_name'] for r in records]
        self.assertEqual(sorted(names), names)
        self.assertEqual(self.all_live(), {r['uuid'] for r in records})

        records = subset.json()
        self.assertEqual(self.all_live(['cell0', 'cell1']),
                         {r['uuid'] for r in records})
        self.assertEqual({'cell0', 'cell1'},
                         {r['cell_name'] for r in records})

        records = by_host.json()
        self.assertTrue(records)
        self.assertEqual({host}, {r['host'] for r in records})
        self.assertEqual(self.sql_uuids('cell2', INSTANCES.c.host == host,
                                        INSTANCES.c.deleted == 0),
                         {r['uuid'] for r in records})

        self.assertEqual(self.sql_uuids('cell2', INSTANCES.c.deleted != 0),
                         set(deleted.out.split()))
        self.assertTrue(deleted.out.split())

        # JSON pages of 40 walk every live instance once, in the full
        # order.
        expected = self.library_order()
        pages, marker = [], None
        while True:
            args = ['list', '--limit', '40', '-f', 'json']
            if marker:
                args += ['--marker', marker]
            run = self.cli(*args, conf=self.conf)
            self.assertExit(0, run)
            page = run.json()
            pages.append(page)
            if len(page) < 40:
                break
            marker = page[-1]['uuid']
        self.assertEqual([40, len(expected) - 40], [len(p) for p in pages])
        records = [r for p in pages for r in p]
        self.assertEqual(expected, [r['uuid'] for r in records])
        for record in records:
            self.assertEqual(list(list_cmd.SHORT_FIELDS), list(record))
            self.assertRegex(record['created_at'],
                             r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$')
            self.assertRegex(record['flavor_name'], r'^m1\.')
        self.assertEqual({n: len(self.live[n]) for n in self.live},
                         {n: sum(r['cell_name'] == n for r in records)
                          for n in self.live})

    def sql_uuids(self, cell, *where):
        engine = self.world.engines.get(self.world.url_of(cell))
        with engine.connect() as conn:
            return {r[0] for r in conn.execute(
                sa.select(INSTANCES.c.uuid).where(*where))}

    def test_timings_stats_and_trace(self):
        """--timings on stderr, --stats JSON per cell, --trace for Chrome."""
        stats_file = os.path.join(self.tmp, 'stats.json')
        trace_file = os.path.join(self.tmp, 'trace.json')
        run = self.cli('list', '--limit', '10', '--timings', '--stats',
                       stats_file, '--trace', trace_file, '-f', 'value',
                       '-c', 'uuid', conf=self.conf)
        self.assertExit(0, run)
        self.assertEqual(self.library_order(limit=10), run.out.split())
        for text in ('Total ms', 'Gather ms', 'Rows fetched', 'Status',
                     'cell0', 'cell1', 'cell2'):
            self.assertIn(text, run.err)
        self.assertNotIn('Total ms', run.out)

        with open(stats_file) as handle:
            stats = json.load(handle)
        self.assertEqual(10, stats['instances'])
        self.assertTrue(stats['complete'])
        self.assertLessEqual({'total', 'setup', 'gather', 'merge', 'view'},
                             set(stats['seconds']))
        cells = {c['name']: c for c in stats['cells']}
        self.assertEqual({n: self.world.uuid_of(n) for n in self.live},
                         {n: c['uuid'] for n, c in cells.items()})
        for name, cell in cells.items():
            self.assertEqual('ok', cell['status'])
            self.assertIsNone(cell['error'])
            # One first batch of at most the limit from every cell.
            self.assertEqual(min(10, len(self.live[name])), cell['rows'])
            self.assertEqual(1, cell['batches'])
            self.assertLessEqual(set(timing.WORKER_PHASES),
                                 set(cell['seconds']))
            for seconds in cell['seconds'].values():
                self.assertGreaterEqual(seconds, 0)

        with open(trace_file) as handle:
            trace = json.load(handle)
        events = trace['traceEvents']
        spans = [e for e in events if e['ph'] == 'X']
        for event in spans:
            self.assertLessEqual({'name', 'ph', 'ts', 'dur', 'pid', 'tid'},
                                 set(event))
        names = {e['name'] for e in spans}
        for cell in self.live:
            for phase in timing.WORKER_PHASES:
                self.assertIn('%s %s' % (phase, cell), names)
        self.assertIn('gather', names)
        self.assertTrue(any(e['ph'] == 'M' and e['name'] == 'thread_name'
                            for e in events))

    def test_empty_result_is_an_empty_table_and_said(self):
        """No match: exit 0, an empty table or [], 'No instance matched.'"""
        table, as_json = self.cli_many([
            ['list', '--project', 'nosuchproject'],
            ['list', '--filter', 'host=nosuchhost', '-f', 'json']],
            conf=self.conf)
        for run in (table, as_json):
            self.assertExit(0, run)
            self.assertEqual('No instance matched.\n', run.err, run)
        self.assertEqual([], as_json.json())
        self.assertEqual([], table.table())
        self.assertIn('| uuid ', table.out)

    def test_bad_inputs_exit_2_with_one_line(self):
        """Each bad argument: exit 2, one 'nova-cellsched: error:' line."""
        missing = os.path.join(self.tmp, 'no', 'such', 'dir', 's.json')
        cases = [
            (['--sort', 'id:desc'], "invalid sort key 'id'"),
            (['--filter', 'vm_state='], "invalid filter 'vm_state='"),
            # Checked before any query: nothing is fetched for nothing.
            (['--stats', missing], 'directory %s does not exist'
             % os.path.dirname(missing)),
            (['--trace', self.tmp], '%s is a directory' % self.tmp),
            (['--sort', 'nosuchkey'], "'nosuchkey'"),
            (['--sort', 'display_name:sideways'], "'sideways'"),
            (['--limit', '0'], "invalid limit '0'"),
            (['--limit', 'x'], "invalid limit 'x'"),
            (['--marker', str(uuid_lib.uuid4())], 'invalid marker'),
            (['--cell', 'nosuchcell'], "invalid cell 'nosuchcell'"),
            (['--filter', 'hostcell1'], "invalid filter 'hostcell1'"),
        ]
        runs = self.cli_many([['list'] + args for args, _ in cases],
                             conf=self.conf)
        for (args, quoted), run in zip(cases, runs):
            self.assertExit(2, run)
            lines = run.err.splitlines()
            self.assertEqual(1, len(lines), run)
            self.assertTrue(lines[0].startswith('nova-cellsched: error: '),
                            run)
            self.assertIn(quoted, lines[0], run)
            self.assertEqual('', run.out, run)


class DemoCliTest(CliTestCase):
    """``demo`` builds SQLite cells once, reuses them, and they list."""

    @classmethod
    def setUpClass(cls):
        # No shared world: the demo makes its own databases.
        super(CliTestCase, cls).setUpClass()

    def test_demo_builds_then_reuses_and_lists(self):
        directory = os.path.join(self.tmp, 'demo')
        args = ['demo', '--cells', '2', '--instances', '60', '--dir',
                directory]
        first = self.cli(*args)
        self.assertExit(0, first)
        self.assertIn('Built 3 cells', first.out)
        for name in ('nova.conf', 'trace.json', 'stats.json'):
            self.assertTrue(os.path.exists(os.path.join(directory, name)),
                            name)
        count = re.search(r'(\d+) instances \((\d+) of them soft-deleted\)',
                          first.out)
        self.assertIsNotNone(count, first)
        total, deleted = int(count.group(1)), int(count.group(2))
        # 30 a cell, one in twenty deleted; cell0 a fiftieth (at least 1).
        self.assertEqual(60 + 1, total)
        self.assertGreater(deleted, 0)
        rows = first.table()
        self.assertEqual(['cell0', 'cell1', 'cell2'],
                         [r['Cell'] for r in rows])
        with open(os.path.join(directory, 'trace.json')) as handle:
            self.assertTrue([e for e in json.load(handle)['traceEvents']
                             if e['ph'] == 'X'])
        with open(os.path.join(directory, 'stats.json')) as handle:
            stats = json.load(handle)
        self.assertEqual(['cell0', 'cell1', 'cell2'],
                         sorted(c['name'] for c in stats['cells']))
        # The demo lists the live instances.
        self.assertEqual(total - deleted,
                         sum(c['rows'] for c in stats['cells']))
        # Next steps that can be pasted: no bare nova-cellsched, which
        # is not on PATH outside the venv.
        steps = first.out.split('Next, try:\n')[1].splitlines()
        self.assertIn('--filter deleted=true', first.out)
        for step in steps:
            if step.strip():
                self.assertFalse(step.strip().startswith('nova-cellsched'),
                                 step)
                program = shlex.split(step)[0]
                self.assertTrue(os.path.isabs(program)
                                or program == 'tools/venv', step)

        conf = os.path.join(directory, 'nova.conf')
        again = self.cli(*args)
        self.assertExit(0, again)
        self.assertIn('Reused 3 cells', again.out)
        self.assertNotIn('Built', again.out + again.err)
        self.assertIn(count.group(0), again.out)
        listed, gone = self.cli_many([
            ['list', '-f', 'json'],
            ['list', '-f', 'json', '--long', '--filter', 'deleted=true']],
            conf=conf)
        self.assertExit(0, listed)
        self.assertExit(0, gone)
        records = listed.json()
        self.assertEqual(total - deleted, len(records))
        self.assertEqual(deleted, len(gone.json()))
        self.assertEqual({'DELETED'}, {r['status'] for r in gone.json()})
        # As nova's objects show them (issue 22): the flavor and, for a
        # server that had a host, its addresses.
        for record in gone.json():
            self.assertTrue(record['flavor_name'], record)
            self.assertEqual(bool(record['host']),
                             bool(record['addresses']), record)
        self.assertEqual({'cell0', 'cell1', 'cell2'},
                         {r['cell_name'] for r in records})
        self.assertEqual(len(records), len({r['uuid'] for r in records}))

    def test_demo_prefix_and_clean_drop_only_the_demo_databases(self):
        """--prefix names the databases; --clean lists, asks, drops them.

        On MariaDB, as a shared server is used: a database that only
        shares the prefix survives.
        """
        problem = db.server_available(db.MYSQL_URL)
        if problem is not None:
            raise AssertionError('MariaDB at %s is needed: %s'
                                 % (db.MYSQL_URL, problem))
        prefix = 'cs_demo_%s' % uuid_lib.uuid4().hex[:8]
        server = db.MYSQL_URL.rsplit('/', 1)[0] + '/'
        bystander = worlds.create_database(server, prefix + '_keepme')
        self.addCleanup(worlds.drop_database, bystander)
        ours = ['%s_%s' % (prefix, part)
                for part in ('api', 'cell0', 'cell1')]
        for name in ours:
            self.addCleanup(worlds.drop_database, server + name)
        directory = os.path.join(self.tmp, 'demo')
        built = self.cli('demo', '--cells', '1', '--instances', '20',
                         '--dir', directory, '--connection', server,
                         '--prefix', prefix)
        self.assertExit(0, built)
        self.assertIn('Built 2 cells', built.out)
        self.assertEqual(sorted(ours + [prefix + '_keepme']),
                         self.databases(server, prefix))

        clean = ['demo', '--clean', '--connection', server, '--prefix',
                 prefix]
        # No answer (stdin is empty): nothing dropped.
        kept = self.cli(*clean)
        self.assertExit(0, kept)
        self.assertIn('Nothing dropped', kept.err)
        for name in ours:
            self.assertIn(name, kept.err)
        self.assertNotIn('keepme', kept.err)
        self.assertEqual(4, len(self.databases(server, prefix)))

        dropped = self.cli(*(clean + ['--yes', '-f', 'value']))
        self.assertExit(0, dropped)
        self.assertEqual(3, len(dropped.out.split()), dropped)
        self.assertEqual([prefix + '_keepme'],
                         self.databases(server, prefix))
        again = self.cli(*(clean + ['--yes']))
        self.assertExit(0, again)
        self.assertIn('No demo database named %s_* found' % prefix,
                      again.err)

    def test_demo_rejects_a_prefix_that_is_no_database_name(self):
        run = self.cli('demo', '--prefix', 'bad-prefix;drop', '--dir',
                       os.path.join(self.tmp, 'demo'))
        self.assertExit(2, run)
        self.assertIn("invalid prefix 'bad-prefix;drop'", run.err)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, 'demo')))

    @staticmethod
    def databases(server, prefix):
        engine = sa.create_engine(server)
        try:
            with engine.connect() as conn:
                return sorted(r[0] for r in conn.execute(sa.text(
                    'SELECT schema_name FROM information_schema.schemata')
                ) if r[0].startswith(prefix))
        finally:
            engine.dispose()
