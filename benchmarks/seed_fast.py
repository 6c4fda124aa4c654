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

"""Fast bulk seeding of benchmark cells, rows shaped as nova writes them.

:func:`nova_cellsched.demo.seed.seed_cell` builds nova ``NetworkInfo`` objects
for every instance and inserts through SQLAlchemy: about 0.5 ms per
instance to generate plus the inserts, too slow for 50 cells x 10,000
instances. This module writes the *same row shapes* much faster:

* the column sets and their order are taken from one row of
  :func:`nova_cellsched.demo.seed.generate` (checked at import), so a column
  added there is noticed here;
* the ``network_info`` JSON is rendered once by ``seed._network_info_json``
  (nova's ``NetworkInfo.json()``) with sentinel numbers, and the sentinels
  are turned into ``%`` placeholders: per instance only the addresses, ids,
  MAC and tap name change, by string formatting (two templates: with and
  without a floating IP, 20% of them floating as in ``seed``);
* the ``flavor`` JSON is ``seed._flavor_json`` (nova's
  ``Flavor.obj_to_primitive()``), one per flavor;
* rows go in with ``LOAD DATA LOCAL INFILE`` (mysqlclient), ids are given
  explicitly so soft-deleted rows get ``deleted = id`` at once, as nova's
  soft delete writes them, without a second UPDATE pass;
* the schema of the first cell comes from nova's alembic migrations; the
  others get an exact copy of it (``SHOW CREATE TABLE`` of every table,
  foreign keys included, and the ``alembic_version`` row).

The conventions of :mod:`nova_cellsched.demo.seed` are kept: cell0 holds a few
instances in ERROR without host, the API database holds one
``instance_mappings`` row per instance (``queued_for_delete`` set for the
deleted ones), sysmeta and metadata rows stay ``deleted = 0``.
"""

import contextlib
import datetime
import os
import random
import tempfile
import time
import uuid as uuid_lib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from nova.compute import power_state
from nova.compute import vm_states

from nova_cellsched.demo import seed

import reporting
import runinfo

START = datetime.datetime(2023, 1, 1)
THREE_YEARS = 3 * 365 * 86400


def _columns() -> dict[str, list[str]]:
    """Column names per table, in seed.generate's order."""
    sample = next(seed.generate('probe', seed.Population(instances=1), 0,
                                START))
    return {
        'instances': list(sample['instances']),
        'instance_extra': list(sample['instance_extra']),
        'instance_info_caches': list(sample['instance_info_caches']),
        'instance_system_metadata': list(
            sample['instance_system_metadata'][0]),
        'instance_metadata': ['instance_uuid', 'key', 'value',
                              'created_at', 'deleted'],
    }


COLUMNS = _columns()
MAPPING_COLUMNS = ['instance_uuid', 'cell_id', 'project_id', 'user_id',
                   'queued_for_delete', 'created_at']


class _SentinelRng:
    """Feeds fixed numbers to seed._network_info_json, in call order."""

    def __init__(self, values: Sequence[Any]) -> None:
        self._values = list(values)

    def _next(self, *_args: Any) -> Any:
        return self._values.pop(0)

    randrange = random = getrandbits = _next


_NET_ID = 0x1111111111111111111111111111111
_VIF_ID = 0x2222222222222222222222222222222


