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

"""Plain rows (``api/hooks/rows.py``) build the objects nova's entities build.

One cell on each database, seeded as nova writes it and then given what
the seed lacks: tags (servers with one, two and three tags, a tag on a
deleted server), compute services (with a conductor on the same host and
a deleted compute service), a server without an info cache, one without
an instance_extra row, deleted metadata and system metadata rows, servers
deleted with nova's own ``instance_destroy`` (which soft-deletes their
instance_extra, info cache and metadata rows) and a soft-deleted one. For
each set of joins nova-api asks for (and every instance_extra
attribute), each context (admin, admin reading deleted rows or only
deleted rows, a project) and filters (live, deleted and mixed listings,
and every filter nova builds with a join or subquery on tags), the batch is
loaded twice with nova's ``instance_get_all_by_filters_sort``: with
nova's joins (its ORM entities) and with a :class:`rows.Loader`; both
go through nova's ``_make_instance_list`` and the objects, with their
loaded fields and change tracking, must be the same.

The seeded world is built once per database server and test process
and shared, read only, by that server's tests (testresources: this
module's ``load_tests``); its uniquely named databases are dropped when
the process's last test of that server is done.
"""

import contextlib
import traceback
from typing import Any

import fixtures
from nova.compute import vm_states
from nova import context as nova_context
from nova.db.main import api as db
from nova.db.main import models
from nova import objects
from nova.objects import instance as instance_obj
import sqlalchemy as sa
import testresources
import testtools

from nova_cellsched.api.hooks import instance_list
from nova_cellsched.api.hooks import keyset
from nova_cellsched.api.hooks import rows
from nova_cellsched.api.startup import selftest
from nova_cellsched.api.view import render
from nova_cellsched import compat
from nova_cellsched import conf as conf_mod
from tests.fixtures import db as db_fixtures
from tests.fixtures import worlds

#: expected_attrs as nova-api's GET /servers/detail asks for them, at
#: 2.1, 2.16 (services), 2.26 (tags) and 2.73+ (system metadata).
#: Every column of nova's instances table.
_INSTANCE_COLUMNS = frozenset(
    prop.key for prop in sa.inspect(models.Instance).column_attrs)

API_ATTRS = [
    ['metadata', 'info_cache', 'security_groups', 'flavor', 'info_cache',
     'metadata'],
    ['metadata', 'info_cache', 'security_groups', 'flavor', 'info_cache',
     'metadata', 'services'],
    ['metadata', 'info_cache', 'security_groups', 'flavor', 'info_cache',
     'metadata', 'services', 'tags', 'trusted_certs'],
    ['metadata', 'info_cache', 'security_groups', 'flavor', 'info_cache',
     'metadata', 'services', 'system_metadata', 'tags', 'trusted_certs'],
    # GET /servers (no details) and every instance_extra attribute.
    ['metadata', 'info_cache', 'security_groups'],
    ['numa_topology', 'pci_requests', 'flavor', 'vcpu_model',
     'migration_context', 'keypairs', 'device_metadata', 'trusted_certs',
     'resources', 'system_metadata'],
]

#: Tags of the seeded servers (see ``_enrich``): two or three a server.
TAGS = ['blue', 'green', 'red']

FILTERS: list[dict[str, Any]] = [
    {'deleted': False},
    {},
    {'deleted': True},
    {'deleted': True, 'soft_deleted': False},
    {'deleted': False, 'tags': ['blue']},
    {'deleted': False, 'not-tags-any': ['blue']},
    # nova's filters that join tags (an inner JOIN per tag for ``tags``,
    # one JOIN on any of them for ``tags-any``, which repeats a server
    # with several of them) or read them in a subquery (``not-tags``,
    # ``not-tags-any``), on live, mixed and deleted listings.
    {'deleted': False, 'tags-any': TAGS},
    {'tags-any': TAGS},
    {'deleted': True, 'tags-any': TAGS},
    {'deleted': False, 'tags': ['blue', 'green']},
    {'deleted': False, 'tags': ['green'], 'tags-any': ['blue', 'red']},
    {'deleted': False, 'not-tags': ['blue', 'green']},
    {'deleted': False, 'not-tags-any': ['green', 'red']},
    {'tags-any': TAGS, 'not-tags': ['red']},
]


