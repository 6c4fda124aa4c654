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

"""The guard's bounds against servers that do not answer, on sockets.

A silent server (it accepts and never answers), a real MariaDB behind a
proxy that freezes, and a refused port: each call on them ends inside
the guard's I/O timeout. These wait on sockets for seconds, so they are
functional tests (the pure bounds are ``tests/unit/api/test_guard.py``).
"""

import logging
import os
import socket
import threading
import time

import fixtures
from nova import context as nova_context
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import uuidutils
import pymysql
import sqlalchemy as sa

from nova_cellsched import compat
from nova_cellsched import guard
from tests import base
from tests.fixtures import db
from tests.fixtures import slow_proxy
from tests.fixtures import worlds


class _SilentServer:
    """A TCP port that accepts connections and never says a word.

    What a frozen database server is to its clients: the kernel
    completes the TCP handshake from the listen backlog, the process
    never answers.
    """

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


def run_bounded(function):
    """Run *function* in a thread: (result or exception, finished)."""
    box = []

    def target():
        try:
            box.append(function())
        except Exception as exc:
            box.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(SAFETY)
    return (box[0] if box else None), not thread.is_alive()


SAFETY = 20.0


class TestIoTimeout(base.TestCase):
    """PyMySQL I/O inside io_timeout ends on its own; elsewhere unchanged.
    """

    def setUp(self):
        super().setUp()
        compat.install(['guard'])
        self.addCleanup(compat.restore, ['guard'])
        self.server = _SilentServer()
        self.addCleanup(self.server.close)
        self.engine = sa.create_engine(
            'mysql+pymysql://nobody@127.0.0.1:%d/nova' % self.server.port,
            pool_pre_ping=True)
        self.addCleanup(self.engine.dispose)

    def test_connecting_to_a_silent_server_ends_inside_io_timeout(self):
        """The handshake read is bounded: the connect fails, not hangs."""
        def connect():
            with guard.io_timeout(0.3):
                with self.engine.connect():
                    pass

        error, finished = run_bounded(connect)
        self.assertTrue(finished, 'the connect still blocks')
        self.assertIsInstance(error, guard.ConnectFailed)
        self.assertIsInstance(error.cause, pymysql.err.OperationalError)

    def test_connections_are_timed_and_keep_their_own_timeouts(self):
        """Outside io_timeout a connection has the URL's timeouts."""
        connection = self._deferred(read_timeout=7, write_timeout=8)
        self.assertEqual((7, 8), (connection._read_timeout,
                                  connection._write_timeout))
        with guard.io_timeout(0.5):
            self.assertEqual((0.5, 0.5, 0.5),
                             (connection._read_timeout,
                              connection._write_timeout,
                              connection.connect_timeout))
        self.assertEqual((7, 8), (connection._read_timeout,
                                  connection._write_timeout))

    def test_other_threads_are_not_affected(self):
        connection = self._deferred()
        seen = []

        def other():
            seen.append(connection._read_timeout)

        with guard.io_timeout(1.0):
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        self.assertEqual([None], seen)

    def test_uninstall_stops_timing_new_connections(self):
        compat.restore(['guard'])
        connection = self._deferred()
        self.assertIs(pymysql.connections.Connection, type(connection))

    def _deferred(self, **params):
        """A connection made by the engine's dialect, without I/O."""
        dialect = self.engine.dialect
        cargs, cparams = dialect.create_connect_args(self.engine.url)
        cparams.update(params, defer_connect=True)
        for fn in dialect.dispatch.do_connect:
            made = fn(dialect, None, list(cargs), cparams)
            if made is not None:
                return made
        return dialect.connect(*cargs, **cparams)


class TestMadeBeforeInstall(base.TestCase):
    """A cell connection pooled before install never serves a bounded
    thread.

    nova-api started with nova's own WSGI entry point and the paste
    filter runs nova's start-up check first: it connects to every cell
    database, and those connections wait in the cells' pools, made
    before the ``guard`` part is on. The pool pings a connection before
    its ``checkout`` event runs, so a connection changed at checkout
    would still be pinged without a bound: turning the part on closes
    them instead (its ``on_install``).
    Real MariaDB behind a proxy that freezes.
    """

    def setUp(self):
        super().setUp()
        compat.restore(['guard'])
        self.addCleanup(compat.restore, ['guard'])
        self.proxy = self.useFixture(slow_proxy.SlowProxy(3306))
        self.manager = enginefacade.transaction_context()
        self.manager.configure(
            connection='mysql+pymysql://root@127.0.0.1:%d/mysql'
            % self.proxy.port)
        self.addCleanup(self.manager.dispose_pool)
        cell = uuidutils.generate_uuid()
        nova_context.CELL_CACHE[cell] = (self.manager, None)
        self.addCleanup(nova_context.CELL_CACHE.pop, cell, None)
        self.engine = self.manager.writer.get_engine()

    def _query(self):
        with self.engine.connect() as connection:
            return connection.exec_driver_sql('SELECT 1').scalar()

    def test_frozen_cell_ends_inside_io_timeout(self):
        self.assertEqual(1, self._query())
        compat.install(['guard'])
        self.proxy.latency = SAFETY * 2

        def bounded():
            with guard.io_timeout(0.5):
                return self._query()

        error, finished = run_bounded(bounded)
        self.assertTrue(finished, 'a connection made before install blocks')
        self.assertIsInstance(error, guard.ConnectFailed)

    def test_outside_io_timeout_a_new_connection_answers(self):
        self.assertEqual(1, self._query())
        made = self.proxy.connections
        compat.install(['guard'])
        self.assertEqual(1, self._query())
        self.assertEqual(made + 1, self.proxy.connections)