def _network_template(floating: bool) -> str:
    values: list[Any] = [201, 202, 203, 0.1 if floating else 0.9]
    if floating:
        values += [204, 205]
    values += [0xfedc, 0xfedb, 0xfeda, _NET_ID, _VIF_ID, 0xe1, 0xe2, 0xe3,
               0x9abcdef0]
    text = seed._network_info_json(_SentinelRng(values), 1)  # type: ignore
    assert '%' not in text  # noqa: S101
    replacements = [
        ('10.201.202.203', '10.%(o2)d.%(o3)d.%(o4)d'),
        ('10.201.202.0/24', '10.%(o2)d.%(o3)d.0/24'),
        ('10.201.202.1"', '10.%(o2)d.%(o3)d.1"'),
        ('188.184.204.205', '188.184.%(f3)d.%(f4)d'),
        ('2001:db8:fedc::/64', '2001:db8:%(v6n)x::/64'),
        ('2001:db8:fedb::feda', '2001:db8:%(v6a)x::%(v6b)x'),
        (str(uuid_lib.UUID(int=_NET_ID, version=4)), '%(net)s'),
        (str(uuid_lib.UUID(int=_VIF_ID, version=4)), '%(vif)s'),
        ('fa:16:3e:e1:e2:e3', 'fa:16:3e:%(m1)02x:%(m2)02x:%(m3)02x'),
        ('tap9abcdef0', 'tap%(dev)08x'),
    ]
    for old, new in replacements:
        if old.startswith('188.') and not floating:
            continue
        if text.count(old) != 1:
            raise RuntimeError('network_info template: %r found %d times'
                               % (old, text.count(old)))
        text = text.replace(old, new)
    return text


NETWORK_TEMPLATES = (_network_template(False), _network_template(True))
FLAVOR_JSON = [seed._flavor_json(n, v, m, r, i + 1)
               for i, (n, v, m, r) in enumerate(seed.FLAVORS)]
KEYPAIRS_JSON = ('{"nova_object.name": "KeyPairList", "nova_object.data": '
                 '{"objects": []}, "nova_object.version": "1.3", '
                 '"nova_object.namespace": "nova"}')


def _uuid(rng: random.Random) -> str:
    return str(uuid_lib.UUID(int=rng.getrandbits(128), version=4))


def _network_info(rng: random.Random) -> str:
    floating = rng.random() < 0.2
    rb = rng.randrange
    values = {'o2': rb(256), 'o3': rb(256), 'o4': rb(2, 254),
              'f3': rb(256), 'f4': rb(1, 255),
              'v6n': rb(65536), 'v6a': rb(65536), 'v6b': rb(1, 65536),
              'net': _uuid(rng), 'vif': _uuid(rng),
              'm1': rb(256), 'm2': rb(256), 'm3': rb(256),
              'dev': rng.getrandbits(32)}
    return NETWORK_TEMPLATES[floating] % values


def _tsv(value: Any) -> str:
    if value is None:
        return '\\N'
    if value is True:
        return '1'
    if value is False:
        return '0'
    if isinstance(value, datetime.datetime):
        return value.strftime('%Y-%m-%d %H:%M:%S')
    text = str(value)
    if '\\' in text or '\t' in text or '\n' in text:
        text = (text.replace('\\', '\\\\').replace('\t', '\\t')
                .replace('\n', '\\n'))
    return text


def _line(values: Sequence[Any]) -> str:
    return '\t'.join(map(_tsv, values)) + '\n'


def _states() -> list[tuple[str, str | None, int]]:
    """VM_STATES expanded by weight, for a uniform pick."""
    out = []
    for vm_state, task_state, power, weight in seed.VM_STATES:
        out += [(vm_state, task_state, power)] * weight
    return out


STATES = _states()


