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

"""The benchmarks leave a database server as they found it.

On a private MariaDB server (``tests.fixtures.mariadb_server``), never
the shared one: a missing requirement stops a benchmark before it
touches the server; a world whose build fails is dropped; the databases
a run created are dropped by the cleanup; ``--tune-server`` sets the
server's globals back. Nothing here times anything.
"""

import ast
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import types

import fixtures

from tests import base
from tests.fixtures import mariadb_server as mdb
from tests.fixtures import worlds

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BENCHMARKS = os.path.join(TOP, 'benchmarks')
if BENCHMARKS not in sys.path:
    sys.path.insert(1, BENCHMARKS)

import bench_listing  # noqa: E402
import bench_startup  # noqa: E402
import runinfo  # noqa: E402
import seed_fast  # noqa: E402


class BenchmarkDatabasesTest(mdb.ServersTestCase):

    @classmethod
    def set_up_servers(cls):
        cls.server = cls.start_server('bench')

    def globals_of(self, *names):
        return {name: int(self.server.query(
            'SHOW GLOBAL VARIABLES LIKE %s', (name,))[0][1])
            for name in names}

    def test_missing_requirement_stops_before_the_server(self):
        """One line naming the requirement; nothing created, no traceback."""
        if importlib.util.find_spec('MySQLdb') is not None:
            self.skipTest('mysqlclient is installed here')
        done = subprocess.run(
            [sys.executable, os.path.join(BENCHMARKS, 'bench_listing.py'),
             '--quick', '--server', self.server.url()],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(1, done.returncode, done.stderr)
        self.assertIn('missing mysqlclient', done.stderr)
        self.assertIn('pip install -r benchmarks/requirements.txt',
                      done.stderr)
        self.assertNotIn('Traceback', done.stderr)
        self.assertEqual(set(), seed_fast.bench_databases(self.server.url()))

    def test_failed_build_leaves_no_half_built_world(self):
        """The API database and cells made before the failure are dropped."""
        def broken(url, table='instances'):
            raise RuntimeError('seeding broke')

        self.useFixture(fixtures.MonkeyPatch('seed_fast.count_rows',
                                             broken))
        server = self.server.url()
        self.assertRaises(RuntimeError, seed_fast.ensure_world, server, 2,
                          5, 0, progress=lambda text: None)
        self.assertEqual(set(), seed_fast.bench_databases(server))

    def test_drop_databases_drops_only_benchmark_databases(self):
        server = self.server.url()
        for name in ('ncsbench_x_api', 'keepme'):
            self.server.query('CREATE DATABASE %s' % name)
        self.addCleanup(self.server.query, 'DROP DATABASE IF EXISTS keepme')
        self.assertRaises(ValueError, seed_fast.drop_databases, server,
                          ['keepme'], print)
        self.assertEqual(['ncsbench_x_api'], seed_fast.drop_databases(
            server, seed_fast.bench_databases(server), lambda text: None))
        self.assertEqual(set(), seed_fast.bench_databases(server))
        names = {row[0] for row in self.server.query('SHOW DATABASES')}
        self.assertIn('keepme', names)

    def test_cleanup_drops_only_the_named_worlds_not_in_use(self):
        """--cleanup drops what a run with the same options made.

        Another world's databases (another user's run, or the same
        world seeded by another nova release) stay, and so does a
        database of the named world that a connection is using.
        """
        server = self.server.url()
        prefix = seed_fast.world_prefix(3, 7, 0)
        mine = [prefix + '_api', prefix + '_cell0', prefix + '_cell1']
        major = runinfo.nova_major()
        other_release = prefix.replace('_n%d_' % major,
                                       '_n%d_' % (major - 1))
        theirs = [seed_fast.world_prefix(2, 7, 0) + '_api',
                  seed_fast.world_prefix(3, 70, 0) + '_api',
                  other_release + '_api']
        self.assertNotEqual(prefix, other_release)
        for name in mine + theirs:
            self.server.query('CREATE DATABASE %s' % name)
        self.addCleanup(seed_fast.drop_databases, server,
                        seed_fast.bench_databases(server), lambda t: None)
        import pymysql
        busy = pymysql.connect(host='127.0.0.1', port=self.server.port,
                               user='root', database=mine[2])
        self.addCleanup(busy.close)
        # Read here, not a 'stdout' detail: stestr prints those of a
        # passing test.
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.assertEqual(0, bench_listing.main([
            '--cleanup', '--server', server, '--cells', '3',
            '--per-cell', '7']))
        self.assertEqual(set(theirs) | {mine[2]},
                         seed_fast.bench_databases(server))
        out.seek(0)
        self.assertIn('left %s: in use by another connection' % mine[2],
                      out.read())

    def test_tune_server_prints_and_restores_the_globals(self):
        """Old and new values and the way back are printed; restored."""
        before = self.globals_of('max_connections')['max_connections']
        wanted = before + 57
        self.useFixture(fixtures.MonkeyPatch(
            'bench_listing.TUNED', {'max_connections': wanted}))
        lines = []
        old = bench_listing.tune_server(self.server.url(), lines.append)
        self.assertEqual({'max_connections': before}, old)
        self.assertEqual(wanted, self.globals_of(
            'max_connections')['max_connections'])
        text = '\n'.join(lines)
        self.assertIn('max_connections %d -> %d' % (before, wanted), text)
        self.assertIn('SET GLOBAL max_connections = %d' % before, text)
        bench_listing.restore_server(self.server.url(), old, lines.append)
        self.assertEqual(before, self.globals_of(
            'max_connections')['max_connections'])
        # A value already high enough is left alone, and said so.
        lines = []
        self.useFixture(fixtures.MonkeyPatch(
            'bench_listing.TUNED', {'max_connections': before - 1}))
        self.assertEqual({}, bench_listing.tune_server(self.server.url(),
                                                       lines.append))
        self.assertIn('left as it is', '\n'.join(lines))


class FilterBenchmarkTest(base.TestCase):
    """bench_filter.py compares the two filters on equal decisions."""

    def test_both_filters_pass_the_same_hosts(self):
        out = self.useFixture(fixtures.TempDir()).path
        done = subprocess.run(
            [sys.executable, os.path.join(BENCHMARKS, 'bench_filter.py'),
             '--hosts', '700', '--cells', '7', '--dedicated', '2',
             '--repeat', '1', '--out', out],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, done.returncode, done.stderr)
        with open(os.path.join(out, 'filter.json')) as handle:
            report = json.load(handle)
        passed = {row['request']: (
            row['project_cell_filter']['hosts_passed'],
            row['aggregate_multitenancy_isolation']['hosts_passed'])
            for row in report['results']}
        # The dedicated project may use every host with both; the others
        # every host but the two dedicated cells' 200.
        self.assertEqual({'dedicated project': (700, 700),
                          'unmapped project': (500, 500)}, passed)
        self.assertTrue(os.path.exists(os.path.join(out, 'filter.md')))


class PlacementBenchmarkTest(base.TestCase):
    """bench_placement.py --quick keeps its own invariants."""

    def test_quick_run_places_nothing_outside_the_allowed_cells(self):
        out = self.useFixture(fixtures.TempDir()).path
        done = subprocess.run(
            [sys.executable, os.path.join(BENCHMARKS, 'bench_placement.py'),
             '--quick', '--out', out],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(0, done.returncode, done.stderr[-3000:])
        with open(os.path.join(out, 'placement.json')) as handle:
            report = json.load(handle)
        runs = report['runs']
        self.assertEqual(
            {'%s/%s/c%d' % (kind, mode, conc)
             for kind in ('dedicated', 'unmapped')
             for mode in ('off', 'member_of', 'forbidden')
             for conc in (1, 4)} |
            {'dedicated/member_of_every_cell/c1',
             'dedicated/member_of_every_cell/c4'}, set(runs))
        for key, run in runs.items():
            self.assertEqual(0, run['outside_allowed_cells'], key)
            self.assertGreater(run['requests'], 0, key)
            if '/off/' not in key:
                # With the pre-filter placement offers allowed hosts
                # only, and there is room in them.
                self.assertEqual(0, run['no_valid_host'], key)
                self.assertEqual(run['candidates_mean'],
                                 run['allowed_candidates_mean'], key)
        # The dedicated project's one cell holds 10 of the 100 hosts.
        self.assertEqual(10, runs['dedicated/member_of/c1'][
            'candidates_mean'])
        self.assertEqual(['cell5', 'cell10'], report['dedicated_cells'])
        self.assertEqual(['cell3'], report['disabled_cells'])
        with open(os.path.join(out, 'placement.md')) as handle:
            self.assertIn('| dedicated | member_of | 4 |', handle.read())


def bench_sync_required():
    """bench_sync.py's REQUIRED (module -> what needs it).

    Read from its source: importing the benchmark imports nova.
    """
    with open(os.path.join(BENCHMARKS, 'bench_sync.py')) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and
                [getattr(t, 'id', None) for t in node.targets] ==
                ['REQUIRED']):
            return ast.literal_eval(node.value)
    raise AssertionError('bench_sync.py has no REQUIRED')


class SyncBenchmarkTest(mdb.ServersTestCase):
    """bench_sync.py --quick on a private server: what it reports, and
    nothing left behind (databases, uwsgi, files) when it ends, fails or
    is interrupted.
    """

    @classmethod
    def setUpClass(cls):
        missing = [what for name, what in bench_sync_required().items()
                   if importlib.util.find_spec(name) is None]
        if missing:
            raise cls.skipException(
                'bench_sync.py needs %s: pip install -r '
                'benchmarks/requirements.txt' % '; '.join(missing))
        super().setUpClass()

    @classmethod
    def set_up_servers(cls):
        cls.server = cls.start_server('benchsync')

    def _start(self, *args):
        return subprocess.Popen(
            [sys.executable, os.path.join(BENCHMARKS, 'bench_sync.py'),
             '--quick', '--server', self.server.url()] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def _work_dir(self, line):
        return line.rsplit('files in ', 1)[1].rstrip(')\n')

    def assertNothingLeft(self, work_dir, output):
        self.assertEqual(set(), seed_fast.bench_databases(self.server.url()),
                         output)
        self.assertFalse(os.path.exists(work_dir), output)
        for pid in os.listdir('/proc'):
            try:
                with open('/proc/%s/cmdline' % pid, 'rb') as handle:
                    cmdline = handle.read().decode(errors='replace')
            except OSError:
                continue
            self.assertNotIn(work_dir, cmdline, output)

    def test_quick_run_reports_every_sync(self):
        out = self.useFixture(fixtures.TempDir()).path
        proc = self._start('--out', out, '--workers', '4')
        output, _ = proc.communicate(timeout=600)
        self.assertEqual(0, proc.returncode, output)
        work_dir = self._work_dir(next(
            line for line in output.splitlines() if 'files in' in line))
        self.assertNothingLeft(work_dir, output)
        with open(os.path.join(out, 'sync_quick.json')) as handle:
            report = json.load(handle)
        self.assertTrue(os.path.exists(os.path.join(out, 'sync_quick.md')))
        runs = {(r['mode'], r['kind']): r for r in report['runs']}
        for mode in ('cli', 'inproc'):
            first = runs[(mode, 'first')]
            self.assertEqual((first['providers'], 0),
                             (first['changes'], first['failed']))
            # One read and one write per provider, one list per cell.
            self.assertEqual(first['providers'],
                             first['requests']['by_method']['PUT'])
            self.assertLessEqual(first['requests']['by_method']['GET'],
                                 first['providers'] + 5 + 1)
            same = runs[(mode, 'no change')]
            self.assertEqual(0, same['changes'])
            self.assertNotIn('PUT', same['requests']['by_method'])
            self.assertLessEqual(same['requests']['by_method']['GET'], 5 + 1)
            moved = runs[(mode, '1% moved/added')]
            self.assertEqual(0, moved['failed'])
            self.assertEqual(2, moved['requests']['by_method']['PUT'])
        probe = report['probe'][0]
        self.assertEqual((100, 0), (probe['changes'], probe['failed']))

    def test_failed_run_leaves_nothing(self):
        """The command refuses --workers 0 after the world was built."""
        proc = self._start('--workers', '0', '--modes', 'cli',
                           '--probe', '0')
        output, _ = proc.communicate(timeout=600)
        self.assertNotEqual(0, proc.returncode, output)
        self.assertIn('sync-aggregates exited 2', output)
        work_dir = self._work_dir(next(
            line for line in output.splitlines() if 'files in' in line))
        self.assertNothingLeft(work_dir, output)

    def test_interrupted_run_leaves_nothing(self):
        """Ctrl-C once placement serves: everything goes."""
        proc = self._start('--probe', '0')
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if 'built:' in line:
                proc.send_signal(signal.SIGINT)
                break
        output = ''.join(lines) + proc.communicate(timeout=600)[0]
        self.assertNotEqual(0, proc.returncode, output)
        work_dir = self._work_dir(next(
            line for line in lines if 'files in' in line))
        self.assertNothingLeft(work_dir, output)


class StartupBenchmarkTest(base.TestCase):
    """bench_startup.py reports its targets; it does not gate on them."""

    def test_a_median_over_target_is_reported_with_exit_0(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        demo_dir = os.path.join(tmp, 'demo')
        subprocess.run(bench_startup.command() + [
            'demo', '--cells', '1', '--instances', '5', '--dir', demo_dir],
            check=True, capture_output=True, timeout=300, cwd=tmp)
        # No process starts in no time: both medians are over target.
        self.useFixture(fixtures.MonkeyPatch(
            'bench_startup.TARGETS', {'list --limit 20': 0.0,
                                      '--help': 0.0}))
        self.useFixture(fixtures.MonkeyPatch(
            'bench_startup.reference_loop', lambda: 0.0))
        # Read here, not a 'stdout' detail: stestr prints those of a
        # passing test.
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.argv', [
            'bench_startup.py', '--repeat', '1', '--dir', demo_dir]))
        self.assertEqual(0, bench_startup.main())
        out.seek(0)
        text = out.read()
        self.assertEqual(2, text.count('over target\n'), text)
        self.assertIn('2 of 2 medians over target (reported, not a '
                      'failure', text)

    def test_baseline_names_the_modules_only_one_of_them_imports(self):
        """--baseline answers what start-up imports now that it did not."""
        tmp = self.useFixture(fixtures.TempDir()).path
        demo_dir = os.path.join(tmp, 'demo')
        subprocess.run(bench_startup.command() + [
            'demo', '--cells', '1', '--instances', '5', '--dir', demo_dir],
            check=True, capture_output=True, timeout=300, cwd=tmp)
        # A checkout whose list command imports one module more.
        before = os.path.join(tmp, 'before')
        shutil.copytree(os.path.join(TOP, 'nova_cellsched'),
                        os.path.join(before, 'nova_cellsched'),
                        ignore=shutil.ignore_patterns('__pycache__'))
        with open(os.path.join(before, 'nova_cellsched', 'cmd',
                               'list_cmd.py'), 'a') as module:
            module.write('\nimport colorsys  # noqa: E402,F401\n')
        self.useFixture(fixtures.MonkeyPatch(
            'bench_startup.reference_loop', lambda: 0.0))
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        results = os.path.join(tmp, 'startup.json')
        self.useFixture(fixtures.MonkeyPatch('sys.argv', [
            'bench_startup.py', '--repeat', '1', '--dir', demo_dir,
            '--baseline', before, '--json', results]))
        self.assertEqual(0, bench_startup.main())
        with open(results) as handle:
            imports = json.load(handle)['imports']
        self.assertEqual(([], ['colorsys']),
                         (imports['added'], imports['gone']))
        self.assertEqual(imports['baseline_modules'],
                         imports['modules'] + 1)
        out.seek(0)
        self.assertIn('added: -; gone: colorsys\n', out.read())


