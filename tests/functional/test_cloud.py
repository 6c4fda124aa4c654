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

"""``tools/cloud``: a real multi-process nova, up, used and down again.

One cloud of three cells with one fake nova-compute each (the harness's
default is ten computes; one per cell is enough to tell the cells apart
and keeps the test short), scheduled
with ProjectCellFilter and the placement pre-filter. Servers are booted
through openstacksdk, as a user of the cloud boots them; the test then
asks where nova put them, lists them, runs ``status`` and ``down`` from
other processes, and checks that nothing of the cloud is left: no
process, database, vhost or directory.

The test takes about a minute on an idle 2-core machine (68 s with the
compute it adds) and over 10 minutes on a loaded one (nova's schemas, a
dozen services): it runs when ``NOVA_CELLSCHED_CLOUD_TESTS=1`` is set,
as ``.ci/run`` does in a step of its own, and skips saying so
otherwise. ``FrozenCellTest`` needs MariaDB only and always runs.
"""

import concurrent.futures
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import uuid

import fixtures
from nova.conf import quota as nova_quota_conf
import openstack
from oslo_config import cfg
import sqlalchemy as sa
from sqlalchemy import pool as sa_pool
import testtools
from testtools import content

from cellsched_tools import cloud as cloud_mod
from nova_cellsched.demo import api as demo_api
from tests import base
from tests.fixtures import worlds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, 'tools', 'cloud')
UNMAPPED = '5b1e0a9f2c8d4e8fa1b2c3d4e5f60718'


def unavailable() -> str | None:
    """Why the cloud cannot run here, or None.

    RabbitMQ is installed and started when it can be (as root with
    apt-get), as ``tools/cloud up`` does.
    """
    if os.environ.get('NOVA_CELLSCHED_CLOUD_TESTS') != '1':
        return ('the cloud takes minutes to start: it runs on its own, '
                'with NOVA_CELLSCHED_CLOUD_TESTS=1 (.ci/run does)')
    problem = demo_api.uwsgi_missing()
    if problem:
        return problem
    if not cloud_mod._port_open('127.0.0.1', 3306):
        return 'MariaDB does not answer on 127.0.0.1:3306 (tools/databases)'
    if importlib.util.find_spec('glance') is None:
        return ('glance is not installed in this venv (pip install '
                'glance): the cloud serves images with it')
    try:
        cloud_mod.ensure_rabbitmq(lambda line: None)
    except cloud_mod.CloudError as exc:
        return 'rabbitmq-server cannot be installed or started: %s' % exc
    return None


class FrozenCellTest(base.TestCase):
    """``Cloud.frozen_cell``: one cell's database waits, the others answer.

    MariaDB only, no services: two uniquely named databases stand for
    two cells of a cloud's state.
    """

    def setUp(self):
        super().setUp()
        if not cloud_mod._port_open('127.0.0.1', 3306):
            self.skipTest('MariaDB does not answer on 127.0.0.1:3306 '
                          '(tools/databases)')
        directory = self.useFixture(fixtures.TempDir()).path
        self.cloud = cloud_mod.Cloud(directory, cells=2)
        self.cloud.state['prefix'] = 'ncs_frozen_%s' % uuid.uuid4().hex[:8]
        for cell in self.cloud.cell_names():
            url = worlds.create_database(cloud_mod.MYSQL, '%s_%s' % (
                self.cloud.prefix, cell))
            self.addCleanup(worlds.drop_database, url)
            engine = sa.create_engine(url, poolclass=sa_pool.NullPool)
            self.addCleanup(engine.dispose)
            with engine.begin() as conn:
                for table in ('instances', 'instance_extra'):
                    conn.exec_driver_sql(
                        'CREATE TABLE %s (id INT PRIMARY KEY)' % table)
                    conn.exec_driver_sql('INSERT INTO %s VALUES (1)'
                                         % table)

    def _count(self, cell, table='instances'):
        """Rows of *table* in *cell*, waiting at most a second for a lock.
        """
        engine = sa.create_engine(self.cloud.database_url(cell),
                                  poolclass=sa_pool.NullPool)
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql('SET SESSION lock_wait_timeout = 1')
                return conn.exec_driver_sql(
                    'SELECT COUNT(*) FROM %s' % table).scalar()
        finally:
            engine.dispose()

    def test_every_table_of_the_cell_waits_until_the_block_ends(self):
        with self.cloud.frozen_cell('cell1'):
            for table in ('instances', 'instance_extra'):
                error = self.assertRaises(sa.exc.OperationalError,
                                          self._count, 'cell1', table)
                self.assertIn('Lock wait timeout', str(error))
            self.assertEqual(1, self._count('cell2'))
        self.assertEqual(1, self._count('cell1'))
        self.assertEqual(1, self._count('cell1', 'instance_extra'))

    def test_unfrozen_when_the_block_raises(self):
        with testtools.ExpectedException(RuntimeError):
            with self.cloud.frozen_cell('cell2'):
                raise RuntimeError('the storm failed')
        self.assertEqual(1, self._count('cell2'))


