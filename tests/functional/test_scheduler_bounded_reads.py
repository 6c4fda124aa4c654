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

"""nova-scheduler's reads of every cell with a frozen one (``bounded_reads``).

nova's own ``HostManager``, as nova-scheduler builds it, reads the
nova-compute services and compute nodes of three cells on real MariaDB
(:class:`.test_nova_api_faults.FrozenServerTestBase`: cell3 on a server
that is frozen with SIGSTOP), and nova's
``get_minimum_version_all_cells`` (nova 34's ``owner_nova_filter``
calls it before each decision) reads their nova-compute versions, with
the part on and ``[cellsched] scheduler_cell_timeout`` set. The
nova-api parts are off, as in nova-scheduler.
"""

import time

import fixtures
from nova import context as nova_context
from nova.db.main import models
from nova import objects
from nova.scheduler import host_manager
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova_cellsched import compat
from nova_cellsched.scheduler import bounded_reads
from tests.functional import test_nova_api_faults as faults

CELLS = ('cell1', 'cell2', 'cell3')
#: nova-compute's version in each cell: cell3's is the oldest.
VERSIONS = {'cell1': 66, 'cell2': 66, 'cell3': 60}
#: Compute hosts per cell.
HOSTS = 2
#: What a frozen cell may cost a decision: a pooled connection's ping,
#: then a new connection's handshake, each ending after the timeout.
FROZEN_BOUND = 2 * faults.CELL_TIMEOUT + 1.0


