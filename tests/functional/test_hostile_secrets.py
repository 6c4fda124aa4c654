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

"""Database passwords never show: output, logs, stats, traces, errors.

The API database and the cells log in as a user whose password has URL
special characters; the cell mappings and nova.conf carry it (URL
encoded). Every command's stdout and stderr, its debug log file, the
--stats and --trace files, the library's log records at DEBUG, results,
timings and exceptions are searched for the password, raw and encoded,
while the cells work and while one of their servers is dead.
"""

import json
import logging
import os
import subprocess
import sys
import time
import urllib.parse

import fixtures
import nova.conf
from nova import context as nova_context
from oslo_config import fixture as config_fixture

from nova_cellsched import cells as cells_mod
from nova_cellsched import conf as conf_mod
from nova_cellsched import exception
from nova_cellsched.listing import timing
from nova_cellsched import records
from nova_cellsched.records import query as instance_query
from tests.fixtures import mariadb_server as mdb
from tests.fixtures import placement_server
from tests.fixtures import worlds

CONF = nova.conf.CONF
CLI = os.path.join(os.path.dirname(sys.executable), 'nova-cellsched')
PASSWORD = 'S3cr3t/n0va@Pw%x'
SECRET_FORMS = (PASSWORD, urllib.parse.quote_plus(PASSWORD),
                urllib.parse.quote(PASSWORD, safe=''), 'S3cr3t', 'n0va@Pw')
PROJECT = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'