class QuotaCountingTest(base.TestCase):
    """``--quota-from-placement``: every nova service reads it; kept.

    No services: the configuration files the harness writes for them,
    read with nova's own quota options.
    """

    def written(self, **kwargs):
        """(cloud, {config file: [quota] count_usage_from_placement})."""
        directory = self.useFixture(fixtures.TempDir()).path
        cloud = cloud_mod.Cloud(directory, **kwargs)
        cloud.state['prefix'] = 'ncs_cloud_conf'
        for sub in ('etc', 'log', 'run', 'state', 'lock', 'glance'):
            os.makedirs(cloud.path(sub))
        cloud._plan()
        # nova's only: the default run has no glance installed (its
        # paste file is glance's).
        cloud._write_nova_configs()
        files = glob.glob(cloud.path('etc', 'nova*', '*.conf'))
        read = {}
        for path in files:
            conf = cfg.ConfigOpts()
            nova_quota_conf.register_opts(conf)
            conf(['--config-file', path], project='nova')
            read[os.path.relpath(path, directory)] = (
                conf.quota.count_usage_from_placement)
        return cloud, read

    def test_nova_asks_the_cells_unless_told_otherwise(self):
        _, read = self.written()
        self.assertIn('etc/nova-api/nova.conf', read)
        self.assertIn('etc/nova/nova-conductor-super.conf', read)
        self.assertEqual({False}, set(read.values()))

    def test_usage_from_placement_in_every_service_and_kept(self):
        cloud, read = self.written(quota_from_placement=True)
        self.assertEqual({True}, set(read.values()), read)
        cloud.state['quota_from_placement'] = True
        cloud.save()
        again = cloud_mod.Cloud(cloud.dir)
        self.assertTrue(again.load())
        self.assertTrue(again.quota_from_placement)


