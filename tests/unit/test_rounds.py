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

"""The listing's rounds (nova_cellsched.rounds), on cells made of lists.

Each cell is a sorted list of integers; a round answers from them as a
cell database answers a keyset-paged query. The page must equal the
first *limit* of all the cells' rows merged, whatever the batch sizes,
and no cell may be asked for rows that cannot reach the page.
"""

import math

import hypothesis
from hypothesis import strategies as st

from nova_cellsched import gather
from nova_cellsched.listing import rounds
from tests import base


class FakeCells:
    """Cells as sorted lists; records every round's requests."""

    def __init__(self, cells, failing=()):
        self.cells = {name: sorted(rows) for name, rows in cells.items()}
        self.failing = set(failing)
        self.rounds = []

    def fetch_round(self, calls):
        self.rounds.append(dict(calls))
        outcomes = {}
        for cell, (after, size) in calls.items():
            if cell in self.failing:
                outcomes[cell] = gather.Outcome(
                    gather.FAILED, error=RuntimeError('%s is down' % cell))
                continue
            rows = [r for r in self.cells[cell]
                    if after is None or r > after[0]][:size]
            outcomes[cell] = gather.Outcome(
                gather.OK, result=rounds.Batch(rows, len(rows)))
        return outcomes

    def run(self, first, batch_size, limit, after=None):
        return rounds.run(sorted(self.cells), self.fetch_round,
                          after, first, batch_size, limit,
                          key=lambda row: row, values_of=lambda row: (row,))


class RoundsTestCase(base.TestCase):

    def test_the_page_is_the_first_rows_of_all_cells_merged(self):
        cells = FakeCells({'a': [1, 4, 7, 10], 'b': [2, 5, 8],
                           'c': [3, 6, 9, 11, 12]})
        page = cells.run(first=2, batch_size=2, limit=7)
        self.assertEqual([1, 2, 3, 4, 5, 6, 7],
                         [row for _key, _cell, row in page.picked])
        self.assertEqual({}, page.failures)

    def test_a_cell_whose_first_batch_was_short_is_not_asked_again(self):
        cells = FakeCells({'a': [1], 'b': list(range(2, 40))})
        cells.run(first=5, batch_size=5, limit=20)
        self.assertTrue(all('a' not in r for r in cells.rounds[1:]))

    def test_a_cell_past_the_cut_is_not_asked_again(self):
        """Its last row comes after the limit-th row fetched so far."""
        cells = FakeCells({'low': list(range(0, 100)),
                           'high': list(range(1000, 1100))})
        cells.run(first=10, batch_size=10, limit=10)
        self.assertEqual(1, len(cells.rounds))

    def test_a_failed_cell_is_reported_and_the_others_listed(self):
        cells = FakeCells({'a': [1, 3], 'b': [2, 4]}, failing={'b'})
        page = cells.run(first=5, batch_size=5, limit=None)
        self.assertEqual([1, 3], [row for _k, _c, row in page.picked])
        self.assertEqual({'b'}, set(page.failures))
        self.assertIsInstance(page.failures['b'].error, RuntimeError)

    def test_rows_before_a_later_failure_stay(self):
        """A cell failing in a later round keeps its rows, as in nova."""
        cells = FakeCells({'a': list(range(0, 40, 2)),
                           'b': list(range(1, 40, 2))})
        real = cells.fetch_round

        def fail_later(calls):
            if cells.rounds:
                cells.failing.add('b')
            return real(calls)

        cells.fetch_round = fail_later
        page = cells.run(first=3, batch_size=3, limit=12)
        picked = [row for _k, _c, row in page.picked]
        self.assertIn(1, picked)
        self.assertEqual({'b'}, set(page.failures))

    def test_after_starts_every_cell_after_the_marker_values(self):
        cells = FakeCells({'a': [1, 4, 7], 'b': [2, 5, 8]})
        page = cells.run(first=5, batch_size=5, limit=None, after=(4,))
        self.assertEqual([5, 7, 8], [row for _k, _c, row in page.picked])

    def test_phases_are_recorded(self):
        seen = []

        def span(name, **info):
            seen.append(name)
            return rounds.no_span(name)

        cells = FakeCells({'a': [1, 2, 3], 'b': [4, 5, 6]})
        rounds.run(['a', 'b'], cells.fetch_round, None, 1, 1, 3,
                   key=lambda r: r, values_of=lambda r: (r,), span=span)
        self.assertEqual('gather', seen[0])
        self.assertIn('refetch', seen)
        self.assertEqual('merge', seen[-1])

    @hypothesis.settings(max_examples=200, deadline=None)
    @hypothesis.given(
        cells=st.dictionaries(
            st.sampled_from('abcdefgh'),
            st.lists(st.integers(0, 500), unique=True, max_size=60),
            min_size=1),
        first=st.integers(1, 30), batch_size=st.integers(1, 30),
        limit=st.one_of(st.none(), st.integers(0, 200)))
    def test_any_cells_and_sizes_give_the_merged_prefix(
            self, cells, first, batch_size, limit):
        # Unique across cells, as uuids make every sort key unique.
        seen, unique = set(), {}
        for name, rows in cells.items():
            unique[name] = [r for r in rows if r not in seen]
            seen.update(unique[name])
        fake = FakeCells(unique)
        page = fake.run(first=first, batch_size=batch_size, limit=limit)
        everything = sorted(seen)
        expected = everything if limit is None else everything[:limit]
        self.assertEqual(expected, [row for _k, _c, row in page.picked])

    def test_a_cell_that_starts_over_fails_instead_of_looping(self):
        """A cell that ignores the values to start after is reported."""
        cells = FakeCells({'a': list(range(20)), 'b': list(range(100, 120))})

        def ignoring_after(calls):
            return FakeCells.fetch_round(cells, {
                cell: (None, size) for cell, (_after, size) in calls.items()})

        page = rounds.run(['a', 'b'], ignoring_after, None, 3, 3, None,
                          key=lambda r: r, values_of=lambda r: (r,))
        self.assertEqual({'a', 'b'}, set(page.failures))
        self.assertIsInstance(page.failures['a'].error, rounds.OutOfOrder)



