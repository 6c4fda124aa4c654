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

"""nova-api's minimum compute version with a frozen cell (``min_version``).

nova's own ``objects.service.get_minimum_version_all_cells``, as
``POST /servers`` calls it, with the nova-api parts installed, on real
MariaDB (:class:`.test_nova_api_faults.FrozenServerTestBase`: cell3 on
a server that is frozen with SIGSTOP). Each cell holds nova-compute
services of its own version: cell1 70, cell2 72, cell3 66, so the
minimum over every cell is cell3's.
"""

import time

import fixtures
from nova import context as nova_context
from nova.db.main import models
from nova import exception as nova_exception
from nova import objects
from oslo_utils import uuidutils
import sqlalchemy as sa


from nova_cellsched.api.hooks import min_version
from nova_cellsched.api.hooks import pool
from nova_cellsched import compat
from tests.functional import test_nova_api_faults as faults

#: nova-compute's version in each cell.
VERSIONS = {'cell1': 70, 'cell2': 72, 'cell3': 66}


class FrozenCellMinimumVersionTest(faults.FrozenServerTestBase):
    """The minimum service version while cell3's database is frozen."""

    @classmethod
    def set_up_servers(cls):
        super().set_up_servers()
        for name, version in VERSIONS.items():
            engine = sa.create_engine(cls.world.cells[name].url)
            try:
                with engine.begin() as conn:
                    conn.execute(models.Service.__table__.insert(), [
                        {'host': '%s-compute%d' % (name, n),
                         'binary': 'nova-compute', 'topic': 'compute',
                         'report_count': 0, 'disabled': False,
                         'forced_down': False, 'deleted': 0,
                         'version': version,
                         'uuid': uuidutils.generate_uuid()}
                        for n in range(2)])
            finally:
                engine.dispose()

    def setUp(self):
        super().setUp()
        self.assertIn('min_version', compat.on())
        min_version.forget()
        self.addCleanup(min_version.forget)
        self.context = nova_context.get_admin_context()

    def minimum(self, require_all=False):
        """nova's call, as compute.api makes it: (version, seconds)."""
        start = time.monotonic()
        version = objects.service.get_minimum_version_all_cells(
            self.context, ['nova-compute'], require_all=require_all)
        return version, time.monotonic() - start

    def healthy_seconds(self):
        """The slowest of three calls with every cell answering.

        Each is nova's answer over every cell: cell3's 66.
        """
        slowest = 0.0
        for _ in range(3):
            version, seconds = self.minimum()
            self.assertEqual(min(VERSIONS.values()), version)
            slowest = max(slowest, seconds)
        return slowest

    def test_healthy_cells_give_novas_answer(self):
        """Every cell answering: the part answers what nova answers."""
        ours, _ = self.minimum()
        compat.restore(compat.API_PARTS)
        novas = objects.service.get_minimum_version_all_cells(
            self.context, ['nova-compute'])
        self.assertEqual(66, novas)
        self.assertEqual(novas, ours)

    def test_a_frozen_cell_counts_with_its_last_answer(self):
        """Bounded by list_cell_timeout, not nova's 60 s; never newer.

        cell3 answered 66 before it froze: the minimum stays 66 (nova
        would leave cell3 out and answer 70, letting a boot use what
        cell3's computes do not have). With ``cell_hold_down`` set, the
        cell is then held down: the next call does not ask it.
        """
        self.cfg.config(cell_hold_down=30, group='cellsched')
        bound = faults.BOUND + self.healthy_seconds()
        self.freeze()
        version, seconds = self.minimum()
        self.assertEqual(66, version)
        self.assertLessEqual(seconds, bound)
        cell3 = self.world.cells['cell3'].uuid
        self.assertIn('Cell %s did not answer for the minimum service '
                      'version: counted with the answer it last gave this '
                      'process' % cell3, self.logs.output)
        self.assertTrue(pool.HEALTH.held(cell3))
        version, seconds = self.minimum()
        self.assertEqual(66, version)
        self.assertLessEqual(seconds, bound)
        self.assert_no_secret()

    def test_a_frozen_cell_never_heard_from_is_left_out_as_nova_does(self):
        """No earlier answer: nova's rule, the cell left out (70)."""
        bound = faults.BOUND + self.healthy_seconds()
        min_version.forget()
        self.freeze()
        version, seconds = self.minimum()
        self.assertEqual(70, version)
        self.assertLessEqual(seconds, bound)
        self.assertIn('Cell %s did not respond when getting minimum service '
                      'version' % self.world.cells['cell3'].uuid,
                      self.logs.output)

    def test_require_all_is_novas_call(self):
        """``require_all=True`` waits nova's CELL_TIMEOUT and raises.

        nova's CELL_TIMEOUT made 3 s here (60 in nova), so that the test
        does not wait a minute.
        """
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELL_TIMEOUT',
                                             3))
        self.healthy_seconds()
        self.freeze()
        self.assertRaises(nova_exception.CellTimeout, self.minimum,
                          require_all=True)
