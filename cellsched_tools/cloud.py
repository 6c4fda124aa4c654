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

"""A multi-cell nova on this machine, every service its own OS process.

``tools/cloud up|status|down`` (this module's :func:`main`) starts, shows
and stops a cells v2 nova from the installed nova, as operators run one:

* MariaDB (127.0.0.1:3306, root): databases ``<prefix>_api``,
  ``<prefix>_cell0``, ``<prefix>_cell1`` ... and placement's and
  glance's, made by the services' own tools (``nova-manage api_db sync``,
  ``db sync --local_cell``, ``cell_v2 map_cell0`` and ``create_cell``,
  ``placement-manage db sync``, ``glance-manage db_sync``);
* RabbitMQ (127.0.0.1:5672, guest): one vhost for the API level and one
  per cell (cell0 has none), as nova's cells v2 layout recommends;
* placement, glance (file store) and nova-api under uwsgi, nova-api with
  the ``cellsched`` paste filter and the bounded entry point;
* the super conductor and one conductor per cell, nova-scheduler with
  ``ProjectCellFilter``, the placement pre-filter and the periodic
  aggregate sync, and ``nova-compute`` processes with nova's
  ``fake.FakeDriver`` spread over the cells;
* a neutron stand-in (its own process): nova-api's server views and
  nova-compute ask neutron about ports even for servers booted with
  ``networks: none``; it answers every ``GET`` with an empty list.

**Authentication: none that deserves the name, on loopback only.**
Keystone is not part of this harness. nova-api runs nova's pipelines
with :func:`nova_cellsched.demo.api.noauth_filter_factory` where
keystone's ``authtoken`` stands (the token ``user:project`` names the
caller, admin unless roles are given), placement runs its ``noauth2``
strategy and glance its ``keystone`` pipeline with the same stand-in
(:func:`write_glance_paste`: its own keystone-less pipeline gives a
context that glance's policies refuse). Every
service binds 127.0.0.1 only: any local user of this machine is an admin
of this cloud while it runs, and ``down`` stops all of it.

Every service runs in its own session (process group) with its own log
under the state directory (``--dir``, default ``./cellsched-cloud``),
started from the virtualenv's console scripts with ``--config-file``
(the WSGI services by ``uwsgi --ini``), and ``up`` returns only when each
one answers: the HTTP services on their port, each RPC service as a
consumer of its queue in RabbitMQ and as an ``up`` service in
``GET /os-services``, every compute node mapped (``nova-manage cell_v2
discover_hosts``) and in its cell's placement aggregate. ``state.json``
and ``run/*.pid`` let ``status`` and ``down`` work from another shell;
``down`` stops every process group it recorded (each pid checked against
its start time first), drops the databases and vhosts and removes the
state directory. A failed ``up`` does the same before it exits.
"""

import argparse
from collections.abc import Callable, Iterable, Iterator, Sequence
import concurrent.futures
import configparser
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any
import urllib.error
import urllib.request
import uuid
import warnings

from nova_cellsched.demo import api as demo_api

#: The project ``cells_projects`` dedicates the last cell to.
DEDICATED = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'
#: The MariaDB server of the functional tests (tools/databases).
MYSQL = os.environ.get('NOVA_CELLSCHED_CLOUD_MYSQL_URL',
                       'mysql+pymysql://root@127.0.0.1:3306/')
#: MariaDB connections the cloud may open: devstack's ``max_connections``
#: (its lib/databases/mysql). At rest a 3-cell cloud with nova-api at
#: 2 x 8 threads holds about 140 (every service's engine pools: 5 per
#: database and process), and MariaDB's default is 151: at a frozen
#: cell's thaw every service reconnects at once and nova-compute's calls
#: through the conductor failed with ``Too many connections``.
MAX_CONNECTIONS = 1024
#: Debian's RabbitMQ with its default guest user, on loopback.
RABBIT_HOST = '127.0.0.1'
RABBIT_PORT = 5672
RABBIT_USER = 'guest'
RABBIT_PASSWORD = 'guest'  # noqa: S105 - Debian's loopback-only default
RABBITMQCTL = os.environ.get('NOVA_CELLSCHED_RABBITMQCTL',
                             '/usr/sbin/rabbitmqctl')
RABBITMQ_SERVER = '/usr/sbin/rabbitmq-server'
BIN = os.path.dirname(sys.executable)
#: How nova-scheduler schedules: nova's filters, + ProjectCellFilter,
#: + the placement pre-filter (and the periodic aggregate sync).
SCHEDULING = ('nova', 'filter', 'prefilter')
FLAVOR = 'cloud.tiny'
IMAGE = 'cloud-image'
STATE = 'state.json'
#: How long ``up`` takes with the defaults on the 2-core machine (the
#: guide's "A real cloud on one machine" says when it was measured).
UP_TAKES = '2 minutes'
#: This module, as ``python -m`` runs it (``__name__`` is then
#: ``__main__``).
MODULE = 'cellsched_tools.cloud'

#: The checkout this module runs from (its children import it too).
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def frozen(url: str) -> Iterator[None]:
    """Every table of the MariaDB database at *url* write-locked.

    One session write-locks every table (``LOCK TABLES ... WRITE``):
    every other session's query on them waits on MariaDB's metadata
    lock until the block ends, as behind a stuck DDL or a hung storage
    volume. Nothing is lost: the waiting queries run when the tables are
    unlocked, also when the block raises.
    """
    import sqlalchemy as sa
    from sqlalchemy import pool

    engine = sa.create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            tables = [str(row[0]) for row in
                      conn.exec_driver_sql('SHOW TABLES').all()]
            conn.exec_driver_sql('LOCK TABLES ' + ', '.join(
                '`%s` WRITE' % table for table in tables))
            try:
                yield
            finally:
                conn.exec_driver_sql('UNLOCK TABLES')
    finally:
        engine.dispose()


class CloudError(Exception):
    """The cloud could not be started, shown or stopped as asked."""


@dataclasses.dataclass
class Service:
    """One OS process group of the cloud, as ``state.json`` records it."""

    name: str
    argv: list[str]
    log: str
    pid: int = 0
    started: float = 0.0
    #: The RPC topic and vhost it consumes ('' for the HTTP services).
    topic: str = ''
    vhost: str = ''
    #: ``(binary, host)`` in ``GET /os-services`` ('' for the others).
    binary: str = ''
    host: str = ''
    port: int = 0
    #: The process's own environment variables beyond the caller's.
    env: dict[str, str] = dataclasses.field(default_factory=dict)


def _ini(path: str, sections: dict[str, dict[str, str]]) -> str:
    conf = configparser.RawConfigParser()
    conf.optionxform = str  # type: ignore[assignment,method-assign]
    for section, values in sections.items():
        if section != 'DEFAULT':
            conf.add_section(section)
        for key, value in values.items():
            conf.set(section, key, value)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        conf.write(f)
    return path


def _http(method: str, url: str, body: Any = None,
          headers: dict[str, str] | None = None, timeout: float = 30.0,
          raw: bytes | None = None) -> tuple[int, Any]:
    """(status, JSON body or None) of one request; 0 when unreachable."""
    data = raw if raw is not None else (
        None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(  # noqa: S310 - loopback services
        url, data=data, method=method, headers=dict(
            {'Accept': 'application/json',
             'Content-Type': 'application/json'}, **(headers or {})))
    try:
        with urllib.request.urlopen(  # noqa: S310 - loopback services
                request, timeout=timeout) as resp:
            payload = resp.read()
            try:
                return resp.status, json.loads(payload) if payload else None
            except ValueError:
                return resp.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (urllib.error.URLError, OSError):
        return 0, None


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, port)) == 0