class FrozenCellComputeReadsTest(faults.FrozenServerTestBase):
    """The scheduler's reads while cell3's database is frozen."""

    @classmethod
    def set_up_servers(cls):
        super().set_up_servers()
        for name in CELLS:
            engine = sa.create_engine(cls.world.cells[name].url)
            try:
                with engine.begin() as conn:
                    for number in range(HOSTS):
                        host = '%s-compute%d' % (name, number)
                        conn.execute(models.Service.__table__.insert(), {
                            'host': host, 'binary': 'nova-compute',
                            'topic': 'compute', 'report_count': 0,
                            'disabled': False, 'forced_down': False,
                            'deleted': 0, 'version': VERSIONS[name],
                            'uuid': uuidutils.generate_uuid()})
                        conn.execute(models.ComputeNode.__table__.insert(), {
                            'host': host, 'hypervisor_hostname': host,
                            'uuid': uuidutils.generate_uuid(),
                            'vcpus': 8, 'memory_mb': 16384, 'local_gb': 100,
                            'vcpus_used': 0, 'memory_mb_used': 0,
                            'local_gb_used': 0, 'hypervisor_type': 'fake',
                            'hypervisor_version': 1, 'cpu_info': '{}',
                            'deleted': 0})
            finally:
                engine.dispose()

    def setUp(self):
        super().setUp()
        # nova-scheduler's own reads of instances per host run in the
        # background at start; not what this test is about.
        self.cfg.config(track_instance_changes=False,
                        group='filter_scheduler')
        self.cfg.config(scheduler_cell_timeout=faults.CELL_TIMEOUT,
                        group='cellsched')
        # As in nova-scheduler: none of nova-api's parts.
        compat.restore(compat.API_PARTS)
        self.assertTrue(bounded_reads.register())
        self.addCleanup(compat.restore, ['bounded_reads'])
        bounded_reads.HEALTH.forget()
        self.addCleanup(bounded_reads.HEALTH.forget)
        self.context = nova_context.get_admin_context()
        self.manager = host_manager.HostManager()
        self.cell3 = self.world.cells['cell3'].uuid

    def computes(self, compute_uuids=None):
        """nova's call, as get_host_states_by_uuids makes it.

        :returns: ({cell name: sorted hosts of its nodes}, sorted service
            hosts, seconds).
        """
        names = {cell.uuid: name for name, cell in self.world.cells.items()}
        start = time.monotonic()
        nodes, services = self.manager._get_computes_for_cells(
            self.context, self.manager.enabled_cells,
            compute_uuids=compute_uuids)
        seconds = time.monotonic() - start
        return ({names[uuid]: sorted(node.host for node in found)
                 for uuid, found in nodes.items() if found},
                sorted(services), seconds)

    def hosts_of(self, cells=CELLS):
        hosts = {name: ['%s-compute%d' % (name, n) for n in range(HOSTS)]
                 for name in cells}
        return hosts, sorted(h for found in hosts.values() for h in found)

    def healthy_seconds(self):
        """The slowest of three reads with every cell answering."""
        slowest = 0.0
        for _ in range(3):
            nodes, services, seconds = self.computes()
            self.assertEqual(self.hosts_of(), (nodes, services))
            slowest = max(slowest, seconds)
        return slowest

    def test_healthy_cells_give_novas_answer(self):
        """Every cell answering: what nova's own reads give."""
        ours = self.computes()[:2]
        self.assertEqual(self.hosts_of(), ours)
        uuids = [node.uuid for found in self.manager._get_computes_for_cells(
            self.context, self.manager.enabled_cells, None)[0].values()
            for node in found if node.host.endswith('compute1')]
        ours_by_uuid = self.computes(uuids)[:2]
        self.cfg.config(scheduler_cell_timeout=0, group='cellsched')
        self.assertEqual(ours, self.computes()[:2])
        self.assertEqual(ours_by_uuid, self.computes(uuids)[:2])
        self.assertEqual(
            {name: ['%s-compute1' % name] for name in CELLS},
            ours_by_uuid[0])

    def test_a_frozen_cell_is_left_out_and_held_down(self):
        """Bounded by the timeout, not nova's 60 s; then not asked.

        The healthy cells' hosts are the decision's candidates; cell3's
        are left out, with nova's own warning. Held down, cell3 is not
        asked by the next decision.
        """
        self.cfg.config(cell_hold_down=30, group='cellsched')
        bound = FROZEN_BOUND + self.healthy_seconds()
        self.freeze()
        nodes, services, seconds = self.computes()
        self.assertEqual(self.hosts_of(('cell1', 'cell2')),
                         (nodes, services))
        self.assertLessEqual(seconds, bound)
        self.assertIn('Timeout getting computes for cell %s' % self.cell3,
                      self.logs.output)
        self.assertTrue(bounded_reads.HEALTH.held(self.cell3))
        nodes, services, seconds = self.computes()
        self.assertEqual(self.hosts_of(('cell1', 'cell2')),
                         (nodes, services))
        self.assertLessEqual(seconds, bound)
        self.assertIn('Cell %s is held down' % self.cell3, self.logs.output)
        states = self.manager.get_host_states_by_uuids(
            self.context, None, None)
        self.assertEqual(self.hosts_of(('cell1', 'cell2'))[1],
                         sorted(state.host for state in states))
        self.assert_no_secret()

    def test_a_thawed_cell_is_back_after_a_probe(self):
        """The first probe that answers ends the hold-down."""
        self.cfg.config(cell_hold_down=300, cell_probe_interval=0.2,
                        group='cellsched')
        self.healthy_seconds()
        self.freeze()
        self.assertNotIn('cell3', self.computes()[0])
        self.assertTrue(bounded_reads.HEALTH.held(self.cell3))
        self.victim.thaw()
        deadline = time.monotonic() + faults.SAFETY
        while True:
            nodes, services, _seconds = self.computes()
            if 'cell3' in nodes or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(self.hosts_of(), (nodes, services))
        self.assertFalse(bounded_reads.HEALTH.held(self.cell3))

    def test_no_timeout_is_novas_own_read(self):
        """``scheduler_cell_timeout = 0``: nova's wait, nothing held.

        nova's CELL_TIMEOUT made 3 s here (60 in nova), so that the test
        does not wait a minute.
        """
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELL_TIMEOUT',
                                             3))
        self.cfg.config(scheduler_cell_timeout=0, cell_hold_down=30,
                        group='cellsched')
        self.healthy_seconds()
        self.freeze()
        nodes, services, _seconds = self.computes()
        self.assertEqual(self.hosts_of(('cell1', 'cell2')),
                         (nodes, services))
        self.assertIn('Timeout getting computes for cell %s' % self.cell3,
                      self.logs.output)
        self.assertFalse(bounded_reads.HEALTH.held(self.cell3))

    def minimum(self):
        """nova's call, as nova 34's owner_nova_filter makes it."""
        start = time.monotonic()
        version = objects.service.get_minimum_version_all_cells(
            self.context, ['nova-compute'])
        return version, time.monotonic() - start

    def test_the_minimum_version_leaves_a_frozen_cell_out_in_time(self):
        """nova's answer over the cells that answer, within the timeout.

        Healthy: cell3's 60, as nova. Frozen: cell3 is left out as nova
        leaves out a cell that did not respond (66), within the timeout
        instead of nova's 60 s, and held down: not asked again.
        """
        self.cfg.config(cell_hold_down=30, group='cellsched')
        slowest = 0.0
        for _ in range(3):
            version, seconds = self.minimum()
            self.assertEqual(60, version)
            slowest = max(slowest, seconds)
        self.freeze()
        version, seconds = self.minimum()
        self.assertEqual(66, version)
        self.assertLessEqual(seconds, FROZEN_BOUND + slowest)
        self.assertIn('Cell %s did not respond when getting minimum service '
                      'version' % self.cell3, self.logs.output)
        self.assertTrue(bounded_reads.HEALTH.held(self.cell3))
        version, seconds = self.minimum()
        self.assertEqual(66, version)
        self.assertLessEqual(seconds, FROZEN_BOUND + slowest)
        self.assertIn('Cell %s is held down' % self.cell3, self.logs.output)
