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

"""Build nova databases and fill them with instances as nova writes them.

Used by ``nova-cellsched demo``, the functional tests and the benchmarks.
Schemas come from nova's own alembic migrations; rows are shaped like the
ones nova's objects write (``Instance.create``): an ``instances`` row, an
``instance_extra`` row whose ``flavor`` is the JSON of a ``Flavor``
object, an ``instance_info_caches`` row holding a ``NetworkInfo`` JSON,
``instance_system_metadata`` image properties, ``instance_metadata``, and
the ``instance_mappings`` and ``request_specs`` rows in the API database
(the spec nova-api builds at boot, ``RequestSpec.from_components``,
serialized as ``RequestSpec.create()`` stores it). They are written with
bulk inserts, so thousands of instances take seconds, not hours.
"""

import contextlib
import dataclasses
import datetime
import functools
import os
import random
import re
import threading
import uuid as uuid_lib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from alembic import command as alembic_command
from alembic import config as alembic_config
from nova.compute import power_state
from nova.compute import task_states
from nova.compute import vm_states
from nova.db.api import models as api_models
from nova.db.main import models as main_models
from nova.network import model as network_model
from nova import objects
from oslo_serialization import jsonutils
import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url

CELL0_UUID = '00000000-0000-0000-0000-000000000000'

FLAVORS = (
    ('m1.tiny', 1, 512, 1), ('m1.small', 1, 2048, 20),
    ('m1.medium', 2, 4096, 40), ('m1.large', 4, 8192, 80),
    ('m1.xlarge', 8, 16384, 160),
)
VM_STATES = (
    # (vm_state, task_state, power_state, weight)
    (vm_states.ACTIVE, None, power_state.RUNNING, 80),
    (vm_states.STOPPED, None, power_state.SHUTDOWN, 10),
    (vm_states.ACTIVE, task_states.REBOOTING, power_state.RUNNING, 2),
    (vm_states.SHELVED_OFFLOADED, None, power_state.SHUTDOWN, 3),
    (vm_states.PAUSED, None, power_state.PAUSED, 2),
    (vm_states.ERROR, None, power_state.NOSTATE, 3),
)


def create_database(server_url: str, name: str) -> str:
    """Create database *name* on the server; return its URL.

    For SQLite *server_url* is a directory and the database a file in it.
    """
    url = sa_url.make_url(server_url)
    backend = url.get_backend_name()
    if backend == 'sqlite':
        directory = url.database or '.'
        os.makedirs(directory, exist_ok=True)
        return 'sqlite:///%s' % os.path.join(os.path.abspath(directory),
                                            name + '.db')
    engine = sa.create_engine(url, isolation_level='AUTOCOMMIT')
    try:
        with engine.connect() as conn:
            if backend == 'mysql':
                conn.execute(sa.text(
                    'CREATE DATABASE IF NOT EXISTS `%s` '
                    'CHARACTER SET utf8mb4' % name))
            elif backend == 'postgresql':
                exists = conn.execute(sa.text(
                    'SELECT 1 FROM pg_database WHERE datname = :n'),
                    {'n': name}).first()
                if not exists:
                    conn.execute(sa.text('CREATE DATABASE "%s"' % name))
            else:
                raise ValueError('unsupported database server %s' % backend)
    finally:
        engine.dispose()
    return str(url.set(database=name).render_as_string(
        hide_password=False))


def list_databases(server_url: str, prefix: str) -> list[str]:
    """URLs of the databases on the server whose names start with *prefix*.

    For SQLite *server_url* is a directory and a database a ``.db`` file
    in it.
    """
    url = sa_url.make_url(server_url)
    backend = url.get_backend_name()
    if backend == 'sqlite':
        directory = os.path.abspath(url.database or '.')
        if not os.path.isdir(directory):
            return []
        return sorted('sqlite:///%s' % os.path.join(directory, name)
                      for name in os.listdir(directory)
                      if name.startswith(prefix) and name.endswith('.db'))
    if backend == 'mysql':
        query = 'SELECT schema_name FROM information_schema.schemata'
    elif backend == 'postgresql':
        query = 'SELECT datname FROM pg_database'
    else:
        raise ValueError('unsupported database server %s' % backend)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = [row[0] for row in conn.execute(sa.text(query))]
    finally:
        engine.dispose()
    return sorted(url.set(database=name).render_as_string(hide_password=False)
                  for name in names if name.startswith(prefix))