def write_cell_files(directory: str, cell_name: str,
                     population: seed.Population, seed_value: int,
                     cell_id: int, first_id: int = 1
                     ) -> dict[str, tuple[str, int]]:
    """Write one TSV file per table; return table -> (path, rows).

    :param first_id: the id of the first row (rows added to a seeded cell
        start after its last id).
    """
    rng = random.Random('%s/%d/fast' % (cell_name, seed_value))
    projects = list(population.projects) or seed.project_ids(10,
                                                             seed_value)
    total = population.instances * (1 + population.deleted_per_instance)
    files = {name: open(os.path.join(directory, name + '.tsv'), 'w')
             for name in list(COLUMNS) + ['instance_mappings']}
    counts = dict.fromkeys(files, 0)
    start_ts = START.timestamp()
    try:
        for index in range(total):
            row_id = index + first_id
            deleted = index >= population.instances
            project = rng.choice(projects)
            user = '%s-user%d' % (project[:8],
                                  rng.randrange(population.users_per_project))
            uuid = _uuid(rng)
            created = datetime.datetime.fromtimestamp(
                start_ts + rng.randrange(THREE_YEARS))
            updated = created + datetime.timedelta(
                seconds=rng.randrange(86400))
            flavor_index = rng.randrange(len(seed.FLAVORS))
            _name, vcpus, memory_mb, root_gb = seed.FLAVORS[flavor_index]
            if population.error_only:
                vm_state, task_state, power = (vm_states.ERROR, None,
                                               power_state.NOSTATE)
                host = node = launched = None
            else:
                vm_state, task_state, power = rng.choice(STATES)
                host = '%s-compute%03d' % (cell_name,
                                           rng.randrange(population.hosts))
                node = host + '.example.org'
                launched = created + datetime.timedelta(seconds=40)
            image = _uuid(rng)
            display_name = 'vm-%s-%05d' % (cell_name, row_id - 1)
            terminated = deleted_at = None
            cleaned = 0
            deleted_value = 0
            if deleted:
                vm_state, task_state, power = (vm_states.DELETED, None,
                                               power_state.NOSTATE)
                terminated = deleted_at = updated
                cleaned = 1
                deleted_value = row_id
            instance = {
                'uuid': uuid, 'user_id': user, 'project_id': project,
                'image_ref': image, 'kernel_id': '', 'ramdisk_id': '',
                'hostname': display_name, 'launch_index': 0,
                'key_name': 'key-%s' % user,
                'key_data': 'ssh-ed25519 AAAA',
                'power_state': power, 'vm_state': vm_state,
                'task_state': task_state, 'memory_mb': memory_mb,
                'vcpus': vcpus, 'root_gb': root_gb, 'ephemeral_gb': 0,
                'host': host, 'node': node,
                'instance_type_id': flavor_index + 1, 'user_data': None,
                'reservation_id': 'r-%08x' % rng.getrandbits(32),
                'launched_at': launched, 'terminated_at': terminated,
                'availability_zone': 'nova' if host else None,
                'display_name': display_name, 'display_description': None,
                'launched_on': host, 'locked': False, 'locked_by': None,
                'os_type': None, 'architecture': None, 'vm_mode': None,
                'root_device_name': '/dev/vda',
                'default_ephemeral_device': None,
                'default_swap_device': None, 'config_drive': '',
                'access_ip_v4': None, 'access_ip_v6': None,
                'auto_disk_config': False, 'progress': 0,
                'shutdown_terminate': False, 'disable_terminate': False,
                'cell_name': None, 'cleaned': cleaned, 'hidden': False,
                'created_at': created, 'updated_at': updated,
                'deleted_at': deleted_at, 'deleted': deleted_value,
            }
            files['instances'].write(_line(
                [row_id] + [instance[c] for c in COLUMNS['instances']]))
            extra = {
                'instance_uuid': uuid, 'device_metadata': None,
                'numa_topology': None, 'pci_requests': '[]',
                'flavor': FLAVOR_JSON[flavor_index], 'vcpu_model': None,
                'migration_context': None, 'keypairs': KEYPAIRS_JSON,
                'trusted_certs': None, 'resources': None,
                'created_at': created, 'updated_at': None,
                'deleted_at': updated if deleted else None,
                'deleted': row_id if deleted else 0}
            files['instance_extra'].write(_line(
                [row_id] + [extra[c] for c in COLUMNS['instance_extra']]))
            cache = {
                'instance_uuid': uuid,
                'network_info': _network_info(rng) if host else '[]',
                'created_at': created, 'updated_at': updated,
                'deleted_at': updated if deleted else None,
                'deleted': row_id if deleted else 0}
            files['instance_info_caches'].write(_line(
                [row_id] + [cache[c]
                            for c in COLUMNS['instance_info_caches']]))
            created_text = _tsv(created)
            sysmeta = files['instance_system_metadata']
            pairs = seed.system_metadata(image, root_gb, project, user)
            for key, value in pairs:
                sysmeta.write('%s\t%s\t%s\t%s\t0\n'
                              % (uuid, key, value, created_text))
            counts['instance_system_metadata'] += len(pairs)
            metadata = files['instance_metadata']
            for k in range(rng.randrange(population.metadata_keys + 1)):
                metadata.write('%s\tkey%d\tvalue-%d-%d\t%s\t0\n' % (
                    uuid, k, k, rng.randrange(1000), created_text))
                counts['instance_metadata'] += 1
            files['instance_mappings'].write('%s\t%d\t%s\t%s\t%d\t%s\n' % (
                uuid, cell_id, project, user, deleted,
                _tsv(START)))
            for name in ('instances', 'instance_extra',
                         'instance_info_caches', 'instance_mappings'):
                counts[name] += 1
    finally:
        for handle in files.values():
            handle.close()
    return {name: (os.path.join(directory, name + '.tsv'), counts[name])
            for name in files}


