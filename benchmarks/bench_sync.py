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

"""``nova-cellsched sync-aggregates`` at scale, on real pieces.

A world on MariaDB: nova's API database, cell0 and ``--cells`` cell
databases (nova's schema: alembic for cell0, copied to the others), with
``--providers`` compute nodes spread over the cells (``services`` and
``compute_nodes`` rows shaped as nova writes them, host mappings); and a
real placement (openstack-placement's WSGI app under uwsgi, as devstack
and the helm charts run ``placement-api``: ``--placement-processes``
processes, ``Connection: close``, noauth2) on its own MariaDB database,
holding one resource provider per compute node as nova's resource
tracker makes them (uuid = compute node uuid, name = node name, VCPU,
MEMORY_MB and DISK_GB inventory, a dozen traits; 10% of them in one
non-cell aggregate, which the sync must keep). Seeding is bulk SQL on
nova's and placement's own table models and is not timed::

    python benchmarks/bench_sync.py --out benchmarks/results/
    python benchmarks/bench_sync.py --quick

**Timed**, for each ``--workers`` value and ``--repeat`` times, through
the operator's command (``nova-cellsched sync-aggregates`` in a
subprocess with a nova.conf naming the API database and the placement
endpoint) and in-process (``aggregate_sync.sync``):

* ``first``: every provider joins its cell aggregate (the cell
  aggregates are emptied by SQL before, not timed);
* ``no change``: the same sync again, nothing to write;
* ``1% moved``: 1% of the nodes moved to the next cell (their rows
  deleted in one cell database and created in the next) and another 1%
  added (new nodes and providers) before the sync (not timed).

For each sync: wall seconds, providers written per second, placement
requests by method (from uwsgi's request log), and the CPU seconds of
the client (the command's process, or this process), placement's uwsgi
workers and mariadbd over the sync: on 2 cores, the sum against twice
the wall time says whether the machine is the bound.

**Placement's own capacity**: ``--probe`` providers are read and written
(``GET`` then ``PUT /resource_providers/{uuid}/aggregates``, the pair
the sync issues per provider) by a trivial client (one
``requests.Session`` per thread) at the same concurrency; its pairs per
second are the ceiling the sync can reach on this placement.

Everything made is removed at the end, also on failure or Ctrl-C: the
``ncsbench_sync_*`` databases this run created, the temp dir, uwsgi.
``--quick`` runs 200 providers in 5 cells, one repetition, for the
tests. Results: ``sync.json`` and ``sync.md`` in ``--out``
(``sync_quick.*`` with ``--quick``).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(1, TOP)

import tests  # noqa: E402,F401  (nova's monkey patching, before nova)

import argparse  # noqa: E402
import collections  # noqa: E402
import concurrent.futures  # noqa: E402
import configparser  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
import uuid as uuid_lib  # noqa: E402

from nova_cellsched.demo import api as demo_api  # noqa: E402
import reporting  # noqa: E402
import runinfo  # noqa: E402
import seed_fast  # noqa: E402

#: What the benchmark needs besides nova and placement.
REQUIRED = {'MySQLdb': 'mysqlclient (the seeder)'}
DEFAULT_SERVER = 'mysql+pymysql://root@127.0.0.1:3306/'
#: Every database this benchmark makes starts with this.
PREFIX = seed_fast.DATABASE_PREFIX + 'sync_'
CELL0_UUID = '00000000-0000-0000-0000-000000000000'
#: Traits a libvirt compute node reports (a sample of nova's).
TRAITS = (
    'COMPUTE_NET_ATTACH_INTERFACE', 'COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG',
    'COMPUTE_VOLUME_ATTACH_WITH_TAG', 'COMPUTE_VOLUME_EXTEND',
    'COMPUTE_VOLUME_MULTI_ATTACH', 'COMPUTE_DEVICE_TAGGING',
    'COMPUTE_IMAGE_TYPE_QCOW2', 'COMPUTE_IMAGE_TYPE_RAW',
    'COMPUTE_TRUSTED_CERTS', 'COMPUTE_NODE', 'COMPUTE_RESCUE_BFV',
    'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42', 'COMPUTE_ACCELERATORS')
#: A non-cell aggregate 10% of the providers are in (kept by the sync).
FOREIGN = 'f0f0f0f0-0000-4000-8000-00000000a66e'
#: uwsgi's request log line: method, path, msecs, status.
REQUEST_LINE = re.compile(
    r'\] (GET|PUT|POST|DELETE|PATCH|HEAD) (\S+) => generated \d+ bytes in '
    r'(\d+) msecs \(HTTP/1\.\d (\d+)\)')
CLK_TCK = os.sysconf('SC_CLK_TCK')


def progress(text: str) -> None:
    print('[bench_sync] %s' % text, flush=True)


# CPU accounting -------------------------------------------------------


def cpu_of(pids: list[int]) -> float:
    """User + system CPU seconds of *pids* (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            with open('/proc/%d/stat' % pid) as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def server_pids(server: str) -> list[int]:
    """The pid of the MariaDB server of *server* (from its pid file),
    when it runs on this machine; else none.
    """
    import sqlalchemy as sa
    engine = sa.create_engine(server)
    try:
        with engine.connect() as conn:
            path = conn.execute(sa.text('SELECT @@pid_file')).scalar()
    finally:
        engine.dispose()
    try:
        with open(str(path)) as handle:
            return [int(handle.read().strip())]
    except (OSError, ValueError):
        return []


# Placement under uwsgi ------------------------------------------------


class PlacementUwsgi:
    """openstack-placement's WSGI app under uwsgi on 127.0.0.1.

    :param database_url: ``[placement_database] connection`` (migrated
        here with ``placement-manage db sync``).
    :param directory: where the config, ini and log go.
    :param processes: uwsgi worker processes.
    :param threads: threads per worker (1: none, as devstack).
    """

    def __init__(self, database_url: str, directory: str, processes: int,
                 threads: int = 1) -> None:
        self.database_url = database_url
        self.dir = directory
        self.processes = processes
        self.threads = threads
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log = os.path.join(directory, 'placement-uwsgi.log')

    @property
    def endpoint(self) -> str:
        return 'http://127.0.0.1:%d' % self.port

    def _write(self) -> str:
        conf = configparser.RawConfigParser()
        conf['DEFAULT'] = {'debug': 'false', 'use_stderr': 'true'}
        conf['api'] = {'auth_strategy': 'noauth2'}
        conf['placement_database'] = {'connection': self.database_url}
        with open(os.path.join(self.dir, 'placement.conf'), 'w') as handle:
            conf.write(handle)
        bindir = os.path.dirname(sys.executable)
        subprocess.run(  # noqa: S603 - placement's own tool
            [os.path.join(bindir, 'placement-manage'), '--config-file',
             os.path.join(self.dir, 'placement.conf'), 'db', 'sync'],
            check=True, capture_output=True, timeout=600)
        from nova_cellsched.demo import api as demo_api
        self.port = demo_api.free_port()
        ini = configparser.RawConfigParser()
        # As devstack's write_uwsgi_config (and the helm charts' placement
        # ini), with http-socket for its socket + apache pair.
        ini['uwsgi'] = {
            'module': 'placement.wsgi.api:application',
            'http-socket': '127.0.0.1:%d' % self.port,
            'processes': str(self.processes),
            'master': 'true', 'die-on-term': 'true',
            'exit-on-reload': 'false', 'enable-threads': 'true',
            'thunder-lock': 'true', 'buffer-size': '65535',
            'add-header': 'Connection: close', 'lazy-apps': 'true',
            'home': sys.prefix, 'need-app': 'true',
            'env': 'OS_PLACEMENT_CONFIG_DIR=%s' % self.dir,
            'logto': self.log, 'listen': '128',
        }
        if self.threads > 1:
            ini['uwsgi']['threads'] = str(self.threads)
        path = os.path.join(self.dir, 'placement-uwsgi.ini')
        with open(path, 'w') as handle:
            ini.write(handle)
        return path

    def start(self, timeout: float = 120.0) -> None:
        """Migrate, start uwsgi, return once every worker answers."""
        ini = self._write()
        uwsgi = os.path.join(os.path.dirname(sys.executable), 'uwsgi')
        self.process = subprocess.Popen(  # noqa: S603 - our uwsgi, our ini
            [uwsgi, '--ini', ini], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while self.log_text().count('WSGI app 0 (mountpoint=') < \
                self.processes:
            if self.process.poll() is not None or \
                    time.monotonic() > deadline:
                raise RuntimeError('placement under uwsgi did not start: %s'
                                   % self.log_text()[-3000:])
            time.sleep(0.1)
        status, _ = self.request('GET', '/')
        if status != 200:
            raise RuntimeError('placement answered GET / with %s' % status)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL uwsgi's session (idempotent)."""
        if self.process is not None:
            demo_api.stop_session(self.process, 20)
        self.process = None

    def worker_pids(self) -> list[int]:
        if self.process is None:
            return []
        out = subprocess.run(  # noqa: S603,S607
            ['ps', '-o', 'pid=', '--ppid', str(self.process.pid)],
            capture_output=True, text=True, check=False)
        return [int(p) for p in out.stdout.split()]

    def log_text(self) -> str:
        try:
            with open(self.log, errors='replace') as handle:
                return handle.read()
        except OSError:
            return ''

    def log_size(self) -> int:
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def requests_since(self, offset: int) -> dict[str, Any]:
        """Requests logged after byte *offset*: by method and status."""
        with open(self.log, 'rb') as handle:
            handle.seek(offset)
            text = handle.read().decode(errors='replace')
        methods: collections.Counter[str] = collections.Counter()
        statuses: collections.Counter[str] = collections.Counter()
        msecs = 0
        for match in REQUEST_LINE.finditer(text):
            methods[match.group(1)] += 1
            statuses[match.group(4)] += 1
            msecs += int(match.group(3))
        return {'by_method': dict(sorted(methods.items())),
                'by_status': dict(sorted(statuses.items())),
                'total': sum(methods.values()),
                'server_seconds': msecs / 1000.0}

    def request(self, method: str, path: str, body: Any = None
                ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(  # noqa: S310 - http://127.0.0.1
            self.endpoint + path, data=data, method=method, headers={
                'X-Auth-Token': 'admin', 'Accept': 'application/json',
                'Content-Type': 'application/json',
                'OpenStack-API-Version': 'placement 1.19'})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:  # noqa
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors='replace')


# The world ------------------------------------------------------------


def _url(server: str, name: str) -> str:
    from sqlalchemy.engine import url as sa_url
    return str(sa_url.make_url(server).set(database=name))


def node_rows(cell_name: str, count: int, first_id: int, rng: random.Random,
              service_ids: dict[str, int]) -> list[dict[str, Any]]:
    """``compute_nodes`` rows as nova's resource tracker creates them.

    The values come from a :class:`nova.objects.ComputeNode` converted
    as its ``create()`` converts them (stats, host IP, supported
    instances, PCI pools), plus the columns nova's DB API sets.
    """
    from nova import objects
    from nova.objects import fields

    rows = []
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    numa = objects.NUMATopology(cells=[
        objects.NUMACell(id=i, cpuset=set(range(i * 32, i * 32 + 32)),
                         pcpuset=set(), memory=131072, cpu_usage=0,
                         memory_usage=0, mempages=[], siblings=[],
                         pinned_cpus=set(),
                         network_metadata=objects.NetworkMetadata(
                             physnets=set(), tunneled=False))
        for i in range(2)])
    for index in range(count):
        host = '%s-compute%05d' % (cell_name, first_id + index)
        node = objects.ComputeNode(
            uuid=str(uuid_lib.UUID(int=rng.getrandbits(128), version=4)),
            host=host, hypervisor_hostname=host + '.example.org',
            vcpus=64, memory_mb=262144, local_gb=1800, vcpus_used=0,
            memory_mb_used=512, local_gb_used=0, hypervisor_type='QEMU',
            hypervisor_version=8002000, free_ram_mb=261632,
            free_disk_gb=1800, current_workload=0, running_vms=0,
            cpu_info=json.dumps({
                'arch': 'x86_64', 'model': 'Cascadelake-Server',
                'vendor': 'Intel', 'topology': {
                    'cells': 2, 'sockets': 1, 'cores': 16, 'threads': 2},
                'features': ['avx2', 'sse4.2', 'vmx', 'aes']}),
            disk_available_least=1700, host_ip='10.%d.%d.%d' % (
                rng.randrange(256), rng.randrange(256), rng.randrange(256)),
            supported_hv_specs=[objects.HVSpec(
                arch=fields.Architecture.X86_64, hv_type='kvm',
                vm_mode=fields.VMMode.HVM)],
            pci_device_pools=objects.PciDevicePoolList(objects=[]),
            stats={}, numa_topology=numa._to_json(),
            cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0,
            disk_allocation_ratio=1.0, mapped=1,
            service_id=None)
        updates = node.obj_get_changes()
        node._convert_stats_to_db_format(updates)
        node._convert_host_ip_to_db_format(updates)
        node._convert_supported_instances_to_db_format(updates)
        node._convert_pci_stats_to_db_format(updates)
        updates['host_ip'] = str(updates['host_ip'])
        updates.update(created_at=now, deleted=0)
        rows.append(updates)
        service_ids.setdefault(host, 0)
    return rows


def service_rows(hosts: list[str], first_id: int) -> list[dict[str, Any]]:
    """``services`` rows of nova-compute as ``Service.create`` writes."""
    from nova.objects import service as service_obj

    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return [{'id': first_id + i, 'uuid': str(uuid_lib.uuid4()),
             'host': host, 'binary': 'nova-compute', 'topic': 'compute',
             'report_count': 1, 'disabled': False,
             'disabled_reason': None, 'last_seen_up': now,
             'forced_down': False,
             'version': service_obj.SERVICE_VERSION, 'created_at': now,
             'updated_at': now, 'deleted': 0}
            for i, host in enumerate(hosts)]


class World:
    """The databases and placement of one run; :meth:`close` undoes all.

    :ivar cells: ``[(name, uuid, url, cell_id)]``, cell0 excluded.
    :ivar nodes: cell name -> compute node uuids (current).
    """

    def __init__(self, server: str, cells: int, providers: int,
                 processes: int, threads: int,
                 placement_driver: str = 'mysql+pymysql') -> None:
        self.server = server
        self.placement_driver = placement_driver
        self.n_cells = cells
        self.providers = providers
        self.processes = processes
        self.threads = threads
        self.prefix = '%s%dc_%d_%d' % (PREFIX, cells, providers, os.getpid())
        self.dir = tempfile.mkdtemp(prefix='ncsbench-sync-')
        self.created: list[str] = []
        self.placement: PlacementUwsgi | None = None
        self.cells: list[tuple[str, str, str, int]] = []
        self.nodes: dict[str, list[str]] = {}
        self.rng = random.Random(42)
        self.next_node = 0
        #: Providers seeded into the foreign aggregate.
        self.foreign = 0

    def _create(self, suffix: str) -> str:
        from nova_cellsched.demo import seed
        name = '%s_%s' % (self.prefix, suffix)
        self.created.append(name)
        return seed.create_database(self.server, name)

    def build(self) -> dict[str, float]:
        """Make everything; return the seconds each step took."""
        from nova_cellsched.demo import seed
        took = {}
        start = time.perf_counter()
        self.api_url = self._create('api')
        seed.apply_schema(self.api_url, 'api')
        self.cell0_url = self._create('cell0')
        seed.apply_schema(self.cell0_url, 'main')
        seed.register_cell(self.api_url, 'cell0', self.cell0_url,
                           cell_uuid=CELL0_UUID)
        took['nova schema (alembic)'] = time.perf_counter() - start
        start = time.perf_counter()
        for index in range(1, self.n_cells + 1):
            name = 'cell%d' % index
            url = self._create(name)
            seed_fast.copy_schema(self.cell0_url, url)
            cell_id, cell_uuid = seed.register_cell(self.api_url, name, url)
            self.cells.append((name, cell_uuid, url, cell_id))
        took['cell databases (schema copied)'] = time.perf_counter() - start
        start = time.perf_counter()
        per_cell = [self.providers // self.n_cells +
                    (1 if i < self.providers % self.n_cells else 0)
                    for i in range(self.n_cells)]
        for (name, _uuid, _url, _id), count in zip(self.cells, per_cell):
            self.add_nodes(name, count, providers=False)
        took['compute nodes'] = time.perf_counter() - start
        start = time.perf_counter()
        self.placement_url = self._create('placement')
        from sqlalchemy.engine import url as sa_url
        self.placement = PlacementUwsgi(str(sa_url.make_url(
            self.placement_url).set(drivername=self.placement_driver)),
            self.dir,
                                        self.processes, self.threads)
        self.placement.start()
        took['placement (migrated, started)'] = time.perf_counter() - start
        start = time.perf_counter()
        self.seed_providers([n for nodes in self.nodes.values()
                             for n in nodes], foreign_share=0.1)
        took['resource providers'] = time.perf_counter() - start
        self.nova_conf = os.path.join(self.dir, 'nova.conf')
        with open(self.nova_conf, 'w') as handle:
            handle.write(
                '[DEFAULT]\ntransport_url = fake://\n'
                '[api_database]\nconnection = %s\n'
                '[database]\nconnection = %s\n'
                '[placement]\nauth_type = admin_token\nendpoint = %s\n'
                'token = admin\n'
                % (self.api_url, self.cell0_url, self.placement.endpoint))
        return took

    def cell(self, name: str) -> tuple[str, str, str, int]:
        return next(c for c in self.cells if c[0] == name)

    def add_nodes(self, cell_name: str, count: int,
                  providers: bool = True) -> list[str]:
        """*count* new compute nodes (services, host mappings) in a cell;
        their resource providers too when *providers*.
        """
        from nova.db.api import models as api_models
        from nova.db.main import models
        import sqlalchemy as sa

        _name, _uuid, url, cell_id = self.cell(cell_name)
        rows = node_rows(cell_name, count, self.next_node, self.rng, {})
        self.next_node += count
        hosts = [r['host'] for r in rows]
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                first = int(conn.execute(sa.select(sa.func.coalesce(
                    sa.func.max(models.Service.__table__.c.id), 0))
                ).scalar_one()) + 1
                conn.execute(models.Service.__table__.insert(),
                             service_rows(hosts, first))
                conn.execute(models.ComputeNode.__table__.insert(), rows)
        finally:
            engine.dispose()
        engine = sa.create_engine(self.api_url)
        try:
            with engine.begin() as conn:
                conn.execute(api_models.HostMapping.__table__.insert(), [
                    {'cell_id': cell_id, 'host': h,
                     'created_at': rows[0]['created_at']} for h in hosts])
        finally:
            engine.dispose()
        uuids = [r['uuid'] for r in rows]
        self.nodes.setdefault(cell_name, []).extend(uuids)
        if providers:
            self.seed_providers(uuids)
        return uuids

    def move_nodes(self, count: int) -> int:
        """Move *count* nodes, spread over the cells, to the next cell.

        The row is deleted (soft, as nova does) in the old cell and a
        row with the same uuid created in the next, as when a host is
        rebuilt into another cell.
        """
        from nova.db.main import models
        import sqlalchemy as sa

        table = models.ComputeNode.__table__
        names = [c[0] for c in self.cells]
        moved = 0
        for i in range(count):
            source = names[i % len(names)]
            target = names[(i + 1) % len(names)]
            node = self.nodes[source].pop(0)
            src = sa.create_engine(self.cell(source)[2])
            dst = sa.create_engine(self.cell(target)[2])
            try:
                with src.begin() as conn:
                    row = dict(conn.execute(sa.select(table).where(
                        table.c.uuid == node, table.c.deleted == 0)
                    ).mappings().one())
                    conn.execute(table.update().where(
                        table.c.id == row['id']).values(
                            deleted=row['id'], deleted_at=row['created_at']))
                row.pop('id')
                with dst.begin() as conn:
                    conn.execute(table.insert(), [row])
            finally:
                src.dispose()
                dst.dispose()
            self.nodes[target].append(node)
            moved += 1
        return moved

    def _placement_engine(self) -> Any:
        import sqlalchemy as sa
        return sa.create_engine(self.placement_url)

    def seed_providers(self, uuids: list[str],
                       foreign_share: float = 0.0) -> None:
        """Resource providers of *uuids* as nova's resource tracker
        leaves them: created, inventory set, traits set (generation 2).
        """
        import os_resource_classes as orc
        from placement.db.sqlalchemy import models as pm
        import sqlalchemy as sa

        names = self._node_names(uuids)
        now = datetime.datetime.now(datetime.timezone.utc).replace(
            tzinfo=None)
        engine = self._placement_engine()
        rp = pm.ResourceProvider.__table__
        try:
            with engine.begin() as conn:
                traits = dict(conn.execute(sa.select(
                    pm.Trait.__table__.c.name, pm.Trait.__table__.c.id).where(
                        pm.Trait.__table__.c.name.in_(TRAITS))).all())
                if len(traits) != len(TRAITS):
                    raise RuntimeError('placement has traits %s, expected %s'
                                       % (sorted(traits), sorted(TRAITS)))
                first = conn.execute(sa.select(sa.func.coalesce(
                    sa.func.max(rp.c.id), 0))).scalar() + 1
                ids = list(range(first, first + len(uuids)))
                conn.execute(rp.insert(), [
                    {'id': i, 'uuid': u, 'name': names[u], 'generation': 2,
                     'root_provider_id': i, 'parent_provider_id': None,
                     'created_at': now, 'updated_at': now}
                    for i, u in zip(ids, uuids)])
                inventory = []
                for i in ids:
                    for rc, total, reserved, ratio in (
                            (orc.VCPU, 64, 0, 4.0),
                            (orc.MEMORY_MB, 262144, 512, 1.0),
                            (orc.DISK_GB, 1800, 0, 1.0)):
                        inventory.append({
                            'resource_provider_id': i,
                            'resource_class_id': orc.STANDARDS.index(rc),
                            'total': total, 'reserved': reserved,
                            'min_unit': 1, 'max_unit': total,
                            'step_size': 1, 'allocation_ratio': ratio,
                            'created_at': now})
                conn.execute(pm.Inventory.__table__.insert(), inventory)
                conn.execute(pm.ResourceProviderTrait.__table__.insert(), [
                    {'resource_provider_id': i, 'trait_id': t,
                     'created_at': now}
                    for i in ids for t in traits.values()])
                if foreign_share:
                    agg = pm.PlacementAggregate.__table__
                    conn.execute(agg.insert(), [{'uuid': FOREIGN,
                                                 'created_at': now}])
                    agg_id = conn.execute(sa.select(agg.c.id).where(
                        agg.c.uuid == FOREIGN)).scalar()
                    step = max(1, int(round(1 / foreign_share)))
                    conn.execute(
                        pm.ResourceProviderAggregate.__table__.insert(),
                        [{'resource_provider_id': i, 'aggregate_id': agg_id,
                          'created_at': now} for i in ids[::step]])
                    self.foreign = len(ids[::step])
        finally:
            engine.dispose()

    def _node_names(self, uuids: list[str]) -> dict[str, str]:
        from nova.db.main import models
        import sqlalchemy as sa

        table = models.ComputeNode.__table__
        wanted = set(uuids)
        names = {}
        for _name, _uuid, url, _id in self.cells:
            engine = sa.create_engine(url)
            try:
                with engine.connect() as conn:
                    for uuid, name in conn.execute(sa.select(
                            table.c.uuid, table.c.hypervisor_hostname)):
                        if uuid in wanted:
                            names[uuid] = name
            finally:
                engine.dispose()
        return names

    def reset_cell_aggregates(self) -> int:
        """Take every provider out of the cell aggregates (SQL)."""
        from placement.db.sqlalchemy import models as pm
        import sqlalchemy as sa

        agg = pm.PlacementAggregate.__table__
        rpa = pm.ResourceProviderAggregate.__table__
        engine = self._placement_engine()
        try:
            with engine.begin() as conn:
                ids = [r[0] for r in conn.execute(sa.select(agg.c.id).where(
                    agg.c.uuid.in_([c[1] for c in self.cells])))]
                if not ids:
                    return 0
                return int(conn.execute(rpa.delete().where(
                    rpa.c.aggregate_id.in_(ids))).rowcount)
        finally:
            engine.dispose()

    def membership(self) -> dict[str, set[str]]:
        """Cell aggregate uuid -> provider uuids, as placement has them."""
        from placement.db.sqlalchemy import models as pm
        import sqlalchemy as sa

        agg = pm.PlacementAggregate.__table__
        rpa = pm.ResourceProviderAggregate.__table__
        rp = pm.ResourceProvider.__table__
        engine = self._placement_engine()
        out: dict[str, set[str]] = collections.defaultdict(set)
        try:
            with engine.connect() as conn:
                for agg_uuid, rp_uuid in conn.execute(
                        sa.select(agg.c.uuid, rp.c.uuid)
                        .join(rpa, rpa.c.aggregate_id == agg.c.id)
                        .join(rp, rp.c.id == rpa.c.resource_provider_id)):
                    out[agg_uuid].add(rp_uuid)
        finally:
            engine.dispose()
        return out

    def check_in_sync(self) -> None:
        """Each cell aggregate holds exactly its cell's nodes, and the
        foreign aggregate kept its members.

        :raises RuntimeError: it does not.
        """
        have = self.membership()
        for name, uuid, _url, _id in self.cells:
            if have.get(uuid, set()) != set(self.nodes[name]):
                raise RuntimeError(
                    'cell %s: aggregate has %d providers, the cell %d nodes '
                    '(%d differ)' % (name, len(have.get(uuid, ())),
                                     len(self.nodes[name]),
                                     len(have.get(uuid, set()) ^
                                         set(self.nodes[name]))))
        if len(have.get(FOREIGN, ())) != self.foreign:
            raise RuntimeError('the foreign aggregate has %d providers, '
                               'expected %d: the sync dropped some'
                               % (len(have.get(FOREIGN, ())), self.foreign))

    def close(self) -> None:
        """Stop placement, drop the databases made, remove the temp dir."""
        try:
            if self.placement is not None:
                self.placement.stop()
        finally:
            try:
                if self.created:
                    seed_fast.drop_databases(
                        self.server, reporting.cleanup_selection(
                            seed_fast.bench_databases(self.server,
                                                      self.prefix),
                            prefix=self.prefix, made=self.created).drop,
                        progress)
            finally:
                shutil.rmtree(self.dir, True)


# The syncs ------------------------------------------------------------


class Runner:
    """Times syncs of one world, through the command and in-process."""

    def __init__(self, world: World, env: dict[str, str]) -> None:
        self.world = world
        self.env = env
        self._inproc: Any = None
        self.mariadb = server_pids(world.server)

    def _measure(self, run: Any) -> dict[str, Any]:
        """Call *run* (-> (rows, failed, client CPU s)); add the rest."""
        placement = self.world.placement
        assert placement is not None  # noqa: S101
        workers = placement.worker_pids()
        mariadb = self.mariadb
        offset = placement.log_size()
        cpu_placement = cpu_of(workers)
        cpu_mariadb = cpu_of(mariadb)
        start = time.perf_counter()
        rows, failed, cpu_client = run()
        seconds = time.perf_counter() - start
        time.sleep(0.3)  # uwsgi writes its log line after the answer
        requests = placement.requests_since(offset)
        return {'seconds': round(seconds, 3), 'changes': rows,
                'failed': failed, 'requests': requests,
                'providers_per_second': round(rows / seconds, 1)
                if rows else None,
                'cpu_seconds': {
                    'client': round(cpu_client, 2),
                    'placement': round(cpu_of(workers) - cpu_placement, 2),
                    'mariadbd': round(cpu_of(mariadb) - cpu_mariadb, 2)}}

    def cli(self, workers: int) -> dict[str, Any]:
        """``nova-cellsched --config-file nova.conf sync-aggregates``,
        with the operator's default output (a table of the changes).
        """
        command = [os.path.join(os.path.dirname(sys.executable),
                                'nova-cellsched'),
                   '--config-file', self.world.nova_conf,
                   'sync-aggregates', '--workers', str(workers)]

        def run() -> tuple[int, int, float]:
            with tempfile.TemporaryFile() as out, \
                    tempfile.TemporaryFile() as err:
                proc = subprocess.Popen(  # noqa: S603 - our command
                    command, stdout=out, stderr=err,
                    stdin=subprocess.DEVNULL, env=self.env)
                _pid, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                out.seek(0)
                err.seek(0)
                lines = out.read().decode().splitlines()
                if proc.returncode != 0:
                    raise RuntimeError('sync-aggregates exited %d: %s'
                                       % (proc.returncode,
                                          err.read().decode()[-2000:]))
            # The operator's default table: a header row, then a row
            # per change.
            rows = [line for line in lines if line.startswith('| ')][1:]
            failed = sum(1 for line in rows if ' failed' in line)
            return len(rows), failed, usage.ru_utime + usage.ru_stime
        return self._measure(run)

    def inproc(self, workers: int) -> dict[str, Any]:
        """``aggregate_sync.sync`` in this process (nova's report client)."""
        from nova_cellsched.cmd import aggregates_cmd
        from nova_cellsched.cmd import nova_setup
        from nova_cellsched.scheduler import aggregate_sync

        if self._inproc is None:
            nova_setup.load_config(['--config-file', self.world.nova_conf])
            self._inproc = aggregate_sync.Placement()

        def run() -> tuple[int, int, float]:
            before = resource.getrusage(resource.RUSAGE_SELF)
            cells = aggregates_cmd.select_cells(nova_setup.cell_mappings(),
                                                None)
            rows = aggregate_sync.sync(self._inproc, cells, workers=workers)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (after.ru_utime + after.ru_stime - before.ru_utime -
                   before.ru_stime)
            return len(rows), sum(1 for r in rows if r.failed), cpu
        return self._measure(run)

    def probe(self, workers: int, count: int) -> dict[str, Any]:
        """GET + PUT aggregates of *count* providers by a trivial client.

        Each provider joins its cell aggregate, as in a first sync; the
        cell aggregates are emptied again afterwards.
        """
        import requests

        placement = self.world.placement
        assert placement is not None  # noqa: S101
        pairs = [(node, cell_uuid) for name, cell_uuid, _u, _i in
                 self.world.cells for node in self.world.nodes[name]]
        pairs = pairs[::max(1, len(pairs) // count)][:count]
        local = threading.local()
        headers = {'X-Auth-Token': 'admin',
                   'OpenStack-API-Version': 'placement 1.19'}

        def one(pair: tuple[str, str]) -> int:
            session = getattr(local, 'session', None)
            if session is None:
                session = local.session = requests.Session()
            url = '%s/resource_providers/%s/aggregates' % (
                placement.endpoint, pair[0])
            got = session.get(url, headers=headers, timeout=60).json()
            resp = session.put(url, headers=headers, timeout=60, json={
                'aggregates': sorted(set(got['aggregates']) | {pair[1]}),
                'resource_provider_generation':
                    got['resource_provider_generation']})
            return resp.status_code

        self.world.reset_cell_aggregates()

        def run() -> tuple[int, int, float]:
            before = resource.getrusage(resource.RUSAGE_SELF)
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                codes = list(pool.map(one, pairs))
            after = resource.getrusage(resource.RUSAGE_SELF)
            return (len(codes), sum(1 for c in codes if c != 200),
                    after.ru_utime + after.ru_stime - before.ru_utime -
                    before.ru_stime)
        result = self._measure(run)
        self.world.reset_cell_aggregates()
        return result


def scenario(runner: Runner, mode: str, workers: int, moved: float
             ) -> list[dict[str, Any]]:
    """First sync, no change, and (with *moved*) a sync after changes.

    Each sync is checked (every cell aggregate holds its cell's nodes,
    the foreign aggregate kept its members) and printed when done.
    """
    world = runner.world
    sync = runner.cli if mode == 'cli' else runner.inproc
    out = []

    def timed(kind: str) -> None:
        providers = sum(len(n) for n in world.nodes.values())
        row = dict(kind=kind, providers=providers, mode=mode,
                   workers=workers, **sync(workers))
        world.check_in_sync()
        out.append(row)
        progress('%-8s workers %2d  %-16s %6.2fs  %5d changes  %s  cpu %s'
                 % (mode, workers, row['kind'], row['seconds'],
                    row['changes'], row['requests']['by_method'],
                    row['cpu_seconds']))

    world.reset_cell_aggregates()
    timed('first')
    timed('no change')
    if moved:
        providers = sum(len(n) for n in world.nodes.values())
        count = max(1, int(round(providers * moved / 2)))
        world.move_nodes(count)
        world.add_nodes(world.cells[-1][0], count)
        timed('%g%% moved/added' % (moved * 100))
    return out


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median, min and max seconds per (mode, workers, kind)."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = \
        collections.defaultdict(list)
    for run in runs:
        groups[(run['mode'], run['workers'], run['kind'])].append(run)
    out = []
    for (mode, workers, kind), group in groups.items():
        seconds = [r['seconds'] for r in group]
        median = statistics.median(seconds)
        changes = group[0]['changes']
        out.append({
            'mode': mode, 'workers': workers, 'kind': kind,
            'providers': group[0]['providers'], 'changes': changes,
            'runs': len(group), 'seconds_median': round(median, 2),
            'seconds_min': min(seconds), 'seconds_max': max(seconds),
            'seconds_each': seconds,
            'providers_per_second': round(changes / median, 1)
            if changes else None,
            'requests': group[0]['requests']['by_method'],
            'cpu_seconds': group[0]['cpu_seconds']})
    return out


def render(report: dict[str, Any]) -> str:
    """The .md next to the .json."""
    info = report['run']
    lines = ['# sync-aggregates at scale (`bench_sync.py`)', '',
             '- command: `%s`' % info['command'],
             '- commit: %s; nova %s; SQLAlchemy %s; Python %s; %s, %s '
             'CPUs; %s' % (info['commit'], info['nova'], info['sqlalchemy'],
                           info['python'], info['machine'], info['cpus'],
                           info['date']),
             '- world: %(providers)d providers in %(cells)d cells; '
             'placement %(placement)s under uwsgi, %(processes)d '
             'process(es) x %(threads)d thread(s), database driver '
             '%(driver)s; MariaDB %(mariadb)s' % report['world'], '']
    lines += ['## Syncs (median of %d; CPU of the first run; every run '
              'below)' % report['repeat'],
              '', '| mode | workers | sync | providers | changes | s median '
              '| s each | providers/s | requests | CPU s client / placement '
              '/ mariadbd |', '|---|---|---|---|---|---|---|---|---|---|']
    for row in report['summary']:
        cpu = row['cpu_seconds']
        lines.append('| %s | %d | %s | %d | %d | %.2f | %s | %s | %s | '
                     '%.1f / %.1f / %.1f |' % (
                         row['mode'], row['workers'], row['kind'],
                         row['providers'], row['changes'],
                         row['seconds_median'],
                         ', '.join('%.2f' % s for s in row['seconds_each']),
                         row['providers_per_second'] or '-',
                         ' '.join('%s %d' % kv for kv in
                                  row['requests'].items()),
                         cpu['client'], cpu['placement'], cpu['mariadbd']))
    cpus = info.get('cpus') or 1
    lines += ['', '## Every run, in order', '',
              'CPU s: client (the command\'s process, or this one), '
              'placement\'s uwsgi workers, mariadbd; floor: their sum / '
              '%d CPUs, the wall time if the machine did nothing else.'
              % cpus, '',
              '| mode | workers | sync | providers | changes | s | CPU s '
              'client / placement / mariadbd | CPU s total | floor s |',
              '|---|---|---|---|---|---|---|---|---|']
    for row in report['runs']:
        cpu = row['cpu_seconds']
        total = cpu['client'] + cpu['placement'] + cpu['mariadbd']
        lines.append('| %s | %d | %s | %d | %d | %.2f | %.1f / %.1f / %.1f '
                     '| %.1f | %.1f |' % (
                         row['mode'], row['workers'], row['kind'],
                         row['providers'], row['changes'], row['seconds'],
                         cpu['client'], cpu['placement'], cpu['mariadbd'],
                         total, total / cpus))
    if report.get('probe'):
        lines += ['', '## Placement\'s own capacity (trivial client, GET + '
                  'PUT per provider)', '',
                  '| concurrency | providers | seconds | pairs/s | requests '
                  '| CPU s client / placement / mariadbd |',
                  '|---|---|---|---|---|---|']
        for row in report['probe']:
            cpu = row['cpu_seconds']
            lines.append('| %d | %d | %.2f | %s | %s | %.1f / %.1f / %.1f |'
                         % (row['workers'], row['changes'], row['seconds'],
                            row['providers_per_second'],
                            ' '.join('%s %d' % kv for kv in
                                     row['requests']['by_method'].items()),
                            cpu['client'], cpu['placement'],
                            cpu['mariadbd']))
    if report.get('ratios'):
        lines += ['', '## Ratios', '']
        lines += ['- %s: %s' % kv for kv in report['ratios'].items()]
    lines += ['', '## Setup (not timed)', '']
    lines += ['- %s: %.1f s' % kv for kv in report['setup_seconds'].items()]
    return '\n'.join(lines) + '\n'


def ratios(summary: list[dict[str, Any]], probe: list[dict[str, Any]]
           ) -> dict[str, str]:
    """Sync rate against the trivial client's, and command vs in-process."""
    out = {}
    by = {(r['mode'], r['workers'], r['kind']): r for r in summary}
    for row in probe:
        first = by.get(('cli', row['workers'], 'first'))
        if first and row['providers_per_second']:
            out['command first sync / trivial client, %d in flight'
                % row['workers']] = '%.2f (%.0f vs %.0f providers/s)' % (
                    first['providers_per_second'] /
                    row['providers_per_second'],
                    first['providers_per_second'],
                    row['providers_per_second'])
    for (mode, workers, kind), row in sorted(by.items()):
        other = by.get(('inproc', workers, kind))
        if mode == 'cli' and other:
            out['command / in-process, %s, %d workers' % (kind, workers)] = \
                '%.2f' % (row['seconds_median'] / other['seconds_median'])
    return out


def mariadb_version(server: str) -> str:
    import sqlalchemy as sa
    engine = sa.create_engine(server)
    try:
        with engine.connect() as conn:
            return str(conn.execute(sa.text('SELECT VERSION()')).scalar())
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--server', default=DEFAULT_SERVER,
                        help='MariaDB server URL (default %(default)s)')
    parser.add_argument('--providers', type=int, default=10000)
    parser.add_argument('--cells', type=int, default=50)
    parser.add_argument('--workers', default='8,32',
                        help='comma-separated --workers values')
    parser.add_argument('--modes', default='cli,inproc',
                        help='cli (the command), inproc, or both')
    parser.add_argument('--repeat', type=int, default=2)
    parser.add_argument('--moved', type=float, default=0.01,
                        help='share of nodes moved/added before the third '
                        'sync (0: no third sync)')
    parser.add_argument('--probe', type=int, default=2000,
                        help='providers the trivial client writes per '
                        'concurrency (0: no probe)')
    parser.add_argument('--placement-processes', type=int, default=2,
                        help='uwsgi processes of placement (devstack: '
                        'API_WORKERS, 2 on this machine)')
    parser.add_argument('--placement-threads', type=int, default=1)
    parser.add_argument('--placement-driver', default='mysql+pymysql',
                        choices=('mysql+pymysql', 'mysql+mysqldb'),
                        help='placement\'s [placement_database] connection '
                        'driver (devstack and most deployments: '
                        '%(default)s)')
    parser.add_argument('--quick', action='store_true',
                        help='200 providers, 5 cells, one repetition')
    reporting.add_output_arguments(parser, name=None)
    args = parser.parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, reporting.text_writer(render))
    if args.quick:
        args.providers, args.cells, args.repeat = 200, 5, 1
        args.probe = min(args.probe, 100)
        if args.workers == '8,32':
            args.workers = '8'
    reporting.require('bench_sync.py', REQUIRED)
    workers = [int(w) for w in args.workers.split(',')]
    modes = args.modes.split(',')
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in [TOP, env.get('PYTHONPATH', '')] if p)

    # Taken now: the commit measured, whatever changes meanwhile.
    info = runinfo.run_info('bench_sync.py', argv)
    with reporting.cleanly() as stack:
        world = World(args.server, args.cells, args.providers,
                      args.placement_processes, args.placement_threads,
                      args.placement_driver)
        stack.callback(world.close)
        progress('building %d providers in %d cells (%s_*, files in %s)'
                 % (args.providers, args.cells, world.prefix, world.dir))
        setup = world.build()
        progress('built: %s' % ', '.join('%s %.1fs' % kv
                                          for kv in setup.items()))
        runner = Runner(world, env)
        probe = []
        for w in workers if args.probe else ():
            row = runner.probe(w, args.probe)
            row['workers'] = w
            probe.append(row)
            progress('probe    workers %2d  %d pairs in %.2fs: %s pairs/s, '
                     'cpu %s' % (w, row['changes'], row['seconds'],
                                 row['providers_per_second'],
                                 row['cpu_seconds']))
        runs = []
        for _rep in range(args.repeat):
            for w in workers:
                for mode in modes:
                    runs += scenario(runner, mode, w, args.moved)
        summary = summarize(runs)
        report = {
            'run': info,
            'world': {'providers': args.providers, 'cells': args.cells,
                      'processes': args.placement_processes,
                      'threads': args.placement_threads,
                      'driver': args.placement_driver,
                      'placement': _placement_version(),
                      'mariadb': mariadb_version(args.server)},
            'repeat': args.repeat, 'setup_seconds': {
                k: round(v, 1) for k, v in setup.items()},
            'summary': summary, 'probe': probe,
            'ratios': ratios(summary, probe), 'runs': runs}
        print(render(report))
        reporting.write_results(
            report, name=args.name or ('sync_quick' if args.quick
                                       else 'sync'),
            out=args.out, json_path=args.json, render=render, indent=1,
            sort_keys=False)
        return 0


def _placement_version() -> str | None:
    from importlib import metadata
    try:
        return metadata.version('openstack-placement')
    except metadata.PackageNotFoundError:
        return None


if __name__ == '__main__':
    sys.exit(main())
