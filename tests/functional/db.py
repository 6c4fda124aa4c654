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

"""Real multi-cell databases for functional tests.

:class:`CellWorld` creates an API database and cell databases on a real
server (MariaDB by default), applies nova's migrations, registers the cell
mappings, seeds instances and points nova's API database engine at it.
Every database name carries a random tag and is dropped at cleanup, so
parallel stestr workers never collide and a rerun starts clean.
"""

from collections.abc import Sequence
import os
import uuid

import fixtures
import nova.conf
from nova.db.api import api as api_db_api
from nova.db.api import models as api_models
from nova import objects
from oslo_config import fixture as config_fixture
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import test_fixtures as db_fixtures
from oslotest import base
import sqlalchemy as sa

from nova_cellsched import cells as cells_mod
from nova_cellsched import conf as conf_mod
from nova_cellsched.demo import seed
from nova_cellsched.records import query as instance_query
from tests import releases

MYSQL_URL = os.environ.get('NOVA_CELLSCHED_TEST_MYSQL_URL',
                           'mysql+pymysql://root@127.0.0.1:3306/')
POSTGRESQL_URL = os.environ.get(
    'NOVA_CELLSCHED_TEST_POSTGRESQL_URL',
    'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres')

CONF = nova.conf.CONF


def server_available(url: str) -> str | None:
    """None when the server answers, else why not."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text('SELECT 1'))
        return None
    except Exception as exc:  # noqa: BLE001 - any reason is reported
        return str(exc)
    finally:
        engine.dispose()


def compute_node_row(table: sa.Table, node: str, host: str
                     ) -> dict[str, object]:
    """A ``compute_nodes`` row of *table* for *node* on *host*.

    The table's other NOT NULL columns without a default get an empty
    string or 0.
    """
    row: dict[str, object] = {'uuid': node, 'host': host,
                              'hypervisor_hostname': node[:8],
                              'deleted': 0}
    for column in table.columns:
        if (column.name not in row and not column.nullable and
                not column.primary_key and column.default is None):
            row[column.name] = '' if isinstance(
                column.type, (sa.String, sa.Text)) else 0
    return row


def add_cell_mapping(api_url: str, name: str, url: str,
                     cell_uuid: str | None = None) -> str:
    """Insert a cell mapping (names may repeat); return its uuid."""
    table = api_models.CellMapping.__table__
    cell_uuid = cell_uuid or str(uuid.uuid4())
    engine = sa.create_engine(api_url)
    try:
        with engine.begin() as conn:
            conn.execute(table.insert().values(
                uuid=cell_uuid, name=name, transport_url='fake://',
                database_connection=url, disabled=False))
    finally:
        engine.dispose()
    return cell_uuid


def remove_cell_mapping(api_url: str, cell_uuid: str) -> None:
    table = api_models.CellMapping.__table__
    engine = sa.create_engine(api_url)
    try:
        with engine.begin() as conn:
            conn.execute(table.delete().where(table.c.uuid == cell_uuid))
    finally:
        engine.dispose()


class CellWorld(fixtures.Fixture):
    """API database + cell databases, nova schema, seeded instances.

    :param server_url: database server (``mysql+pymysql://root@host/``),
        or ``sqlite:///<dir>`` for files.
    :param cells: ``(name, Population)`` per cell; a cell named ``cell0``
        gets nova's cell0 uuid.
    """

    def __init__(self, server_url: str,
                 cells: Sequence[tuple[str, seed.Population]],
                 seed_value: int = 0) -> None:
        super().__init__()
        self.server_url = server_url
        self.cell_specs = list(cells)
        self.seed_value = seed_value

    def _setUp(self) -> None:
        if self.server_url.startswith('sqlite'):
            directory = self.useFixture(fixtures.TempDir()).path
            self.server_url = 'sqlite:///' + directory
        self.tag = 'ncs_%s' % uuid.uuid4().hex[:12]
        self.api_url = self._database('api')
        seed.apply_schema(self.api_url, 'api')
        self.cells: dict[str, tuple[str, str]] = {}
        self.projects = seed.project_ids(6, self.seed_value)
        for name, population in self.cell_specs:
            url = self._database(name)
            seed.apply_schema(url, 'main')
            cell_id, cell_uuid = seed.register_cell(
                self.api_url, name, url,
                cell_uuid=seed.CELL0_UUID if name == 'cell0' else None,
                transport_url='fake://%s' % name)
            if not population.projects:
                population = type(population)(**{
                    **population.__dict__, 'projects': self.projects})
            seed.seed_cell(url, self.api_url, cell_id, name, population,
                           seed=self.seed_value)
            self.cells[name] = (cell_uuid, url)

        # nova's objects (CellMappingList, InstanceMapping) read this API
        # database for the rest of the test.
        cells_mod.register_messaging_opts()
        objects.register_all()
        # nova caches a database engine per cell uuid; cell0's uuid is the
        # same in every world, so each world starts with an empty cache.
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELL_CACHE', {}))
        facade = enginefacade.transaction_context()
        facade.configure(connection=self.api_url)
        self.useFixture(db_fixtures.ReplaceEngineFacadeFixture(
            api_db_api.context_manager, facade))
        self.engines = instance_query.EngineCache(io_timeout=30)
        self.addCleanup(self.engines.dispose)

    def _database(self, name: str) -> str:
        url = seed.create_database(self.server_url,
                                   '%s_%s' % (self.tag, name))
        self.addCleanup(seed.drop_database, url)
        return url

    def uuid_of(self, name: str) -> str:
        return self.cells[name][0]

    def url_of(self, name: str) -> str:
        return self.cells[name][1]

    def all_uuids(self, live_only: bool = True) -> dict[str, set[str]]:
        """Cell name -> instance uuids, straight from SQL."""
        table = instance_query.INSTANCES
        out = {}
        for name, (_uuid, url) in self.cells.items():
            engine = sa.create_engine(url)
            try:
                with engine.connect() as conn:
                    query = sa.select(table.c.uuid)
                    if live_only:
                        query = query.where(table.c.deleted == 0)
                    out[name] = {r[0] for r in conn.execute(query)}
            finally:
                engine.dispose()
        return out


class FunctionalTestCase(base.BaseTestCase):
    """Base for tests on real databases; nova's CONF under a fixture."""

    SERVER_URL = MYSQL_URL

    def setUp(self) -> None:
        super().setUp()
        problem = server_available(self.SERVER_URL)
        if problem is not None:
            self.fail('the database server %s is needed by this test and '
                      'does not answer (%s); start it, or point '
                      'NOVA_CELLSCHED_TEST_MYSQL_URL at one'
                      % (self.SERVER_URL, problem))
        self.cfg = self.useFixture(config_fixture.Config(CONF))
        conf_mod.register_opts(CONF)
        # nova's own lister (run here as the yardstick) starts nova's cell
        # worker pool; shut it down at the end like nova's tests do.
        self.useFixture(releases.isolated_nova_pools(self.id()))