class TestCloud(base.TestCase):
    """up, boots through openstacksdk, list, status, down: nothing left."""

    def setUp(self):
        super().setUp()
        problem = unavailable()
        if problem and os.environ.get('NOVA_CELLSCHED_CLOUD_TESTS') == '1':
            # Asked for by name (.ci/run's cloud step): not a skip.
            self.fail('the cloud test was asked for but cannot run: %s'
                      % problem)
        if problem:
            self.skipTest(problem)
        self.dir = tempfile.mkdtemp(prefix='cellsched-cloud-')
        self.lines = []
        # The aggregate sync every 10 s: a compute added below joins its
        # cell's aggregate within the test. A boot's reads of every cell
        # bounded at 5 s (nova-api's minimum version, nova-scheduler's
        # compute nodes) and quota usage counted from placement, as the
        # faults page says to set them where boots must carry on while a
        # cell database is frozen.
        self.cloud = cloud_mod.Cloud(
            self.dir, cells=3, computes=3, scheduling='prefilter',
            sync_interval=10, say=self.lines.append,
            quota_from_placement=True,
            api_cellsched={'list_cell_timeout': '5'},
            scheduler_cellsched={'scheduler_cell_timeout': '5'})
        self.addCleanup(self._down_if_up)
        self.addCleanup(lambda: self.addDetail('up', content.text_content(
            '\n'.join(self.lines))))

    def _down_if_up(self):
        if os.path.exists(self.cloud.state_file):
            self.cloud.down()

    def connect(self, project=None):
        """A project member's connection; an admin's without *project*."""
        token = (demo_api.TOKEN if project is None
                 else 'user:%s:member,reader' % project)
        conn = openstack.connect(
            auth_type='admin_token',
            auth={'endpoint': self.cloud.compute_url, 'auth_token': token},
            load_yaml_config=False, load_envvars=False)
        self.addCleanup(conn.close)
        return conn

    def boot(self, project, name):
        conn = self.connect(project)
        server = conn.compute.create_server(
            name=name, flavor_id=self.cloud.state['flavor'],
            image_id=self.cloud.state['image'], networks='none')
        return conn.compute.wait_for_server(
            server, status='ACTIVE', failures=['ERROR'], interval=1,
            wait=180)

    def test_up_boot_list_status_down(self):
        """Each project's servers land in its cells; down leaves nothing."""
        max_connections = self.cloud._max_connections()
        self.cloud.up()
        self.assertGreaterEqual(self.cloud._max_connections(),
                                cloud_mod.MAX_CONNECTIONS)
        cells = self.cloud.compute_hosts()
        self.addDetail('memory_and_start', content.text_content(json.dumps(
            {'up_seconds': self.cloud.state['up_seconds'],
             'phases': self.cloud.state['up_phases'],
             'services': self.cloud.status()}, indent=1)))

        wanted = [(UNMAPPED, 'unmapped-%d' % i) for i in range(3)] + [
            (cloud_mod.DEDICATED, 'dedicated-%d' % i) for i in range(3)]
        with concurrent.futures.ThreadPoolExecutor(len(wanted)) as pool:
            servers = list(pool.map(lambda pair: self.boot(*pair), wanted))

        # The host is shown to admins only (the users above are members).
        admin = self.connect()
        where = {s.name: cells[admin.compute.get_server(s.id).compute_host]
                 for s in servers}
        self.assertEqual(
            {'cell3'}, {where[n] for n in where if n.startswith('ded')},
            'the dedicated project boots only in its cell (cell3)')
        self.assertLessEqual(
            {where[n] for n in where if n.startswith('unm')},
            {'cell1', 'cell2'}, 'an unmapped project boots only in the '
            'default cells')

        listed = {s.name: (s.status, s.project_id) for s in
                  admin.compute.servers(details=True, all_projects=True)}
        self.assertEqual({name: ('ACTIVE', project)
                          for project, name in wanted}, listed)

        # cell1's database frozen: boots into the healthy cells carry on
        # and become ACTIVE before it thaws (a boot that waited for cell1
        # would still be building when boot() gives up, 180 s on). The
        # unmapped project's default cells are cell1 and cell2: its server
        # lands in cell2; the dedicated project's in cell3. Both are
        # listed during the freeze.
        frozen = [(UNMAPPED, 'frozen-unmapped'),
                  (cloud_mod.DEDICATED, 'frozen-dedicated')]
        with self.cloud.frozen_cell('cell1'):
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                during = list(pool.map(lambda pair: self.boot(*pair),
                                       frozen))
            landed = {s.name: cells[admin.compute.get_server(s.id)
                                    .compute_host] for s in during}
            listed = {s.name: s.status for s in admin.compute.servers(
                details=True, all_projects=True)}
        self.assertEqual({'frozen-unmapped': 'cell2',
                          'frozen-dedicated': 'cell3'}, landed)
        self.assertEqual({'ACTIVE'}, {listed[name] for _p, name in frozen})

        # A nova-compute added to cell3 joins cell3's aggregate through
        # nova-scheduler's periodic sync and, with cell3's first compute
        # disabled, takes the dedicated project's next boot.
        added = self.cloud.add_compute('cell3')
        self.assertEqual('cell3', self.cloud.compute_hosts()[added])
        self.cloud.wait_in_cell_aggregate(added)
        first = [h for h, c in cells.items() if c == 'cell3']
        self.cloud.set_compute_status(first, 'disabled')
        try:
            server = self.boot(cloud_mod.DEDICATED, 'dedicated-new')
        finally:
            self.cloud.set_compute_status(first, 'enabled')
        self.assertEqual(added,
                         admin.compute.get_server(server.id).compute_host)

        status = subprocess.run(
            [TOOL, '--dir', self.dir, 'status'], capture_output=True,
            text=True, timeout=120, cwd=tempfile.gettempdir(),
            env=dict(os.environ, VIRTUAL_ENV=sys.prefix))
        self.assertEqual(0, status.returncode, status.stderr)
        self.assertIn('%d of %d services running' % (
            len(self.cloud.services), len(self.cloud.services)),
            status.stdout)
        self.assertNotIn(cloud_mod.RABBIT_PASSWORD + '@', status.stdout)

        down = subprocess.run(
            [TOOL, '--dir', self.dir, 'down'], capture_output=True,
            text=True, timeout=300, cwd=tempfile.gettempdir(),
            env=dict(os.environ, VIRTUAL_ENV=sys.prefix))
        self.assertEqual(0, down.returncode, down.stdout + down.stderr)
        self.assertEqual([], self.cloud.leftovers())
        self.assertEqual(max_connections, self.cloud._max_connections())
