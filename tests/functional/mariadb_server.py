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

"""Private MariaDB servers that tests may kill, freeze and restart.

:class:`MariaDBServer` runs its own ``mariadbd`` (own datadir in a temp
dir, own port on 127.0.0.1), so a cell database can fail for real while
the shared server and the other cells keep serving. The process is
SIGKILLed (:meth:`~MariaDBServer.kill`), SIGSTOPped
(:meth:`~MariaDBServer.freeze`), SIGCONTed (:meth:`~MariaDBServer.thaw`)
and restarted on the same datadir and port
(:meth:`~MariaDBServer.restart`). Cleanup always resumes and stops it and
removes its files; an ``atexit`` hook does the same for servers a crashed
test could not clean up.

:func:`build_world` puts nova's API database and cell databases on such
servers (nova's schema is migrated once per process and then cloned, so
ten cells cost seconds), registers the cell mappings and seeds instances;
:func:`use_world` points nova's API database at it for one test.
"""

import atexit
from collections.abc import Mapping, Sequence
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any
import urllib.parse
import uuid as uuid_lib

import fixtures
from nova.db.api import api as api_db_api
from nova import objects
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import test_fixtures as db_fixtures
from oslotest import base
import pymysql
import sqlalchemy as sa

from nova_cellsched import cells as cells_mod
from nova_cellsched.demo import api as demo_api
from nova_cellsched.demo import seed
from nova_cellsched.records import query as instance_query

MARIADBD = os.environ.get('NOVA_CELLSCHED_TEST_MARIADBD', '/usr/sbin/mariadbd')
INSTALL_DB = os.environ.get('NOVA_CELLSCHED_TEST_MARIADB_INSTALL_DB',
                            '/usr/bin/mariadb-install-db')

#: Small buffers and no durability beyond a process crash: starts in
#: about a second and survives SIGKILL (flush at commit = 2 writes the
#: log to the OS at every commit).
SERVER_OPTIONS = (
    '--innodb-buffer-pool-size=32M', '--innodb-log-file-size=8M',
    '--innodb-flush-log-at-trx-commit=2', '--skip-log-bin',
    '--performance-schema=OFF', '--skip-name-resolve',
    '--max-connections=1000', '--character-set-server=utf8mb4',
    '--collation-server=utf8mb4_general_ci',
)

_LIVE: 'set[MariaDBServer]' = set()
_LIVE_LOCK = threading.Lock()


def unavailable() -> str | None:
    """Why private servers cannot run here, or None."""
    for path in (MARIADBD, INSTALL_DB):
        if not os.access(path, os.X_OK):
            return '%s is not installed' % path
    return None


#: A TCP port on 127.0.0.1 that nothing uses right now, below the
#: kernel's ephemeral range (so a killed server can restart on it).
free_port = demo_api.free_port


class ServerError(Exception):
    """The private server did not start or stop as asked."""