def _differences(theirs: Any, ours: Any, path: str = '') -> list[str]:
    """Where two primitives differ, as paths (for failure messages)."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        found = []
        for key in sorted(set(theirs) | set(ours), key=str):
            found += _differences(theirs.get(key), ours.get(key),
                                  '%s.%s' % (path, key))
        return found
    if (isinstance(theirs, (list, tuple)) and
            isinstance(ours, (list, tuple)) and len(theirs) == len(ours)):
        found = []
        for index, (left, right) in enumerate(zip(theirs, ours)):
            found += _differences(left, right, '%s[%d]' % (path, index))
        return found
    if theirs != ours:
        return ['%s: nova %r, ours %r' % (path, theirs, ours)]
    return []


def load_tests(loader: Any, tests: Any, pattern: Any) -> Any:
    """The module's tests, grouped so that each world is built once."""
    return testresources.OptimisingTestSuite(testtools.iterate_tests(tests))


class SeededWorld(fixtures.Fixture):
    """One cell on *server_url*, seeded and given what the seed lacks.

    Built once and shared by the tests of one database server: they only
    read it. Every database it made is dropped at its cleanup.
    """

    def __init__(self, server_url: str) -> None:
        super().__init__()
        self.server_url = server_url

    def _setUp(self) -> None:
        conf_mod.register_opts(db_fixtures.CONF)
        self.world = self.useFixture(
            worlds.CellWorld(self.server_url, [
                ('cell1', worlds.Population(instances=40, deleted=6,
                                          hosts=4)),
            ]))
        self.url = self.world.url_of('cell1')
        self._enrich(self.url)
        self.ctx = nova_context.get_admin_context()
        self.cell = objects.CellMapping.get_by_uuid(
            self.ctx, self.world.uuid_of('cell1'))
        self._delete_as_nova_does()

    def _enrich(self, url: str) -> None:
        """What the seed does not write, as nova would write it."""
        inst = models.Instance.__table__
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        with engine.begin() as conn:
            live = conn.execute(
                sa.select(inst.c.uuid, inst.c.host, inst.c.id)
                .where(inst.c.deleted == 0).order_by(inst.c.id)).all()
            gone = conn.execute(
                sa.select(inst.c.uuid).where(inst.c.deleted != 0)
                .order_by(inst.c.id)).all()
            if not gone:
                raise AssertionError('the seed deleted no server')
            tags = models.Tag.__table__
            for number, row in enumerate(live[:8]):
                # Three tags, then two, on the first servers; the next
                # two get deleted below (nova removes their tags).
                for tag in TAGS[:3 if number < 3 else 2]:
                    conn.execute(tags.insert().values(resource_id=row.uuid,
                                                      tag=tag))
            conn.execute(tags.insert().values(resource_id=live[8].uuid,
                                              tag='red'))
            conn.execute(tags.insert().values(resource_id=gone[0].uuid,
                                              tag='blue'))
            services = models.Service.__table__
            hosts = sorted({row.host for row in live if row.host})
            for number, host in enumerate(hosts):
                conn.execute(services.insert().values(
                    host=host, binary='nova-compute', topic='compute',
                    report_count=number, disabled=number == 1,
                    disabled_reason='maintenance' if number == 1 else None,
                    forced_down=False, version=66, deleted=0,
                    uuid='00000000-0000-4000-8000-%012d' % number))
                conn.execute(services.insert().values(
                    host=host, binary='nova-conductor', topic='conductor',
                    report_count=0, disabled=False, forced_down=False,
                    version=66, deleted=0))
            conn.execute(services.insert().values(
                host=hosts[0], binary='nova-compute', topic='compute',
                report_count=0, disabled=False, forced_down=False,
                version=60, deleted=1000))
            conn.execute(models.InstanceInfoCache.__table__.delete().where(
                models.InstanceInfoCache.__table__.c.instance_uuid ==
                live[1].uuid))
            conn.execute(models.InstanceExtra.__table__.delete().where(
                models.InstanceExtra.__table__.c.instance_uuid ==
                live[2].uuid))
            for model in (models.InstanceMetadata,
                          models.InstanceSystemMetadata):
                table = model.__table__
                conn.execute(table.insert().values(
                    instance_uuid=live[3].uuid, key='removed',
                    value='yes', deleted=1))
            conn.execute(models.InstanceExtra.__table__.update().where(
                models.InstanceExtra.__table__.c.instance_uuid ==
                live[4].uuid).values(keypairs=(
                    '{"nova_object.name": "KeyPairList", '
                    '"nova_object.namespace": "nova", '
                    '"nova_object.version": "1.3", '
                    '"nova_object.data": {"objects": []}}')))
        with engine.connect() as conn:
            self.project_id = conn.execute(
                sa.select(inst.c.project_id).where(
                    inst.c.uuid == live[0].uuid)).scalar_one()
        self.live = [row.uuid for row in live]

    def _delete_as_nova_does(self) -> None:
        """Delete two tagged servers with nova's ``instance_destroy``.

        nova soft-deletes their instance_extra, info cache, metadata and
        system metadata rows with them and removes their tags; a third
        server is soft-deleted (``deleted`` still 0).
        """
        with nova_context.target_cell(self.ctx, self.cell) as cctxt:
            for uuid in self.live[6:8]:
                db.instance_destroy(cctxt, uuid)
            db.instance_update(cctxt, self.live[9],
                               {'vm_state': vm_states.SOFT_DELETED})