def mysql_connect(url: str) -> Any:
    """A mysqlclient connection for a SQLAlchemy mysql URL."""
    import MySQLdb
    from sqlalchemy.engine import url as sa_url

    parsed = sa_url.make_url(url)
    kwargs: dict[str, Any] = {
        'host': parsed.host or '127.0.0.1', 'port': parsed.port or 3306,
        'user': parsed.username or 'root', 'local_infile': 1,
        'charset': 'utf8mb4'}
    if parsed.password:
        kwargs['password'] = parsed.password
    if parsed.database:
        kwargs['database'] = parsed.database
    return MySQLdb.connect(**kwargs)


def load_file(conn: Any, table: str, path: str,
              columns: Sequence[str]) -> None:
    cursor = conn.cursor()
    cursor.execute(
        "LOAD DATA LOCAL INFILE '%s' INTO TABLE `%s` CHARACTER SET utf8mb4 "
        "FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' "
        "LINES TERMINATED BY '\\n' (%s)"
        % (path.replace("'", "''"), table,
           ', '.join('`%s`' % c for c in columns)))
    warnings = conn.warning_count()
    if warnings:
        cursor.execute('SHOW WARNINGS LIMIT 5')
        raise RuntimeError('LOAD DATA into %s: %d warning(s): %s'
                           % (table, warnings, cursor.fetchall()))


def copy_schema(template_url: str, target_url: str) -> None:
    """Give *target_url* exactly the tables of *template_url*.

    The template was migrated by nova's alembic migrations; every table is
    recreated from its ``SHOW CREATE TABLE`` (indexes and foreign keys
    included) and ``alembic_version`` is copied.
    """
    src = mysql_connect(template_url)
    dst = mysql_connect(target_url)
    try:
        scur = src.cursor()
        dcur = dst.cursor()
        scur.execute('SHOW FULL TABLES WHERE Table_type = %s',
                     ('BASE TABLE',))
        tables = [r[0] for r in scur.fetchall()]
        dcur.execute('SET FOREIGN_KEY_CHECKS = 0')
        for table in tables:
            scur.execute('SHOW CREATE TABLE `%s`' % table)
            ddl = scur.fetchone()[1]
            # AUTO_INCREMENT counters of the template are not schema.
            ddl = ' '.join(part for part in ddl.split(' ')
                           if not part.startswith('AUTO_INCREMENT='))
            dcur.execute(ddl)
        scur.execute('SELECT version_num FROM alembic_version')
        for (version,) in scur.fetchall():
            dcur.execute('INSERT INTO alembic_version VALUES (%s)',
                         (version,))
        dst.commit()
    finally:
        src.close()
        dst.close()