class MariaDBServer(fixtures.Fixture):
    """One private ``mariadbd``; root has no password.

    :param name: a label for messages and the temp dir.
    :param start_timeout: seconds to wait for the server to answer.
    """

    def __init__(self, name: str = 'cells',
                 start_timeout: float = 60.0) -> None:
        super().__init__()
        self.name = name
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.frozen = False

    # Life cycle

    def _setUp(self) -> None:
        problem = unavailable()
        if problem:
            raise ServerError(problem)
        # tmpfs when there is one: DDL and commits cost no fsync.
        base = '/dev/shm' if os.access('/dev/shm', os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix='ncs-mariadb-%s-' % self.name,
                                    dir=base)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.datadir = os.path.join(self.dir, 'data')
        self.socket = os.path.join(self.dir, 'mariadb.sock')
        self.log = os.path.join(self.dir, 'error.log')
        self.port = free_port()
        done = subprocess.run(
            [INSTALL_DB, '--no-defaults', '--user=root',
             '--datadir=%s' % self.datadir, '--tmpdir=%s' % self.dir,
             '--auth-root-authentication-method=normal', '--skip-test-db',
             '--innodb-buffer-pool-size=32M', '--innodb-log-file-size=8M',
             '--skip-log-bin', '--skip-name-resolve'],
            capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise ServerError('mariadb-install-db failed (%d): %s'
                              % (done.returncode, done.stderr[-2000:]))
        self.addCleanup(self.stop)
        for attempt in range(3):
            try:
                self.start()
                return
            except ServerError:
                # Another test may have taken the port meanwhile.
                if attempt == 2:
                    raise
                self.port = free_port()

    def _command(self) -> list[str]:
        return [MARIADBD, '--no-defaults', '--user=root',
                '--datadir=%s' % self.datadir, '--socket=%s' % self.socket,
                '--tmpdir=%s' % self.dir,
                '--pid-file=%s' % os.path.join(self.dir, 'mariadbd.pid'),
                '--port=%d' % self.port, '--bind-address=127.0.0.1',
                '--skip-networking=0', '--log-error=%s' % self.log,
                *SERVER_OPTIONS]

    def start(self) -> None:
        """Start mariadbd and wait (bounded) until it answers."""
        if self.running:
            raise ServerError('%s is already running' % self.name)
        # Own session: a signal meant for the test runner never reaches it.
        self.process = subprocess.Popen(
            self._command(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.frozen = False
        with _LIVE_LOCK:
            _LIVE.add(self)
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError('mariadbd %s exited with %s: %s' % (
                    self.name, self.process.returncode, self.log_tail()))
            try:
                self.query('SELECT 1', connect_timeout=1)
                return
            except pymysql.err.MySQLError as exc:
                last = exc
                time.sleep(0.05)
        self.stop()
        raise ServerError('mariadbd %s did not answer within %.0fs (%s): %s'
                          % (self.name, self.start_timeout, last,
                             self.log_tail()))

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the server vanishes as in a crash."""
        self._signal(signal.SIGKILL)
        self._wait(10)

    def freeze(self) -> None:
        """SIGSTOP: connections stay open, nothing is answered.

        Returns once every thread of the server is stopped: a stop is
        delivered asynchronously, and on a loaded machine a query sent
        right after the signal could otherwise still be answered.
        """
        self._signal(signal.SIGSTOP)
        self.frozen = True
        deadline = time.monotonic() + 10
        while not self._all_threads_stopped():
            if time.monotonic() > deadline:
                raise RuntimeError('mariadbd %s did not stop after SIGSTOP'
                                   % self.process.pid)
            time.sleep(0.01)

    def _all_threads_stopped(self) -> bool:
        """True when every thread in /proc is stopped (state T)."""
        assert self.process is not None
        task_dir = '/proc/%d/task' % self.process.pid
        try:
            tasks = os.listdir(task_dir)
            states = []
            for task in tasks:
                with open(os.path.join(task_dir, task, 'stat')) as handle:
                    # pid (comm) state ...: comm may hold spaces.
                    states.append(handle.read().rsplit(')', 1)[1].split()[0])
        except FileNotFoundError:
            return True  # it is gone: nothing answers either
        return all(state in ('T', 't') for state in states)

    def thaw(self) -> None:
        """SIGCONT after :meth:`freeze`."""
        self._signal(signal.SIGCONT)
        self.frozen = False

    def restart(self) -> None:
        """Stop (cleanly if it runs) and start again: same data, port."""
        self.stop()
        self.start()

    def stop(self) -> None:
        """Resume, terminate, and SIGKILL if that takes too long."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            if not self._wait(30):
                self._signal(signal.SIGKILL)
                self._wait(10)
        self.frozen = False
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def _signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    def _wait(self, seconds: float) -> bool:
        assert self.process is not None
        try:
            self.process.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def log_tail(self, chars: int = 2000) -> str:
        try:
            with open(self.log, errors='replace') as handle:
                return handle.read()[-chars:]
        except OSError:
            return '(no log)'

    # Access

    def url(self, database: str = '', user: str = 'root',
            password: str | None = None, port: int | None = None) -> str:
        """A SQLAlchemy URL (PyMySQL) for *database* on this server.

        With *port*, the URL connects there instead (a proxy in front of
        this server).
        """
        return sa.engine.URL.create(
            'mysql+pymysql', username=user, password=password,
            host='127.0.0.1', port=port or self.port,
            database=database or None).render_as_string(hide_password=False)

    def query(self, sql: str, args: Any = None,
              connect_timeout: float = 10) -> list[tuple[Any, ...]]:
        """Run one statement on a fresh connection (never pooled)."""
        conn = pymysql.connect(host='127.0.0.1', port=self.port,
                               user='root', connect_timeout=connect_timeout,
                               read_timeout=30, write_timeout=30,
                               autocommit=True)
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql, args)
                return list(cursor.fetchall())
        finally:
            conn.close()

    def threads_connected(self) -> int:
        """Client connections open now (this query's own excluded)."""
        rows = self.query("SHOW STATUS LIKE 'Threads_connected'")
        return int(rows[0][1]) - 1

    def create_user(self, user: str, password: str) -> None:
        """A user with every privilege, logging in with *password*."""
        self.query("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s",
                   (user, password))
        self.query("GRANT ALL PRIVILEGES ON *.* TO %s@'%%'", (user,))


@atexit.register
class ServersTestCase(base.BaseTestCase):
    """A test case whose class runs private MariaDB servers.

    Subclasses start their servers with :meth:`start_server` and build
    their world in :meth:`set_up_servers`, once per class. Every server is
    stopped and its files removed after the class's last test, and at
    once if building fails half way.
    """

    _servers: list['MariaDBServer'] = []

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls._servers = []
        try:
            cls.set_up_servers()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def set_up_servers(cls) -> None:
        raise NotImplementedError(cls.__name__ + '.set_up_servers')

    @classmethod
    def start_server(cls, name: str, user: str | None = None,
                     password: str | None = None) -> 'MariaDBServer':
        """A running server, with *user* created when given."""
        server = MariaDBServer(name)
        server.setUp()
        cls._servers.append(server)
        if user:
            server.create_user(user, password)
        return server

    @classmethod
    def tearDownClass(cls) -> None:
        for server in reversed(cls._servers):
            server.cleanUp()
        cls._servers = []
        super().tearDownClass()


def _stop_leftovers() -> None:
    with _LIVE_LOCK:
        left = list(_LIVE)
    for server in left:
        try:
            server.stop()
            shutil.rmtree(server.dir, ignore_errors=True)
        except Exception:  # noqa: BLE001,S110 - best effort at exit
            pass


def create_nova_database(server: MariaDBServer, name: str,
                         kind: str = 'main') -> str:
    """Create database *name* with nova's *kind* (main/api) schema.

    The schema is migrated once per server and process, then copied
    (:func:`nova_cellsched.demo.seed.apply_schema`).
    """
    url = seed.create_database(server.url(), name)
    seed.apply_schema(url, kind)
    return url


# Worlds: an API database and cells spread over private servers.

@dataclasses.dataclass
class CellDB:
    name: str
    uuid: str
    #: The database on its server, reached directly (what tests query).
    url: str
    server: MariaDBServer
    #: What the cell mapping holds (nova's URL): :attr:`url`, or the same
    #: database through a proxy's port (see :func:`build_world`).
    mapped_url: str = ''


@dataclasses.dataclass
class World:
    """Databases built by :func:`build_world`."""

    api_url: str
    api_server: MariaDBServer
    cells: dict[str, CellDB]
    projects: list[str]

    def live_uuids(self, names: Sequence[str] | None = None
                   ) -> dict[str, set[str]]:
        """Cell name -> uuids of its live, listable instances, by SQL."""
        table = instance_query.INSTANCES
        out = {}
        for name in names or self.cells:
            engine = sa.create_engine(self.cells[name].url,
                                      poolclass=sa.pool.NullPool)
            try:
                with engine.connect() as conn:
                    out[name] = {r[0] for r in conn.execute(
                        sa.select(table.c.uuid).where(
                            table.c.deleted == 0,
                            sa.or_(table.c.vm_state != 'soft-delete',
                                   table.c.vm_state.is_(None)),
                            sa.or_(table.c.hidden == sa.false(),
                                   table.c.hidden.is_(None))))}
            finally:
                engine.dispose()
        return out

    def count_live(self, name: str) -> int:
        """``SELECT COUNT(*)`` of the live instances of one cell."""
        engine = sa.create_engine(self.cells[name].url,
                                  poolclass=sa.pool.NullPool)
        table = instance_query.INSTANCES
        try:
            with engine.connect() as conn:
                return int(conn.execute(
                    sa.select(sa.func.count()).select_from(table).where(
                        table.c.deleted == 0)).scalar_one())
        finally:
            engine.dispose()

    def on(self, server: MariaDBServer) -> list[str]:
        """Names of the cells whose database is on *server*."""
        return [c.name for c in self.cells.values() if c.server is server]


def build_world(api_server: MariaDBServer,
                cells: Sequence[tuple[str, MariaDBServer,
                                      seed.Population]],
                seed_value: int = 0, user: str = 'root',
                password: str | None = None,
                via: Mapping[str, int] | None = None) -> World:
    """API database on *api_server*, each cell on its server, seeded.

    The cell mappings hold URLs for *user*/*password* (the user must
    exist on every server). *via* maps a cell name to a loopback port
    its mapping connects to instead of its server's (a
    :class:`tests.functional.slow_proxy.SlowProxy` in front of it);
    seeding and :class:`World`'s queries go to the server directly.
    """
    tag = 'ncs_%s' % uuid_lib.uuid4().hex[:10]
    api_url = create_nova_database(api_server, '%s_api' % tag, 'api')
    projects = seed.project_ids(6, seed_value)
    out: dict[str, CellDB] = {}
    for name, server, population in cells:
        root_url = create_nova_database(server, '%s_%s' % (tag, name))
        url = server.url('%s_%s' % (tag, name), user=user,
                         password=password)
        mapped_url = server.url('%s_%s' % (tag, name), user=user,
                                password=password,
                                port=(via or {}).get(name))
        cell_id, cell_uuid = seed.register_cell(
            api_url, name, mapped_url,
            cell_uuid=seed.CELL0_UUID if name == 'cell0' else None,
            transport_url='fake://%s' % name)
        if not population.projects:
            population = dataclasses.replace(population, projects=projects)
        seed.seed_cell(root_url, api_url, cell_id, name, population,
                       seed=seed_value)
        out[name] = CellDB(name, cell_uuid, url, server, mapped_url)
    return World(api_url, api_server, out, projects)


#: ``scheme://user:password@``: credentials in a URL, unless masked.
_CREDENTIALS = re.compile(r'[a-z][a-z0-9+.-]*://[^\s/:@\'"]+:'
                          r'(?!\*\*\*@)[^\s/@\'"]+@', re.IGNORECASE)


def leaked_secrets(text: str, world: World, password: str) -> list[str]:
    """What *text* shows of the cells' database credentials.

    The *password* (raw, URL encoded, or either half of it), a cell's
    URL (direct or as its mapping holds it), and any
    ``scheme://user:password@`` whose password is not ``***``. An empty
    list means nothing leaked.
    """
    half = len(password) // 2
    forms = {password, urllib.parse.quote_plus(password),
             urllib.parse.quote(password, safe=''), password[:half],
             password[half:]}
    found = ['the password (%s form)' % ('a' if form != password else 'raw')
             for form in sorted(forms) if form and form in text]
    for cell in world.cells.values():
        for url in {cell.url, cell.mapped_url} - {''}:
            if url in text:
                found.append('the URL of %s' % cell.name)
    found.extend('credentials in a URL at offset %d' % match.start()
                 for match in _CREDENTIALS.finditer(text))
    return found


class UseWorld(fixtures.Fixture):
    """Point nova's API database (objects, contexts) at *world*."""

    def __init__(self, world: World) -> None:
        super().__init__()
        self.world = world

    def _setUp(self) -> None:
        cells_mod.register_messaging_opts()
        objects.register_all()
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELL_CACHE', {}))
        # nova caches the list of cells per process, too.
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELLS', []))
        self.facade = enginefacade.transaction_context()
        # One connection attempt: a test that stopped the API database
        # wants the error now, not after oslo.db's ten retries.
        self.facade.configure(connection=self.world.api_url, max_retries=1,
                              retry_interval=0)
        self.useFixture(db_fixtures.ReplaceEngineFacadeFixture(
            api_db_api.context_manager, self.facade))
        self.addCleanup(self.facade.dispose_pool)