def drop_database(database_url: str) -> None:
    """Drop the database of *database_url* (delete a SQLite file)."""
    url = sa_url.make_url(database_url)
    backend = url.get_backend_name()
    if backend == 'sqlite':
        if url.database and os.path.exists(url.database):
            os.unlink(url.database)
        return
    name = url.database
    server = url.set(database='postgres' if backend == 'postgresql' else '')
    engine = sa.create_engine(server, isolation_level='AUTOCOMMIT')
    try:
        with engine.connect() as conn:
            if backend == 'mysql':
                conn.execute(sa.text('DROP DATABASE IF EXISTS `%s`' % name))
            else:
                conn.execute(sa.text(
                    'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name))
    finally:
        engine.dispose()


#: nova's schema as first migrated in this process, per server and kind:
#: (its CREATE statements, its alembic versions). See :func:`apply_schema`.
_SCHEMAS: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
_SCHEMAS_LOCK = threading.Lock()


def apply_schema(database_url: str, database: str = 'main') -> None:
    """Give *database_url* nova's latest ``main`` or ``api`` schema.

    The first empty database of each kind on each server is migrated by
    nova's own alembic migrations, as ``nova-manage db sync`` does. On
    MariaDB/MySQL and SQLite the next empty ones, in the same process,
    get that database's schema copied: the statements the server gives
    for it (``SHOW CREATE TABLE``; SQLite's ``sqlite_master``) and its
    ``alembic_version`` rows, so they have the same tables, columns,
    indexes and constraints and ``nova-manage db sync`` finds nothing to
    do. Migrating runs some hundred statements one by one (on MariaDB
    the main schema takes seconds); the copy runs one per table.
    PostgreSQL databases, and databases that already have tables (alembic
    then does what is left), are always migrated. Measured on the 2-core
    machine: nova's main schema migrated in 3.7-5.0 s on MariaDB and
    1.6-1.8 s on SQLite, copied in 0.7-1.1 s and 0.04 s.
    """
    url = sa_url.make_url(database_url)
    backend = url.get_backend_name()
    key = (backend, str(url.host), str(url.port), str(url.username),
           database)
    copyable = backend in ('mysql', 'sqlite') and not _has_tables(url)
    if copyable:
        with _SCHEMAS_LOCK:
            schema = _SCHEMAS.get(key)
        if schema is not None:
            _copy_schema(url, *schema)
            return
    _migrate(database_url, database)
    if copyable:
        with _SCHEMAS_LOCK:
            _SCHEMAS.setdefault(key, _read_schema(url))


def _migrate(database_url: str, database: str) -> None:
    """nova's alembic migrations of *database* (main/api), up to head."""
    import nova.db

    ini = os.path.join(os.path.dirname(nova.db.__file__), database,
                       'alembic.ini')
    config = alembic_config.Config(ini)
    config.attributes['configure_logger'] = False
    config.set_main_option('sqlalchemy.url',
                           database_url.replace('%', '%%'))
    engine = sa.create_engine(database_url)
    try:
        with engine.begin() as connection:
            config.attributes['connection'] = connection
            alembic_command.upgrade(config, 'head')
    finally:
        engine.dispose()


def _has_tables(url: sa_url.URL) -> bool:
    if url.get_backend_name() == 'sqlite' and not (
            url.database and os.path.exists(url.database)):
        return False
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        return bool(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _read_schema(url: sa_url.URL) -> tuple[list[str], list[str]]:
    """(CREATE statements, alembic versions) of a freshly migrated *url*."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            if url.get_backend_name() == 'mysql':
                tables = [row[0] for row in conn.execute(sa.text(
                    "SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'"))]
                statements = [
                    # An empty table's counter; said only once it moved.
                    re.sub(r' AUTO_INCREMENT=\d+', '', conn.execute(
                        sa.text('SHOW CREATE TABLE `%s`' % table)).one()[1])
                    for table in tables]
            else:
                statements = [row[0] for row in conn.execute(sa.text(
                    "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"))]
            versions = [row[0] for row in conn.execute(sa.text(
                'SELECT version_num FROM alembic_version'))]
        return statements, versions
    finally:
        engine.dispose()


def _copy_schema(url: sa_url.URL, statements: Sequence[str],
                 versions: Sequence[str]) -> None:
    """Run :func:`_read_schema`'s statements in the empty *url*."""
    if url.get_backend_name() == 'sqlite':
        # One transaction: pysqlite would commit (and sync) each one.
        import sqlite3

        with contextlib.closing(sqlite3.connect(url.database or '')) as db:
            db.executescript('BEGIN;\n%s;' % ';\n'.join(statements))
            db.executemany('INSERT INTO alembic_version (version_num) '
                           'VALUES (?)', [(v,) for v in versions])
            db.commit()
        return
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            # Tables come in name order, not in their keys' order.
            conn.exec_driver_sql('SET FOREIGN_KEY_CHECKS = 0')
            for statement in statements:
                conn.exec_driver_sql(statement)
            for version in versions:
                conn.execute(sa.text(
                    'INSERT INTO alembic_version (version_num) '
                    'VALUES (:v)'), {'v': version})
            conn.exec_driver_sql('SET FOREIGN_KEY_CHECKS = 1')
    finally:
        engine.dispose()


def has_schema(database_url: str) -> bool:
    """True when the database already has nova's tables."""
    engine = sa.create_engine(database_url)
    try:
        return bool(sa.inspect(engine).has_table('alembic_version'))
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


def register_cell(api_url: str, name: str, database_url: str,
                  cell_uuid: str | None = None,
                  transport_url: str = 'fake://',
                  disabled: bool = False) -> tuple[int, str]:
    """Add (or find) a cell mapping; return its ``(id, uuid)``."""
    table = api_models.CellMapping.__table__
    engine = sa.create_engine(api_url)
    try:
        with engine.begin() as conn:
            row = conn.execute(sa.select(table.c.id, table.c.uuid).where(
                table.c.name == name)).first()
            if row is not None:
                return int(row[0]), str(row[1])
            cell_uuid = cell_uuid or str(uuid_lib.uuid4())
            result = conn.execute(table.insert().values(
                uuid=cell_uuid, name=name, transport_url=transport_url,
                database_connection=database_url, disabled=disabled,
                created_at=datetime.datetime.utcnow()))
            return int(result.inserted_primary_key[0]), cell_uuid
    finally:
        engine.dispose()


@dataclasses.dataclass(frozen=True)
class Population:
    """How to fill one cell.

    :ivar instances: live instances.
    :ivar deleted_per_instance: soft-deleted rows per live one (clouds
        that churn carry many more deleted than live rows).
    :ivar deleted: soft-deleted rows besides those of
        ``deleted_per_instance`` (the demo's few deleted servers).
    :ivar projects: project ids the instances are spread over.
    :ivar users_per_project: users in each project.
    :ivar hosts: compute hosts of the cell.
    :ivar error_only: every instance in ERROR without a host (cell0).
    """

    instances: int
    deleted_per_instance: int = 0
    projects: Sequence[str] = ()
    users_per_project: int = 3
    hosts: int = 20
    error_only: bool = False
    metadata_keys: int = 3
    networks: int = 1
    deleted: int = 0

    @property
    def rows(self) -> int:
        """Instance rows written, deleted included."""
        return self.instances * (1 + self.deleted_per_instance) + \
            self.deleted


def project_ids(count: int, seed: int = 0) -> list[str]:
    """*count* keystone-style project ids (32 hex digits), reproducible."""
    rng = random.Random(seed)
    return [uuid_lib.UUID(int=rng.getrandbits(128), version=4).hex
            for _ in range(count)]


def _flavor(name: str, vcpus: int, memory_mb: int, root_gb: int,
            flavor_id: int) -> Any:
    """The ``Flavor`` object of one of :data:`FLAVORS` (id *flavor_id*)."""
    objects.register_all()
    return objects.Flavor(
        id=flavor_id, flavorid=str(flavor_id), name=name, vcpus=vcpus,
        memory_mb=memory_mb, root_gb=root_gb, ephemeral_gb=0, swap=0,
        rxtx_factor=1.0, vcpu_weight=0, disabled=False, is_public=True,
        extra_specs={'hw:cpu_policy': 'shared'}, description=None,
        created_at=None, updated_at=None, deleted_at=None, deleted=False)


def _flavor_json(name: str, vcpus: int, memory_mb: int, root_gb: int,
                 flavor_id: int) -> str:
    flavor = _flavor(name, vcpus, memory_mb, root_gb, flavor_id)
    return str(jsonutils.dumps({'cur': flavor.obj_to_primitive(),
                                'old': None, 'new': None}))


#: Stand-ins in a request spec template, replaced per server (see
#: :func:`_request_spec_template`): valid values of their fields, found
#: nowhere else in the spec's JSON.
_SPEC_INSTANCE = '5eed5eed-0000-4000-8000-00000000a001'
_SPEC_IMAGE = '5eed5eed-0000-4000-8000-00000000a002'
_SPEC_PROJECT = '5eed5eed5eed4000800000000000a003'
_SPEC_USER = '5eed5eed-user-stand-in-a004'


@functools.cache
def _request_spec_template(flavor_index: int) -> str:
    """The ``request_specs.spec`` nova-api stores at boot, for a flavor.

    Built as nova-api builds it (``RequestSpec.from_components`` with the
    image's metadata, the flavor, no NUMA topology nor PCI request, the
    scheduler hints of a request that gave none, no availability zone
    asked for, the ``default`` security group) and serialized as
    ``RequestSpec.create()`` stores it, with stand-ins for the server's
    uuid, image, project and user.
    """
    from nova import context as nova_context
    from nova.objects import security_group as security_group_obj
    from nova.scheduler import utils as scheduler_utils

    objects.register_all()
    name, vcpus, memory_mb, root_gb = FLAVORS[flavor_index]
    flavor = _flavor(name, vcpus, memory_mb, root_gb, flavor_index + 1)
    image = {'id': _SPEC_IMAGE, 'status': 'active', 'disk_format': 'qcow2',
             'container_format': 'bare', 'min_disk': root_gb, 'min_ram': 0,
             'properties': {'hw_rng_model': 'virtio'}}
    spec = objects.RequestSpec.from_components(
        nova_context.get_admin_context(), _SPEC_INSTANCE, image, flavor,
        None, objects.InstancePCIRequests(requests=[]),
        scheduler_utils.build_filter_properties({}, None, None, flavor),
        None, None,
        security_groups=security_group_obj.make_secgroup_list(
            ['default']),
        project_id=_SPEC_PROJECT, user_id=_SPEC_USER)
    spec.is_bfv = False
    spec.num_instances = 1
    # NOTE: what create() writes: the spec less what nova never persists.
    return str(spec._get_update_primitives()['spec'])


def request_spec_row(instance: dict[str, Any]) -> dict[str, Any]:
    """The ``request_specs`` row nova-api writes for a seeded *instance*.

    :param instance: an ``instances`` row of :func:`generate` (``uuid``,
        ``project_id``, ``user_id``, ``image_ref``, ``instance_type_id``
        and ``created_at`` are read).
    :raises ValueError: its ``instance_type_id`` is not one of
        :data:`FLAVORS`.
    """
    index = int(instance['instance_type_id']) - 1
    if not 0 <= index < len(FLAVORS):
        raise ValueError(
            'instance %s: expected an instance_type_id of the seed\'s '
            'flavors (1-%d), got %r; seed it with seed_cell' % (
                instance['uuid'], len(FLAVORS), instance['instance_type_id']))
    spec = _request_spec_template(index)
    for stand_in, value in ((_SPEC_INSTANCE, instance['uuid']),
                            (_SPEC_IMAGE, instance['image_ref']),
                            (_SPEC_PROJECT, instance['project_id']),
                            (_SPEC_USER, instance['user_id'])):
        spec = spec.replace(stand_in, jsonutils.dumps(value)[1:-1])
    return {'instance_uuid': instance['uuid'], 'spec': spec,
            'created_at': instance['created_at']}


def _network_info_json(rng: random.Random, networks: int) -> str:
    vifs = []
    for index in range(networks):
        octets = (10, rng.randrange(256), rng.randrange(256),
                  rng.randrange(2, 254))
        address = '.'.join(map(str, octets))
        subnet_v4 = network_model.Subnet(
            cidr='%d.%d.%d.0/24' % octets[:3],
            gateway=network_model.IP(address='%d.%d.%d.1' % octets[:3],
                                     type='gateway'),
            dns=[network_model.IP(address='10.0.0.2', type='dns')],
            ips=[network_model.FixedIP(
                address=address,
                floating_ips=[network_model.IP(
                    address='188.184.%d.%d' % (rng.randrange(256),
                                               rng.randrange(1, 255)),
                    type='floating')] if rng.random() < 0.2 else [])],
            routes=[], version=4)
        subnet_v6 = network_model.Subnet(
            cidr='2001:db8:%x::/64' % rng.randrange(65536),
            gateway=network_model.IP(address='2001:db8::1', type='gateway'),
            ips=[network_model.FixedIP(
                address='2001:db8:%x::%x' % (rng.randrange(65536),
                                              rng.randrange(1, 65536)))],
            routes=[], version=6)
        network = network_model.Network(
            id=str(uuid_lib.UUID(int=rng.getrandbits(128), version=4)),
            bridge='br-int', label='net%d' % index,
            subnets=[subnet_v4, subnet_v6], meta={'mtu': 1450},
            tenant_id=None)
        vifs.append(network_model.VIF(
            id=str(uuid_lib.UUID(int=rng.getrandbits(128), version=4)),
            address='fa:16:3e:%02x:%02x:%02x' % (
                rng.randrange(256), rng.randrange(256), rng.randrange(256)),
            network=network, type='ovs', devname='tap%08x' % rng.getrandbits(
                32), ovs_interfaceid=None, details={'port_filter': True},
            active=True, vnic_type='normal', profile={},
            preserve_on_delete=False))
    return str(network_model.NetworkInfo(vifs).json())


def _weighted_state(rng: random.Random) -> tuple[str, str | None, int]:
    total = sum(w for *_, w in VM_STATES)
    pick = rng.uniform(0, total)
    for vm_state, task_state, power, weight in VM_STATES:
        pick -= weight
        if pick <= 0:
            return vm_state, task_state, power
    return VM_STATES[0][:3]


def generate(cell_name: str, population: Population, seed: int,
             start: datetime.datetime
             ) -> Iterator[dict[str, Any]]:
    """Yield one dict of table rows per instance (live then deleted)."""
    rng = random.Random('%s/%d' % (cell_name, seed))
    projects = list(population.projects) or project_ids(10, seed)
    flavor_json = [_flavor_json(n, v, m, r, i + 1)
                   for i, (n, v, m, r) in enumerate(FLAVORS)]
    total = population.rows
    for index in range(total):
        deleted = index >= population.instances
        project = rng.choice(projects)
        user = '%s-user%d' % (project[:8],
                              rng.randrange(population.users_per_project))
        uuid = str(uuid_lib.UUID(int=rng.getrandbits(128), version=4))
        created = start + datetime.timedelta(
            seconds=rng.randrange(0, 3 * 365 * 86400))
        updated = created + datetime.timedelta(seconds=rng.randrange(86400))
        flavor_index = rng.randrange(len(FLAVORS))
        name, vcpus, memory_mb, root_gb = FLAVORS[flavor_index]
        if population.error_only:
            vm_state, task_state, power = (vm_states.ERROR, None,
                                           power_state.NOSTATE)
            host = node = None
            launched = None
        else:
            vm_state, task_state, power = _weighted_state(rng)
            host = '%s-compute%03d' % (cell_name,
                                       rng.randrange(population.hosts))
            node = host + '.example.org'
            launched = created + datetime.timedelta(seconds=40)
        image = str(uuid_lib.UUID(int=rng.getrandbits(128), version=4))
        display_name = 'vm-%s-%05d' % (cell_name, index)
        instance = {
            'uuid': uuid, 'user_id': user, 'project_id': project,
            'image_ref': image, 'kernel_id': '', 'ramdisk_id': '',
            'hostname': display_name, 'launch_index': 0,
            'key_name': 'key-%s' % user, 'key_data': 'ssh-ed25519 AAAA',
            'power_state': power, 'vm_state': vm_state,
            'task_state': task_state, 'memory_mb': memory_mb,
            'vcpus': vcpus, 'root_gb': root_gb, 'ephemeral_gb': 0,
            'host': host, 'node': node, 'instance_type_id': flavor_index + 1,
            'user_data': None,
            'reservation_id': 'r-%08x' % rng.getrandbits(32),
            'launched_at': launched, 'terminated_at': None,
            'availability_zone': 'nova' if host else None,
            'display_name': display_name, 'display_description': None,
            'launched_on': host, 'locked': False, 'locked_by': None,
            'os_type': None, 'architecture': None, 'vm_mode': None,
            'root_device_name': '/dev/vda', 'default_ephemeral_device': None,
            'default_swap_device': None, 'config_drive': '',
            'access_ip_v4': None, 'access_ip_v6': None,
            'auto_disk_config': False, 'progress': 0,
            'shutdown_terminate': False, 'disable_terminate': False,
            'cell_name': None, 'cleaned': 0, 'hidden': False,
            'created_at': created, 'updated_at': updated,
            'deleted_at': None, 'deleted': 0,
        }
        if deleted:
            instance.update(vm_state=vm_states.DELETED, task_state=None,
                            power_state=power_state.NOSTATE,
                            terminated_at=updated, deleted_at=updated,
                            cleaned=1)
        yield {
            'instances': instance,
            'instance_extra': {
                'instance_uuid': uuid, 'device_metadata': None,
                'numa_topology': None, 'pci_requests': '[]',
                'flavor': flavor_json[flavor_index], 'vcpu_model': None,
                'migration_context': None, 'keypairs': jsonutils.dumps({
                    'nova_object.name': 'KeyPairList', 'nova_object.data': {
                        'objects': []}, 'nova_object.version': '1.3',
                    'nova_object.namespace': 'nova'}),
                'trusted_certs': None, 'resources': None,
                'created_at': created, 'updated_at': None,
                'deleted_at': updated if deleted else None, 'deleted': 0},
            'instance_info_caches': {
                'instance_uuid': uuid,
                'network_info': (_network_info_json(rng, population.networks)
                                 if host else '[]'),
                'created_at': created, 'updated_at': updated,
                'deleted_at': updated if deleted else None, 'deleted': 0},
            'instance_system_metadata': [
                {'instance_uuid': uuid, 'key': key, 'value': value,
                 'created_at': created, 'deleted': 0}
                for key, value in system_metadata(image, root_gb, project,
                                                  user)],
            'instance_metadata': [
                {'instance_uuid': uuid, 'key': 'key%d' % k,
                 'value': 'value-%d-%d' % (k, rng.randrange(1000)),
                 'created_at': created, 'deleted': 0}
                for k in range(rng.randrange(population.metadata_keys + 1))],
            'mapping': (uuid, project, user, deleted),
        }


def seed_cell(cell_url: str, api_url: str | None, cell_id: int | None,
              cell_name: str, population: Population, seed: int = 0,
              start: datetime.datetime | None = None,
              progress: Callable[[int, int], None] | None = None,
              chunk: int = 500) -> int:
    """Insert *population* into the cell database (and its mappings).

    With *api_url*, each instance also gets its ``instance_mappings`` row
    (in cell *cell_id*) and the ``request_specs`` row nova-api wrote when
    it was booted (:func:`request_spec_row`).

    :returns: the number of instance rows written (deleted included).
    """
    start = start or datetime.datetime(2023, 1, 1)
    tables = main_models.BASE.metadata.tables
    mappings = api_models.InstanceMapping.__table__
    specs = api_models.RequestSpec.__table__
    cell_engine = sa.create_engine(cell_url)
    api_engine = sa.create_engine(api_url) if api_url else None
    total = population.rows
    written = 0
    try:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            nonlocal written
            if not batch:
                return
            with cell_engine.begin() as conn:
                for name in ('instances', 'instance_extra',
                             'instance_info_caches'):
                    conn.execute(tables[name].insert(),
                                 [b[name] for b in batch])
                for name in ('instance_system_metadata',
                             'instance_metadata'):
                    rows = [r for b in batch for r in b[name]]
                    if rows:
                        conn.execute(tables[name].insert(), rows)
                # nova soft-deletes by setting deleted to the row's id.
                for name in ('instances', 'instance_extra',
                             'instance_info_caches'):
                    table = tables[name]
                    conn.execute(table.update().where(
                        table.c.deleted == 0,
                        table.c.deleted_at.is_not(None)).values(
                        deleted=table.c.id))
            if api_engine is not None:
                with api_engine.begin() as conn:
                    conn.execute(mappings.insert(), [
                        {'instance_uuid': u, 'cell_id': cell_id,
                         'project_id': p, 'user_id': us,
                         'queued_for_delete': d, 'created_at': start}
                        for u, p, us, d in (b['mapping'] for b in batch)])
                    conn.execute(specs.insert(), [
                        request_spec_row(b['instances']) for b in batch])
            written += len(batch)
            batch.clear()
            if progress is not None:
                progress(written, total)

        for rows in generate(cell_name, population, seed, start):
            batch.append(rows)
            if len(batch) >= chunk:
                flush()
        flush()
        analyze(cell_engine, SEEDED_TABLES)
    finally:
        cell_engine.dispose()
        if api_engine is not None:
            api_engine.dispose()
    return written


def system_metadata(image: str, root_gb: int, project: str,
                    user: str) -> tuple[tuple[str, str], ...]:
    """The system metadata nova writes for a server booted from *image*."""
    return (('image_base_image_ref', image),
            ('image_disk_format', 'qcow2'),
            ('image_container_format', 'bare'),
            ('image_min_disk', str(root_gb)),
            ('image_min_ram', '0'),
            ('image_hw_rng_model', 'virtio'),
            ('boot_roles', 'member,reader'),
            ('owner_project_name', 'project-%s' % project[:8]),
            ('owner_user_name', user))


#: The cell tables :func:`seed_cell` writes.
SEEDED_TABLES = ('instances', 'instance_extra', 'instance_info_caches',
                 'instance_system_metadata', 'instance_metadata')


def analyze(engine: sa.Engine, tables: Sequence[str]) -> None:
    """Refresh the planner's statistics of freshly loaded *tables*.

    Right after a bulk load MariaDB's persistent statistics may still say
    the tables are empty (they are refreshed in the background), and a
    listing run at once can get a plan that joins every row before
    sorting. A production cell database has settled statistics; so does
    a seeded one after this. MySQL and PostgreSQL only (SQLite plans
    without statistics here).
    """
    statement = analyze_statement(engine.dialect.name, tables)
    if statement is None:
        return
    with engine.connect() as conn:
        result = conn.execute(sa.text(statement))
        if result.returns_rows:
            result.all()  # MySQL answers with a status row per table
        conn.commit()


def analyze_statement(dialect: str, tables: Sequence[str]) -> str | None:
    """The statement that refreshes *tables*' statistics; None for SQLite.

    *tables* are nova's table names (identifiers we choose, not input).
    """
    if dialect == 'mysql':
        return 'ANALYZE TABLE %s' % ', '.join('`%s`' % t for t in tables)
    if dialect == 'postgresql':
        return 'ANALYZE %s' % ', '.join('"%s"' % t for t in tables)
    return None


def map_instances(api_url: str, cell_url: str, cell_id: int,
                  chunk: int = 2000) -> int:
    """Write the API rows of every instance of a cell seeded by seed_cell.

    Its ``instance_mappings`` row (in cell *cell_id*) and its
    ``request_specs`` row (:func:`request_spec_row`).
    """
    instances = main_models.Instance.__table__
    mappings = api_models.InstanceMapping.__table__
    specs = api_models.RequestSpec.__table__
    cell_engine = sa.create_engine(cell_url)
    api_engine = sa.create_engine(api_url)
    written = 0
    try:
        with cell_engine.connect() as cell_conn:
            rows = [row._asdict() for row in cell_conn.execute(sa.select(
                instances.c.uuid, instances.c.project_id,
                instances.c.user_id, instances.c.deleted,
                instances.c.created_at, instances.c.image_ref,
                instances.c.instance_type_id))]
        for start in range(0, len(rows), chunk):
            with api_engine.begin() as conn:
                conn.execute(mappings.insert(), [
                    {'instance_uuid': row['uuid'], 'cell_id': cell_id,
                     'project_id': row['project_id'],
                     'user_id': row['user_id'],
                     'queued_for_delete': bool(row['deleted']),
                     'created_at': row['created_at']}
                    for row in rows[start:start + chunk]])
                conn.execute(specs.insert(), [
                    request_spec_row(row)
                    for row in rows[start:start + chunk]])
            written += len(rows[start:start + chunk])
    finally:
        cell_engine.dispose()
        api_engine.dispose()
    return written


def count_instances(cell_url: str, deleted: bool | None = None) -> int:
    """Number of instance rows in a cell database.

    :param deleted: None for all rows, True for the (soft-)deleted ones
        only, False for the live ones only.
    """
    table = main_models.Instance.__table__
    query = sa.select(sa.func.count()).select_from(table)
    if deleted is not None:
        query = query.where(table.c.deleted != 0 if deleted
                            else table.c.deleted == 0)
    engine = sa.create_engine(cell_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(query).scalar_one())
    finally:
        engine.dispose()
