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

"""The embedded demo: a small multi-cell nova database set, ready to list.

:func:`build` creates (or reuses) an API database, cell0 and N cell
databases with nova's schema, registers the cell mappings, seeds
instances and writes a ``nova.conf`` for them, with an example
``[cellsched]`` mapping. SQLite files in a directory by default; a
database server URL (MariaDB, PostgreSQL) works too.
"""

from collections.abc import Callable
import configparser
import dataclasses
import os
import re

import sqlalchemy as sa

from nova_cellsched.demo import seed

DB_PREFIX = 'cellsched_demo'


@dataclasses.dataclass(frozen=True)
class DemoWorld:
    """What :func:`build` made."""

    directory: str
    config_file: str
    api_url: str
    cells: tuple[tuple[str, str], ...]
    instances: int
    reused: bool
    projects: tuple[str, ...]
    #: Soft-deleted instances among :attr:`instances`.
    deleted: int = 0


def _cell_names(count: int) -> list[str]:
    return ['cell%d' % i for i in range(1, count + 1)]


def _server(directory: str, connection: str | None) -> str:
    return connection or 'sqlite:///' + os.path.abspath(directory)


def _registered(api_url: str) -> dict[str, str]:
    from nova.db.api import models as api_models

    table = api_models.CellMapping.__table__
    engine = sa.create_engine(api_url)
    try:
        with engine.connect() as conn:
            return {name: url for name, url in conn.execute(
                sa.select(table.c.name, table.c.database_connection))}
    finally:
        engine.dispose()


def write_config(path: str, api_url: str, cell0_url: str,
                 cells: list[str], projects: list[str]) -> None:
    """Write the demo's nova.conf, with an example ``[cellsched]``."""
    default = cells[:-2] if len(cells) > 2 else cells[:1]
    dedicated = cells[len(default):]
    pairs = []
    for index, cell in enumerate(dedicated):
        pairs.append('%s:%s' % (cell, ';'.join(projects[index::3][:2])))
    text = """\
# nova.conf written by "nova-cellsched demo" for its databases.
[DEFAULT]
transport_url = fake://

[api_database]
connection = {api}

[database]
connection = {cell0}

[api]
# nova's own options for cross-cell listing, honoured by nova-cellsched.
list_records_by_skipping_down_cells = true
instance_list_cells_batch_strategy = distributed

[cellsched]
# New servers of unmapped projects go to these cells.
cells_default = {default}
# These cells take only the projects named for them.
cells_projects = {projects}
list_cell_timeout = 30
""".format(api=api_url, cell0=cell0_url, default=','.join(default),
           projects=','.join(pairs))
    with open(path, 'w') as handle:
        handle.write(text)


def database_name(prefix: str, part: str) -> str:
    """The demo's name for the database of *part* (``api``, ``cell0``...)."""
    return '%s_%s' % (prefix, part)


def demo_databases(directory: str, connection: str | None = None,
                   prefix: str = DB_PREFIX) -> list[str]:
    """URLs of the databases a demo with *prefix* created, and only those.

    Those named ``<prefix>_api`` or ``<prefix>_cell<N>`` on the server (in
    *directory* for SQLite): other databases sharing the prefix are left
    out.
    """
    own = re.compile(r'^%s_(api|cell\d+)(\.db)?$' % re.escape(prefix))
    found = []
    for url in seed.list_databases(_server(directory, connection),
                                   prefix + '_'):
        name = sa.engine.make_url(url).database or ''
        if own.match(os.path.basename(name)):
            found.append(url)
    return found


def clean(urls: list[str]) -> None:
    """Drop the demo databases *urls* (see :func:`demo_databases`)."""
    for url in urls:
        seed.drop_database(url)


def _same_database(one: str, other: str) -> bool:
    a, b = sa.engine.make_url(one), sa.engine.make_url(other)
    return (a.get_backend_name(), a.host, a.port, a.database) == (
        b.get_backend_name(), b.host, b.port, b.database)


def remove_stale_config(directory: str, dropped: list[str]) -> str | None:
    """Remove the demo's nova.conf in *directory* if it names *dropped*.

    After :func:`clean`, a nova.conf whose ``[api_database] connection``
    is one of the dropped databases only leads to errors (or, for
    SQLite, to an empty database file made on first use). A nova.conf
    naming other databases (another ``--prefix``) stays.

    :returns: the path removed, or None.
    """
    path = os.path.join(os.path.abspath(directory), 'nova.conf')
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
        connection = parser.get('api_database', 'connection')
    except (configparser.Error, OSError):
        return None
    if not any(_same_database(connection, url) for url in dropped):
        return None
    os.remove(path)
    return path


def build(directory: str, cells: int = 10, instances: int = 10000,
          connection: str | None = None,
          progress: Callable[[str], None] = lambda text: None,
          prefix: str = DB_PREFIX) -> DemoWorld:
    """Create or reuse the demo databases and write their nova.conf.

    Reuses everything when the API database already maps the cells.
    Every database is named ``<prefix>_api``, ``<prefix>_cell0``, ...;
    one in twenty instances of a cell (besides cell0) is soft-deleted, as
    nova soft-deletes, so a listing with ``deleted=true`` shows some.
    """
    os.makedirs(directory, exist_ok=True)
    server = _server(directory, connection)
    config_file = os.path.join(os.path.abspath(directory), 'nova.conf')
    names = _cell_names(cells)
    projects = seed.project_ids(12, seed=42)
    api_url = seed.create_database(server, database_name(prefix, 'api'))
    if not seed.has_schema(api_url):
        progress('Applying nova API schema (nova alembic migrations)')
        seed.apply_schema(api_url, 'api')
    existing = _registered(api_url)
    reused = set(['cell0'] + names) <= set(existing)
    per_cell = max(1, instances // max(1, cells))
    for index, name in enumerate(['cell0'] + names):
        if name in existing:
            continue
        if name == 'cell0':
            population = seed.Population(instances=max(1, per_cell // 50),
                                         projects=projects, error_only=True)
        else:
            deleted = per_cell // 20
            population = seed.Population(instances=per_cell - deleted,
                                         deleted=deleted, projects=projects)

        def report(done: int, total: int, name: str = name) -> None:
            progress('Seeding %s: %d/%d instances' % (name, done, total))

        # Seed before registering: a run interrupted while seeding leaves
        # no half-filled cell behind a mapping, and the next run redoes it.
        url = seed.create_database(server, database_name(prefix, name))
        seed.drop_database(url)
        url = seed.create_database(server, database_name(prefix, name))
        progress('Applying nova main schema to %s' % name)
        seed.apply_schema(url, 'main')
        seed.seed_cell(url, None, None, name, population, seed=index,
                       progress=report)
        cell_id, _uuid = seed.register_cell(
            api_url, name, url,
            cell_uuid=seed.CELL0_UUID if name == 'cell0' else None,
            transport_url='fake://')
        seed.map_instances(api_url, url, cell_id)
    registered = _registered(api_url)
    cell_urls = tuple((name, registered[name])
                      for name in ['cell0'] + names)
    write_config(config_file, api_url, registered['cell0'], names,
                 projects)
    total = sum(seed.count_instances(url) for _name, url in cell_urls)
    deleted = sum(seed.count_instances(url, deleted=True)
                  for _name, url in cell_urls)
    return DemoWorld(directory=os.path.abspath(directory),
                     config_file=config_file, api_url=api_url,
                     cells=cell_urls, instances=total, reused=reused,
                     projects=tuple(projects), deleted=deleted)
