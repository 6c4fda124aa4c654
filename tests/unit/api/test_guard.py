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

"""Bounds on a hung cell: the stuck-query count and the read timeout.

The tests that wait on a silent or frozen server are functional
(``tests/functional/test_guard_sockets.py``).
"""

import threading

import fixtures
from nova import context as nova_context
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import uuidutils

from nova_cellsched.api.hooks import stuck as stuck_queries
from nova_cellsched import compat
from nova_cellsched import guard
from tests import base
from tests.fixtures import slow_proxy


class TestStuckQueries(base.TestCase):

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


class TestIoTimeoutBound(base.TestCase):
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


class TestStuckQueriesAfterFork(base.TestCase):

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


class TestOtherCellsAtInstall(base.TestCase):
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
                             % slow_proxy.closed_port())
        compat.install(['guard'])
        self.assertFalse(manager.is_started)