def seed_cell(cell_url: str, api_url: str | None, cell_id: int,
              cell_name: str, population: seed.Population,
              seed_value: int = 0, first_id: int = 1) -> dict[str, Any]:
    """Fill an empty cell database (and its mappings); return stats.

    :param first_id: the first row id; with more than 1, the rows are
        added to a cell that holds rows up to ``first_id - 1``.
    """
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='ncsbench-') as directory:
        files = write_cell_files(directory, cell_name, population,
                                 seed_value, cell_id, first_id)
        generated = time.perf_counter()
        conn = mysql_connect(cell_url)
        try:
            cursor = conn.cursor()
            cursor.execute('SET FOREIGN_KEY_CHECKS = 0')
            cursor.execute('SET UNIQUE_CHECKS = 0')
            for table, columns in COLUMNS.items():
                path, _rows = files[table]
                if table in ('instances', 'instance_extra',
                             'instance_info_caches'):
                    columns = ['id'] + columns
                load_file(conn, table, path, columns)
            conn.commit()
            # Settled statistics, as a production cell database has (see
            # nova_cellsched.demo.seed.analyze).
            cursor.execute(seed.analyze_statement('mysql',
                                                  seed.SEEDED_TABLES))
            cursor.fetchall()
        finally:
            conn.close()
        if api_url is not None:
            conn = mysql_connect(api_url)
            try:
                path, _rows = files['instance_mappings']
                load_file(conn, 'instance_mappings', path, MAPPING_COLUMNS)
                conn.commit()
            finally:
                conn.close()
    done = time.perf_counter()
    rows = sum(count for _path, count in files.values())
    return {'cell': cell_name, 'instances': files['instances'][1],
            'rows': rows, 'generate_seconds': generated - started,
            'load_seconds': done - generated, 'seconds': done - started}


def count_rows(url: str, table: str = 'instances') -> int | None:
    """Rows of *table*, None when the database or table is missing."""
    import MySQLdb

    try:
        conn = mysql_connect(url)
    except MySQLdb.OperationalError:
        return None
    try:
        cursor = conn.cursor()
        cursor.execute('SELECT COUNT(*) FROM `%s`' % table)
        return int(cursor.fetchone()[0])
    except MySQLdb.ProgrammingError:
        return None
    finally:
        conn.close()


def progress_printer(prefix: str) -> Callable[[str], None]:
    def show(text: str) -> None:
        print('%s%s' % (prefix, text), flush=True)
    return show


#: Every benchmark database's name starts with this.
DATABASE_PREFIX = 'ncsbench_'


def world_prefix(cells: int, per_cell: int, deleted: int) -> str:
    """``ncsbench_n<nova>_<cells>c_<per_cell>_<deleted>``.

    A world's schema and rows are those of the installed nova release
    (its migrations, its models' columns): another release seeds its
    own world (``bench_api_e2e.py --nova NN``) rather than reading one
    made for another schema.
    """
    return '%sn%s_%dc_%d_%d' % (DATABASE_PREFIX, runinfo.nova_major(),
                                cells, per_cell, deleted)


def bench_databases(server_url: str,
                    prefix: str = DATABASE_PREFIX) -> set[str]:
    """Names of the databases on the server that start with *prefix*.

    Through SQLAlchemy and the server URL's own driver (no mysqlclient
    needed), so it can run before anything is created.
    """
    import sqlalchemy as sa

    engine = sa.create_engine(server_url)
    try:
        with engine.connect() as conn:
            names = [r[0] for r in conn.execute(sa.text('SHOW DATABASES'))]
    finally:
        engine.dispose()
    return {name for name in names if name.startswith(prefix)}


def databases_in_use(server_url: str) -> set[str]:
    """Databases another connection to the server is using now.

    From the server's process list (``information_schema.processlist``:
    its ``DB`` column), this connection left out. A user without the
    PROCESS privilege sees only its own connections.
    """
    import sqlalchemy as sa

    engine = sa.create_engine(server_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                'SELECT DISTINCT db FROM information_schema.processlist '
                'WHERE db IS NOT NULL AND id <> CONNECTION_ID()'))
            return {row[0] for row in rows}
    finally:
        engine.dispose()


