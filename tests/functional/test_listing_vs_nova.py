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
queries: sort keys and directions, limits, markers, filters (live,
deleted and mixed listings) and cell subsets. Where nova's merge crashes
(NULL sort values in different cells) ours must still answer, in the
database's NULL order.

On MariaDB, PostgreSQL and SQLite, deleted and mixed listings of servers
deleted by nova's own ``instance_destroy`` give, field by field, what
nova's objects give: flavor, addresses and metadata included.
"""

import random

import fixtures
import hypothesis
from hypothesis import strategies as st
from nova.api.openstack import common
try:
    from nova.api.openstack.compute.views import ips
except ImportError:  # nova 31: views/addresses.py, renamed ips.py in 32
    from nova.api.openstack.compute.views import addresses as ips
from nova.compute import instance_list as nova_instance_list
from nova.compute import vm_states
from nova import context as nova_context
from nova.db.main import api as nova_db
from nova.db.main import models
from nova import objects
import sqlalchemy as sa

from nova_cellsched import records
from nova_cellsched.records import fields as record_fields
from tests.fixtures import db
from tests.fixtures import worlds

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
        population = worlds.Population(instances=90, hosts=3,
                                     deleted_per_instance=1,
                                     metadata_keys=1)
        self.world = self.useFixture(worlds.CellWorld(db.MYSQL_URL, [
            ('cell0', worlds.Population(instances=25, error_only=True)),
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
        from nova_cellsched.records import query as instance_query
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
        result = records.list_instances(
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
        # Live, deleted (soft-deleted included) or both: nova lists both
        # without the filter, ours with deleted=None.
        filters = {'deleted': data.draw(st.sampled_from([False, True, None]),
                                        'deleted')}
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

        novas = {k: v for k, v in filters.items()
                 if not (k == 'deleted' and v is None)}
        expected = nova_uuids(self.ctx, cell_mappings, novas, limit,
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
            got = records.list_instances(
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


#: Detail fields read from other tables than instances, and some columns.
JOINED_FIELDS = ['uuid', 'display_name', 'vm_state', 'flavor_name', 'flavor',
                 'addresses', 'metadata']
#: What nova's objects need for those fields.
NOVA_ATTRS = ['flavor', 'info_cache', 'metadata']


def _address_set(addresses):
    """label -> sorted (addr, version, type, mac).

    nova's view lists a network's fixed addresses before its floating
    ones, ours each floating address after its fixed one.
    """
    return {label: sorted((a['addr'], a['version'], a['OS-EXT-IPS:type'],
                           a['OS-EXT-IPS-MAC:mac_addr']) for a in entries)
            for label, entries in addresses.items()}


class DeletedServersMatchNovaObjectsMixin:
    """Deleted and mixed listings: every joined field is nova's.

    Two cells of live servers, a third of them then deleted with nova's
    own ``instance_destroy`` (which soft-deletes their instance_extra,
    info cache and metadata rows and removes their tags) and a few more
    soft-deleted (``vm_state`` soft-delete, ``deleted`` still 0). Each
    record of ``list_instances`` is compared with what nova's lister and
    objects (``get_instance_objects_sorted`` and nova's address view)
    give for the same server: flavor, addresses and metadata included.
    """

    SERVER_URL: str

    def setUp(self):
        super().setUp()
        population = worlds.Population(instances=24, hosts=3, metadata_keys=2)
        self.world = self.useFixture(worlds.CellWorld(self.SERVER_URL, [
            ('cell1', population), ('cell2', population)]))
        self.cfg.config(connection=self.world.url_of('cell1'),
                        group='database')
        # nova's lister reads its cells once per process.
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELLS', []))
        self.ctx = nova_context.get_admin_context()
        self.destroyed = self._delete_as_nova_does()

    def _delete_as_nova_does(self):
        """Destroy every third server of each cell with nova's DB API."""
        destroyed = set()
        for cm in objects.CellMappingList.get_all(self.ctx):
            with nova_context.target_cell(self.ctx, cm) as cctxt:
                uuids = sorted(i.uuid for i in objects.InstanceList
                               .get_by_filters(cctxt, {'deleted': False}))
                for uuid in uuids[::3]:
                    nova_db.instance_destroy(cctxt, uuid)
                    destroyed.add(uuid)
                for uuid in uuids[1:6:3]:
                    nova_db.instance_update(
                        cctxt, uuid, {'vm_state': vm_states.SOFT_DELETED})
        # What the listing must still show: each deleted server's rows
        # are soft-deleted, as nova leaves them.
        for name in self.world.cells:
            engine = sa.create_engine(self.world.url_of(name))
            try:
                with engine.connect() as conn:
                    for model in (models.InstanceExtra,
                                  models.InstanceInfoCache):
                        table = model.__table__
                        live = conn.execute(sa.select(sa.func.count()).where(
                            table.c.instance_uuid.in_(destroyed),
                            table.c.deleted == 0)).scalar_one()
                        self.assertEqual(0, live, table.name)
            finally:
                engine.dispose()
        return destroyed

    def nova_records(self, read_deleted, filters, limit, sort_keys,
                     sort_dirs):
        """The records nova's lister and objects give, in its order."""
        ctx = nova_context.get_admin_context(read_deleted=read_deleted)
        insts, down = nova_instance_list.get_instance_objects_sorted(
            ctx, dict(filters), limit, None, list(NOVA_ATTRS),
            list(sort_keys), list(sort_dirs))
        self.assertEqual([], down)
        view = ips.ViewBuilder()
        out = []
        for inst in insts:
            flavor = inst.flavor
            networks = common.get_networks_for_instance(ctx, inst)
            out.append({
                'uuid': inst.uuid, 'display_name': inst.display_name,
                'vm_state': inst.vm_state,
                'flavor_name': flavor.name if flavor else None,
                'flavor': ({k: getattr(flavor, k)
                            for k in record_fields.FLAVOR_SUMMARY}
                           if flavor else None),
                'addresses': _address_set(view.index(
                    None, networks, extend_address=True)['addresses']),
                'metadata': dict(inst.metadata)})
        return out

    def our_records(self, filters, limit, sort_keys, sort_dirs):
        result = records.list_instances(
            self.ctx, filters=filters, limit=limit, sort_keys=sort_keys,
            sort_dirs=sort_dirs, fields=JOINED_FIELDS,
            engines=self.world.engines)
        self.assertTrue(result.complete, result.failures)
        return [dict({f: r[f] for f in JOINED_FIELDS},
                     addresses=_address_set(r['addresses']))
                for r in result.instances]

    def assertSameRecords(self, read_deleted, nova_filters, our_filters,
                          limit=None, sort_keys=(), sort_dirs=()):
        theirs = self.nova_records(read_deleted, nova_filters, limit,
                                   sort_keys, sort_dirs)
        ours = self.our_records(our_filters, limit, list(sort_keys) or None,
                                list(sort_dirs) or None)
        label = (read_deleted, our_filters, limit, sort_keys)
        self.assertEqual([r['uuid'] for r in theirs],
                         [r['uuid'] for r in ours], label)
        for nova_record, our_record in zip(theirs, ours):
            self.assertEqual(nova_record, our_record, label)
        return ours

    def test_deleted_servers_keep_novas_flavor_and_addresses(self):
        """``deleted=true``: every field of every record is nova's."""
        for read_deleted in ('yes', 'only'):
            for limit in (None, 5):
                records = self.assertSameRecords(
                    read_deleted, {'deleted': True, 'soft_deleted': False},
                    {'deleted': True, 'soft_deleted': False}, limit)
                self.assertTrue(records)
                self.assertLessEqual({r['uuid'] for r in records},
                                     self.destroyed)
                # What the issue saw missing: nova has them, and so must
                # the listing.
                for record in records:
                    self.assertIsNotNone(record['flavor_name'])
                    self.assertTrue(record['addresses'])
        every = self.assertSameRecords('yes', {'deleted': True},
                                       {'deleted': True})
        self.assertEqual(len(self.destroyed) + 4, len(every))

    def test_mixed_listings_are_novas_records(self):
        """Live and deleted servers together, sorted and limited."""
        for sort_keys, sort_dirs in (((), ()), (('display_name',), ('asc',)),
                                     (('uuid',), ('desc',))):
            for limit in (None, 7, 30):
                records = self.assertSameRecords(
                    'yes', {}, {'deleted': None}, limit, sort_keys,
                    sort_dirs)
                if limit is None:
                    self.assertEqual(48, len(records))
        live = self.assertSameRecords('yes', {'deleted': False},
                                      {'deleted': False})
        self.assertFalse({r['uuid'] for r in live} & self.destroyed)


class DeletedServersMatchNovaMariaDBTest(DeletedServersMatchNovaObjectsMixin,
                                         db.FunctionalTestCase):
    SERVER_URL = db.MYSQL_URL


class DeletedServersMatchNovaPostgreSQLTest(
        DeletedServersMatchNovaObjectsMixin, db.FunctionalTestCase):
    SERVER_URL = db.POSTGRESQL_URL


class DeletedServersMatchNovaSQLiteTest(DeletedServersMatchNovaObjectsMixin,
                                        db.FunctionalTestCase):
    SERVER_URL = 'sqlite://'


class FiltersMatchNovaMixin:
    """Every filter the lister accepts selects what nova's DB API selects.

    For each of :data:`nova_cellsched.records.FILTERS`, several values
    (exact values, substrings, regular expressions with anchors, classes,
    alternation and characters that are wildcards to LIKE), live and
    deleted listings: the set of servers equals the one nova's own lister
    returns for the same filter on the same database. nova picks its
    regular expression operator from the dialect of ``[database]
    connection``, which points at the cells' server here.
    """

    SERVER_URL: str

    def setUp(self):
        super().setUp()
        population = worlds.Population(instances=30, hosts=3,
                                     deleted_per_instance=1)
        self.world = self.useFixture(worlds.CellWorld(self.SERVER_URL, [
            ('cell1', population), ('cell2', population)]))
        self.cfg.config(connection=self.world.url_of('cell1'),
                        group='database')
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELLS', []))
        self.ctx = nova_context.get_admin_context()
        self.mappings = list(objects.CellMappingList.get_all(self.ctx))
        self._vary_texts()

    def _vary_texts(self):
        """Names, key names, zones and nodes regexes can tell apart."""
        names = ['web-1', 'web-10', 'db_1', 'db%1', 'WEB-2', 'api.x',
                 'apix', 'a|b', 'cache-01']
        table = models.Instance.__table__
        for name in self.world.cells:
            engine = sa.create_engine(self.world.url_of(name))
            try:
                with engine.begin() as conn:
                    ids = [i for (i,) in conn.execute(
                        sa.select(table.c.id).order_by(table.c.id))]
                    for n, row_id in enumerate(ids):
                        text = names[n % len(names)]
                        conn.execute(table.update().where(
                            table.c.id == row_id).values(
                                display_name=text,
                                key_name='key-' + text,
                                availability_zone=(None if n % 4 == 0
                                                   else 'az-%d' % (n % 3)),
                                node=(None if n % 5 == 0
                                      else 'node-%d.%s' % (n % 4, name))))
            finally:
                engine.dispose()

    def values(self):
        """filter -> values to try, from the seeded rows."""
        table = models.Instance.__table__
        engine = sa.create_engine(self.world.url_of('cell1'))
        try:
            with engine.connect() as conn:
                row = conn.execute(sa.select(table).where(
                    table.c.deleted == 0, table.c.host.isnot(None)).order_by(
                        table.c.id)).first()._mapping
        finally:
            engine.dispose()
        regexes = ['web-1', '^web-1$', 'WEB', 'db_1', 'db%1', 'api.x',
                   'a|b', '^(web|db)', '[0-9]{2}$', 'cache-0?1', '.']
        return {
            'project_id': [row['project_id'], 'nope'],
            'user_id': [row['user_id']],
            'host': [row['host'], row['host'][:-1]],
            'image_ref': [row['image_ref']],
            'instance_type_id': [row['instance_type_id']],
            'uuid': [[row['uuid']]],
            'vm_state': [[vm_states.ACTIVE, vm_states.ERROR]],
            'task_state': [[None]],
            'display_name': regexes,
            'key_name': ['key-web', '^key-db', 'key-a|b'],
            'availability_zone': ['az-1', '^az-[02]$', 'z'],
            'node': ['node-1', r'^node-[23]\.cell1$', 'cell2$'],
            'changes-since': [row['updated_at']],
            'changes-before': [row['updated_at']],
            'soft_deleted': [True],
        }

    def test_every_filter_selects_novas_servers(self):
        tried = 0
        for name, values in sorted(self.values().items()):
            for value in values:
                for deleted in (False, True):
                    filters = {name: value, 'deleted': deleted}
                    theirs = set(nova_uuids(
                        self.ctx, self.mappings, filters, None, None,
                        ['uuid'], ['asc']))
                    result = records.list_instances(
                        self.ctx, filters=filters,
                        cells=self.mappings, engines=self.world.engines,
                        fields=['uuid'])
                    self.assertTrue(result.complete, result.failures)
                    ours = {r['uuid'] for r in result.instances}
                    self.assertEqual((filters, sorted(theirs)),
                                     (filters, sorted(ours)))
                    tried += 1
        # Every filter the lister accepts was tried.
        self.assertEqual(set(records.FILTERS) - {'deleted'},
                         set(self.values()))
        self.assertGreater(tried, 50)


class FiltersMatchNovaMariaDBTest(FiltersMatchNovaMixin,
                                  db.FunctionalTestCase):
    SERVER_URL = db.MYSQL_URL


class FiltersMatchNovaPostgreSQLTest(FiltersMatchNovaMixin,
                                     db.FunctionalTestCase):
    SERVER_URL = db.POSTGRESQL_URL


class FiltersMatchNovaSQLiteTest(FiltersMatchNovaMixin,
                                 db.FunctionalTestCase):
    SERVER_URL = 'sqlite://'
