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

"""The nova API database goes away: commands and the running filter.

The API database (and, to keep the test small, the cell databases) live
on a private MariaDB server that the tests kill and start again. The
cell mappings and the command's nova.conf log in as a user with a
password, which must never be printed.
"""

# nova.tests first, as in tests/unit/test_filter.py.
from nova.tests.unit.scheduler import fakes  # isort: skip

import logging
import os
import subprocess
import sys
import time

import fixtures
import nova.conf
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cellsched import conf as conf_mod
from nova_cellsched.scheduler import host_filter as filters
from nova_cellsched.scheduler import state
from tests.fixtures import mariadb_server as mdb
from tests.fixtures import request_specs
from tests.fixtures import scheduler_state
from tests.fixtures import worlds

CONF = nova.conf.CONF
CLI = os.path.join(os.path.dirname(sys.executable), 'nova-cellsched')
PASSWORD = 'Api-Pw-6f1c2e9a'
PROJECT = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'   # dedicated to cell2
OTHER = '5b1e0a9f2c8d4e8fa1b2c3d4e5f60718'     # default cells


class FakeClock:

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class ApiDatabaseDownTest(mdb.ServersTestCase):

    @classmethod
    def set_up_servers(cls):
        cls.server = cls.start_server('apidown', 'nova', PASSWORD)
        small = worlds.Population(instances=3)
        cls.world = worlds.build_world(cls.server, [
            ('cell0', cls.server, worlds.Population(instances=1,
                                                  error_only=True)),
            ('cell1', cls.server, small), ('cell2', cls.server, small),
            ('cell3', cls.server, small)],
            user='nova', password=PASSWORD)

    def setUp(self):
        super().setUp()
        self._heal()
        self.addCleanup(self._heal)
        self.dir = self.useFixture(fixtures.TempDir()).path
        # The API URL as an operator writes it: a user with a password.
        self.api_url = self.world.api_url.replace(
            'root@', 'nova:%s@' % PASSWORD)
        self.env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')

    def _heal(self):
        if not self.server.running:
            self.server.start()

    def write_conf(self, extra=''):
        path = os.path.join(self.dir, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write('[api_database]\nconnection = %s\n%s\n'
                         '[cellsched]\ncells_default = cell1\n'
                         'cells_projects = cell2:%s\n'
                         % (self.api_url, extra, PROJECT))
        return path

    def cli(self, config, *argv, timeout=120):
        start = time.monotonic()
        done = subprocess.run([CLI, '--config-file', config, *argv],
                              capture_output=True, text=True,
                              timeout=timeout, env=self.env, cwd=self.dir)
        return done, time.monotonic() - start

    # The command line

    def test_commands_exit_3_when_the_api_database_is_down(self):
        """list, check and explain: exit 3, a clear message, no secret."""
        # nova's own [api_database] retry options: left at their defaults.
        config = self.write_conf()
        done, _ = self.cli(config, 'check')
        self.assertEqual(0, done.returncode, done.stderr)
        self.server.kill()
        for argv in (['list'], ['check'], ['explain', '--project', PROJECT],
                     ['list', '--limit', '5', '--long']):
            done, _ = self.cli(config, *argv)
            self.assertEqual(3, done.returncode, (argv, done.stderr))
            self.assertEqual('', done.stdout, argv)
            self.assertNotIn('Traceback', done.stderr, argv)
            self.assertIn(
                'nova-cellsched: error: cannot read the nova API database '
                'at mysql+pymysql://nova:***@127.0.0.1:%d/'
                % self.server.port, done.stderr, argv)
            self.assertIn("Can't connect to MySQL server", done.stderr)
            self.assertIn('check [api_database] connection', done.stderr)
            self.assertNotIn(PASSWORD, done.stderr + done.stdout, argv)

    def test_commands_fail_fast_with_novas_retry_defaults(self):
        """One connection attempt, whatever nova.conf says.

        oslo.db's service defaults (max_retries=10, retry_interval=10)
        made an operator wait about 100 s for exit 3; the command now
        tries once, even when nova.conf asks for more.
        """
        for extra in ('', 'max_retries = 10\nretry_interval = 5\n'):
            config = self.write_conf(extra)
            self.server.kill()
            done, elapsed = self.cli(config, 'check')
            self.assertEqual(3, done.returncode, done.stderr)
            self.assertLessEqual(done.stderr.count('SQL connection failed'),
                                 1, done.stderr)
            self.assertLess(elapsed, 30.0)
            self._heal()

    def test_api_database_error_is_one_line(self):
        """The exit-3 message is one line, the driver's error in it.

        (It used to carry SQLAlchemy's "(Background on this error at:
        https://sqlalche.me/...)" line between the error and the hint.)
        """
        config = self.write_conf()
        self.server.kill()
        done, _ = self.cli(config, 'list')
        self.assertEqual(3, done.returncode, done.stderr)
        errors = [line for line in done.stderr.splitlines()
                  if not line.startswith('SQL connection failed')]
        self.assertEqual(1, len(errors), done.stderr)
        self.assertNotIn('sqlalche.me', done.stderr)

    # The filter in a running scheduler

    def test_filter_keeps_last_good_cells_when_api_database_dies(self):
        self.cfg = self.useFixture(config_fixture.Config(CONF))
        conf_mod.register_opts(CONF)
        self.useFixture(worlds.UseWorld(self.world))
        logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched', level=logging.INFO))
        self.cfg.config(cells_default=['cell1'],
                        cells_projects='cell2:%s' % PROJECT,
                        group='cellsched')
        cell_uuid = {n: c.uuid for n, c in self.world.cells.items()}
        hosts = [fakes.FakeHostState('%s-h%d' % (name, i), 'n',
                                     {'cell_uuid': cell_uuid[name]})
                 for name in ('cell1', 'cell2', 'cell3') for i in range(2)]
        stranger = fakes.FakeHostState('new-h', 'n',
                                       {'cell_uuid': uuids.new_cell})

        clock = FakeClock()
        self.useFixture(scheduler_state.FreshPolicy(state.SharedPolicy(
            CONF, state.load_cell_infos, clock=clock)))
        filt = filters.ProjectCellFilter()

        def cells_passed(project, candidates=hosts):
            spec = request_specs.request_spec(
                project, instance_uuid=uuids.instance)
            by_uuid = {u: n for n, u in cell_uuid.items()}
            return {by_uuid.get(h.cell_uuid, h.cell_uuid)
                    for h in filt.filter_all(list(candidates), spec)}

        self.assertEqual({'cell2'}, cells_passed(PROJECT))
        self.assertEqual({'cell1'}, cells_passed(OTHER))

        self.server.kill()
        # A host of a cell the cache does not know asks for a reload.
        clock.now += 60
        self.assertEqual({'cell1'}, cells_passed(OTHER, hosts + [stranger]))
        self.assertEqual({'cell2'}, cells_passed(PROJECT, hosts + [stranger]))
        errors = [r for r in logs.output.splitlines()
                  if 'Cannot load the cell mappings' in r]
        self.assertEqual(1, len(errors), logs.output)
        self.assertIn('keeping the last known cells', errors[0])
        self.assertNotIn(PASSWORD, logs.output)
        # A SIGHUP-style option change reloads the cells too: it fails,
        # the new mapping is resolved against the last known cells.
        self.cfg.config(cells_default=['cell3'], group='cellsched')
        scheduler_state.sighup(CONF)
        self.assertEqual({'cell3'}, cells_passed(OTHER))
        self.assertEqual({'cell2'}, cells_passed(PROJECT))
        self.assertEqual(2, logs.output.count('Cannot load the cell'))

        # Back: a cell created meanwhile is found on the next reload.
        self.server.start()
        worlds.register_cell(self.world.api_url, 'cell4',
                           self.world.cells['cell1'].url,
                           cell_uuid=uuids.new_cell)
        self.addCleanup(self.server.query,
                        'DELETE FROM %s.cell_mappings WHERE uuid = %%s'
                        % self.world.api_url.rsplit('/', 1)[1],
                        (uuids.new_cell,))
        self.cfg.config(cells_default=['cell3', 'cell4'], group='cellsched')
        scheduler_state.sighup(CONF)
        clock.now += 60
        self.assertEqual({'cell3', uuids.new_cell},
                         cells_passed(OTHER, hosts + [stranger]))
        self.assertEqual(2, logs.output.count('Cannot load the cell'))
