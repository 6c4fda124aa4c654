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

"""The correctness contract: same instances, same order as nova's lister.

Both listers run on the same MariaDB cell databases, over many generated
queries: sort keys and directions, limits, markers, filters and cell
subsets. Where nova's merge crashes (NULL sort values in different
cells) ours must still answer, in the database's NULL order.
"""

import random

import hypothesis
from hypothesis import strategies as st
from nova.compute import instance_list as nova_instance_list
from nova.compute import vm_states
from nova import context as nova_context
from nova import objects

from nova_cellsched.demo import seed
from nova_cellsched import listing
from tests.functional import db

# Sort keys whose values are never NULL in the seeded cells, so nova's own
# merge can compare them.
NOT_NULL_KEYS = ('created_at', 'display_name', 'uuid', 'vm_state',
                 'power_state', 'project_id', 'user_id', 'image_ref',
                 'key_name', 'hostname', 'updated_at', 'instance_type_id',
                 'launch_index', 'root_device_name')
# Keys that are NULL in cell0 or for some states.
NULLABLE_KEYS = ('host', 'node', 'launched_at', 'task_state',
                 'availability_zone')

SETTINGS = hypothesis.settings(
    deadline=None, derandomize=True, max_examples=60,
    suppress_health_check=[hypothesis.HealthCheck.too_slow,
                           hypothesis.HealthCheck.data_too_large])


def nova_uuids(ctx, cell_mappings, filters, limit, marker, sort_keys,
               sort_dirs):
    """uuids in the order nova's own cross-cell lister returns them."""
    batch = nova_instance_list.get_instance_list_cells_batch_size(
        limit, cell_mappings)
    _lister, records = nova_instance_list.get_instances_sorted(
        ctx, dict(filters), limit, marker, [], list(sort_keys),
        list(sort_dirs), cell_mappings=cell_mappings, batch_size=batch)
    return [r['uuid'] for r in records]