def drop_databases(server_url: str, names: Iterable[str],
                   progress: Callable[[str], None] = print,
                   skip_in_use: bool = False) -> list[str]:
    """Drop the benchmark databases *names* (others are refused).

    :param skip_in_use: leave alone, and say so, those another
        connection is using (:func:`databases_in_use`): another user's
        benchmark running on the same server.
    :returns: the names dropped.
    """
    from sqlalchemy.engine import url as sa_url

    names = sorted(names)
    for name in names:
        if not name.startswith(DATABASE_PREFIX):
            raise ValueError('%r is not a benchmark database (expected the '
                             'prefix %r)' % (name, DATABASE_PREFIX))
    busy = databases_in_use(server_url) if skip_in_use and names else set()
    chosen = reporting.cleanup_selection(names, prefix=DATABASE_PREFIX,
                                         in_use=busy)
    for name in chosen.in_use:
        progress('left %s: in use by another connection (a running '
                 'benchmark?)' % name)
    for name in chosen.drop:
        seed.drop_database(str(sa_url.make_url(server_url).set(
            database=name)))
    if chosen.drop:
        progress('dropped %d benchmark database(s): %s'
                 % (len(chosen.drop), ', '.join(chosen.drop)))
    return chosen.drop


def world_runs(worlds: Iterable[tuple[int, int, int]]) -> list[str]:
    """The name prefixes of the worlds *worlds* (``cleanup_selection``).

    Each world is ``(cells, per_cell, deleted)``; its databases are
    ``<world_prefix>_api``, ``_cell0``, ``_cellN``.
    """
    return [world_prefix(*world) + '_' for world in worlds]


def world_databases(server_url: str,
                    worlds: Iterable[tuple[int, int, int]]) -> set[str]:
    """The databases on the server of the worlds *worlds*."""
    return set(reporting.cleanup_selection(
        bench_databases(server_url), prefix=DATABASE_PREFIX,
        runs=world_runs(worlds)).drop)


def cleanup(server_url: str, worlds: Iterable[tuple[int, int, int]],
            progress: Callable[[str], None] = print) -> list[str]:
    """``--cleanup``: drop the databases of *worlds*, not in use.

    The worlds are those the command line names, so a cleanup removes
    what a run with the same options made, and nothing of another run's
    worlds; a database another connection uses is left (and said).
    """
    names = world_databases(server_url, list(worlds))
    if not names:
        progress('no benchmark database of these worlds on the server')
    return drop_databases(server_url, names, progress, skip_in_use=True)


def add_database_args(parser: Any) -> None:
    """``--keep`` and ``--cleanup``: what a benchmark does with its worlds.
    """
    parser.add_argument('--keep', action='store_true',
                        help='keep the benchmark databases this run '
                        'created (the next run reuses them); default: '
                        'drop them at the end')
    parser.add_argument('--cleanup', action='store_true',
                        help='drop the ncsbench_* databases of the worlds '
                        'the other options name (what a run with the same '
                        'options made) and exit; databases another '
                        'connection uses are left')


@contextlib.contextmanager
def databases_of_this_run(server_url: str, keep: bool,
                          worlds: Iterable[tuple[int, int, int]] | None
                          = None) -> Iterator[None]:
    """Drop, at the end, the benchmark databases made in the block.

    Also when the block fails: no half-built world is left behind.
    Databases that existed before are never touched; with *keep*,
    nothing is dropped. With *worlds*, only databases of those worlds
    count as this run's (another run on the server may create others
    meanwhile); a database in use by another connection is left.
    """
    runs = None if worlds is None else world_runs(worlds)
    before = bench_databases(server_url)
    try:
        yield
    finally:
        if not keep:
            drop_databases(server_url, reporting.cleanup_selection(
                bench_databases(server_url), prefix=DATABASE_PREFIX,
                runs=runs, before=before).drop, skip_in_use=True)


def _mapped_count(api_url: str, cell_id: int) -> int:
    conn = mysql_connect(api_url)
    try:
        cursor = conn.cursor()
        cursor.execute('SELECT COUNT(*) FROM instance_mappings '
                       'WHERE cell_id = %s', (cell_id,))
        return int(cursor.fetchone()[0])
    finally:
        conn.close()


def _unmap(api_url: str, cell_id: int) -> None:
    conn = mysql_connect(api_url)
    try:
        conn.cursor().execute('DELETE FROM instance_mappings '
                              'WHERE cell_id = %s', (cell_id,))
        conn.commit()
    finally:
        conn.close()


