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

"""Bounds on a hung cell: the stuck-query count and the read timeout."""

import logging
import socket
import threading

import fixtures
from nova import context as nova_context
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import uuidutils
from oslotest import base
import pymysql
import sqlalchemy as sa

from nova_cellsched.api.hooks import stuck as stuck_queries
from nova_cellsched import compat
from nova_cellsched import guard
from tests.functional import slow_proxy


class TestStuckQueries(base.BaseTestCase):

    def test_query_given_up_while_running_counts_until_it_ends(self):
        stuck = stuck_queries.StuckQueries()
        query = stuck_queries.Query('cell1')
        self.assertTrue(stuck.begin(query))
        stuck.abandon(query)
        self.assertEqual(1, stuck.count('cell1'))
        self.assertEqual({'cell1': 1}, stuck.snapshot())
        stuck.end(query)
        self.assertEqual(0, stuck.count('cell1'))
        self.assertEqual({}, stuck.snapshot())

    def test_query_given_up_before_it_started_never_runs_or_counts(self):
        stuck = stuck_queries.StuckQueries()
        query = stuck_queries.Query('cell1')
        stuck.abandon(query)
        self.assertEqual(0, stuck.count('cell1'))
        self.assertFalse(stuck.begin(query))

    def test_finished_query_is_not_stuck(self):
        stuck = stuck_queries.StuckQueries()
        query = stuck_queries.Query('cell1')
        stuck.begin(query)
        stuck.end(query)
        stuck.abandon(query)
        self.assertEqual(0, stuck.count('cell1'))

    def test_abandon_twice_counts_once(self):
        stuck = stuck_queries.StuckQueries()
        query = stuck_queries.Query('cell2')
        stuck.begin(query)
        stuck.abandon(query)
        stuck.abandon(query)
        self.assertEqual(1, stuck.count('cell2'))
        stuck.end(query)
        self.assertEqual(0, stuck.count('cell2'))

    def test_counts_are_per_cell_and_thread_safe(self):
        stuck = stuck_queries.StuckQueries()
        queries = [stuck_queries.Query('cell%d' % (n % 3)) for n in range(300)]

        def run(chunk):
            for query in chunk:
                stuck.begin(query)
                stuck.abandon(query)

        threads = [threading.Thread(target=run, args=(queries[n::4],))
                   for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual({'cell0': 100, 'cell1': 100, 'cell2': 100},
                         stuck.snapshot())
        for query in queries:
            stuck.end(query)
        self.assertEqual({}, stuck.snapshot())


class TestIoTimeoutBound(base.BaseTestCase):
    """The block's I/O ends within its seconds plus guard.GRAIN."""

    def setUp(self):
        super().setUp()
        self.now = 1000.0
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.guard.time.monotonic', lambda: self.now))

    def test_the_last_call_gets_what_is_left_rounded_to_the_grain(self):
        """0.05 s left of a 4 s block: the next call may take 0.1 s.

        Regression: the time left was rounded up to a whole second, so a
        stuck worker's I/O could run 2 x list_cell_timeout + 1 s.
        """
        with guard.io_timeout(4.0):
            self.now += 3.95
            timeout = guard._thread_timeout()
        self.assertLessEqual(timeout, 0.05 + guard.GRAIN)
        self.assertGreaterEqual(timeout, 0.05)

    def test_a_call_gets_at_most_the_blocks_seconds(self):
        with guard.io_timeout(0.25):
            self.assertEqual(0.25, guard._thread_timeout())

    def test_after_the_blocks_end_a_call_fails_at_once(self):
        with guard.io_timeout(1.0):
            self.now += 2.0
            self.assertEqual(guard._EXPIRED, guard._thread_timeout())

    def test_outside_a_block_nothing_is_bounded(self):
        self.assertIsNone(guard._thread_timeout())

    def test_without_a_total_a_busy_process_never_cuts_a_call_short(self):
        """total=False: however long the block ran, each call gets its
        seconds (a socket timeout, which only silence runs down).
        """
        with guard.io_timeout(1.0, total=False):
            self.now += 60.0
            self.assertEqual(1.0, guard._thread_timeout())

    def test_once_its_query_is_given_up_a_call_fails_at_once(self):
        """The listing stopped waiting: the chain ends with this call."""
        query = stuck_queries.Query('cell1')
        stuck = stuck_queries.StuckQueries()
        stuck.begin(query)
        with guard.io_timeout(1.0, total=False, given_up=query):
            self.assertEqual(1.0, guard._thread_timeout())
            stuck.abandon(query)
            self.assertEqual(guard._EXPIRED, guard._thread_timeout())


class TestStuckQueriesAfterFork(base.BaseTestCase):

    def test_forget_counts_nothing_and_keeps_counting(self):
        stuck = stuck_queries.StuckQueries()
        query = stuck_queries.Query('cell1')
        stuck.begin(query)
        stuck.abandon(query)
        stuck.forget()
        self.assertEqual({}, stuck.snapshot())
        again = stuck_queries.Query('cell1')
        stuck.begin(again)
        stuck.abandon(again)
        self.assertEqual({'cell1': 1}, stuck.snapshot())


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


class TestIoTimeout(base.BaseTestCase):
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


class TestMadeBeforeInstall(base.BaseTestCase):
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


class TestOtherCellsAtInstall(base.BaseTestCase):
    """Turning the part on leaves alone what it does not change.

    Only PyMySQL connections get the thread-bound timeouts, so only
    theirs are closed: another driver's pool keeps its connections (an
    in-memory SQLite cell, one connection in a ``StaticPool``, is its
    database: nova's own test fixtures of nova 31 to 33 make their
    cells so), and a cell nova has not used yet is not connected to.
    """

    def setUp(self):
        super().setUp()
        compat.restore(['guard'])
        self.addCleanup(compat.restore, ['guard'])

    def _cell(self, connection):
        manager = enginefacade.transaction_context()
        manager.configure(connection=connection)
        self.addCleanup(manager.dispose_pool)
        cell = uuidutils.generate_uuid()
        nova_context.CELL_CACHE[cell] = (manager, None)
        self.addCleanup(nova_context.CELL_CACHE.pop, cell, None)
        return manager

    def test_an_in_memory_sqlite_cell_keeps_its_data(self):
        manager = self._cell('sqlite://')
        with manager.writer.get_engine().begin() as connection:
            connection.exec_driver_sql('CREATE TABLE services (id INTEGER)')
            connection.exec_driver_sql('INSERT INTO services VALUES (7)')
        compat.install(['guard'])
        with manager.reader.get_engine().connect() as connection:
            self.assertEqual([7], connection.exec_driver_sql(
                'SELECT id FROM services').scalars().all())

    def test_a_cell_not_used_yet_is_not_connected_to(self):
        manager = self._cell('mysql+pymysql://nobody@127.0.0.1:%d/nova'
                             % _closed_port())
        compat.install(['guard'])
        self.assertFalse(manager.is_started)


def _closed_port():
    """A loopback port nothing listens on (connections are refused)."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


class TestFirstContact(base.BaseTestCase):
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
        query = self._first_contact(_closed_port())

        def bounded():
            with guard.io_timeout(5):
                query()

        error, finished = run_bounded(bounded)
        self.assertTrue(finished, 'oslo.db still retries the connect')
        self.assertIsInstance(error, guard.ConnectFailed)
        self.assertIsInstance(error, OSError)
        self.assertNotIn('SQL connection failed', self.retries.output)

    def test_outside_io_timeout_oslo_db_retries_as_configured(self):
        query = self._first_contact(_closed_port(), retries=2, interval=0)
        error, finished = run_bounded(query)
        self.assertTrue(finished)
        self.assertIsInstance(error, db_exc.DBConnectionError)
        self.assertEqual(2, self.retries.output.count(
            'SQL connection failed'))