class ListingMatchesNovaTest(db.FunctionalTestCase):
    """list_instances answers exactly what nova answers."""

    def setUp(self):
        super().setUp()
        # Few hosts, few projects and coarse timestamps make many ties,
        # which is where merge order and tie-breaking are tested.
        population = seed.Population(instances=90, hosts=3,
                                     deleted_per_instance=1,
                                     metadata_keys=1)
        self.world = self.useFixture(db.CellWorld(db.MYSQL_URL, [
            ('cell0', seed.Population(instances=25, error_only=True)),
            ('cell1', population), ('cell2', population),
            ('cell3', population)]))
        self._coarsen_timestamps()
        # nova picks its regex operator for the name filter from the
        # dialect of [database] connection.
        self.cfg.config(connection=self.world.url_of('cell1'),
                        group='database')
        self.ctx = nova_context.get_admin_context()
        self.mappings = {cm.name: cm for cm in
                         objects.CellMappingList.get_all(self.ctx)}
        self.everything = [u for uuids in self.world.all_uuids().values()
                           for u in uuids]

    def _coarsen_timestamps(self):
        """Round created_at to the day so that sort keys tie a lot."""
        import sqlalchemy as sa

        from nova_cellsched.listing import query as instance_query
        table = instance_query.INSTANCES
        for name in self.world.cells:
            engine = sa.create_engine(self.world.url_of(name))
            with engine.begin() as conn:
                conn.execute(table.update().values(
                    created_at=sa.func.date(table.c.created_at),
                    display_name=sa.func.concat(
                        'vm-', sa.func.mod(table.c.id, 7))))
            engine.dispose()

    def ours(self, cells, filters, limit, marker, sort_keys, sort_dirs):
        result = listing.list_instances(
            self.ctx, cells=cells, filters=filters, limit=limit,
            marker=marker, sort_keys=sort_keys, sort_dirs=sort_dirs,
            engines=self.world.engines)
        self.assertTrue(result.complete, result.failures)
        return [r['uuid'] for r in result.instances]

    @SETTINGS
    @hypothesis.given(data=st.data())
    def test_generated_queries_return_novas_instances_in_novas_order(
            self, data):
        """Sort keys, directions, limits, markers, filters, cell subsets."""
        keys = data.draw(st.lists(st.sampled_from(NOT_NULL_KEYS),
                                  max_size=3, unique=True), 'keys')
        dirs = [data.draw(st.sampled_from(['asc', 'desc']), 'dir')
                for _ in keys]
        names = data.draw(st.lists(
            st.sampled_from(sorted(self.mappings)), min_size=1,
            unique=True), 'cells')
        limit = data.draw(st.one_of(st.none(), st.integers(1, 400)),
                          'limit')
        marker = data.draw(st.one_of(st.none(),
                                     st.sampled_from(self.everything)),
                           'marker')
        filters = {'deleted': False}
        if data.draw(st.booleans(), 'by project'):
            filters['project_id'] = data.draw(
                st.sampled_from(self.world.projects), 'project')
        if data.draw(st.booleans(), 'by state'):
            filters['vm_state'] = data.draw(st.lists(
                st.sampled_from([vm_states.ACTIVE, vm_states.STOPPED,
                                 vm_states.ERROR]), min_size=1,
                unique=True), 'states')
        if data.draw(st.booleans(), 'by name'):
            filters['display_name'] = data.draw(
                st.sampled_from(['vm-1', 'vm-', '3']), 'name')
        cell_mappings = [self.mappings[n] for n in names]

        expected = nova_uuids(self.ctx, cell_mappings, filters, limit,
                              marker, keys, dirs)
        got = self.ours(cell_mappings, filters, limit, marker, keys, dirs)
        self.assertEqual(expected, got)

    def test_walking_all_pages_yields_every_instance_once_in_order(self):
        """Pages of 37 with markers concatenate to the unpaged listing."""
        full = self.ours(None, None, None, None, ['display_name'], ['asc'])
        self.assertEqual(sorted(self.everything), sorted(full))
        pages, marker = [], None
        while True:
            page = self.ours(None, None, 37, marker, ['display_name'],
                             ['asc'])
            pages.extend(page)
            if len(page) < 37:
                break
            marker = page[-1]
        self.assertEqual(full, pages)

    def test_default_order_matches_nova_for_every_limit(self):
        """created_at desc, id desc, uuid asc; limits across batches."""
        cells = list(self.mappings.values())
        for limit in (1, 50, 99, 100, 101, 250, None):
            self.assertEqual(
                nova_uuids(self.ctx, cells, {'deleted': False}, limit,
                           None, [], []),
                self.ours(cells, {'deleted': False}, limit, None, None,
                          None))

    def test_nullable_sort_keys_work_where_nova_crashes(self):
        """NULL sorts first ascending and last descending, as in MySQL.

        nova's merge compares None with str across cells and raises
        TypeError; ours answers, in the order the database uses.
        """
        cells = list(self.mappings.values())
        rng = random.Random(7)
        for key in NULLABLE_KEYS:
            direction = rng.choice(['asc', 'desc'])
            try:
                expected = nova_uuids(self.ctx, cells, {'deleted': False},
                                      None, None, [key], [direction])
            except TypeError:
                expected = None
            got = listing.list_instances(
                self.ctx, sort_keys=[key], sort_dirs=[direction],
                fields=['uuid', key], engines=self.world.engines)
            values = [r[key] for r in got.instances]
            nulls = [v is None for v in values]
            if direction == 'asc':
                self.assertEqual(sorted(nulls, reverse=True), nulls, key)
            else:
                self.assertEqual(sorted(nulls), nulls, key)
            present = [v for v in values if v is not None]
            self.assertEqual(sorted(present, reverse=direction == 'desc'),
                             present, key)
            if expected is not None:
                self.assertEqual(expected,
                                 [r['uuid'] for r in got.instances], key)
            self.assertEqual(len(self.everything), len(values))