class TestFirstContact(base.TestCase):
    """A thread's first contact with a dead or silent cell: one attempt.

    nova makes a cell's engine on first use with oslo.db's service
    defaults: 10 connection attempts, 10 s apart. Inside io_timeout the
    first failed connect ends the thread, so a listing's (or the start-up
    check's) thread is not held 100 s past its timeout; outside, oslo.db
    behaves as it always did.
    """

    def setUp(self):
        super().setUp()
        compat.install(['guard'])
        self.addCleanup(compat.restore, ['guard'])
        self.retries = self.useFixture(fixtures.FakeLogger(
            name='oslo_db.sqlalchemy.engines', level=logging.WARNING))

    def _first_contact(self, port, retries=10, interval=10):
        """Start a cell's engine as nova does, run one query."""
        facade = enginefacade.transaction_context()
        facade.configure(
            connection='mysql+pymysql://nobody@127.0.0.1:%d/nova' % port,
            max_retries=retries, retry_interval=interval)
        self.addCleanup(facade.dispose_pool)

        def query():
            engine = facade.writer.get_engine()
            with engine.connect() as connection:
                connection.exec_driver_sql('SELECT 1')

        return query

    def test_silent_cell_ends_on_the_first_attempt(self):
        server = _SilentServer()
        self.addCleanup(server.close)
        query = self._first_contact(server.port)

        def bounded():
            with guard.io_timeout(0.3):
                query()

        error, finished = run_bounded(bounded)
        self.assertTrue(finished, 'oslo.db still retries the connect')
        self.assertIsInstance(error, guard.ConnectFailed)
        self.assertIn('timed out', str(error))
        self.assertNotIn('SQL connection failed', self.retries.output)

    def test_refused_cell_ends_on_the_first_attempt(self):
        query = self._first_contact(slow_proxy.closed_port())

        def bounded():
            with guard.io_timeout(5):
                query()

        error, finished = run_bounded(bounded)
        self.assertTrue(finished, 'oslo.db still retries the connect')
        self.assertIsInstance(error, guard.ConnectFailed)
        self.assertIsInstance(error, OSError)
        self.assertNotIn('SQL connection failed', self.retries.output)

    def test_outside_io_timeout_oslo_db_retries_as_configured(self):
        query = self._first_contact(slow_proxy.closed_port(), retries=2,
                                    interval=0)
        error, finished = run_bounded(query)
        self.assertTrue(finished)
        self.assertIsInstance(error, db_exc.DBConnectionError)
        self.assertEqual(2, self.retries.output.count(
            'SQL connection failed'))


class TestGivenUpSessionEnds(db.FunctionalTestCase):
    """A connection given up on ends its session, whoever else holds it.

    A nova-scheduler master reads the cells before it forks its workers:
    each worker holds a copy of the master's connections, which oslo.db
    drops without closing. When the master then gives up on a query of
    a frozen cell, closing its own socket did not end the connection:
    the query ran at the thaw and its session kept a transaction, and
    the table's metadata lock, for as long as the workers lived. Real
    MariaDB, the table write-locked, the socket's copy an ``os.dup``.
    """

    def setUp(self):
        super().setUp()
        compat.install(['guard'])
        self.addCleanup(compat.restore, ['guard'])
        name = 'ncs_guard_%s' % uuidutils.generate_uuid(dashed=False)[:12]
        url = worlds.create_database(db.MYSQL_URL, name)
        self.addCleanup(worlds.drop_database, url)
        parsed = sa.engine.make_url(url)
        self.params = dict(host=parsed.host, port=parsed.port or 3306,
                           user=parsed.username,
                           password=parsed.password or '',
                           database=parsed.database)
        with self.connect() as admin:
            admin.cursor().execute(
                'CREATE TABLE compute_nodes (id INT PRIMARY KEY) '
                'ENGINE=InnoDB')

    def connect(self, cls=pymysql.connections.Connection):
        return cls(**self.params)

    def sessions(self):
        with self.connect() as admin:
            cursor = admin.cursor()
            cursor.execute('SELECT id FROM information_schema.processlist '
                           'WHERE db = %s', (self.params['database'],))
            return {row[0] for row in cursor.fetchall()}

    def test_a_timed_out_query_ends_its_session_at_the_thaw(self):
        locker = self.connect()
        self.addCleanup(locker.close)
        reader = self.connect(guard.timed_class(
            pymysql.connections.Connection))
        self.addCleanup(reader.close)
        given_up = reader.thread_id()
        copy = os.dup(reader._sock.fileno())
        self.addCleanup(os.close, copy)
        locker.cursor().execute('LOCK TABLES compute_nodes WRITE')

        def read():
            with guard.io_timeout(0.5):
                reader.cursor().execute('SELECT id FROM compute_nodes')

        error, finished = run_bounded(read)
        self.assertTrue(finished, 'the read still blocks')
        self.assertIsInstance(error, pymysql.err.OperationalError)
        locker.cursor().execute('UNLOCK TABLES')
        deadline = time.monotonic() + SAFETY
        while given_up in self.sessions() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertNotIn(given_up, self.sessions())
        # Nothing of it blocks the table: a write lock is granted at once.
        locker.cursor().execute('SET SESSION lock_wait_timeout = 5')
        locker.cursor().execute('LOCK TABLES compute_nodes WRITE')
        locker.cursor().execute('UNLOCK TABLES')