class OneCellPagesTestCase(base.TestCase):
    """A page that lives in one cell of many: a few rounds, not many.

    A project dedicated to one cell of 50: every other cell answers its
    first batch empty. The lister's first batch at 50 cells is
    ``int(limit / 50 * 1.5)`` rows (``batches.first_batch_size``); nova
    asks the one cell 10 times for 100 rows for a page of 1,000.
    """

    CELLS = ['cell%02d' % n for n in range(50)]

    def one_cell(self, rows):
        cells = dict.fromkeys(self.CELLS, [])
        cells['cell07'] = list(range(rows))
        return FakeCells(cells)

    def asked(self, fake, cell='cell07'):
        """The sizes the cell was asked for, round by round."""
        return [calls[cell][1] for calls in fake.rounds if cell in calls]

    def test_a_page_of_1000_in_one_cell_of_50_takes_log_rounds(self):
        fake = self.one_cell(5000)
        first = int(1000 / 50 * 1.5)
        page = fake.run(first=first, batch_size=first, limit=1000)
        self.assertEqual(list(range(1000)),
                         [row for _k, _c, row in page.picked])
        sizes = self.asked(fake)
        # 30, 60, 180, 540 and the 190 rows the page still misses: the
        # rows the cell gave triple each round. Without growth: 34 rounds
        # of 30 rows.
        self.assertEqual([30, 60, 180, 540, 190], sizes)
        self.assertLessEqual(len(sizes), math.ceil(math.log2(1000 / first))
                             + 1)
        # The cell is never asked for a row the page cannot hold.
        self.assertEqual(1000, sum(sizes))
        # The empty cells are asked once.
        self.assertEqual(len(fake.rounds), len(sizes))
        self.assertEqual([50] + [1] * (len(sizes) - 1),
                         [len(calls) for calls in fake.rounds])

    def test_a_page_of_50_in_one_cell_of_50(self):
        fake = self.one_cell(5000)
        page = fake.run(first=10, batch_size=10, limit=50)
        self.assertEqual(list(range(50)),
                         [row for _k, _c, row in page.picked])
        self.assertEqual([10, 20, 20], self.asked(fake))

    def test_a_cell_that_runs_out_is_not_asked_again(self):
        """It holds 100 rows: its batch of 180 comes back short."""
        fake = self.one_cell(100)
        page = fake.run(first=30, batch_size=30, limit=1000)
        self.assertEqual(list(range(100)),
                         [row for _k, _c, row in page.picked])
        self.assertEqual([30, 60, 180], self.asked(fake))

    def test_without_growth_every_batch_is_the_batch_size(self):
        """``fixed``: the operator's size of every query."""
        fake = self.one_cell(5000)
        page = rounds.run(sorted(fake.cells), fake.fetch_round, None, 100,
                          100, 1000, key=lambda r: r,
                          values_of=lambda r: (r,), grow=False)
        self.assertEqual(list(range(1000)),
                         [row for _k, _c, row in page.picked])
        self.assertEqual([100] * 10, self.asked(fake))

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(
        heavy=st.lists(st.integers(0, 5000), unique=True, max_size=400),
        light=st.dictionaries(
            st.sampled_from('abcdefgh'),
            st.lists(st.integers(0, 5000), unique=True, max_size=8)),
        first=st.integers(1, 40), batch_size=st.integers(1, 40),
        limit=st.one_of(st.none(), st.integers(0, 600)),
        marker=st.one_of(st.none(), st.integers(0, 5000)),
        grow=st.booleans())
    def test_skewed_cells_give_the_merged_prefix(
            self, heavy, light, first, batch_size, limit, marker, grow):
        """One cell holds most rows: the page is still the global order.

        Whatever the batch sizes grow to, the page is the first *limit*
        rows after the marker of all the cells merged, and no cell is
        asked for more than a batch, or twice the rows it gave.
        """
        seen, unique = set(heavy), {'heavy': list(heavy)}
        for name, rows in light.items():
            unique[name] = [r for r in rows if r not in seen]
            seen.update(unique[name])
        fake = FakeCells(unique)
        after = None if marker is None else (marker,)
        page = rounds.run(sorted(fake.cells), fake.fetch_round, after,
                          first, batch_size, limit, key=lambda r: r,
                          values_of=lambda r: (r,), grow=grow)
        everything = sorted(r for r in seen if marker is None or r > marker)
        expected = everything if limit is None else everything[:limit]
        self.assertEqual(expected, [row for _k, _c, row in page.picked])
        given = dict.fromkeys(fake.cells, 0)
        for number, calls in enumerate(fake.rounds):
            for cell, (start, size) in calls.items():
                if number:
                    self.assertLessEqual(size, max(
                        batch_size, 2 * given[cell] if grow else 0))
                    if limit is not None:
                        self.assertLessEqual(size, limit)
                given[cell] += len([
                    r for r in fake.cells[cell]
                    if start is None or r > start[0]][:size])
