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

"""Seeded servers have the RequestSpec nova-api stores when it boots one.

nova-api's views read it: ``pinned_availability_zone`` (2.96) and
``scheduler_hints`` (2.100) come from each listed server's RequestSpec,
and a server without one shows ``scheduler_hints: null``, which nova's
2.100 response schema rejects (an ERROR in nova-api's log per request).
Both ways the seed writes the API rows are checked, on SQLite and on
MariaDB: :func:`seed.seed_cell` with the API database (the tests'
worlds, the cloud's benchmark) and :func:`seed.map_instances` (the
demo's ``world.build``). The specs are read back with nova's own
``RequestSpec.get_by_instance_uuids`` and compared with the server's
rows, and one is compared with what nova's ``RequestSpec.create()``
stores for the same server.
"""

import json

import fixtures
from nova import context as nova_context
from nova.db.api import models as api_models
from nova.db.main import models as main_models
from nova import objects
from nova.objects import security_group as security_group_obj
from nova.scheduler import utils as scheduler_utils
import sqlalchemy as sa

from nova_cellsched.demo import seed
from nova_cellsched.demo import world
from tests import base
from tests.fixtures import db as db_fixtures
from tests.fixtures import worlds


def _rows(url, query):
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [row._asdict() for row in conn.execute(query)]
    finally:
        engine.dispose()


def _instances(url):
    """uuid -> the server's instances row and its flavor (instance_extra)."""
    inst = main_models.Instance.__table__
    extra = main_models.InstanceExtra.__table__
    rows = _rows(url, sa.select(
        inst.c.uuid, inst.c.project_id, inst.c.user_id, inst.c.image_ref,
        extra.c.flavor).join(extra, extra.c.instance_uuid == inst.c.uuid))
    return {row['uuid']: row for row in rows}


def _changes_unordered(primitive):
    """*primitive* with each ``nova_object.changes`` list as a set."""
    if isinstance(primitive, dict):
        return {key: (set(value) if key == 'nova_object.changes'
                      else _changes_unordered(value))
                for key, value in primitive.items()}
    if isinstance(primitive, list):
        return [_changes_unordered(value) for value in primitive]
    return primitive


class SeedRequestSpecsTest(db_fixtures.FunctionalTestCase):
    """seed_cell writes each server's spec beside its mapping."""

    SERVER_URL = db_fixtures.MYSQL_URL

    def setUp(self):
        super().setUp()
        self.world = self.useFixture(worlds.CellWorld(
            self.SERVER_URL, [
                ('cell0', seed.Population(instances=3, error_only=True)),
                ('cell1', seed.Population(instances=12, deleted=3)),
            ]))
        self.ctx = nova_context.get_admin_context()

    def assertSpecsOfServers(self, cell_url):
        servers = _instances(cell_url)
        specs = objects.RequestSpec.get_by_instance_uuids(
            self.ctx, sorted(servers))
        self.assertEqual(sorted(servers),
                         sorted(spec.instance_uuid for spec in specs))
        for spec in specs:
            server = servers[spec.instance_uuid]
            flavor = json.loads(server['flavor'])['cur']['nova_object.data']
            self.assertEqual(
                (server['project_id'], server['user_id'],
                 server['image_ref'], flavor['flavorid'], flavor['name']),
                (spec.project_id, spec.user_id, spec.image.id,
                 spec.flavor.flavorid, spec.flavor.name))
            # What a boot without hints nor zone stores: 2.100 shows {},
            # 2.96 a null pinned_availability_zone.
            self.assertEqual({}, spec.scheduler_hints)
            self.assertIsNone(spec.availability_zone)
            self.assertEqual(1, spec.num_instances)

    def test_every_server_has_its_spec(self):
        for name in ('cell0', 'cell1'):
            self.assertSpecsOfServers(self.world.url_of(name))

    def test_the_row_is_what_nova_stores(self):
        """Compared with RequestSpec.create() for the same server."""
        servers = _instances(self.world.url_of('cell1'))
        uuid = sorted(servers)[0]
        server = servers[uuid]
        table = api_models.RequestSpec.__table__
        (seeded,) = _rows(self.world.api_url, sa.select(table.c.spec).where(
            table.c.instance_uuid == uuid))
        flavor = objects.Flavor.obj_from_primitive(
            json.loads(server['flavor'])['cur'])
        (_name, _vcpus, _ram, root_gb) = seed.FLAVORS[flavor.id - 1]
        # As nova-api's _provision_instances builds and stores it.
        spec = objects.RequestSpec.from_components(
            self.ctx, 'd0d0d0d0-0000-4000-8000-000000000001', {
                'id': server['image_ref'], 'status': 'active',
                'disk_format': 'qcow2', 'container_format': 'bare',
                'min_disk': root_gb, 'min_ram': 0,
                'properties': {'hw_rng_model': 'virtio'}},
            flavor, None, objects.InstancePCIRequests(requests=[]),
            scheduler_utils.build_filter_properties({}, None, None, flavor),
            None, None,
            security_groups=security_group_obj.make_secgroup_list(
                ['default']),
            project_id=server['project_id'], user_id=server['user_id'])
        spec.is_bfv = False
        spec.num_instances = 1
        spec.create()
        (stored,) = _rows(self.world.api_url, sa.select(table.c.spec).where(
            table.c.instance_uuid == spec.instance_uuid))
        expected = json.loads(stored['spec'])
        expected['nova_object.data']['instance_uuid'] = uuid
        self.assertEqual(_changes_unordered(expected),
                         _changes_unordered(json.loads(seeded['spec'])))


class SeedRequestSpecsSQLiteTest(SeedRequestSpecsTest):
    SERVER_URL = 'sqlite:///'


class DemoWorldRequestSpecsTest(base.TestCase):
    """world.build (seed, then map_instances) writes them too."""

    def test_every_mapped_server_has_its_spec(self):
        directory = self.useFixture(fixtures.TempDir()).path
        built = world.build(directory, cells=2, instances=40)
        mappings = api_models.InstanceMapping.__table__
        specs = api_models.RequestSpec.__table__
        mapped = {row['instance_uuid'] for row in _rows(
            built.api_url, sa.select(mappings.c.instance_uuid))}
        rows = _rows(built.api_url, sa.select(specs.c.instance_uuid,
                                              specs.c.spec))
        self.assertEqual(built.instances, len(mapped))
        self.assertEqual(mapped, {row['instance_uuid'] for row in rows})
        servers = {}
        for _name, url in built.cells:
            servers.update(_instances(url))
        objects.register_all()
        for row in rows:
            spec = objects.RequestSpec.obj_from_primitive(
                json.loads(row['spec']))
            server = servers[row['instance_uuid']]
            self.assertEqual(
                (row['instance_uuid'], server['project_id'],
                 server['user_id'], server['image_ref'], {}),
                (spec.instance_uuid, spec.project_id, spec.user_id,
                 spec.image.id, spec.scheduler_hints))

    def test_a_server_of_another_flavor_is_refused(self):
        exc = self.assertRaises(ValueError, seed.request_spec_row, {
            'uuid': 'u1', 'instance_type_id': 42})
        self.assertIn('expected an instance_type_id of the seed', str(exc))
        self.assertIn('got 42', str(exc))