def _run(argv: Sequence[str], timeout: float = 300.0,
         log: str | None = None) -> str:
    """Run a command; its stdout. Its output is kept in *log* if given.

    :raises CloudError: it failed (the message ends with its output).
    """
    try:
        done = subprocess.run(  # noqa: S603 - our own commands
            list(argv), capture_output=True, text=True, timeout=timeout,
            check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise CloudError('%s did not finish in %.0f s'
                         % (' '.join(argv[:3]), timeout)) from exc
    if log:
        with open(log, 'a') as f:
            f.write('$ %s\n%s%s' % (' '.join(argv), done.stdout,
                                     done.stderr))
    if done.returncode != 0:
        raise CloudError('%s exited %d: %s' % (
            ' '.join(os.path.basename(a) for a in argv[:4]),
            done.returncode, (done.stderr or done.stdout)[-1500:]))
    return done.stdout


def _parallel(calls: Iterable[Callable[[], Any]]) -> list[Any]:
    """Run the *calls* in threads; their results, the first error raised.
    """
    calls = list(calls)
    if not calls:
        return []
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


def nova_default_filters() -> list[str]:
    """nova's default ``[filter_scheduler] enabled_filters``."""
    from nova.conf import scheduler
    for opt in scheduler.filter_scheduler_opts:
        if opt.name == 'enabled_filters':
            return list(opt.default)
    raise CloudError("nova.conf.scheduler has no enabled_filters option: "
                     "expected nova 34's [filter_scheduler] options")


def write_glance_paste(directory: str) -> str:
    """glance's paste file, nova-api's noauth stand-in for ``authtoken``.

    glance's own keystone-less pipeline (``unauthenticated-context``)
    makes a context without roles or project, which glance's policies
    (admin or project member, project scope) refuse for creating an
    image. Like nova-api here, glance runs its ``keystone`` pipeline with
    :func:`nova_cellsched.demo.api.noauth_filter_factory` in place of
    keystone's ``authtoken``: the token ``user:project`` names the caller
    and glance's own ``context`` middleware reads it. Returns the path.

    :raises CloudError: glance's file has no ``authtoken`` in its
        ``keystone`` pipeline.
    """
    parser = configparser.RawConfigParser()
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    source = os.path.join(sys.prefix, 'etc', 'glance',
                          'glance-api-paste.ini')
    with open(source) as f:
        parser.read_file(f)
    section = 'composite:api'
    words = (parser.get(section, 'keystone').split()
             if parser.has_option(section, 'keystone') else [])
    if 'authtoken' not in words:
        raise CloudError('expected authtoken in the keystone pipeline of '
                         '[%s] in %s, got %r' % (section, source, words))
    words[words.index('authtoken')] = demo_api.NOAUTH
    parser.set(section, 'keystone', ' '.join(words))
    parser.add_section('filter:' + demo_api.NOAUTH)
    parser.set('filter:' + demo_api.NOAUTH, 'paste.filter_factory',
               'nova_cellsched.demo.api:noauth_filter_factory')
    path = os.path.join(directory, 'glance-api-paste.ini')
    with open(path, 'w') as f:
        parser.write(f)
    return path


# RabbitMQ

def rabbitmq_missing() -> str | None:
    """Why RabbitMQ cannot be used here, or None (it answers on 5672)."""
    if _port_open(RABBIT_HOST, RABBIT_PORT):
        if not os.access(RABBITMQCTL, os.X_OK):
            return ('RabbitMQ answers on %s:%d but %s is missing: the '
                    'harness makes its vhosts with rabbitmqctl on this '
                    'machine' % (RABBIT_HOST, RABBIT_PORT, RABBITMQCTL))
        return None
    return ('RabbitMQ does not answer on %s:%d (tools/cloud up installs '
            'rabbitmq-server with apt-get and starts it when run as root)'
            % (RABBIT_HOST, RABBIT_PORT))


def ensure_rabbitmq(say: Callable[[str], None], wait: float = 60.0
                    ) -> None:
    """RabbitMQ answering on 127.0.0.1:5672: installed, started if not.

    Debian's ``rabbitmq-server`` (apt-get, as ``tools/databases`` installs
    MariaDB), started once and left running, like the database servers:
    ``down`` removes only the vhosts it made.

    :raises CloudError: it cannot be installed or did not start.
    """
    if rabbitmq_missing() is None:
        return
    if not os.access(RABBITMQ_SERVER, os.X_OK):
        if shutil.which('apt-get') is None or os.geteuid() != 0:
            raise CloudError(
                'rabbitmq-server is not installed: install it as root '
                '(apt-get install rabbitmq-server) and run tools/cloud up '
                'again')
        say('installing rabbitmq-server (apt-get)')
        _run(['apt-get', 'update', '-qq'], timeout=600)
        env_run = ['env', 'DEBIAN_FRONTEND=noninteractive', 'apt-get',
                   'install', '-y', '-qq', 'rabbitmq-server']
        _run(env_run, timeout=900)
    if rabbitmq_missing() is not None:
        say('starting rabbitmq-server')
        _run(['start-stop-daemon', '--start', '--oknodo', '--background',
              '--exec', RABBITMQ_SERVER], timeout=60)
        deadline = time.monotonic() + wait
        while rabbitmq_missing() is not None:
            if time.monotonic() > deadline:
                raise CloudError('rabbitmq-server did not answer on '
                                 '%s:%d within %.0f s' % (
                                     RABBIT_HOST, RABBIT_PORT, wait))
            time.sleep(1)


def transport_url(vhost: str) -> str:
    """oslo.messaging's URL of *vhost* (holds the password: not shown)."""
    return 'rabbit://%s:%s@%s:%d/%s' % (RABBIT_USER, RABBIT_PASSWORD,
                                        RABBIT_HOST, RABBIT_PORT, vhost)


def queue_consumers(vhost: str) -> dict[str, int]:
    """Queue name -> consumer count in *vhost* (rabbitmqctl)."""
    out = _run([RABBITMQCTL, '-q', 'list_queues', '-p', vhost, 'name',
                'consumers', '--no-table-headers'], timeout=60)
    counts = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


# Processes

def _process(pid: int) -> Any:
    """psutil's Process of *pid*, or None when there is none."""
    import psutil
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def group_members(pgid: int) -> list[Any]:
    """psutil Processes (not zombies) of process group *pgid*."""
    import psutil
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and (
                    proc.status() != psutil.STATUS_ZOMBIE):
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def _ours(service: Service) -> bool:
    """The group leader of *service* is still the process we started.

    A pid is not reused while its process group has members, so a group
    whose leader is gone is still ours; a leader with another start time
    means the pid was reused after the whole group ended.
    """
    import psutil
    proc = _process(service.pid)
    if proc is None:
        return True
    try:
        return bool(abs(proc.create_time() - service.started) < 1.0)
    except psutil.Error:  # gone meanwhile
        return True


def alive(service: Service) -> bool:
    """Some process of *service*'s group is running (not a zombie)."""
    return bool(service.pid) and _ours(service) and bool(
        group_members(service.pid))


def stop_groups(services: Sequence[Service], timeout: float = 30.0
                ) -> list[str]:
    """SIGTERM every group, then SIGKILL what is left after *timeout*.

    Returns the names of the services some of whose processes had to be
    killed. Only groups whose leader is still ours are signalled.
    """
    targets = [s for s in services if s.pid and _ours(s)]
    for service in targets:
        try:
            os.killpg(service.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    left = list(targets)
    while left and time.monotonic() < deadline:
        left = [s for s in left if group_members(s.pid)]
        if left:
            time.sleep(0.2)
    killed = []
    for service in left:
        killed.append(service.name)
        try:
            os.killpg(service.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
            group_members(s.pid) for s in left):
        time.sleep(0.1)
    return killed


def usage(service: Service) -> tuple[float, float, float, int]:
    """(RSS MiB, PSS MiB, CPU seconds, processes) of *service*'s group."""
    import psutil
    rss = pss = cpu = 0.0
    count = 0
    for proc in group_members(service.pid) if alive(service) else []:
        try:
            info = proc.memory_full_info()
            times = proc.cpu_times()
        except psutil.Error:  # gone meanwhile: not counted
            info = times = None
        if info is None or times is None:
            continue
        rss += info.rss
        pss += getattr(info, 'pss', info.rss)
        cpu += times.user + times.system + times.children_user + (
            times.children_system)
        count += 1
    return rss / 2**20, pss / 2**20, cpu, count


# The cloud

class Cloud:
    """The cloud of one state directory.

    :param directory: the state directory (configs, logs, pid files,
        ``state.json``); created by :meth:`up`, removed by :meth:`down`.
    :param cells: cells besides cell0.
    :param computes: nova-compute processes, spread over the cells.
    :param scheduling: one of :data:`SCHEDULING`.
    :param sync_interval: ``[cellsched] aggregate_sync_interval``.
    :param api_workers: uwsgi processes of nova-api.
    :param api_threads: uwsgi threads in each nova-api process.
    :param quota_from_placement: nova's ``[quota]
        count_usage_from_placement`` in every service: usage counted from
        the API database and placement, not by asking every cell.
    :param api_cellsched: ``[cellsched]`` options of nova-api (e.g.
        ``{'list_cell_timeout': '5'}``), over the defaults.
    :param scheduler_cellsched: ``[cellsched]`` options of nova-scheduler
        (e.g. ``{'scheduler_cell_timeout': '5'}``), over the harness's.
    :param debug: nova's ``debug`` in every service.
    :param profiler: an osprofiler connection string (``redis://...``):
        tracing on in every nova service and nova-api (off: None).
    :param say: where progress lines go.
    """

    def __init__(self, directory: str, cells: int = 3, computes: int = 10,
                 scheduling: str = 'prefilter', sync_interval: int = 30,
                 api_workers: int = 2, api_threads: int = 1,
                 quota_from_placement: bool = False,
                 api_cellsched: dict[str, str] | None = None,
                 scheduler_cellsched: dict[str, str] | None = None,
                 debug: bool = False,
                 profiler: str | None = None,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.dir = os.path.abspath(directory)
        self.cells = cells
        self.computes = computes
        self.scheduling = scheduling
        self.sync_interval = sync_interval
        self.api_workers = api_workers
        self.api_threads = api_threads
        self.quota_from_placement = quota_from_placement
        self.api_cellsched = dict(api_cellsched or {})
        self.scheduler_cellsched = dict(scheduler_cellsched or {})
        self.debug = debug
        self.profiler = profiler
        self.say = say
        self.state: dict[str, Any] = {}
        self.services: dict[str, Service] = {}

    # State on disk.

    @property
    def state_file(self) -> str:
        return os.path.join(self.dir, STATE)

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def save(self) -> None:
        self.state['services'] = {
            n: dataclasses.asdict(s) for n, s in self.services.items()}
        tmp = self.state_file + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(self.state, f, indent=1, sort_keys=True)
        os.replace(tmp, self.state_file)

    def load(self) -> bool:
        """Read ``state.json``; False when there is no cloud here."""
        try:
            with open(self.state_file) as f:
                self.state = json.load(f)
        except FileNotFoundError:
            return False
        except ValueError as exc:
            raise CloudError('%s is not a cloud state file (%s): remove '
                             'it by hand' % (self.state_file, exc)) from exc
        self.services = {n: Service(**s) for n, s in
                         self.state.get('services', {}).items()}
        for key in ('cells', 'computes', 'scheduling', 'sync_interval',
                    'api_workers', 'api_threads', 'quota_from_placement',
                    'api_cellsched', 'scheduler_cellsched', 'debug',
                    'profiler'):
            if key in self.state:
                setattr(self, key, self.state[key])
        return True

    def _max_connections(self, value: int | None = None) -> int:
        """The MariaDB server's ``max_connections`` (set first: *value*)."""
        import sqlalchemy as sa
        from sqlalchemy import pool as sa_pool
        engine = sa.create_engine(MYSQL, poolclass=sa_pool.NullPool)
        try:
            with engine.connect() as conn:
                if value is not None:
                    conn.exec_driver_sql('SET GLOBAL max_connections = %d'
                                         % value)
                return int(conn.exec_driver_sql(
                    'SELECT @@GLOBAL.max_connections').scalar_one())
        finally:
            engine.dispose()

    # Names.

    @property
    def prefix(self) -> str:
        return str(self.state['prefix'])

    def cell_names(self) -> list[str]:
        return ['cell%d' % i for i in range(1, self.cells + 1)]

    def database_url(self, part: str) -> str:
        return '%s%s_%s' % (MYSQL, self.prefix, part)

    def vhost(self, part: str) -> str:
        return '%s-%s' % (self.prefix, part)

    def compute_hosts(self) -> dict[str, str]:
        """Compute host name -> its cell: round-robin over the cells, then
        those :meth:`add_compute` started.
        """
        names = self.cell_names()
        hosts = {'%s-compute%d' % (names[i % len(names)], i + 1):
                 names[i % len(names)] for i in range(self.computes)}
        hosts.update(self.state.get('added_computes', {}))
        return hosts

    def base_url(self, name: str) -> str:
        return 'http://127.0.0.1:%d' % self.services[name].port

    @property
    def compute_url(self) -> str:
        """nova-api's compute endpoint (``.../v2.1``)."""
        return self.base_url('nova-api') + '/v2.1'

    @property
    def image_url(self) -> str:
        return self.base_url('glance-api')

    # Configuration.

    def _common(self, name: str, host: str, vhost: str | None
                ) -> dict[str, dict[str, str]]:
        state_path = self.path('state', name)
        os.makedirs(state_path, exist_ok=True)
        conf = {
            'DEFAULT': {
                'host': host, 'my_ip': '127.0.0.1',
                'state_path': state_path,
                'debug': str(self.debug).lower(), 'use_stderr': 'true',
                'transport_url': (transport_url(vhost) if vhost
                                  else 'none:///'),
            },
            'oslo_concurrency': {'lock_path': self.path('lock')},
            'oslo_messaging_notifications': {'driver': 'noop'},
            'placement': {'auth_type': 'admin_token',
                          'endpoint': self.base_url('placement'),
                          'token': 'admin', 'region_name': 'RegionOne'},
            # A boot storm of 200 from four projects is past nova's
            # default quotas (10 instances, 20 cores a project): the
            # POSTs beyond them fail with 403. Unlimited here, as a
            # cloud that takes storms sets its projects' quotas.
            'quota': {'instances': '-1', 'cores': '-1', 'ram': '-1',
                      'count_usage_from_placement': str(
                          self.quota_from_placement).lower()},
            'glance': {'endpoint_override': self.image_url},
            'neutron': {'endpoint_override': self.base_url('neutron'),
                        'auth_type': 'admin_token',
                        'endpoint': self.base_url('neutron'),
                        'token': demo_api.TOKEN},
        }
        if self.profiler:
            conf['profiler'] = {
                'enabled': 'true', 'trace_sqlalchemy': 'true',
                'hmac_keys': 'cellsched-cloud',
                'connection_string': self.profiler}
        return conf

    def _scheduler_sections(self) -> dict[str, dict[str, str]]:
        filters = nova_default_filters()
        if self.scheduling != 'nova':
            filters.append('ProjectCellFilter')
        names = self.cell_names()
        return {
            'filter_scheduler': {
                'available_filters': 'nova.scheduler.filters.all_filters',
                'enabled_filters': ','.join(filters),
            },
            'cellsched': {
                'cells_default': ','.join(names[:-1]),
                'cells_projects': '%s:%s' % (names[-1], DEDICATED),
                'placement_prefilter': str(
                    self.scheduling == 'prefilter').lower(),
                'aggregate_sync_interval': str(
                    self.sync_interval if self.scheduling == 'prefilter'
                    else -1),
            },
        }

    def write_scheduler_conf(self, cellsched: dict[str, str] | None = None
                             ) -> str:
        """nova-scheduler's nova.conf for :attr:`scheduling`.

        *cellsched*: ``[cellsched]`` options over the harness's own and
        :attr:`scheduler_cellsched`.
        """
        conf = self._common('nova-scheduler', 'scheduler', self.vhost('api'))
        conf['api_database'] = {'connection': self.database_url('api')}
        conf['database'] = {'connection': self.database_url('cell0')}
        conf.update(self._scheduler_sections())
        conf['cellsched'].update(self.scheduler_cellsched)
        conf['cellsched'].update(cellsched or {})
        # ProjectCellFilter is found through a second available_filters
        # line: configparser keeps one value, oslo.config reads a
        # MultiStrOpt from repeated lines, so the file is patched below.
        path = _ini(self.path('etc', 'nova', 'nova-scheduler.conf'), conf)
        if self.scheduling != 'nova':
            with open(path) as f:
                text = f.read()
            text = text.replace(
                'available_filters = nova.scheduler.filters.all_filters\n',
                'available_filters = nova.scheduler.filters.all_filters\n'
                'available_filters = nova_cellsched.filters.'
                'ProjectCellFilter\n')
            with open(path, 'w') as f:
                f.write(text)
        return path

    def _write_nova_configs(self) -> None:
        """Every nova service's configuration (no other service's)."""
        etc = self.path('etc')
        names = self.cell_names()
        # nova-manage: the API database and cell0, the API vhost.
        manage = self._common('nova-manage', 'manage', self.vhost('api'))
        manage['api_database'] = {'connection': self.database_url('api')}
        manage['database'] = {'connection': self.database_url('cell0')}
        _ini(os.path.join(etc, 'nova', 'nova-manage.conf'), manage)
        for cell in names:
            conf = self._common('nova-manage-' + cell, 'manage',
                                self.vhost(cell))
            conf['database'] = {'connection': self.database_url(cell)}
            _ini(os.path.join(etc, 'nova', 'nova-manage-%s.conf' % cell),
                 conf)
        # nova-api: its own directory, as nova's WSGI app reads
        # OS_NOVA_CONFIG_DIR/{api-paste.ini,nova.conf}.
        api_dir = os.path.join(etc, 'nova-api')
        os.makedirs(api_dir, exist_ok=True)
        demo_api.write_paste(api_dir, with_filter=True)
        api = self._common('nova-api', 'api', self.vhost('api'))
        api['api'] = {'auth_strategy': 'keystone'}
        api['api_database'] = {'connection': self.database_url('api')}
        api['database'] = {'connection': self.database_url('cell0')}
        api['wsgi'] = {'api_paste_config': os.path.join(
            api_dir, 'api-paste.ini')}
        if self.api_cellsched:
            api['cellsched'] = dict(self.api_cellsched)
        _ini(os.path.join(api_dir, 'nova.conf'), api)
        # The super conductor: API database, API vhost.
        sup = self._common('nova-conductor-super', 'conductor-super',
                           self.vhost('api'))
        sup['api_database'] = {'connection': self.database_url('api')}
        sup['database'] = {'connection': self.database_url('cell0')}
        sup['conductor'] = {'workers': '1'}
        _ini(os.path.join(etc, 'nova', 'nova-conductor-super.conf'), sup)
        # A conductor per cell: its database and vhost, no API database
        # (devstack's superconductor layout: no up-calls).
        for cell in names:
            conf = self._common('nova-conductor-' + cell,
                                'conductor-' + cell, self.vhost(cell))
            conf['database'] = {'connection': self.database_url(cell)}
            conf['conductor'] = {'workers': '1'}
            _ini(os.path.join(etc, 'nova', 'nova-conductor-%s.conf' % cell),
                 conf)
        self.write_scheduler_conf()
        for host, cell in self.compute_hosts().items():
            self._write_compute_conf(host, cell)

    def _write_configs(self) -> None:
        etc = self.path('etc')
        self._write_nova_configs()
        # placement
        placement_dir = os.path.join(etc, 'placement')
        _ini(os.path.join(placement_dir, 'placement.conf'), {
            'DEFAULT': {'debug': str(self.debug).lower()},
            'api': {'auth_strategy': 'noauth2'},
            'placement_database': {
                'connection': self.database_url('placement')},
        })
        # glance: file store, no keystone (its default paste flavor).
        glance_dir = os.path.join(etc, 'glance')
        os.makedirs(glance_dir, exist_ok=True)
        glance_paste = write_glance_paste(glance_dir)
        store = self.path('glance')
        _ini(os.path.join(glance_dir, 'glance-api.conf'), {
            'DEFAULT': {
                'debug': str(self.debug).lower(),
                'enabled_backends': 'fs:file',
                'worker_self_reference_url': self.image_url,
            },
            'database': {'connection': self.database_url('glance')},
            'glance_store': {'default_backend': 'fs'},
            'fs': {'filesystem_store_datadir': os.path.join(store,
                                                            'images')},
            'os_glance_staging_store': {
                'filesystem_store_datadir': os.path.join(store, 'staging')},
            'os_glance_tasks_store': {
                'filesystem_store_datadir': os.path.join(store, 'tasks')},
            'paste_deploy': {'config_file': glance_paste,
                             'flavor': 'keystone'},
            'oslo_concurrency': {'lock_path': self.path('lock')},
        })

    def _write_compute_conf(self, host: str, cell: str) -> str:
        name = 'nova-compute-' + host
        conf = self._common(name, host, self.vhost(cell))
        conf['DEFAULT']['compute_driver'] = 'fake.FakeDriver'
        conf['DEFAULT']['instances_path'] = self.path('state', name,
                                                      'instances')
        return _ini(self.path('etc', 'nova', name + '.conf'), conf)

    # Services.

    def _uwsgi(self, name: str, module: str, env: tuple[str, str],
               processes: int, threads: int = 1) -> Service:
        ini = configparser.RawConfigParser()
        log = self.path('log', name + '.log')
        ini['uwsgi'] = demo_api.uwsgi_options(
            module, self.services[name].port, processes, threads, env,
            self.path('run', name + '.uwsgi.pid'), log)
        path = self.path('etc', name + '.uwsgi.ini')
        with open(path, 'w') as f:
            ini.write(f)
        service = self.services[name]
        service.argv = [os.path.join(BIN, 'uwsgi'), '--ini', path]
        service.log = log
        return service

    def _nova(self, name: str, script: str, conf: str, topic: str,
              vhost: str, binary: str, host: str) -> Service:
        service = Service(
            name=name, argv=[os.path.join(BIN, script), '--config-file',
                             conf],
            log=self.path('log', name + '.log'), topic=topic, vhost=vhost,
            binary=binary, host=host)
        self.services[name] = service
        return service

    def _plan(self) -> None:
        """Every service of the cloud, not started yet."""
        for name in ('placement', 'glance-api', 'nova-api', 'neutron'):
            self.services[name] = Service(name=name, argv=[], log='',
                                          port=demo_api.free_port())
        self._uwsgi('placement', 'placement.wsgi.api:application',
                    ('OS_PLACEMENT_CONFIG_DIR', self.path('etc',
                                                          'placement')),
                    processes=2)
        self._uwsgi('glance-api', 'glance.wsgi.api:application',
                    ('OS_GLANCE_CONFIG_DIR', self.path('etc', 'glance')),
                    processes=1)
        self._uwsgi('nova-api', demo_api.BOUNDED_MODULE,
                    ('OS_NOVA_CONFIG_DIR', self.path('etc', 'nova-api')),
                    processes=self.api_workers, threads=self.api_threads)
        # The demo's noauth filter loads only beside the paste file the
        # harness wrote (demo_api.noauth_filter_factory): say where.
        for name, directory in (('glance-api', 'glance'),
                                ('nova-api', 'nova-api')):
            self.services[name].env[demo_api.DEMO_PASTE_DIR_ENV] = (
                self.path('etc', directory))
        neutron = self.services['neutron']
        neutron.argv = [sys.executable, '-m', MODULE, 'neutron-stand-in',
                        '--port', str(neutron.port)]
        neutron.log = self.path('log', 'neutron.log')
        etc = self.path('etc', 'nova')
        api_vhost = self.vhost('api')
        self._nova('nova-conductor-super', 'nova-conductor',
                   os.path.join(etc, 'nova-conductor-super.conf'),
                   'conductor', api_vhost, 'nova-conductor',
                   'conductor-super')
        for cell in self.cell_names():
            self._nova('nova-conductor-' + cell, 'nova-conductor',
                       os.path.join(etc, 'nova-conductor-%s.conf' % cell),
                       'conductor', self.vhost(cell), 'nova-conductor',
                       'conductor-' + cell)
        self._nova('nova-scheduler', 'nova-scheduler',
                   os.path.join(etc, 'nova-scheduler.conf'), 'scheduler',
                   api_vhost, 'nova-scheduler', 'scheduler')
        for host, cell in self.compute_hosts().items():
            name = 'nova-compute-' + host
            self._nova(name, 'nova-compute',
                       os.path.join(etc, name + '.conf'), 'compute.' + host,
                       self.vhost(cell), 'nova-compute', host)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # This package (a checkout, or site-packages) before the venv's.
        env['PYTHONPATH'] = os.pathsep.join(
            p for p in dict.fromkeys([demo_api.PACKAGE_ROOT, CHECKOUT,
                                      env.get('PYTHONPATH', '')])
            if p)
        for name in ('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'OS_CLOUD',
                     'OS_NOVA_CONFIG_DIR'):
            env.pop(name, None)
        return env

    def spawn(self, service: Service) -> None:
        """Start *service* in a session of its own; record its pid."""
        import psutil
        os.makedirs(os.path.dirname(service.log), exist_ok=True)
        env = self._env()
        env.update(service.env)
        with open(service.log, 'ab') as log:
            process = subprocess.Popen(  # noqa: S603 - our services
                service.argv, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                cwd=self.dir, env=env)
        service.pid = process.pid
        try:
            service.started = psutil.Process(process.pid).create_time()
        except psutil.NoSuchProcess:
            service.started = time.time()
        with open(self.path('run', service.name + '.pid'), 'w') as f:
            f.write('%d\n' % process.pid)
        self.save()

    def log_tail(self, service: Service, chars: int = 2000) -> str:
        try:
            with open(service.log, errors='replace') as f:
                return f.read()[-chars:]
        except OSError:
            return ''

    def _check_alive(self, services: Iterable[Service]) -> None:
        for service in services:
            if not alive(service):
                raise CloudError('%s exited (log %s): %s' % (
                    service.name, service.log, self.log_tail(service)))

    def _wait(self, what: str, ready: Callable[[], bool],
              services: Iterable[Service], timeout: float) -> None:
        services = list(services)
        deadline = time.monotonic() + timeout
        while not ready():
            self._check_alive(services)
            if time.monotonic() > deadline:
                raise CloudError('%s: not ready within %.0f s (logs in %s)'
                                 % (what, timeout, self.path('log')))
            time.sleep(0.5)

    # Requests to the cloud.

    def nova(self, method: str, path: str, body: Any = None,
             token: str = demo_api.TOKEN, version: str = '2.1',
             timeout: float = 60.0) -> tuple[int, Any]:
        """*method* nova-api's ``/v2.1`` *path*; (status, JSON)."""
        return _http(method, self.compute_url + path, body, {
            'X-Auth-Token': token,
            'OpenStack-API-Version': 'compute %s' % version},
            timeout=timeout)

    def placement(self, method: str, path: str, body: Any = None,
                  version: str = '1.39') -> tuple[int, Any]:
        return _http(method, self.base_url('placement') + path, body, {
            'X-Auth-Token': 'admin',
            'OpenStack-API-Version': 'placement %s' % version})

    def manage(self, *args: str, conf: str = 'nova-manage.conf',
               timeout: float = 300.0) -> str:
        """``nova-manage --config-file etc/nova/<conf> <args>``."""
        return _run([os.path.join(BIN, 'nova-manage'), '--config-file',
                     self.path('etc', 'nova', conf), *args],
                    timeout=timeout, log=self.path('log', 'manage.log'))

    def cell_uuids(self) -> dict[str, str]:
        """Cell name -> uuid, as nova-manage mapped them."""
        import sqlalchemy as sa
        engine = sa.create_engine(self.database_url('api'))
        try:
            with engine.connect() as conn:
                rows = conn.execute(sa.text(
                    'SELECT name, uuid FROM cell_mappings')).all()
        finally:
            engine.dispose()
        return {str(name): str(cell) for name, cell in rows}

    # up

    def up(self) -> dict[str, float]:
        """Start the cloud; the seconds each phase took.

        :raises CloudError: something did not start (everything started
            is stopped and dropped first, as :meth:`down` does).
        """
        if os.path.exists(self.state_file):
            raise CloudError('a cloud is recorded in %s already: '
                             'tools/cloud down first' % self.dir)
        problem = demo_api.uwsgi_missing()
        if problem:
            raise CloudError(problem)
        if not _port_open('127.0.0.1', 3306):
            raise CloudError('MariaDB does not answer on 127.0.0.1:3306: '
                             'run tools/databases (as root) first')
        ensure_rabbitmq(self.say)
        for sub in ('etc', 'log', 'run', 'state', 'lock', 'glance'):
            os.makedirs(self.path(sub), exist_ok=True)
        self.state = {
            'prefix': 'ncs_cloud_%s' % uuid.uuid4().hex[:8],
            'cells': self.cells, 'computes': self.computes,
            'scheduling': self.scheduling,
            'sync_interval': self.sync_interval,
            'api_workers': self.api_workers,
            'api_threads': self.api_threads,
            'quota_from_placement': self.quota_from_placement,
            'api_cellsched': self.api_cellsched,
            'scheduler_cellsched': self.scheduler_cellsched,
            'debug': self.debug,
            'profiler': self.profiler, 'databases': [], 'vhosts': [],
            'created': time.time(),
        }
        self.save()
        try:
            return self._up()
        except BaseException:
            self.say('up failed: stopping and dropping what it made')
            self.down(keep_logs=True)
            raise

    def _up(self) -> dict[str, float]:
        from nova_cellsched.demo import seed
        times: dict[str, float] = {}
        start = last = time.monotonic()

        def phase(name: str) -> None:
            nonlocal last
            now = time.monotonic()
            times[name] = round(now - last, 1)
            last = now
            self.say('%-28s %5.1f s' % (name, times[name]))

        names = self.cell_names()
        before = self._max_connections()
        if before < MAX_CONNECTIONS:
            # As devstack configures it; put back by down.
            self.state['max_connections_before'] = before
            self.save()
            self._max_connections(MAX_CONNECTIONS)
            self.say('MariaDB max_connections %d -> %d (devstack\'s) '
                     'until down' % (before, MAX_CONNECTIONS))
        parts = ['api', 'cell0', *names, 'placement', 'glance']
        for part in parts:
            self.state['databases'].append('%s_%s' % (self.prefix, part))
            self.save()
            seed.create_database(MYSQL, '%s_%s' % (self.prefix, part))
        vhosts = [self.vhost(p) for p in ['api', *names]]
        self.state['vhosts'] = vhosts
        self.save()

        def add_vhost(vhost: str) -> None:
            _run([RABBITMQCTL, '-q', 'add_vhost', vhost])
            _run([RABBITMQCTL, '-q', 'set_permissions', '-p', vhost,
                  RABBIT_USER, '.*', '.*', '.*'])
        _parallel(functools.partial(add_vhost, v) for v in vhosts)
        phase('databases and vhosts')

        self._plan()
        self._write_configs()
        self.save()
        etc = self.path('etc')

        def api_and_mappings() -> None:
            # The mappings need the API schema only: made while the
            # cell databases are migrated.
            self.manage('api_db', 'sync')
            _parallel([functools.partial(
                self.manage, 'cell_v2', 'map_cell0',
                '--database_connection', self.database_url('cell0'))] + [
                functools.partial(
                    self.manage, 'cell_v2', 'create_cell', '--name', c,
                    '--database_connection', self.database_url(c),
                    '--transport-url', transport_url(self.vhost(c)))
                for c in names])

        syncs: list[Callable[[], Any]] = [
            api_and_mappings,
            functools.partial(self.manage, 'db', 'sync', '--local_cell'),
            functools.partial(
                _run, [os.path.join(BIN, 'placement-manage'),
                       '--config-file',
                       os.path.join(etc, 'placement', 'placement.conf'),
                       'db', 'sync'], log=self.path('log', 'manage.log')),
            functools.partial(
                _run, [os.path.join(BIN, 'glance-manage'), '--config-file',
                       os.path.join(etc, 'glance', 'glance-api.conf'),
                       'db_sync'], log=self.path('log', 'manage.log')),
        ]
        syncs += [functools.partial(
            self.manage, 'db', 'sync', '--local_cell',
            conf='nova-manage-%s.conf' % c) for c in names]
        _parallel(syncs)
        self.state['cell_uuids'] = self.cell_uuids()
        self.save()
        phase('schemas and cell mappings')

        http = [self.services[n] for n in ('placement', 'glance-api',
                                           'neutron')]
        for service in http:
            self.spawn(service)
        self._wait('placement, glance, neutron stand-in', lambda: all(
            _http('GET', self.base_url(s.name) + path, timeout=5)[0] == 200
            for s, path in zip(http, ('/', '/versions', '/v2.0/ports'))),
            http, 120)
        phase('placement, glance')
        rpc = [s for s in self.services.values() if s.topic]
        api = self.services['nova-api']
        for service in [api, *rpc]:
            self.spawn(service)
        everything = list(self.services.values())
        self._wait('nova-api', lambda: self.nova('GET', '/flavors',
                                                 timeout=10)[0] == 200,
                   everything, 300)
        phase('nova-api answers')
        self.wait_rpc(rpc, 300)
        phase('nova services up')
        self.discover_hosts()
        phase('hosts discovered')
        self._create_flavor_and_image()
        if self.scheduling == 'prefilter':
            self.sync_aggregates()
        phase('flavor, image, aggregates')
        self.state['up_seconds'] = round(time.monotonic() - start, 1)
        self.state['up_phases'] = times
        self.save()
        return times

    def wait_rpc(self, services: Sequence[Service], timeout: float) -> None:
        """Each RPC service consumes its queue and is up in os-services."""
        by_vhost: dict[str, list[Service]] = {}
        for service in services:
            by_vhost.setdefault(service.vhost, []).append(service)

        def consuming() -> bool:
            counts = _parallel(functools.partial(queue_consumers, v)
                               for v in by_vhost)
            return all(counts[i].get(s.topic, 0) > 0
                       for i, vhost in enumerate(by_vhost)
                       for s in by_vhost[vhost])

        everything = list(self.services.values())
        self._wait('RPC services consuming their queues', consuming,
                   everything, timeout)
        wanted = {(s.binary, s.host) for s in services}

        def listed_up() -> bool:
            status, body = self.nova('GET', '/os-services')
            if status != 200:
                return False
            up = {(s['binary'], s['host']) for s in body['services']
                  if s['state'] == 'up'}
            return wanted <= up

        self._wait('services up in GET /os-services', listed_up, everything,
                   timeout)

    def discover_hosts(self, timeout: float = 120.0) -> None:
        """Map the compute hosts (nova-manage) and wait for placement."""
        hosts = set(self.compute_hosts())

        def providers() -> bool:
            status, body = self.placement('GET', '/resource_providers')
            return status == 200 and hosts <= {
                rp['name'] for rp in body['resource_providers']}

        self._wait('compute nodes in placement', providers,
                   self.services.values(), timeout)
        self.manage('cell_v2', 'discover_hosts')

        def hypervisors() -> bool:
            status, body = self.nova('GET', '/os-hypervisors')
            return status == 200 and hosts <= {
                h['hypervisor_hostname'] for h in body['hypervisors']}

        self._wait('hypervisors mapped', hypervisors,
                   self.services.values(), timeout)

    def sync_aggregates(self) -> str:
        """``nova-cellsched sync-aggregates`` with the scheduler's conf."""
        return _run([os.path.join(BIN, 'nova-cellsched'), '--config-file',
                     self.path('etc', 'nova', 'nova-scheduler.conf'),
                     'sync-aggregates'],
                    log=self.path('log', 'manage.log'))

    def _create_flavor_and_image(self) -> None:
        status, body = self.nova('POST', '/flavors', {'flavor': {
            'name': FLAVOR, 'ram': 128, 'vcpus': 1, 'disk': 1}})
        if status != 200:
            raise CloudError('POST /flavors answered %s: %s' % (status,
                                                                 body))
        self.state['flavor'] = body['flavor']['id']
        token = {'X-Auth-Token': demo_api.TOKEN}
        status, body = _http('POST', self.image_url + '/v2/images', {
            'name': IMAGE, 'disk_format': 'raw',
            'container_format': 'bare', 'visibility': 'public'},
            headers=token)
        if status != 201:
            raise CloudError('glance POST /v2/images answered %s' % status)
        image = body['id']
        status, _body = _http(
            'PUT', '%s/v2/images/%s/file' % (self.image_url, image),
            raw=b'\0' * 1024,
            headers=dict(token, **{
                'Content-Type': 'application/octet-stream'}))
        if status != 204:
            raise CloudError('glance image upload answered %s' % status)
        self.state['image'] = image
        self.save()

    # Changes while it runs.

    def restart(self, name: str, timeout: float = 180.0) -> None:
        """Stop service *name* and start it again; wait until it serves."""
        service = self.services[name]
        stop_groups([service])
        self.spawn(service)
        if service.topic:
            # Its old service record stays "up" for a while: wait for the
            # new process to consume its queue again.
            self.wait_rpc([service], timeout)

    def set_scheduling(self, scheduling: str) -> None:
        """Rewrite nova-scheduler's conf for *scheduling*; restart it.

        enabled_filters is read once, at start: a restart, as operators
        do. The pre-filter's cell aggregates are synced first.
        """
        if scheduling not in SCHEDULING:
            raise CloudError('expected one of %s, got %r' % (
                ', '.join(SCHEDULING), scheduling))
        self.scheduling = scheduling
        self.state['scheduling'] = scheduling
        self.write_scheduler_conf()
        if scheduling == 'prefilter':
            self.sync_aggregates()
        self.restart('nova-scheduler')
        self.save()

    def add_compute(self, cell: str, timeout: float = 180.0) -> str:
        """Start one more nova-compute in *cell*, as an operator adds one.

        Its service is up and its host mapped (``nova-manage cell_v2
        discover_hosts``) when this returns; joining the cell's placement
        aggregate is left to nova-scheduler's periodic sync
        (``[cellsched] aggregate_sync_interval``). Returns its host name;
        :meth:`down` stops it with the rest.
        """
        if cell not in self.cell_names():
            raise CloudError('expected one of %s, got %r' % (
                ', '.join(self.cell_names()), cell))
        added = self.state.setdefault('added_computes', {})
        host = '%s-compute%d' % (cell, self.computes + len(added) + 1)
        added[host] = cell
        conf = self._write_compute_conf(host, cell)
        service = self._nova('nova-compute-' + host, 'nova-compute', conf,
                             'compute.' + host, self.vhost(cell),
                             'nova-compute', host)
        self.spawn(service)
        self.wait_rpc([service], timeout)
        self.discover_hosts(timeout)
        return host

    def wait_in_cell_aggregate(self, host: str,
                               timeout: float | None = None) -> float:
        """Wait until *host*'s node is in its cell's placement aggregate.

        Only nova-scheduler's periodic sync puts it there in this cloud
        (nothing else writes the cell aggregates). Returns the seconds
        waited; the default *timeout* is three sync intervals and a
        minute.
        """
        aggregate = self.state['cell_uuids'][self.compute_hosts()[host]]
        status, body = self.placement('GET',
                                      '/resource_providers?name=' + host)
        if status != 200 or not body['resource_providers']:
            raise CloudError('%s has no resource provider in placement'
                             % host)
        provider = body['resource_providers'][0]['uuid']

        def joined() -> bool:
            status, body = self.placement(
                'GET', '/resource_providers/%s/aggregates' % provider)
            return status == 200 and aggregate in body['aggregates']

        start = time.monotonic()
        if timeout is None:
            timeout = 3 * max(self.sync_interval, 0) + 60
        self._wait('%s in its cell aggregate' % host, joined,
                   [self.services['nova-scheduler']], timeout)
        return time.monotonic() - start

    def set_compute_status(self, hosts: Iterable[str], status: str) -> None:
        """``PUT /os-services/{id}`` (2.53): *hosts*' nova-compute services
        ``enabled`` or ``disabled``, as an admin does.
        """
        hosts = set(hosts)
        code, body = self.nova('GET', '/os-services?binary=nova-compute',
                               version='2.53')
        if code != 200:
            raise CloudError('GET /os-services answered %s' % code)
        for service in body['services']:
            if service['host'] in hosts:
                code, _body = self.nova(
                    'PUT', '/os-services/' + service['id'],
                    {'status': status}, version='2.53')
                if code != 200:
                    raise CloudError('PUT /os-services/%s answered %s'
                                     % (service['id'], code))

    @contextlib.contextmanager
    def frozen_cell(self, cell: str) -> Iterator[None]:
        """Cell *cell*'s database frozen for the block (:func:`frozen`).

        The server and the other cells' databases answer as before.
        """
        with frozen(self.database_url(cell)):
            yield

    def sighup_scheduler(self, cellsched: dict[str, str],
                         timeout: float = 120.0) -> None:
        """Rewrite nova-scheduler's ``[cellsched]``, SIGHUP it, wait.

        Returns when the new mapping is logged (``[cellsched] options
        changed``, as an operator checks it) and every worker serves it:
        with nova 34's service launcher (cotyledon) the parent process
        re-reads the files, logs the change once and starts new workers,
        which inherit it (``Starting scheduler node``); where each worker
        re-reads the files itself, each logs it.
        """
        service = self.services['nova-scheduler']
        marker = '[cellsched] options changed'
        started = 'Starting scheduler node'
        text = self.log_tail(service, 10**9)
        before, started_before = text.count(marker), text.count(started)
        workers = max(1, usage(service)[3] - 1)
        self.write_scheduler_conf(cellsched)
        os.kill(service.pid, signal.SIGHUP)

        def reloaded() -> bool:
            text = self.log_tail(service, 10**9)
            logged = text.count(marker) - before
            restarted = text.count(started) - started_before
            return logged >= workers or (logged >= 1 and
                                         restarted >= workers)

        self._wait('nova-scheduler reloaded after SIGHUP', reloaded,
                   [service], timeout)

    # status and down

    def status(self) -> list[dict[str, Any]]:
        """One row per service: name, pid, running, RSS/PSS, CPU, log."""
        rows = []
        for service in self.services.values():
            rss, pss, cpu, count = usage(service)
            rows.append({'service': service.name, 'pid': service.pid,
                         'running': count > 0, 'processes': count,
                         'rss_mib': round(rss, 1), 'pss_mib': round(pss, 1),
                         'cpu_s': round(cpu, 1), 'log': service.log})
        return rows

    def down(self, keep_logs: bool = False) -> list[str]:
        """Stop every service, drop databases and vhosts, remove the dir.

        Returns the problems met (each also said); nothing raised, so
        that everything else is still cleaned. With *keep_logs* the
        ``log`` directory stays (after a failed ``up``).
        """
        from nova_cellsched.demo import seed
        problems = []
        killed = stop_groups(list(self.services.values()))
        if killed:
            self.say('killed (did not stop on SIGTERM): %s'
                     % ', '.join(killed))
        for name in self.state.get('databases', []):
            try:
                seed.drop_database(MYSQL + name)
            except Exception as exc:  # noqa: BLE001 - go on cleaning
                problems.append('database %s: %s' % (name, exc))
        before = self.state.get('max_connections_before')
        if before is not None:
            try:
                # Unless something else changed it since.
                if self._max_connections() == MAX_CONNECTIONS:
                    self._max_connections(int(before))
            except Exception as exc:  # noqa: BLE001 - go on cleaning
                problems.append('max_connections not set back to %s: %s'
                                % (before, exc))
        vhosts = self.state.get('vhosts', [])
        if vhosts and rabbitmq_missing() is None:
            for error in _parallel(functools.partial(self._delete_vhost, v)
                                   for v in vhosts):
                if error:
                    problems.append(error)
        elif vhosts:
            problems.append('vhosts %s not deleted: %s' % (
                ', '.join(vhosts), rabbitmq_missing()))
        for problem in problems:
            self.say('problem: ' + problem)
        if keep_logs:
            for sub in os.listdir(self.dir):
                if sub != 'log':
                    target = self.path(sub)
                    if os.path.isdir(target):
                        shutil.rmtree(target, True)
                    else:
                        os.unlink(target)
        else:
            shutil.rmtree(self.dir, True)
        return problems

    def _delete_vhost(self, vhost: str) -> str | None:
        try:
            _run([RABBITMQCTL, '-q', 'delete_vhost', vhost])
        except CloudError as exc:
            if 'does not exist' in str(exc) or 'no_such_vhost' in str(exc):
                return None
            return 'vhost %s: %s' % (vhost, exc)
        return None

    def leftovers(self) -> list[str]:
        """What of this cloud still exists: processes, databases, vhosts.
        """
        from nova_cellsched.demo import seed
        found = ['process group %d (%s)' % (s.pid, s.name)
                 for s in self.services.values() if alive(s)]
        found += [url.rsplit('/', 1)[-1] for url in
                  seed.list_databases(MYSQL, self.prefix + '_')]
        out = _run([RABBITMQCTL, '-q', 'list_vhosts', '--no-table-headers'])
        found += ['vhost ' + v for v in out.split()
                  if v.startswith(self.prefix + '-')]
        if os.path.exists(self.dir):
            found.append('directory ' + self.dir)
        return found


# The neutron stand-in's process.

def serve_neutron(port: int) -> None:
    """:class:`demo_api.NeutronStandIn` on *port*, until SIGTERM."""
    import threading

    stand_in = demo_api.NeutronStandIn(port)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stopped.set())
    stand_in.start()
    try:
        while not stopped.wait(3600):
            pass
    finally:
        stand_in.stop()


# The command line.

def _print_status(cloud: Cloud) -> None:
    rows = cloud.status()
    running = sum(1 for r in rows if r['running'])
    print('cloud %s in %s: %d of %d services running (scheduling: %s)'
          % (cloud.prefix, cloud.dir, running, len(rows), cloud.scheduling))
    print('%-30s %7s %5s %9s %9s %8s' % ('service', 'pid', 'procs',
                                         'RSS MiB', 'PSS MiB', 'CPU s'))
    for r in rows:
        print('%-30s %7d %5d %9.1f %9.1f %8.1f%s' % (
            r['service'], r['pid'], r['processes'], r['rss_mib'],
            r['pss_mib'], r['cpu_s'], '' if r['running'] else '  STOPPED'))
    print('%-30s %7s %5d %9.1f %9.1f %8.1f' % (
        'total', '', sum(r['processes'] for r in rows),
        sum(r['rss_mib'] for r in rows), sum(r['pss_mib'] for r in rows),
        sum(r['cpu_s'] for r in rows)))
    if 'nova-api' in cloud.services:
        print('compute API: %s (token admin:admin, or user:project; no '
              'keystone, loopback only)' % cloud.compute_url)
        print('logs: %s' % cloud.path('log'))


#: What ``up`` changes on the machine besides its state directory, said
#: by ``tools/cloud --help`` and ``tools/cloud up --help``.
MACHINE_CHANGES = (
    'What up changes on this machine: it raises MariaDB\'s global '
    'max_connections to %d (SET GLOBAL, for every client of the server) '
    'when it is lower, until down puts the old value back; it installs '
    'rabbitmq-server with apt-get when it is missing (as root) and starts '
    'it when it does not answer, and RabbitMQ is left running after down, '
    'like MariaDB; it creates MariaDB databases ncs_cloud_<run>_* and '
    'RabbitMQ vhosts ncs_cloud_<run>-*, which down drops. Guide: '
    'doc/source/contributor/index.rst, "A real cloud on one machine".'
    % MAX_CONNECTIONS)


def _options(parser: argparse.ArgumentParser, flag: str, service: str,
             given: list[str]) -> dict[str, str]:
    """``--FLAG NAME=VALUE`` as a dict; a bad one is exit 2."""
    options = {}
    for item in given:
        name, sep, value = item.partition('=')
        if not sep or not name.strip():
            parser.error('expected --%s NAME=VALUE (a [cellsched] option '
                         'of %s), got %r' % (flag, service, item))
        options[name.strip()] = value.strip()
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """``tools/cloud up|status|down``; the exit code."""
    parser = argparse.ArgumentParser(
        prog='tools/cloud', description='A multi-cell nova on this '
        'machine: every service its own process (loopback only, no '
        'keystone).', epilog=MACHINE_CHANGES)
    parser.add_argument('--dir', default=os.environ.get(
        'NOVA_CELLSCHED_CLOUD_DIR', './cellsched-cloud'),
        help='State directory: configs, logs, pid files (default '
             './cellsched-cloud, or $NOVA_CELLSCHED_CLOUD_DIR).')
    # The metavar names the commands for users: the neutron stand-in,
    # which up starts, is left out of the help (a subcommand added
    # without help= is not listed).
    sub = parser.add_subparsers(dest='command', required=True,
                                metavar='{up,status,down}')
    up = sub.add_parser('up', help='Start the cloud; return when it serves.',
                        description='Start the cloud; return when it '
                        'serves (about %s on 2 cores).' % UP_TAKES,
                        epilog=MACHINE_CHANGES)
    up.add_argument('--cells', type=int, default=3,
                    help='Cells besides cell0 (default 3; the last is '
                         'dedicated to project %s).' % DEDICATED)
    up.add_argument('--computes', type=int, default=10,
                    help='nova-compute processes (default 10).')
    up.add_argument('--scheduling', choices=SCHEDULING, default='prefilter',
                    help="nova's filters, + ProjectCellFilter, or + the "
                         'placement pre-filter (default).')
    up.add_argument('--sync-interval', type=int, default=30,
                    help='[cellsched] aggregate_sync_interval (default 30).')
    up.add_argument('--api-workers', type=int, default=2,
                    help='uwsgi processes of nova-api (default 2).')
    up.add_argument('--api-threads', type=int, default=1,
                    help='uwsgi threads in each nova-api process (default '
                         '1; nova 33 and newer run native threads).')
    up.add_argument('--quota-from-placement', action='store_true',
                    help="nova's [quota] count_usage_from_placement: usage "
                         'counted from placement, no cell asked.')
    up.add_argument('--api-option', action='append', default=[],
                    metavar='NAME=VALUE', dest='api_options',
                    help="A [cellsched] option of nova-api (e.g. "
                         'list_cell_timeout=5); repeat for more.')
    up.add_argument('--scheduler-option', action='append', default=[],
                    metavar='NAME=VALUE', dest='scheduler_options',
                    help='A [cellsched] option of nova-scheduler (e.g. '
                         'scheduler_cell_timeout=5); repeat for more.')
    up.add_argument('--debug', action='store_true',
                    help="nova's debug logging in every service.")
    up.add_argument('--profiler', metavar='CONNECTION',
                    help='osprofiler connection string (e.g. '
                         'redis://127.0.0.1:6379): tracing on.')
    sub.add_parser('status', help='Show each service and its resources.')
    sub.add_parser('down', help='Stop everything, drop what up made.')
    neutron = sub.add_parser('neutron-stand-in')
    neutron.add_argument('--port', type=int, required=True)
    args = parser.parse_args(argv)
    # futurist (under nova's database code) imports eventlet when it is
    # installed, and eventlet warns on import: not this command's news.
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')

    def say(line: str) -> None:
        print('tools/cloud: %s' % line, flush=True)

    if args.command == 'neutron-stand-in':
        serve_neutron(args.port)
        return 0
    try:
        if args.command == 'up':
            if args.cells < 1 or args.computes < args.cells:
                parser.error('expected at least one cell and one compute '
                             'per cell, got --cells %d --computes %d'
                             % (args.cells, args.computes))
            cloud = Cloud(args.dir, cells=args.cells,
                          computes=args.computes,
                          scheduling=args.scheduling,
                          sync_interval=args.sync_interval,
                          api_workers=args.api_workers,
                          api_threads=args.api_threads,
                          quota_from_placement=args.quota_from_placement,
                          api_cellsched=_options(
                              parser, 'api-option', 'nova-api',
                              args.api_options),
                          scheduler_cellsched=_options(
                              parser, 'scheduler-option', 'nova-scheduler',
                              args.scheduler_options),
                          debug=args.debug,
                          profiler=args.profiler, say=say)
            cloud.up()
            say('up in %.1f s' % cloud.state['up_seconds'])
            _print_status(cloud)
            return 0
        cloud = Cloud(args.dir, say=say)
        if not cloud.load():
            say('no cloud in %s' % cloud.dir)
            return 1 if args.command == 'status' else 0
        if args.command == 'status':
            _print_status(cloud)
            return 0
        problems = cloud.down()
        say('down: %s' % ('stopped and dropped everything' if not problems
                          else '%d problem(s), see above' % len(problems)))
        return 1 if problems else 0
    except CloudError as exc:
        say('error: %s' % exc)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == '__main__':
    sys.exit(main())