#: The project of :func:`ensure_dedicated_project`: every server of it
#: lives in one cell.
DEDICATED_PROJECT = 'dedicated0000000000000000000cell'


def ensure_dedicated_project(world: dict[str, Any], instances: int,
                             cell: str = 'cell1',
                             progress: Callable[[str], None] = print
                             ) -> str:
    """Give *world*'s *cell* *instances* servers of a project of its own.

    A project dedicated to one cell, as ``[cellsched]`` operators map
    projects to cells: :data:`DEDICATED_PROJECT` has *instances* live
    servers, all in *cell* (added after the cell's own rows, mapped in
    the API database), and none anywhere else. Kept when the cell
    already has exactly that many; otherwise its rows are replaced.

    :returns: the project id.
    """
    url = next(u for name, _uuid, u in world['cells'] if name == cell)
    conn = mysql_connect(url)
    try:
        cursor = conn.cursor()
        cursor.execute('SELECT COUNT(*) FROM instances WHERE project_id = '
                       '%s', (DEDICATED_PROJECT,))
        have = cursor.fetchone()[0]
    finally:
        conn.close()
    if have == instances:
        return DEDICATED_PROJECT
    if have:
        raise RuntimeError('%s holds %d servers of %s, expected %d: drop '
                           'the world (--cleanup) and run again'
                           % (cell, have, DEDICATED_PROJECT, instances))
    api = mysql_connect(world['api_url'])
    try:
        cursor = api.cursor()
        cursor.execute('SELECT id FROM cell_mappings WHERE name = %s',
                       (cell,))
        cell_id = cursor.fetchone()[0]
    finally:
        api.close()
    conn = mysql_connect(url)
    try:
        cursor = conn.cursor()
        first_id = 1
        for table in ('instances', 'instance_extra', 'instance_info_caches'):
            cursor.execute('SELECT COALESCE(MAX(id), 0) FROM %s' % table)
            first_id = max(first_id, cursor.fetchone()[0] + 1)
    finally:
        conn.close()
    stats = seed_cell(url, world['api_url'], cell_id, cell,
                      seed.Population(instances=instances,
                                      projects=[DEDICATED_PROJECT]),
                      seed_value=7919, first_id=first_id)
    progress('%s: %d servers of project %s in %s in %.1fs'
             % (world.get('prefix', 'world'), stats['instances'],
                DEDICATED_PROJECT, cell, stats['seconds']))
    return DEDICATED_PROJECT


def _seed_one(args: tuple[Any, ...]) -> dict[str, Any]:
    (url, api_url, template_url, cell_id, name, population,
     seed_value) = args
    url = seed.create_database(url.rsplit('/', 1)[0] + '/',
                               url.rsplit('/', 1)[1])
    if template_url is None:
        seed.apply_schema(url, 'main')
    else:
        copy_schema(template_url, url)
    return seed_cell(url, api_url, cell_id, name, population, seed_value)


def ensure_world(server_url: str, cells: int, per_cell: int,
                 deleted: int, workers: int = 2,
                 progress: Callable[[str], None] = print
                 ) -> dict[str, Any]:
    """Create or reuse the benchmark databases of one world.

    ``<prefix>_api``, ``<prefix>_cell0`` and ``<prefix>_cell1..N`` with
    ``prefix = ncsbench_<cells>c_<per_cell>_<deleted>``. A cell whose
    instance and mapping counts are already right is reused; any other is
    dropped and seeded again (an interrupted run is redone, not trusted).
    When building fails (or is interrupted), the databases this call
    created or was seeding again are dropped before the error goes on:
    no half-built world is left on the server.

    :returns: ``{'api_url', 'cells': [(name, uuid, url)], 'seeded': [...],
        'reused': bool}``.
    """
    prefix = world_prefix(cells, per_cell, deleted)
    existed = bench_databases(server_url, prefix + '_')
    reseeding: list[str] = []
    try:
        return _build_world(server_url, cells, per_cell, deleted, workers,
                            progress, prefix, reseeding)
    except BaseException:
        half_built = (bench_databases(server_url, prefix + '_') - existed
                      ) | set(reseeding)
        progress('%s: building failed; dropping what it made' % prefix)
        drop_databases(server_url, half_built, progress)
        raise


