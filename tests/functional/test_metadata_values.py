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

"""User metadata comes back exactly, through each database's JSON aggregate.

A batch carries an instance's metadata as JSON object text built by the
database (JSON_OBJECTAGG on MariaDB, json_object_agg on PostgreSQL,
json_group_object on SQLite): whatever the keys and values hold, the
record's ``metadata`` must equal the live rows of instance_metadata.
"""

import datetime

from nova import context as nova_context
import sqlalchemy as sa

from nova_cellsched import records as cli_lister
from nova_cellsched.records import query as instance_query
from tests.fixtures import db
from tests.fixtures import worlds

METADATA = instance_query.METADATA

#: Keys and values that JSON text has to escape, or that look like JSON.
AWKWARD = {
    'quote"d': 'va"lue',
    'back\\slash': 'C:\\path\\',
    'newline': 'line 1\nline 2\r\n',
    'tab\t': '\t',
    'non-ascii çé': 'ü ✓ Ω 漢字',
    'empty': '',
    'json': '{"a": [1, 2], "b": null}',
    'null value': None,
    '': 'empty key',
}


class MetadataValuesMixin:
    """The cases; subclasses say which database server."""

    def setUp(self):
        super().setUp()
        self.world = self.useFixture(worlds.CellWorld(
            self.SERVER_URL, [('cell1', worlds.Population(instances=6))]))
        self.url = self.world.url_of('cell1')
        engine = sa.create_engine(self.url)
        self.addCleanup(engine.dispose)
        instances = instance_query.INSTANCES
        with engine.begin() as conn:
            uuids = conn.execute(sa.select(instances.c.uuid).where(
                instances.c.deleted == 0).order_by(
                instances.c.id)).scalars().all()
            self.awkward, self.bare, self.mixed = uuids[:3]
            conn.execute(METADATA.delete().where(
                METADATA.c.instance_uuid.in_(uuids[:3])))
            now = datetime.datetime(2026, 1, 1)
            rows = [{'instance_uuid': self.awkward, 'key': k, 'value': v,
                     'deleted': 0, 'created_at': now}
                    for k, v in AWKWARD.items()]
            rows += [
                # Deleted rows and a NULL key are not user metadata.
                {'instance_uuid': self.mixed, 'key': 'gone', 'value': 'x',
                 'deleted': 1, 'created_at': now, 'deleted_at': now},
                {'instance_uuid': self.mixed, 'key': None, 'value': 'no key',
                 'deleted': 0, 'created_at': now},
                {'instance_uuid': self.mixed, 'key': 'kept', 'value': 'y',
                 'deleted': 0, 'created_at': now},
            ]
            conn.execute(METADATA.insert(), rows)
            self.stored = {}
            for uuid in uuids:
                self.stored[uuid] = {k: v for k, v in conn.execute(
                    sa.select(METADATA.c.key, METADATA.c.value).where(
                        METADATA.c.instance_uuid == uuid,
                        METADATA.c.deleted == 0,
                        METADATA.c.key.is_not(None)))}

    def _listed(self, **kwargs):
        result = cli_lister.list_instances(
            nova_context.get_admin_context(), engines=self.world.engines,
            **kwargs)
        self.assertTrue(result.complete, result.failures)
        return {r['uuid']: r for r in result.instances}

    def test_metadata_equals_the_live_rows_whatever_they_hold(self):
        records = self._listed(fields=['uuid', 'metadata'])
        self.assertEqual(AWKWARD, records[self.awkward]['metadata'])
        self.assertEqual({}, records[self.bare]['metadata'])
        self.assertEqual({'kept': 'y'}, records[self.mixed]['metadata'])
        self.assertEqual(self.stored,
                         {u: r['metadata'] for u, r in records.items()})

    def test_metadata_with_the_other_joined_fields_and_any_sort(self):
        """Blobs joined as well, a sort without an index, small batches."""
        records = self._listed(fields=cli_lister.DETAIL_FIELDS,
                               sort_keys=['display_name'],
                               sort_dirs=['desc'], limit=4)
        self.assertEqual(4, len(records))
        for uuid, record in records.items():
            self.assertEqual(self.stored[uuid], record['metadata'])
            self.assertTrue(record['flavor_name'])


class MariaDBMetadataTest(MetadataValuesMixin, db.FunctionalTestCase):
    SERVER_URL = db.MYSQL_URL


class PostgreSQLMetadataTest(MetadataValuesMixin, db.FunctionalTestCase):
    SERVER_URL = db.POSTGRESQL_URL


class SQLiteMetadataTest(MetadataValuesMixin, db.FunctionalTestCase):
    SERVER_URL = 'sqlite://'
