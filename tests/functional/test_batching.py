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

"""Per-cell batching: the cells together fetch little more than needed.

nova's 2018 fix for slow listings was to stop fetching ``limit`` rows
from every cell. The lister follows nova's batch size strategy
(``[api] instance_list_cells_batch_strategy``) without nova's floor of
100 rows, and asks a cell again, in a parallel round, only while its rows
can still reach the page.
"""

import datetime

import fixtures
from nova import context as nova_context
import sqlalchemy as sa

from nova_cellsched.listing import order
from nova_cellsched.listing import sorting
from nova_cellsched import records
from nova_cellsched.records import codec
from nova_cellsched.records import query as instance_query
from tests.fixtures import db
from tests.fixtures import worlds

CELLS = ('cell1', 'cell2', 'cell3')
PER_CELL = 400


class BatchingTest(db.FunctionalTestCase):
    """Rows fetched, batches and order on a real (SQLite) world."""

    SERVER_URL = 'sqlite://'

    def setUp(self):
        super().setUp()
        self.world = self.useFixture(worlds.CellWorld('sqlite:///x', [
            (name, worlds.Population(instances=PER_CELL)) for name in CELLS]))
        self.ctx = nova_context.get_admin_context()

    def expected_default_order(self):
        """All live uuids in nova's default order, computed in Python."""
        table = instance_query.INSTANCES
        rows = []
        for name in CELLS:
            engine = sa.create_engine(self.world.url_of(name))
            with engine.connect() as conn:
                rows += conn.execute(sa.select(
                    table.c.uuid, table.c.created_at, table.c.id).where(
                    table.c.deleted == 0)).all()
            engine.dispose()
        rows.sort(key=lambda r: r.uuid)  # uuid asc breaks the last ties
        rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return [r.uuid for r in rows]

    def _list(self, limit, marker=None, fields=None):
        return records.list_instances(self.ctx, limit=limit, marker=marker,
                                      fields=fields,
                                      engines=self.world.engines)

    def test_limit_fetches_far_less_than_limit_from_every_cell(self):
        """limit 300 over 3 cells: first batches of 150 rows per cell."""
        result = self._list(300)
        self.assertEqual(self.expected_default_order()[:300],
                         [r['uuid'] for r in result.instances])
        fetched = sum(c.rows for c in result.timings.cells)
        # nova before 2018 fetched limit rows from every cell: 900.
        self.assertLess(fetched, 3 * 300)
        # No cell was asked for more than one batch (int(300 / 3 * 1.5))
        # beyond what it gave to the result.
        used = {}
        for record in result.instances:
            used[record['cell_uuid']] = used.get(record['cell_uuid'], 0) + 1
        for cell in result.timings.cells:
            self.assertLessEqual(cell.rows, used.get(cell.cell_uuid, 0) + 150)

    def test_fixed_small_batches_walk_every_row_in_order(self):
        """Batches of 100 from each cell merge into the full order."""
        self.cfg.config(instance_list_cells_batch_strategy='fixed',
                        instance_list_cells_batch_fixed_size=100,
                        group='api')
        result = self._list(None)
        self.assertEqual(self.expected_default_order(),
                         [r['uuid'] for r in result.instances])
        for cell in result.timings.cells:
            # 400 rows in batches of 100 (nova's max_limit caps a batch
            # at 1000): four full batches and one empty answer.
            self.assertEqual(PER_CELL, cell.rows)
            self.assertEqual(5, cell.batches)

    def test_pages_of_limit_with_markers_cover_everything_once(self):
        expected = self.expected_default_order()
        seen, marker = [], None
        while True:
            result = self._list(250, marker)
            seen += [r['uuid'] for r in result.instances]
            marker = result.next_marker
            if marker is None:
                break
        self.assertEqual(expected, seen)

    def test_small_limit_asks_cells_for_their_share_not_nova_floor(self):
        """limit 30 over 3 cells: first batches of 15, not nova's 100.

        nova never asks a cell for fewer than 100 rows, so 50 cells fetch
        5,000 rows for a page of 1,000. Here the first round asks each
        cell for 50% more than its share, and a further round asks only
        the cells whose rows can still reach the page.
        """
        result = self._list(30)
        self.assertEqual(self.expected_default_order()[:30],
                         [r['uuid'] for r in result.instances])
        fetched = sum(c.rows for c in result.timings.cells)
        self.assertLessEqual(fetched, 3 * 15 + 30)
        self.assertGreaterEqual(fetched, 30)

    def test_statements_are_built_once_per_shape(self):
        """Every cell and batch of a listing reuses one SELECT per shape.

        A shape is the first batch, or a batch after a row with NULLs in
        given sort values; the limit and the sort values are parameters.
        """
        spec = sorting.SortSpec.build(['host', 'created_at'],
                                              ['asc', 'desc'])
        query = instance_query.BatchQuery(('uuid', 'host', 'created_at'),
                                          {'deleted': False}, spec)
        first, params = query('sqlite', None, 10)
        self.assertEqual({instance_query.LIMIT_PARAM: 10}, params)
        self.assertIs(first, query('sqlite', None, 99)[0])
        when = datetime.datetime(2026, 1, 1)
        after, params = query('sqlite', ('h1', when, 'u1'), 10)
        self.assertIs(after, query('sqlite', ('h2', when, 'u2'), 5)[0])
        self.assertEqual('h1', params[order.after_param(0)])
        null_host, params = query('sqlite', (None, when, 'u3'), 10)
        self.assertIsNot(after, null_host)
        self.assertNotIn(order.after_param(0), params)
        # The rows after a point are those the order puts after it, a
        # NULL host among them.
        table = instance_query.INSTANCES
        engine = sa.create_engine(self.world.url_of('cell1'))
        self.addCleanup(engine.dispose)
        with engine.connect() as conn:
            conn.execute(table.update().where(
                table.c.uuid == sa.select(sa.func.min(table.c.uuid))
                .where(table.c.deleted == 0).scalar_subquery()).values(
                host=None))
            conn.commit()
            everything = [tuple(r) for r in conn.execute(
                sa.select(*[table.c[c] for c in query.columns]).where(
                    table.c.deleted == 0))]
            ordered = sorted(everything,
                             key=spec.key_function(query.columns))
            self.assertIn(None, [r[1] for r in ordered])
            points = [ordered[0], ordered[len(ordered) // 2], ordered[-2]]
            points += [r for r in ordered if r[1] is None]
            for point in points:
                statement, params = query(
                    'sqlite', spec.values_of(point, query.columns), None)
                after = ordered[ordered.index(point) + 1:]
                self.assertTrue(after)
                self.assertEqual(after, [tuple(r) for r in conn.execute(
                    statement, params)])

    def test_blobs_parsed_only_for_the_rows_of_the_answer(self):
        """Batches carry the blobs; only the merge's survivors are parsed.

        limit 300 over 3 cells fetches 450 rows with their network info,
        flavor and metadata joined in; the network info and metadata of
        exactly the 300 are parsed, and each distinct flavor blob once.
        """
        parsed = []
        real_loads = codec.loads

        def spy(text, fast=None):
            parsed.append(text)
            return real_loads(text, fast)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.records.codec.loads', spy))
        result = self._list(300, fields=records.DETAIL_FIELDS)
        self.assertEqual(300, len(result.instances))
        self.assertGreater(sum(c.rows for c in result.timings.cells), 300)
        network_infos = [t for t in parsed if t.startswith('[')]
        flavors = [t for t in parsed if '"nova_object.data"' in t]
        metadata = [t for t in parsed
                    if t.startswith('{') and t not in flavors]
        self.assertEqual(300, len(network_infos))
        self.assertEqual(len(flavors), len(set(flavors)))
        # At most the 300 (SQLite aggregates no rows to '{}', the other
        # databases to NULL, which is not parsed).
        self.assertLessEqual(len(metadata), 300)
        self.assertGreaterEqual(
            len(metadata), sum(1 for r in result.instances if r['metadata']))
        self.assertTrue(all(r['addresses'] for r in result.instances))
        self.assertTrue(all(r['flavor']['name'] == r['flavor_name']
                            for r in result.instances))

    def test_instance_with_two_live_extra_rows_is_listed_once(self):
        """instance_extra has no unique key on the instance uuid.

        Were an instance to have two live rows, the LEFT JOIN would
        return it twice; it is listed once, and batches of 100 still walk
        every row (the duplicate counts towards a full batch).
        """
        engine = sa.create_engine(self.world.url_of('cell2'))
        self.addCleanup(engine.dispose)
        extra = instance_query.EXTRA
        expected = self.expected_default_order()
        table = instance_query.INSTANCES
        with engine.begin() as conn:
            # The first and last instances of cell2, around batch edges.
            mine = conn.execute(sa.select(table.c.uuid).where(
                table.c.deleted == 0).order_by(
                table.c.created_at.desc(), table.c.id.desc())).scalars().all()
            for uuid in mine[:3] + mine[-3:]:
                row = conn.execute(sa.select(extra).where(
                    extra.c.instance_uuid == uuid)).mappings().one()
                copy = dict(row)
                copy.pop('id')
                conn.execute(extra.insert().values(**copy))
        self.cfg.config(instance_list_cells_batch_strategy='fixed',
                        instance_list_cells_batch_fixed_size=100,
                        group='api')
        result = self._list(None, fields=records.DETAIL_FIELDS)
        self.assertEqual(expected, [r['uuid'] for r in result.instances])
        self.assertTrue(all(r['flavor_name'] for r in result.instances))
