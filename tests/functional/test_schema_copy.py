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

"""A copied nova schema is the migrated one (``seed.apply_schema``).

The demo and the tests give nova's schema to many databases: the first
of each kind is migrated with nova's alembic migrations, the next ones
get its copy. Here one database of each kind is migrated without the
copy (:func:`seed._migrate`, nova's migrations as ``nova-manage db
sync`` runs them) and another made by :func:`seed.apply_schema` after a
first one: tables, columns (types, nullability, defaults), indexes,
unique constraints and foreign keys as SQLAlchemy reads them back, and
the statements the server itself reports (in any order), must be the
same, and nova's
alembic must find nothing left to do on the copy.
"""

import os
import uuid

from alembic import config as alembic_config
from alembic import migration
from alembic import script
import fixtures
import nova.db
import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url

from nova_cellsched.demo import seed
from tests import base
from tests.fixtures import db


def describe(url: str) -> dict:
    """Everything SQLAlchemy reads back of the schema at *url*."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        inspector = sa.inspect(engine)
        out = {}
        for table in sorted(inspector.get_table_names()):
            out[table] = {
                'columns': [(c['name'], str(c['type']), c['nullable'],
                             str(c.get('default')))
                            for c in inspector.get_columns(table)],
                'pk': inspector.get_pk_constraint(table)[
                    'constrained_columns'],
                'indexes': sorted((i['name'], tuple(i['column_names']),
                                   bool(i['unique']))
                                  for i in inspector.get_indexes(table)),
                'unique': sorted(
                    (u['name'], tuple(u['column_names']))
                    for u in inspector.get_unique_constraints(table)),
                'fks': sorted(
                    (tuple(f['constrained_columns']), f['referred_table'],
                     tuple(f['referred_columns']))
                    for f in inspector.get_foreign_keys(table)),
            }
        return out
    finally:
        engine.dispose()


def alembic_heads(url: str, kind: str) -> tuple[set, set]:
    """(the database's alembic revisions, nova's heads for *kind*)."""
    ini = os.path.join(os.path.dirname(nova.db.__file__), kind,
                       'alembic.ini')
    heads = set(script.ScriptDirectory.from_config(
        alembic_config.Config(ini)).get_heads())
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            current = set(migration.MigrationContext.configure(
                conn).get_current_heads())
    finally:
        engine.dispose()
    return current, heads


def statements(url: str) -> tuple[list[list[str]], list[str]]:
    """The server's own statements for *url*'s schema, order aside.

    A server lists a table's indexes, and SQLite its objects, in the
    order it keeps them, which a migration's drops and rebuilds change:
    the same schema, so lines and statements are compared as sets.
    """
    found, versions = seed._read_schema(sa_url.make_url(url))
    return sorted(sorted(s.strip().rstrip(',')
                         for s in statement.splitlines())
                  for statement in found), versions


class SchemaCopyMixin:
    """Run per database server (``server_url``)."""

    def server_url(self) -> str:
        raise NotImplementedError

    def new_database(self, kind: str) -> str:
        url = seed.create_database(
            self.server_url(), 'ncs_%s_%s' % (uuid.uuid4().hex[:10], kind))
        self.addCleanup(seed.drop_database, url)  # type: ignore
        return url

    def assert_copy_is_migration(self, kind: str) -> None:
        first = self.new_database(kind)
        seed.apply_schema(first, kind)
        copied = self.new_database(kind)
        seed.apply_schema(copied, kind)
        migrated = self.new_database(kind)
        seed._migrate(migrated, kind)

        # The copy was made: the process knows this schema.
        key = [k for k in seed._SCHEMAS if k[-1] == kind
               and k[0] == sa_url.make_url(copied).get_backend_name()]
        self.assertTrue(key)  # type: ignore[attr-defined]
        self.assertEqual(  # type: ignore[attr-defined]
            describe(migrated), describe(copied))
        self.assertEqual(  # type: ignore[attr-defined]
            statements(migrated), statements(copied))
        current, heads = alembic_heads(copied, kind)
        self.assertEqual(heads, current)  # type: ignore[attr-defined]

    def test_main_schema_copy_is_the_migrated_schema(self) -> None:
        self.assert_copy_is_migration('main')

    def test_api_schema_copy_is_the_migrated_schema(self) -> None:
        self.assert_copy_is_migration('api')

    def test_a_database_with_tables_is_migrated_not_copied(self) -> None:
        """alembic does what is left; nothing is run twice."""
        url = self.new_database('api')
        seed.apply_schema(url, 'api')
        seed.apply_schema(url, 'api')
        current, heads = alembic_heads(url, 'api')
        self.assertEqual(heads, current)  # type: ignore[attr-defined]


class MariaDBSchemaCopyTest(SchemaCopyMixin, base.TestCase):

    def setUp(self) -> None:
        super().setUp()
        problem = db.server_available(db.MYSQL_URL)
        if problem is not None:
            self.fail('MariaDB at %s is needed and does not answer: %s'
                      % (db.MYSQL_URL, problem))

    def server_url(self) -> str:
        return db.MYSQL_URL


class SQLiteSchemaCopyTest(SchemaCopyMixin, base.TestCase):

    def server_url(self) -> str:
        if not hasattr(self, '_dir'):
            self._dir = self.useFixture(fixtures.TempDir()).path
        return 'sqlite:///' + self._dir
