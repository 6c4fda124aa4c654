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

"""The request's one deadline: a busy process costs time, never rows.

:class:`nova_cellsched.listing.cross_cell.CrossCellLister` over cells
held in memory, its rounds on a real one-worker pool that another
listing keeps busy before every round, with nova's fixed batches
(``[api] instance_list_cells_batch_strategy = fixed``). The bounds
asserted are the contract's (``REQUEST_FACTOR x T`` for the process,
``T`` for a cell that stops answering) with a margin of a whole ``T``
for a loaded machine; the listing they replace took 8 ``T``.
"""

import time

import futurist

from nova_cellsched import gather
from nova_cellsched.listing import cross_cell
from nova_cellsched.listing import rounds
from nova_cellsched.listing import sorting
from tests import base
from tests.fixtures import silent

#: list_cell_timeout in these tests.
T = 1.0
#: How long the other listing holds the only worker before each round.
BUSY = 0.8 * T
SAFETY = 30.0


class MemoryLister(cross_cell.CrossCellLister):
    """Cells of sorted integers; each round first waits for a busy pool."""

    def __init__(self, cells, executor, frozen=None):
        super().__init__(None, sorting.SortSpec(('id',), ('asc',)), T)
        self.cells = cells
        self.executor = executor
        self.frozen = frozen or {}
        self.rounds = 0

    def read_marker(self, cell_mapping, marker):
        raise NotImplementedError

    def key(self, row):
        return row

    def values_of(self, row):
        return (row,)

    def submit(self):
        return self.executor.submit

    def hold_the_worker(self):
        """Another listing's task, queued first, takes the worker for BUSY.
        """
        self.executor.submit(time.sleep, BUSY)

    def fetch_round(self, calls):
        self.rounds += 1
        self.hold_the_worker()
        return self.in_cells(
            {cell: (self.fetch, (cell, after, size))
             for cell, (after, size) in calls.items()}, self.budgets)

    def fetch(self, cell, after, size):
        if cell in self.frozen:
            self.frozen[cell].wait(SAFETY)
        rows = [row for row in self.cells[cell]
                if after is None or row > after[0]][:size]
        return rounds.Batch(rows, len(rows))


class RequestDeadlineTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.executor = futurist.ThreadPoolExecutor(max_workers=1)
        self.addCleanup(self.executor.shutdown, wait=False)

    def thawed_at_cleanup(self):
        """A frozen database (:class:`tests.fixtures.silent.Silence`),
        thawed at the cleanup.
        """
        frozen = silent.Silence()
        self.addCleanup(frozen.close)
        return frozen

    def listed(self, lister, limit=1000, batch=100):
        lister.start(list(lister.cells))
        began = time.monotonic()
        page = lister.page(list(lister.cells), None, batch, batch, limit,
                           grow=False)
        return page, time.monotonic() - began

    def test_a_busy_pool_costs_the_request_its_deadline_not_every_round(
            self):
        """Rounds behind a busy worker: complete, within 2 T (+ T)."""
        cells = {'cell1': list(range(0, 2000, 2)),
                 'cell2': list(range(1, 2000, 2))}
        lister = MemoryLister(cells, self.executor)
        page, took = self.listed(lister, batch=50)
        self.assertEqual(list(range(1000)),
                         [row for _key, _cell, row in page.picked])
        self.assertEqual({}, page.failures)
        self.assertGreaterEqual(lister.rounds, 8)
        self.assertLess(took, (cross_cell.REQUEST_FACTOR + 1) * T,
                        '%d rounds took %.1f s' % (lister.rounds, took))

    def test_a_frozen_cell_costs_one_T_and_the_healthy_cells_answer(self):
        """A cell frozen from the start is down; the others' rows are all
        there, in later rounds too, within 2 T + T (+ T).
        """
        cells = {'cell1': list(range(0, 3000, 3)),
                 'cell2': list(range(1, 3000, 3)),
                 'frozen': list(range(2, 3000, 3))}
        lister = MemoryLister(cells, self.executor,
                              frozen={'frozen': self.thawed_at_cleanup()})
        page, took = self.listed(lister)
        healthy = sorted(cells['cell1'] + cells['cell2'])[:1000]
        self.assertEqual(healthy, [row for _key, _cell, row in page.picked])
        self.assertEqual(['frozen'], list(page.failures))
        self.assertEqual(gather.TIMED_OUT, page.failures['frozen'].status)
        self.assertGreater(lister.rounds, 2)
        self.assertLess(took, (cross_cell.REQUEST_FACTOR + 2) * T,
                        '%d rounds took %.1f s' % (lister.rounds, took))

    def test_a_request_past_its_deadline_still_asks_its_cells(self):
        """The request's deadline is over before the listing: every cell
        still answers (at once, on threads of their own), none is down.
        """
        cells = {'cell1': [1, 3], 'cell2': [2, 4]}
        lister = MemoryLister(cells, self.executor)
        lister.start(list(cells))
        lister.deadline = gather.Deadline(0.0)
        page = lister.page(list(cells), None, 10, 10, None, grow=False)
        self.assertEqual([1, 2, 3, 4],
                         [row for _key, _cell, row in page.picked])
        self.assertEqual({}, page.failures)