class FloorTest(mdb.ServersTestCase):
    """benchmarks/floor.py reads the page's rows, as many as the body needs."""

    @classmethod
    def set_up_servers(cls):
        import floor


        cls.server = cls.start_server('floor')
        cls.world = worlds.build_world(cls.server, [
            ('cell1', cls.server, worlds.Population(instances=4)),
            ('cell2', cls.server, worlds.Population(instances=3))])
        cls.floor = floor.Floor(types.SimpleNamespace(
            api_url=cls.world.api_url, cells=cls.world.cells))

    @classmethod
    def tearDownClass(cls):
        cls.floor.close()
        super().tearDownClass()

    def uuids(self, cell, count):
        return [row[0] for row in self.server.query(
            'SELECT uuid FROM %s.instances WHERE deleted = 0 ORDER BY id '
            'LIMIT %d' % (self.world.cells[cell].url.rsplit('/', 1)[1],
                          count))]

    def sysmeta_rows(self, uuids):
        found = 0
        for cell in self.world.cells.values():
            found += int(self.server.query(
                'SELECT COUNT(*) FROM %s.instance_system_metadata WHERE '
                'instance_uuid IN (%s)' % (
                    cell.url.rsplit('/', 1)[1],
                    ', '.join("'%s'" % u for u in uuids)))[0][0])
        return found

    def body(self, uuids):
        return json.dumps({'servers': [{'id': u} for u in uuids]}).encode()

    def test_reads_only_the_page_from_each_cell(self):
        page = self.uuids('cell1', 2) + self.uuids('cell2', 1)
        _seconds, rows = self.floor.measure(self.body(page), '2.1')
        self.assertEqual(3, rows['instances'])
        self.assertEqual(3, rows['instance_info_caches'])
        self.assertEqual(3, rows['instance_extra'])
        # Both cells on one server: one engine, a connection per thread.
        self.assertEqual(1, len(self.floor.engines))
        self.assertLessEqual(len(self.floor.connections), 2)

    def test_reads_what_the_microversion_shows(self):
        page = self.uuids('cell1', 4) + self.uuids('cell2', 3)
        _seconds, early = self.floor.measure(self.body(page), '2.25')
        _seconds, late = self.floor.measure(self.body(page), '2.73')
        self.assertNotIn('tags', early)
        self.assertNotIn('instance_system_metadata', early)
        self.assertIn('tags', late)
        self.assertEqual(self.sysmeta_rows(page),
                         late['instance_system_metadata'])
        self.assertGreater(late['instance_system_metadata'], 0)

    def test_holds_no_transaction_between_reads(self):
        """The run can drop its databases at the end (no metadata lock)."""
        self.floor.measure(self.body(self.uuids('cell1', 2)), '2.104')
        threads = [c.dbapi_connection.thread_id()
                   for c in self.floor.connections]
        self.assertNotEqual([], threads)
        open_trx = self.server.query(
            'SELECT trx_mysql_thread_id FROM information_schema.innodb_trx')
        self.assertEqual([], [row for row in open_trx if row[0] in threads])

    def test_an_empty_page_reads_nothing(self):
        seconds, rows = self.floor.measure(self.body([]), '2.1')
        self.assertEqual({}, rows)
        self.assertGreaterEqual(seconds, 0.0)