class SecretsTest(mdb.ServersTestCase):

    @classmethod
    def set_up_servers(cls):
        cls.api = cls.start_server('secrets-api', 'nova', PASSWORD)
        cls.victim = cls.start_server('secrets-victim', 'nova', PASSWORD)
        population = worlds.Population(instances=15)
        cls.world = worlds.build_world(cls.api, [
            ('cell0', cls.api, worlds.Population(instances=2,
                                               error_only=True)),
            ('cell1', cls.api, population),
            ('cell2', cls.victim, population)],
            user='nova', password=PASSWORD)

    def setUp(self):
        super().setUp()
        if not self.victim.running:
            self.victim.start()
        self.addCleanup(lambda: self.victim.running or self.victim.start())
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.api_url = self.world.api_url.replace(
            'root@', 'nova:%s@' % urllib.parse.quote_plus(PASSWORD))
        self.assertIn(urllib.parse.quote_plus(PASSWORD),
                      self.world.cells['cell1'].url)

    def assert_no_secret(self, where, text):
        for form in SECRET_FORMS:
            self.assertNotIn(form, text, '%s shows the password' % where)
        # Nor a cell's URL, nor user:password@ in any URL.
        self.assertEqual([], worlds.leaked_secrets(text, self.world, PASSWORD),
                         where)

    # The command line

    def write_conf(self, name='nova.conf', extra=''):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as handle:
            handle.write('[api_database]\nconnection = %s\nmax_retries = 1\n'
                         'retry_interval = 0\n[cellsched]\n'
                         'cells_default = cell1\ncells_projects = cell2:%s\n'
                         'list_cell_timeout = 10\n%s'
                         % (self.api_url, PROJECT, extra))
        return path

    def run_cli(self, config, *argv):
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        return subprocess.run([CLI, '--config-file', config, *argv],
                              capture_output=True, text=True, timeout=120,
                              env=env, cwd=self.dir)

    def read(self, name):
        with open(os.path.join(self.dir, name)) as handle:
            return handle.read()

    def test_commands_never_show_the_password(self):
        config = self.write_conf()
        strict = self.write_conf('strict.conf', '[api]\n'
                                 'list_records_by_skipping_down_cells = '
                                 'false\n')
        runs = [
            ('list', 0, ['-vv', '--log-file', 'list.log', 'list', '--long',
                         '-f', 'json', '--timings', '--stats', 'stats.json',
                         '--trace', 'trace.json']),
            ('check', 0, ['-vv', '--log-file', 'check.log', 'check', '-f',
                          'json']),
            ('explain', 0, ['-vv', 'explain', '--project', PROJECT, '-f',
                            'yaml']),
        ]
        for label, code, argv in runs:
            done = self.run_cli(config, *argv)
            self.assertEqual(code, done.returncode, (label, done.stderr))
            self.assert_no_secret(label, done.stdout + done.stderr)
        # The listing did use the password: it found every instance.
        listed = json.loads(self.run_cli(config, 'list', '-f', 'json',
                                         '-c', 'uuid').stdout)
        self.assertEqual(set().union(*self.world.live_uuids().values()),
                         {r['uuid'] for r in listed})
        check = json.loads(self.run_cli(config, 'check', '-f',
                                        'json').stdout)
        self.assertIn('mysql+pymysql://nova:***@127.0.0.1',
                      check[0]['Database'])

        self.victim.kill()
        for label, config_file, argv in (
                ('list, dead cell', config,
                 ['-vv', '--log-file', 'dead.log', 'list', '--timings',
                  '--stats', 'dead-stats.json', '--trace',
                  'dead-trace.json']),
                ('strict list, dead cell', strict, ['list', '--long'])):
            done = self.run_cli(config_file, *argv)
            self.assertEqual(1, done.returncode, (label, done.stderr))
            self.assertIn('cell2', done.stderr)
            self.assert_no_secret(label, done.stdout + done.stderr)
        for name in ('list.log', 'check.log', 'stats.json', 'trace.json',
                     'dead.log', 'dead-stats.json', 'dead-trace.json'):
            text = self.read(name)
            self.assertTrue(text, name)
            self.assert_no_secret(name, text)
        self.assertIn("Can't connect", self.read('dead-stats.json'))

    def test_commands_on_a_dead_cell_never_show_the_password(self):
        """check, explain and sync-aggregates' failure paths, cell2 dead.

        Each answers at once: a dead cell's compute nodes are read with
        one connection attempt, whatever nova.conf's ``[database]`` says.

        Placement is a real one with no aggregate (the sync reads every
        cell's compute nodes), or an address nothing listens on.
        """
        placement = self.useFixture(placement_server.PlacementServer())
        config = self.write_conf(extra=placement_server.nova_conf(
            placement.endpoint))
        unreachable = self.write_conf('unreachable.conf',
                                      placement_server.nova_conf(
                                          'http://127.0.0.1:1'))
        self.victim.kill()
        runs = [
            ('check', config, 1, ['-vv', 'check']),
            ('explain', config, 0, ['-vv', 'explain', '--project',
                                    PROJECT]),
            ('sync-aggregates --dry-run', config, 1,
             ['-vv', '--log-file', 'sync.log', 'sync-aggregates',
              '--dry-run', '-f', 'json']),
            ('sync-aggregates --cell cell2', config, 1,
             ['sync-aggregates', '--cell', 'cell2']),
            ('sync-aggregates, placement unreachable', unreachable, 3,
             ['-vv', 'sync-aggregates']),
            ('check, placement unreachable', unreachable, 0,
             ['-vv', 'check']),
        ]
        outputs = {}
        for label, config_file, code, argv in runs:
            start = time.monotonic()
            done = self.run_cli(config_file, *argv)
            elapsed = time.monotonic() - start
            self.assertEqual(code, done.returncode,
                             (label, done.stdout, done.stderr))
            # One connection attempt to the dead cell: oslo.db's service
            # defaults (10 attempts 10 s apart) took 101 s per command.
            self.assertLess(elapsed, 30.0, label)
            self.assert_no_secret(label, done.stdout + done.stderr)
            outputs[label] = done
        dry = outputs['sync-aggregates --dry-run']
        self.assertIn('cannot read the cell database', dry.stderr)
        self.assertIn('cell2', dry.stderr)
        self.assertIn('cannot read the cell database',
                      outputs['sync-aggregates --cell cell2'].stderr)
        log = self.read('sync.log')
        self.assertIn('Cannot read the compute nodes of cell', log)
        self.assert_no_secret('sync.log', log)

    # The library

    def test_library_never_shows_the_password(self):
        self.useFixture(config_fixture.Config(CONF))
        conf_mod.register_opts(CONF)
        self.useFixture(worlds.UseWorld(self.world))
        logs = self.useFixture(fixtures.FakeLogger(level=logging.DEBUG))
        engines = instance_query.EngineCache(io_timeout=5)
        self.addCleanup(engines.dispose)
        ctx = nova_context.get_admin_context()
        texts = []

        def keep(result):
            texts.append(repr(result))
            texts.append(json.dumps(result.timings.as_dict(), default=str))
            texts.append(json.dumps(timing.chrome_trace(result.timings),
                                    default=str))
            texts.append(timing.format_table(result.timings))
            texts.extend(repr(f) + f.describe() for f in result.failures)
            texts.extend(repr(c) for c in result.cells)

        ok = records.list_instances(ctx, engines=engines,
                                    fields=records.DETAIL_FIELDS)
        self.assertTrue(ok.complete)
        keep(ok)
        page = records.list_instances(ctx, engines=engines, limit=3,
                                      cells=['cell2'])
        self.victim.kill()
        broken = records.list_instances(ctx, engines=engines)
        self.assertEqual(['cell2'], [f.cell.name for f in broken.failures])
        keep(broken)
        for kwargs in ({'skip_down_cells': False},
                       {'marker': page.next_marker}):
            exc = self.assertRaises(exception.CellsFailed,
                                    records.list_instances, ctx,
                                    engines=engines, **kwargs)
            texts.append(str(exc) + repr(exc.failures))
        exc = self.assertRaises(exception.InvalidListRequest,
                                records.list_instances, ctx,
                                engines=engines, cells=['nope'])
        texts.append(str(exc))
        texts.append(logs.output)
        self.assertIn('Cell cell2 failed', logs.output)
        for index, text in enumerate(texts):
            self.assert_no_secret('text %d' % index, text)

    def test_password_in_the_url_query_is_masked(self):
        """Was a bug: ``?password=`` in a cell URL is printed by check.

        PyMySQL (and psycopg2) take the password from the URL query as
        well (SQLAlchemy passes query arguments to connect()), so
        ``mysql+pymysql://nova@host/db?password=...`` is a working cell
        URL. cells.mask_url only masks URL.password, so ``check`` prints
        the password in its Database column.
        """
        cell1 = self.world.cells['cell1']
        url = '%s?password=%s' % (
            cell1.url.replace(':%s@' % urllib.parse.quote_plus(PASSWORD),
                              '@'), urllib.parse.quote_plus(PASSWORD))
        engine = instance_query.create_engine(url)
        with engine.connect() as conn:   # the password is used
            self.assertGreater(conn.exec_driver_sql(
                'SELECT COUNT(*) FROM instances').scalar_one(), 0)
        engine.dispose()
        cell_id, cell_uuid = worlds.register_cell(self.world.api_url, 'cellq',
                                                url)
        self.addCleanup(self.api.query,
                        'DELETE FROM %s.cell_mappings WHERE id = %%s'
                        % self.world.api_url.rsplit('/', 1)[1], (cell_id,))
        self.assert_no_secret('mask_url', cells_mod.mask_url(url))
        done = self.run_cli(self.write_conf(), 'check')
        self.assert_no_secret('check', done.stdout + done.stderr)