class WorldManager(testresources.TestResourceManager):
    """Makes and cleans up the :class:`SeededWorld` of one server."""

    def __init__(self, server_url: str) -> None:
        super().__init__()
        self.server_url = server_url

    def make(self, dependency_resources: Any) -> SeededWorld | str:
        """The world, or why it could not be built.

        An exception here would end the whole test process (testresources
        builds resources between tests): each test that needs the world
        fails with the reason instead.
        """
        problem = db_fixtures.server_available(self.server_url)
        if problem is not None:
            return ('the database server %s is needed by this test and '
                    'does not answer (%s)' % (self.server_url, problem))
        world = SeededWorld(self.server_url)
        try:
            world.setUp()
        except Exception:  # noqa: BLE001 - reported by every test
            return 'building the world failed:\n' + traceback.format_exc()
        return world

    def clean(self, resource: SeededWorld | str) -> None:
        if not isinstance(resource, str):
            resource.cleanUp()


MARIADB_WORLD = WorldManager(db_fixtures.MYSQL_URL)
POSTGRESQL_WORLD = WorldManager(db_fixtures.POSTGRESQL_URL)
SQLITE_WORLD = WorldManager('sqlite://')


class PlainRowsTestMixin:
    """The two loads agree; run per database server."""

    SERVER_URL: str
    seeded: SeededWorld | str

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        if isinstance(self.seeded, str):
            self.fail(self.seeded)  # type: ignore[attr-defined]
        if not compat.is_on('keyset'):
            compat.install(['keyset'])
            self.addCleanup(  # type: ignore[attr-defined]
                compat.restore, ['keyset'])
        # nova's regex filters pick their operator by this URL's scheme.
        self.cfg.config(  # type: ignore[attr-defined]
            connection=self.seeded.url, group='database')
        self.ctx = nova_context.get_admin_context()
        self.cell = objects.CellMapping.get_by_uuid(
            self.ctx, self.seeded.world.uuid_of('cell1'))
        self.project_id = self.seeded.project_id
        self.live = self.seeded.live

    def _load(self, ctx: Any, filters: dict[str, Any], attrs: list[str],
              plain: bool, limit: int | None = None,
              cols: list[str] | None = None, paged: bool = True
              ) -> list[Any]:
        """One batch, loaded by nova (*plain* False) or by the loader.

        :param cols: the joins; nova's ``_expected_cols(attrs)`` if None.
        :param paged: through :func:`keyset.paging`, as the lister runs
            nova's query; False for nova's query as nova runs it
            (oslo.db's ``paginate_query``).
        """
        spec = instance_list.sort_order(None, None)
        if cols is None:
            cols = instance_obj._expected_cols(list(attrs))
        with nova_context.target_cell(ctx, self.cell) as cctxt:
            loader = rows.Loader(cctxt, cols) if plain else None
            with (keyset.paging(None, loader) if paged
                  else contextlib.nullcontext()):
                found = db.instance_get_all_by_filters_sort(
                    cctxt, filters, limit=limit,
                    columns_to_join=[] if plain else cols,
                    sort_keys=list(spec.keys), sort_dirs=list(spec.dirs))
            if loader is not None:
                found = loader.finish(found)
        built = instance_obj._make_instance_list(
            ctx, objects.InstanceList(), found, list(attrs))
        return [(selftest.canonical(inst.obj_to_primitive()),
                 sorted(inst.obj_what_changed())) for inst in built]

    def _assert_same(self, ctx: Any, label: str, at_least: int = 500
                     ) -> None:
        checked = 0
        for attrs in API_ATTRS:
            cols = instance_obj._expected_cols(list(attrs))
            self.assertTrue(  # type: ignore[attr-defined]
                rows.supports(cols), cols)
            for filters in FILTERS:
                theirs = self._load(ctx, dict(filters), attrs, False)
                ours = self._load(ctx, dict(filters), attrs, True)
                self.assertEqual(  # type: ignore[attr-defined]
                    [], _differences(theirs, ours)[:10],
                    '%s %s %s' % (label, attrs, filters))
                checked += len(ours)
        self.assertGreater(checked, at_least)  # type: ignore[attr-defined]

    def test_admin_objects_are_nova_objects(self) -> None:
        """An admin's listing: every join set and filter, same objects."""
        self._assert_same(self.ctx, 'admin')

    def test_read_deleted_objects_are_nova_objects(self) -> None:
        """Reading deleted rows (deleted metadata included): same."""
        self._assert_same(self.ctx.elevated(read_deleted='yes'), 'deleted')

    def test_read_deleted_only_objects_are_nova_objects(self) -> None:
        """Reading only deleted rows (nova then reads no live metadata)."""
        self._assert_same(self.ctx.elevated(read_deleted='only'),
                          'only deleted')

    def test_deleted_servers_keep_their_joins(self) -> None:
        """Servers nova deleted: nova's flavor and info cache, no tags."""
        for read_deleted in ('yes', 'only'):
            ctx = self.ctx.elevated(read_deleted=read_deleted)
            ours = self._load(ctx, {'deleted': True, 'soft_deleted': False},
                              API_ATTRS[3], True)
            by_uuid = {p['nova_object.data']['uuid']: p['nova_object.data']
                       for p, _c in ours}
            for uuid in self.live[6:8]:
                data = by_uuid[uuid]
                self.assertTrue(  # type: ignore[attr-defined]
                    data['flavor']['nova_object.data']['name'])
                self.assertNotEqual(  # type: ignore[attr-defined]
                    '[]', data['info_cache']['nova_object.data'][
                        'network_info'])
                self.assertEqual(  # type: ignore[attr-defined]
                    [], data['tags']['nova_object.data']['objects'])

    def test_tag_filters_list_each_server_once(self) -> None:
        """A server with several of the tags is one object, as in nova."""
        for filters, expected in (
                ({'deleted': False, 'tags-any': TAGS},
                 self.live[:6] + self.live[8:9]),
                ({'tags-any': TAGS}, self.live[:6] + self.live[8:9]),
                ({'deleted': False, 'tags': ['blue', 'green']},
                 self.live[:6])):
            for plain in (True, False):
                found = [p['nova_object.data']['uuid'] for p, _c in
                         self._load(self.ctx, dict(filters), API_ATTRS[3],
                                    plain)]
                self.assertEqual(  # type: ignore[attr-defined]
                    set(expected), set(found), filters)
                self.assertEqual(  # type: ignore[attr-defined]
                    len(expected), len(found), (filters, plain))

    def test_limited_tag_batches_are_novas_first_servers(self) -> None:
        """A batch of N holds the first N matching servers, each once.

        nova's SQL applies the LIMIT to the joined rows: ``tags-any`` of
        servers that have two or three of the tags gives fewer servers
        than the limit (its lister asks again after the last one, so its
        page is the first N servers). A batch here is never short while
        servers remain: its end is the end of the cell.
        """
        for filters in ({'deleted': False, 'tags-any': TAGS},
                        {'tags-any': TAGS, 'not-tags': ['red']},
                        {'deleted': False, 'tags': ['green'],
                         'tags-any': ['blue', 'red']}):
            everything = self._load(self.ctx, dict(filters), API_ATTRS[3],
                                    False, paged=False)
            self.assertGreater(  # type: ignore[attr-defined]
                len(everything), 2, filters)
            # nova's own batches: some hold fewer servers than asked for.
            short = [limit for limit in range(1, len(everything) + 1)
                     if len(self._load(self.ctx, dict(filters),
                                       API_ATTRS[3], False, limit,
                                       paged=False)) < limit]
            self.assertTrue(short, filters)  # type: ignore[attr-defined]
            for limit in range(1, len(everything) + 2):
                for plain in (True, False):
                    batch = self._load(self.ctx, dict(filters),
                                       API_ATTRS[3], plain, limit)
                    self.assertEqual(  # type: ignore[attr-defined]
                        [], _differences(everything[:limit], batch)[:10],
                        (filters, limit, plain))

    def test_a_second_extra_row_does_not_cut_a_batch(self) -> None:
        """A batch of N holds the first N servers with a repeated join.

        instance_extra has no unique key; the loader reads it in the
        batch's statement, where a server with two rows would be counted
        twice by the LIMIT. Such a batch is read again, one query per
        join: it still holds nova's first N servers, each once.
        """
        extra = models.InstanceExtra.__table__
        engine = sa.create_engine(self.seeded.url)  # type: ignore[union-attr]
        self.addCleanup(engine.dispose)  # type: ignore[attr-defined]
        uuid = self.live[5]
        with engine.begin() as conn:
            flavor = conn.execute(sa.select(extra.c.flavor).where(
                extra.c.instance_uuid == uuid)).scalar_one()
            conn.execute(extra.insert().values(
                instance_uuid=uuid, flavor=flavor, deleted=0))

        def remove() -> None:
            with engine.begin() as conn:
                first = conn.execute(sa.select(sa.func.min(extra.c.id)).where(
                    extra.c.instance_uuid == uuid)).scalar_one()
                conn.execute(extra.delete().where(
                    extra.c.instance_uuid == uuid, extra.c.id != first))
        self.addCleanup(remove)  # type: ignore[attr-defined]
        filters = {'deleted': False}
        everything = [p['nova_object.data']['uuid'] for p, _c in self._load(
            self.ctx, dict(filters), API_ATTRS[0], False, paged=False)]
        self.assertIn(uuid, everything)  # type: ignore[attr-defined]
        for limit in range(1, len(everything) + 2):
            batch = [p['nova_object.data']['uuid'] for p, _c in self._load(
                self.ctx, dict(filters), API_ATTRS[0], True, limit)]
            self.assertEqual(  # type: ignore[attr-defined]
                everything[:limit], batch, limit)

    def test_project_objects_are_nova_objects(self) -> None:
        """A project's own listing (nova's scope applies): same."""
        ctx = nova_context.RequestContext('user', self.project_id,
                                         is_admin=False)
        found = self._load(ctx, {'deleted': False}, API_ATTRS[3], True)
        self.assertTrue(found)  # type: ignore[attr-defined]
        self.assertEqual(  # type: ignore[attr-defined]
            {self.project_id},
            {p['nova_object.data']['project_id'] for p, _c in found})
        self._assert_same(ctx, 'project', at_least=100)

    def test_batches_with_limit_are_nova_objects(self) -> None:
        """A limited batch: the same first rows, the same objects."""
        for limit in (1, 7, 30):
            theirs = self._load(self.ctx, {'deleted': False}, API_ATTRS[3],
                                False, limit)
            ours = self._load(self.ctx, {'deleted': False}, API_ATTRS[3],
                              True, limit)
            self.assertEqual(limit, len(ours))  # type: ignore[attr-defined]
            self.assertEqual(  # type: ignore[attr-defined]
                [], _differences(theirs, ours)[:10], limit)

    def test_extra_column_without_extra_join_is_nova_objects(self) -> None:
        """``extra.flavor`` alone (no ``extra``): nova joins it anyway."""
        for cols in (['extra.flavor'],
                     ['info_cache', 'extra.flavor', 'extra.numa_topology']):
            attrs = [c.split('.', 1)[-1] for c in cols]
            theirs = self._load(self.ctx, {'deleted': False}, attrs, False,
                                cols=cols)
            ours = self._load(self.ctx, {'deleted': False}, attrs, True,
                              cols=cols)
            self.assertEqual(  # type: ignore[attr-defined]
                [], _differences(theirs, ours)[:10], cols)

    def test_the_renderers_rows_read_again_are_nova_objects(self) -> None:
        """A batch of the renderer's columns, then the rest by uuid.

        The batch holds the renderer's instance columns and the sort
        keys, and of its one-to-one joins what the body shows; reading
        the rest again (``rows.reread``, deleted servers too) gives
        nova's objects.
        """
        spec = instance_list.sort_order(None, None)
        wanted = render.ROW_COLUMNS | set(spec.keys)
        for read_deleted in ('no', 'yes'):
            ctx = self.ctx.elevated(read_deleted=read_deleted)
            for attrs in API_ATTRS:
                cols = instance_obj._expected_cols(list(attrs))
                theirs = self._load(ctx, {}, attrs, False)
                with nova_context.target_cell(ctx, self.cell) as cctxt:
                    loader = rows.Loader(cctxt, cols, render.ROW_COLUMNS)
                    with keyset.paging(None, loader):
                        found = loader.finish(
                            db.instance_get_all_by_filters_sort(
                                cctxt, {}, columns_to_join=[],
                                sort_keys=list(spec.keys),
                                sort_dirs=list(spec.dirs)))
                    self.assertTrue(found)  # type: ignore[attr-defined]
                    for row in found:
                        self.assertEqual(  # type: ignore[attr-defined]
                            wanted, set(row) & set(_INSTANCE_COLUMNS))
                        if row.get('info_cache'):
                            self.assertEqual(  # type: ignore
                                {'id', 'network_info'},
                                set(row['info_cache']))
                        if row.get('extra'):
                            self.assertNotIn(  # type: ignore
                                'created_at', row['extra'])
                    whole = rows.reread(cctxt, [r['uuid'] for r in found],
                                        cols)
                for row in found:
                    row.update(whole[row['uuid']])
                built = instance_obj._make_instance_list(
                    ctx, objects.InstanceList(), found, list(attrs))
                ours = [(selftest.canonical(inst.obj_to_primitive()),
                         sorted(inst.obj_what_changed())) for inst in built]
                self.assertEqual(  # type: ignore[attr-defined]
                    [], _differences(theirs, ours)[:10],
                    (read_deleted, attrs))

    def test_joins_it_does_not_know_stay_with_nova(self) -> None:
        """``fault``, ``pci_devices`` and nova's default joins: not ours."""
        self.assertFalse(rows.supports(None))  # type: ignore[attr-defined]
        for cols in (['fault'], ['pci_devices'], ['metadata', 'fault'],
                     ['ec2_ids']):
            self.assertFalse(  # type: ignore[attr-defined]
                rows.supports(cols), cols)


class PlainRowsMariaDBTest(PlainRowsTestMixin,
                           testresources.ResourcedTestCase,
                           db_fixtures.FunctionalTestCase):
    SERVER_URL = db_fixtures.MYSQL_URL
    resources = [('seeded', MARIADB_WORLD)]


class PlainRowsPostgreSQLTest(PlainRowsTestMixin,
                              testresources.ResourcedTestCase,
                              db_fixtures.FunctionalTestCase):
    SERVER_URL = db_fixtures.POSTGRESQL_URL
    resources = [('seeded', POSTGRESQL_WORLD)]


class PlainRowsSQLiteTest(PlainRowsTestMixin,
                          testresources.ResourcedTestCase,
                          db_fixtures.FunctionalTestCase):
    SERVER_URL = 'sqlite://'
    resources = [('seeded', SQLITE_WORLD)]
