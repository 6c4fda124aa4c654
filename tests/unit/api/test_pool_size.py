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

"""nova-api's lister pool: sized for what the worker process can run.

uwsgi's Python module exists only inside uwsgi: where a test needs its
``threads`` option, a module with that one attribute stands in for it
(``tests.functional.test_nova_api_uwsgi`` runs the real one).
"""

import logging
import os
import sys
import types

import fixtures
import hypothesis
from hypothesis import strategies as st


from nova_cellsched.api.hooks import pool
from tests import base


class TestPoolSize(base.TestCase):

    @hypothesis.given(cells=st.integers(1, 500), requests=st.integers(1, 64),
                      stuck=st.integers(1, 10), most=st.integers(1, 4096))
    def test_enough_for_every_request_and_stuck_query_at_most_the_cap(
            self, cells, requests, stuck, most):
        size = pool.pool_size(cells, requests, stuck, most)
        self.assertEqual(min(most, cells * (requests + stuck)), size)
        self.assertGreaterEqual(size, 1)

    @hypothesis.given(cells=st.integers(1, 500), most=st.integers(1, 4096))
    def test_unknown_concurrency_is_the_cap(self, cells, most):
        self.assertEqual(most, pool.pool_size(cells, None, 2, most))


class TestExecutor(base.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        pool.shutdown()
        self.addCleanup(pool.shutdown)

    def uwsgi(self, threads):
        """nova-api in uwsgi with *threads* threads, nova on native threads.

        Whether nova runs on native threads is the adapter's
        answer (nova 31 has eventlet only): set here, on every release.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.pool._threading', lambda: True))
        self.addCleanup(sys.modules.pop, 'uwsgi', None)
        sys.modules['uwsgi'] = types.SimpleNamespace(
            opt={'threads': threads})

    def test_uwsgi_threads_are_the_requests(self):
        self.uwsgi(b'4')
        self.assertEqual(4, pool.request_threads())

    def test_without_uwsgi_the_concurrency_is_unknown(self):
        self.assertNotIn('uwsgi', sys.modules)
        self.assertIsNone(pool.request_threads())

    def test_a_capped_pool_says_what_to_set(self):
        """4 cells x (4 threads + 2 stuck) need 24 workers; 8 allowed."""
        self.uwsgi(b'4')
        self.flags(list_max_workers=8, api_stuck_queries_per_cell=2,
                   group='cellsched')
        executor = pool.executor(4)
        self.assertEqual(8, executor._max_workers)
        self.assertIn('Set list_max_workers to 24',
                      self.log.output)
        # A pool too small costs time, not rows: not a warning.
        self.assertNotIn('WARNING [nova_cellsched',
                         self.log.output)

    def test_a_pool_for_the_load_is_not_capped(self):
        self.uwsgi(b'2')
        self.flags(list_max_workers=64, api_stuck_queries_per_cell=2,
                   group='cellsched')
        executor = pool.executor(5)
        self.assertEqual(20, executor._max_workers)
        self.assertNotIn('list_max_workers to', self.log.output)


class TestExecutorAfterFork(base.TestCase):
    """A uwsgi worker forked after the master made the pool has its own.

    Without ``lazy-apps``, uwsgi forks its workers after the master
    loaded nova-api, whose start-up check may have started the pool;
    the child has none of its threads.
    """

    def setUp(self):
        super().setUp()
        pool.shutdown()
        self.addCleanup(pool.shutdown)

    def test_a_forked_child_runs_its_tasks_on_a_pool_of_its_own(self):
        self.flags(list_max_workers=1, group='cellsched')
        parent = pool.executor(1)
        # The parent's only worker thread is started.
        self.assertEqual(1, parent.submit(lambda: 1).result(10))
        query = _stuck_query()
        pool.STUCK.abandon(query)
        self.addCleanup(pool.STUCK.end, query)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by its pipe
            answer = b'?'
            try:
                child = pool.executor(1)
                ok = (child is not parent and
                      child.submit(lambda: 2).result(10) == 2 and
                      not pool.STUCK.snapshot())
                answer = b'1' if ok else b'0'
            except BaseException:
                answer = b'E'
            finally:
                os.write(write, answer)
                os._exit(0)
        os.close(write)
        self.addCleanup(os.close, read)
        answer = os.read(read, 1)
        os.waitpid(pid, 0)
        self.assertEqual(b'1', answer)
        self.assertIs(parent, pool.executor(1))


def _stuck_query():
    """A query of cell1 that ran and was given up on (stuck, here)."""
    from nova_cellsched.api.hooks import stuck

    query = stuck.Query('cell1')
    pool.STUCK.begin(query)
    return query
