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

import threading

from oslotest import base
import sqlalchemy as sa

from nova_cellsched.api import guard


class TestStuckQueries(base.BaseTestCase):

    def test_query_given_up_while_running_counts_until_it_ends(self):
        stuck = guard.StuckQueries()
        query = guard.Query('cell1')
        self.assertTrue(stuck.begin(query))
        stuck.abandon(query)
        self.assertEqual(1, stuck.count('cell1'))
        self.assertEqual({'cell1': 1}, stuck.snapshot())
        stuck.end(query)
        self.assertEqual(0, stuck.count('cell1'))
        self.assertEqual({}, stuck.snapshot())

    def test_query_given_up_before_it_started_never_runs_or_counts(self):
        stuck = guard.StuckQueries()
        query = guard.Query('cell1')
        stuck.abandon(query)
        self.assertEqual(0, stuck.count('cell1'))
        self.assertFalse(stuck.begin(query))

    def test_finished_query_is_not_stuck(self):
        stuck = guard.StuckQueries()
        query = guard.Query('cell1')
        stuck.begin(query)
        stuck.end(query)
        stuck.abandon(query)
        self.assertEqual(0, stuck.count('cell1'))

    def test_abandon_twice_counts_once(self):
        stuck = guard.StuckQueries()
        query = guard.Query('cell2')
        stuck.begin(query)
        stuck.abandon(query)
        stuck.abandon(query)
        self.assertEqual(1, stuck.count('cell2'))
        stuck.end(query)
        self.assertEqual(0, stuck.count('cell2'))

    def test_counts_are_per_cell_and_thread_safe(self):
        stuck = guard.StuckQueries()
        queries = [guard.Query('cell%d' % (n % 3)) for n in range(300)]

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


class _FakePyMySQL:
    """A DBAPI connection with PyMySQL's timeout attributes."""

    def __init__(self):
        self._read_timeout = None
        self._write_timeout = None

    def close(self):
        pass

    def rollback(self):
        pass


class TestIoTimeout(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        guard.install()
        self.addCleanup(guard.uninstall)
        self.dbapi = _FakePyMySQL()
        self.pool = sa.pool.StaticPool(lambda: self.dbapi)

    def test_checkout_inside_sets_timeouts_and_checkin_restores(self):
        with guard.io_timeout(2.5):
            conn = self.pool.connect()
            self.assertEqual((2.5, 2.5), (self.dbapi._read_timeout,
                                          self.dbapi._write_timeout))
            conn.close()
        self.assertEqual((None, None), (self.dbapi._read_timeout,
                                        self.dbapi._write_timeout))

    def test_checkout_outside_changes_nothing(self):
        conn = self.pool.connect()
        self.assertIsNone(self.dbapi._read_timeout)
        conn.close()

    def test_other_threads_are_not_affected(self):
        seen = []

        def other():
            conn = self.pool.connect()
            seen.append(self.dbapi._read_timeout)
            conn.close()

        with guard.io_timeout(1.0):
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        self.assertEqual([None], seen)

    def test_uninstall_stops_listening(self):
        guard.uninstall()
        with guard.io_timeout(3.0):
            conn = self.pool.connect()
            self.assertIsNone(self.dbapi._read_timeout)
            conn.close()