def _build_world(server_url: str, cells: int, per_cell: int, deleted: int,
                 workers: int, progress: Callable[[str], None],
                 prefix: str, reseeding: list[str]) -> dict[str, Any]:
    """:func:`ensure_world`'s work.

    *reseeding* collects the databases dropped to be seeded again.
    """
    import concurrent.futures
    import multiprocessing

    from nova.db.api import models as api_models
    import sqlalchemy as sa

    projects = seed.project_ids(12, seed=42)
    api_url = seed.create_database(server_url, prefix + '_api')
    if not seed.has_schema(api_url):
        progress('%s: applying nova API schema' % prefix)
        seed.apply_schema(api_url, 'api')
    names = ['cell0'] + ['cell%d' % i for i in range(1, cells + 1)]
    jobs = []
    template = None
    out_cells = []
    for index, name in enumerate(names):
        url = seed.create_database(server_url, '%s_%s' % (prefix, name))
        if name == 'cell0':
            population = seed.Population(
                instances=max(1, per_cell // 50), projects=projects,
                error_only=True)
        else:
            population = seed.Population(
                instances=per_cell, deleted_per_instance=deleted,
                projects=projects)
        expected = population.instances * (
            1 + population.deleted_per_instance)
        cell_id, cell_uuid = seed.register_cell(
            api_url, name, url,
            cell_uuid=seed.CELL0_UUID if name == 'cell0' else None)
        out_cells.append((name, cell_uuid, url))
        have = count_rows(url)
        if have == expected and _mapped_count(api_url, cell_id) == expected:
            if template is None:
                template = url
            continue
        reseeding.append('%s_%s' % (prefix, name))
        seed.drop_database(url)
        _unmap(api_url, cell_id)
        jobs.append((url, api_url, None, cell_id, name, population, index))
    seeded = []
    if jobs:
        started = time.perf_counter()
        # The first job gets its schema from nova's migrations, the others
        # copy it (a reused cell is a valid template too).
        if template is None:
            first = jobs.pop(0)
            progress('%s: seeding %s (nova alembic migrations)'
                     % (prefix, first[4]))
            seeded.append(_seed_one(first))
            template = first[0]
        jobs = [job[:2] + (template,) + job[3:] for job in jobs]
        ctx = multiprocessing.get_context('fork')
        with concurrent.futures.ProcessPoolExecutor(
                max_workers=workers, mp_context=ctx) as pool:
            for stats in pool.map(_seed_one, jobs):
                seeded.append(stats)
                progress('%s: seeded %s: %d instances, %d rows in %.1fs'
                         % (prefix, stats['cell'], stats['instances'],
                            stats['rows'], stats['seconds']))
        elapsed = time.perf_counter() - started
        rows = sum(s['rows'] for s in seeded)
        progress('%s: seeded %d cell(s), %d rows (%d instances) in %.1fs: '
                 '%.0f rows/s, %.0f instances/s with %d worker(s)'
                 % (prefix, len(seeded), rows,
                    sum(s['instances'] for s in seeded), elapsed,
                    rows / elapsed, sum(s['instances'] for s in seeded)
                    / elapsed, workers))
    # Sanity: the API database maps exactly these cells' instances.
    engine = sa.create_engine(api_url)
    try:
        with engine.connect() as conn:
            table = api_models.CellMapping.__table__
            registered = {r[0] for r in conn.execute(sa.select(
                table.c.name))}
    finally:
        engine.dispose()
    if registered != set(names):
        raise RuntimeError('%s_api maps cells %s, expected %s'
                           % (prefix, sorted(registered), names))
    return {'api_url': api_url, 'cells': out_cells, 'seeded': seeded,
            'reused': not seeded, 'prefix': prefix}
