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

"""The view's lookups (:mod:`.api.view.lookups`) give nova's answers.

On MariaDB, PostgreSQL and SQLite, with rows written as nova writes
them: block device mappings (several per server, written out of order,
deleted ones, local disks without a volume, a NULL
``delete_on_termination``) and request specs of every shape the lean
read must either take as nova does or hand to nova (other object
versions, a server group that exists or is gone, hints, no zone).
What the view reads of each is compared with nova's objects, order
included.
"""

import datetime
import random
from typing import Any

from nova import context as nova_context
from nova.db.api import models as api_models
from nova.db.main import models
from nova import exception as nova_exception
from nova import objects
from oslo_serialization import jsonutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova_cellsched.api.view import lookups as view
from tests.fixtures import db as db_fixtures
from tests.fixtures.request_specs import stored_request_spec as _spec
from tests.fixtures import worlds


def _volumes(bdms: dict[str, Any]) -> dict[str, list[tuple[Any, Any]]]:
    """What ``_add_volumes_attachments`` reads, per server, in order."""
    return {uuid: [(b.get('volume_id'), b['delete_on_termination'])
                   for b in found] for uuid, found in bdms.items()}


class ViewLookupsTestMixin:
    """Run per database server."""

    SERVER_URL: str

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        self.world = self.useFixture(  # type: ignore[attr-defined]
            worlds.CellWorld(self.SERVER_URL, [
                ('cell1', worlds.Population(instances=12, deleted=2)),
                ('cell2', worlds.Population(instances=12, deleted=2)),
            ]))
        self.ctx = nova_context.get_admin_context()
        self.cells = {name: objects.CellMapping.get_by_uuid(
            self.ctx, self.world.uuid_of(name)) for name in ('cell1',
                                                             'cell2')}
        self.uuids = {name: sorted(found) for name, found in
                      self.world.all_uuids(live_only=False).items()}

    # Block device mappings

    def _write_bdms(self, name: str, null_delete: bool = False) -> None:
        """Mappings of a cell's servers, in shuffled order.

        Per server 0-3 volumes, a local root disk, a deleted volume;
        *null_delete*: one ``delete_on_termination`` is NULL.
        """
        rng = random.Random(name)
        rows = []
        for number, uuid in enumerate(self.uuids[name]):
            rows.append(dict(instance_uuid=uuid, source_type='image',
                             destination_type='local', boot_index=0,
                             delete_on_termination=True, deleted=0))
            for volume in range(number % 4):
                rows.append(dict(
                    instance_uuid=uuid, source_type='volume',
                    destination_type='volume',
                    volume_id='%08d-0000-4000-8000-%012d' % (volume, number),
                    delete_on_termination=bool((volume + number) % 2),
                    deleted=0))
            rows.append(dict(instance_uuid=uuid, source_type='volume',
                             destination_type='volume',
                             volume_id=uuidutils.generate_uuid(),
                             delete_on_termination=False, deleted=1))
        rng.shuffle(rows)
        if null_delete:
            # nova's object reads NULL as the field's default (False).
            [row for row in rows if row.get('volume_id') and
             not row['deleted']][0]['delete_on_termination'] = None
        engine = sa.create_engine(self.world.url_of(name))
        try:
            with engine.begin() as conn:
                for row in rows:
                    conn.execute(models.BlockDeviceMapping.__table__.insert()
                                 .values(uuid=uuidutils.generate_uuid(),
                                         **row))
        finally:
            engine.dispose()

    def _nova_bdms(self, ctx: Any, uuids: list[str]) -> dict[str, Any]:
        """As nova's view does: every cell asked for every server."""
        found: dict[str, Any] = {}
        for cell in self.cells.values():
            with nova_context.target_cell(ctx, cell) as cctxt:
                found.update(
                    objects.BlockDeviceMappingList.bdms_by_instance_uuid(
                        cctxt, uuids))
        return found

    def _our_bdms(self, ctx: Any, uuids: list[str]) -> dict[str, Any]:
        by_cell = {cell.uuid: [u for u in uuids if u in self.uuids[name]]
                   for name, cell in self.cells.items()}
        found: dict[str, Any] = {}
        for cell in self.cells.values():
            with nova_context.target_cell(ctx, cell) as cctxt:
                found.update(view._bdms_in_cell(cctxt, by_cell))
        return found

    def test_volumes_are_novas_in_novas_order(self) -> None:
        """Every server's volumes, deleted mappings out, order kept.

        cell1 has a NULL ``delete_on_termination``, which nova's object
        reads as the field's default (False): that cell is read by nova.
        """
        self._write_bdms('cell1', null_delete=True)
        self._write_bdms('cell2')
        everyone = self.uuids['cell1'] + self.uuids['cell2']
        for read_deleted in ('no', 'yes'):
            ctx = self.ctx.elevated(read_deleted=read_deleted)
            for uuids in (everyone, everyone[::3], self.uuids['cell2'][:1]):
                theirs = _volumes(self._nova_bdms(ctx, uuids))
                ours = _volumes(self._our_bdms(ctx, uuids))
                self.assertEqual(  # type: ignore[attr-defined]
                    theirs, ours, read_deleted)
        theirs = _volumes(self._nova_bdms(self.ctx, everyone))
        self.assertGreater(  # type: ignore[attr-defined]
            sum(len(v) for v in theirs.values()), 2 * len(everyone))
        self.assertNotIn(None, [d for found in theirs.values()  # type: ignore
                                for _v, d in found])

    # Request specs

    def _write_specs(self) -> dict[str, str]:
        """A spec per server of every shape; uuid -> its shape."""
        group = objects.InstanceGroup(uuid=uuidutils.generate_uuid())
        engine = sa.create_engine(self.world.api_url)
        try:
            with engine.begin() as conn:
                # As InstanceGroup.create writes it (without notifying).
                group_id = conn.execute(
                    api_models.InstanceGroup.__table__.insert().values(
                        uuid=group.uuid, name='g', project_id='p',
                        user_id='u')).inserted_primary_key[0]
                conn.execute(
                    api_models.InstanceGroupPolicy.__table__.insert().values(
                        policy='affinity', group_id=group_id))
        finally:
            engine.dispose()
        gone = uuidutils.generate_uuid()
        shapes = {
            'plain': lambda u: _spec(u),
            'no zone': lambda u: _spec(u, availability_zone=None),
            'hints': lambda u: _spec(u, scheduler_hints={
                'rack': ['r1'], 'z': ['b', 'a'], 'n': ['10']}),
            'null hints': lambda u: _spec(u, scheduler_hints=None),
            'group': lambda u: _spec(
                u, scheduler_hints={'group': [group.uuid]},
                instance_group=objects.InstanceGroup(uuid=group.uuid,
                                                     policy='affinity')),
            'gone group': lambda u: _spec(
                u, scheduler_hints={'group': [gone], 'x': ['y']},
                instance_group=objects.InstanceGroup(uuid=gone,
                                                     policy='affinity')),
            'older': lambda u: _spec(u, scheduler_hints={'a': ['1']}),
        }
        written = {}
        everyone = self.uuids['cell1'] + self.uuids['cell2']
        names = list(shapes)
        engine = sa.create_engine(self.world.api_url)
        try:
            with engine.begin() as conn:
                # The seed stored a boot's spec per server: these shapes
                # replace them, and the last two servers have none.
                conn.execute(api_models.RequestSpec.__table__.delete())
                for number, uuid in enumerate(everyone[:-2]):
                    shape = names[number % len(names)]
                    spec = shapes[shape](uuid)
                    primitive = spec.obj_to_primitive()
                    if shape == 'older':
                        # Written by an older nova-api: another version.
                        primitive['nova_object.version'] = '1.14'
                    conn.execute(api_models.RequestSpec.__table__.insert()
                                 .values(instance_uuid=uuid,
                                         spec=jsonutils.dumps(primitive)))
                    written[uuid] = shape
        finally:
            engine.dispose()
        return written

    def test_zones_and_hints_are_novas(self) -> None:
        """Every shape: nova's zones and hints, key order included.

        Two servers have no spec (nova answers nothing for them). The
        specs nova must build (another version, a server group) are
        built by nova; a spec without a zone fails as nova's does.
        """
        written = self._write_specs()
        everyone = self.uuids['cell1'] + self.uuids['cell2']
        for hints in (False, True):
            specs = objects.RequestSpec.get_by_instance_uuids(self.ctx,
                                                              everyone)
            zones = {s.instance_uuid: s.availability_zone for s in specs
                     if s.availability_zone is not None}
            their_hints = ({s.instance_uuid: s.scheduler_hints for s in specs
                            if s.scheduler_hints is not None}
                           if hints else {})
            before = view.USED.snapshot()
            ours = view.request_spec_fields(self.ctx, everyone, hints)
            used = {k: v - before[k]
                    for k, v in view.USED.snapshot().items()}
            self.assertEqual((zones, their_hints),  # type: ignore
                             ours)
            self.assertEqual(  # type: ignore[attr-defined]
                jsonutils.dumps([zones, their_hints]),
                jsonutils.dumps(list(ours)))
            by_nova = sum(1 for shape in written.values()
                          if shape in ('group', 'gone group', 'older'))
            self.assertEqual(  # type: ignore[attr-defined]
                {'bdms': 0, 'faults': 0,
                 'request_specs': len(written) - by_nova,
                 'request_specs_nova': by_nova, 'rows': 0}, used)
        # The gone group's hint is dropped, as nova drops it.
        gone = [u for u, shape in written.items() if shape == 'gone group']
        self.assertEqual({'x': ['y']}, ours[1][gone[0]])  # type: ignore

        # No availability_zone in the JSON: nova's error, not ours.
        uuid = everyone[-1]
        primitive = _spec(uuid).obj_to_primitive()
        del primitive['nova_object.data']['availability_zone']
        engine = sa.create_engine(self.world.api_url)
        try:
            with engine.begin() as conn:
                conn.execute(api_models.RequestSpec.__table__.insert().values(
                    instance_uuid=uuid, spec=jsonutils.dumps(primitive)))
        finally:
            engine.dispose()
        spec = objects.RequestSpec.get_by_instance_uuids(self.ctx, [uuid])[0]
        self.assertRaises(  # type: ignore[attr-defined]
            nova_exception.ObjectActionError, getattr, spec,
            'availability_zone')
        self.assertRaises(  # type: ignore[attr-defined]
            nova_exception.ObjectActionError, view.request_spec_fields,
            self.ctx, [uuid], False)


    # A server in two cells

    def _copy_into(self, uuid: str, source: str, target: str,
                   **values: Any) -> None:
        """*uuid*'s instance row written into *target*'s database too.

        As a cross-cell resize leaves it for a moment: the same server,
        not hidden, in two cells.
        """
        table = models.Instance.__table__
        engines = [sa.create_engine(self.world.url_of(name))
                   for name in (source, target)]
        try:
            with engines[0].connect() as conn:
                row = dict(conn.execute(table.select().where(
                    table.c.uuid == uuid)).mappings().one())
            row.pop('id')
            row.update(values)
            with engines[1].begin() as conn:
                conn.execute(table.insert().values(**row))
        finally:
            for engine in engines:
                engine.dispose()

    def test_a_server_in_two_cells_is_looked_up_in_its_first_copys_cell(
            self) -> None:
        """The view asks the cell of the copy nova shows: the first.

        nova's compute API keeps the first copy of a server the listing
        returns twice (``_get_unique_filter_method``); the listing's
        server -> cell map must name that copy's cell, not the last's.
        """
        from nova_cellsched.api.hooks import instance_list
        uuid = sorted(self.world.all_uuids()['cell1'])[0]
        # Newer: first in nova's default order (created_at desc).
        self._copy_into(uuid, 'cell1', 'cell2',
                        created_at=datetime.datetime(2100, 1, 1))
        # nova-api's own [database] (nova's DB API reads its scheme).
        self.cfg.config(  # type: ignore[attr-defined]
            connection=self.world.url_of('cell1'), group='database')
        from nova_cellsched.api.middleware import request_state
        ctx = nova_context.get_admin_context()
        with request_state.scope() as state:
            _lister, found = instance_list.get_instances_sorted(
                ctx, {'deleted': False}, None, None, [], None, None,
                cell_mappings=[self.cells['cell1'], self.cells['cell2']])
            listed = [row['uuid'] for row in found]
        self.assertEqual(  # type: ignore[attr-defined]
            [uuid, uuid], [u for u in listed if u == uuid])
        self.assertEqual(uuid, listed[0])  # type: ignore[attr-defined]
        cells = state.listed
        self.assertIsNotNone(cells)  # type: ignore[attr-defined]
        assert cells is not None
        self.assertEqual(  # type: ignore[attr-defined]
            self.cells['cell2'].uuid, cells[uuid].uuid)


    def test_both_listers_look_the_marker_up_the_same_way(self) -> None:
        """One marker lookup (``lister.marker_cell``) for CLI and API.

        A deleted server's uuid is a marker for both, and both continue
        after it in the same order; a server still being scheduled (a
        mapping without a cell) and an unknown uuid are refused by both,
        the command line with its error, nova-api with nova's
        ``MarkerNotFound``.
        """
        from nova_cellsched.api.hooks import instance_list
        from nova_cellsched import compat
        from nova_cellsched import exception
        from nova_cellsched import records
        if not compat.is_on('keyset'):
            compat.install(['keyset'])
            self.addCleanup(  # type: ignore[attr-defined]
                compat.restore, ['keyset'])
        self.cfg.config(  # type: ignore[attr-defined]
            connection=self.world.url_of('cell1'), group='database')
        ctx = nova_context.get_admin_context()
        cells = [self.cells['cell1'], self.cells['cell2']]
        deleted = sorted(set(self.uuids['cell1']) -
                         self.world.all_uuids()['cell1'])[0]

        def api(marker: str) -> list[str]:
            _lister, found = instance_list.get_instances_sorted(
                ctx, {'deleted': False}, 5, marker, [], None, None,
                cell_mappings=cells)
            return [row['uuid'] for row in found]

        def cli(marker: str) -> list[str]:
            result = records.list_instances(
                ctx, cells=['cell1', 'cell2'], limit=5, marker=marker,
                fields=['uuid'], engines=self.world.engines)
            return [r['uuid'] for r in result.instances]

        after = cli(deleted)
        self.assertEqual(5, len(after))  # type: ignore[attr-defined]
        self.assertEqual(after, api(deleted))  # type: ignore[attr-defined]

        scheduling = uuidutils.generate_uuid()
        objects.InstanceMapping(ctx, instance_uuid=scheduling,
                                project_id='p', cell_mapping=None).create()
        for marker, why in ((scheduling, 'still being scheduled'),
                            (uuidutils.generate_uuid(), 'existing')):
            error = self.assertRaises(  # type: ignore[attr-defined]
                exception.MarkerNotFound, cli, marker)
            self.assertIn(why, str(error))  # type: ignore[attr-defined]
            self.assertRaises(  # type: ignore[attr-defined]
                nova_exception.MarkerNotFound, api, marker)


class ViewLookupsMariaDBTest(ViewLookupsTestMixin,
                             db_fixtures.FunctionalTestCase):
    SERVER_URL = db_fixtures.MYSQL_URL


class ViewLookupsPostgreSQLTest(ViewLookupsTestMixin,
                                db_fixtures.FunctionalTestCase):
    SERVER_URL = db_fixtures.POSTGRESQL_URL


class ViewLookupsSQLiteTest(ViewLookupsTestMixin,
                            db_fixtures.FunctionalTestCase):
    SERVER_URL = 'sqlite://'
