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

"""A page that lives in one cell costs a few rounds, not limit / batch.

A project dedicated to one cell of many: its whole page is in that cell,
every other cell answers its first batch empty. The first batch at N
cells is about ``limit / N * 1.5`` rows; asking the one cell again for
that many each time took ``limit / batch`` sequential rounds (34 for a
page of 1,000 at 50 cells). A cell that keeps filling its batches is now
asked for up to twice the rows it gave: O(log(limit / batch)) rounds,
and never a row more than the page holds.

Both listers: the command line's (batches counted from its timings) and
nova-api's (the calls of nova's DB API counted per cell), each on real
databases, each answer compared with the order the rows must come in.
"""

import math

import fixtures
from nova.compute import instance_list as nova_instance_list
from nova import context as nova_context
from nova.db.main import api as nova_db
from nova import objects
import sqlalchemy as sa

from nova_cellsched.api.hooks import instance_list as api_lister
from nova_cellsched import compat
from nova_cellsched.listing import batches
from nova_cellsched import records
from nova_cellsched.records import query as instance_query
from tests import base
from tests.fixtures import db
from tests.fixtures import nova_api
from tests.fixtures import worlds

DEDICATED = 'dedicated0000000000000000000cell'
OTHER = 'other000000000000000000000000000'
#: Cells besides cell0 and the dedicated one.
OTHER_CELLS = 9
PAGE = 1000


class CliOneCellPageTest(db.FunctionalTestCase):
    """``list_instances`` as a member of a project living in cell1."""

    SERVER_URL = 'sqlite://'

    def setUp(self):
        super().setUp()
        cells = [('cell0', worlds.Population(instances=1, error_only=True)),
                 ('cell1', worlds.Population(instances=PAGE + 200,
                                           projects=[DEDICATED]))]
        cells += [('cell%d' % n, worlds.Population(instances=5,
                                                 projects=[OTHER]))
                  for n in range(2, OTHER_CELLS + 2)]
        self.world = self.useFixture(worlds.CellWorld('sqlite:///x', cells))
        self.member = nova_context.RequestContext(
            user_id='someone', project_id=DEDICATED, is_admin=False)

    def expected(self):
        """cell1's live uuids in nova's default order, in Python."""
        table = instance_query.INSTANCES
        engine = sa.create_engine(self.world.url_of('cell1'))
        try:
            with engine.connect() as conn:
                rows = conn.execute(sa.select(
                    table.c.uuid, table.c.created_at, table.c.id).where(
                    table.c.deleted == 0)).all()
        finally:
            engine.dispose()
        rows.sort(key=lambda r: r.uuid)
        rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return [r.uuid for r in rows]

    def _list(self, limit, marker=None):
        return records.list_instances(self.member, limit=limit,
                                      marker=marker,
                                      engines=self.world.engines)

    def dedicated_cell(self, result):
        uuid = self.world.uuid_of('cell1')
        return next(c for c in result.timings.cells if c.cell_uuid == uuid)

    def test_a_page_of_1000_in_one_cell_takes_log_rounds(self):
        result = self._list(PAGE)
        self.assertEqual(self.expected()[:PAGE],
                         [r['uuid'] for r in result.instances])
        first = batches.first_batch_size(PAGE, OTHER_CELLS + 2)
        cell = self.dedicated_cell(result)
        # 136, 272, 592 rows: 3 batches. Every batch the size of the
        # first: 8.
        self.assertLessEqual(cell.batches,
                             math.ceil(math.log2(PAGE / first)) + 1)
        # Not a row more than the page holds.
        self.assertEqual(PAGE, cell.rows)
        # The other cells are asked once.
        for other in result.timings.cells:
            if other is not cell:
                self.assertEqual(1, other.batches)

    def test_pages_after_a_marker_walk_the_cell_in_order(self):
        """Growing batches change neither the order nor the markers."""
        seen, marker = [], None
        while True:
            result = self._list(450, marker)
            seen += [r['uuid'] for r in result.instances]
            self.assertLessEqual(self.dedicated_cell(result).batches, 4)
            marker = result.next_marker
            if marker is None:
                break
        self.assertEqual(self.expected(), seen)

    def test_fixed_batches_stay_the_operators_size(self):
        """``fixed``: every query asks for the configured size."""
        self.cfg.config(instance_list_cells_batch_strategy='fixed',
                        instance_list_cells_batch_fixed_size=100,
                        group='api')
        result = self._list(PAGE)
        self.assertEqual(self.expected()[:PAGE],
                         [r['uuid'] for r in result.instances])
        self.assertEqual(10, self.dedicated_cell(result).batches)


class ApiOneCellPageTest(base.NovaTestCase):
    """nova-api's lister on nova's fixture cells: one cell holds the page.

    The calls of nova's ``instance_get_all_by_filters_sort`` are counted
    per cell (the function runs; it is only counted), and the rows are
    compared with nova's own lister's.
    """

    NUMBER_OF_CELLS = 10
    PAGE = 300

    def setUp(self):
        # Installed as nova-api's filter installs it (the keyset paging of
        # nova's DB API, nova's lister replaced by ours); nova's own
        # lister stays callable, as the yardstick.
        self.useFixture(nova_api.CellschedInNovaApi(fence=False))
        super().setUp()
        self.ctx = nova_context.RequestContext('someone', DEDICATED)
        self.cells = objects.CellMappingList.get_all(self.ctx)
        self.dedicated = self.cells[1]
        with nova_context.target_cell(self.ctx, self.dedicated) as cctx:
            for i in range(self.PAGE + 40):
                objects.Instance(
                    context=cctx, project_id=DEDICATED, user_id='someone',
                    hostname='inst%d' % i, instance_type_id=1).create()
        self.calls = []
        real = nova_db.instance_get_all_by_filters_sort

        def counted(context, filters, limit=None, *args, **kwargs):
            self.calls.append((context.cell_uuid, limit))
            return real(context, filters, limit, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api.instance_get_all_by_filters_sort', counted))

    def _rows(self, function):
        batch = batches.first_batch_size(self.PAGE, len(self.cells))
        _cells, rows = function(
            self.ctx, {'project_id': DEDICATED, 'deleted': False},
            self.PAGE, None, [], None, None, cell_mappings=self.cells,
            batch_size=batch)
        return [row['uuid'] for row in rows]

    def test_a_page_in_one_cell_takes_log_rounds(self):
        nova_answer = self._rows(compat.original(
            'nova.compute.instance_list', 'get_instances_sorted'))
        self.calls.clear()
        # Through nova's module, as nova-api calls it.
        self.assertIs(api_lister.get_instances_sorted,
                      nova_instance_list.get_instances_sorted)
        ours = self._rows(nova_instance_list.get_instances_sorted)
        self.assertEqual(self.PAGE, len(ours))
        self.assertEqual(nova_answer, ours)
        asked = [limit for cell, limit in self.calls
                 if cell == self.dedicated.uuid]
        first = batches.first_batch_size(self.PAGE, len(self.cells))
        # 40, 80, 180 rows; every batch the size of the first: 8.
        self.assertLessEqual(len(asked),
                             math.ceil(math.log2(self.PAGE / first)) + 1)
        self.assertEqual(self.PAGE, sum(asked))
        # Every other cell is asked once.
        self.assertEqual(len(self.cells) - 1,
                         len([c for c, _limit in self.calls
                              if c != self.dedicated.uuid]))
