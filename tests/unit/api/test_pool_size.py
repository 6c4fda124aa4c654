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
import subprocess
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

    def uwsgi(self, threads, native=True):
        """nova-api in uwsgi with *threads* threads, nova on native threads.

        Whether nova runs on native threads (else eventlet) is the
        adapter's answer (nova 31 has eventlet only): set here, on every
        release.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.pool._threading', lambda: native))
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

    def test_eventlet_in_uwsgi_threads_is_warned_about(self):
        self.uwsgi(b'8', native=False)
        self.assertIsInstance(pool.executor(3), pool._GreenPools)
        self.assertIn('nova-api runs on eventlet with 8 uwsgi threads',
                      self.log.output)
        self.assertIn('Set uwsgi threads = 1', self.log.output)

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


#: An eventlet process (nova 31 and 32's nova-api) with several OS
#: threads (uwsgi's ``threads``): ``executor``, of ``sys.argv[2]``
#: workers, is one futurist pool for them all (``sys.argv[1]`` "shared")
#: or ours, a pool per thread; ``threading`` makes OS threads.
_EVENTLET_PROCESS = '''
import eventlet
eventlet.monkey_patch()
import sys
from eventlet import patcher
import futurist
from futurist import waiters
from nova_cellsched.api.hooks import pool
workers = int(sys.argv[2])
executor = (futurist.GreenThreadPoolExecutor(max_workers=workers)
            if sys.argv[1] == 'shared' else pool._GreenPools(workers))
threading = patcher.original('threading')
'''

#: Four OS threads list at once: each submits more tasks than the pool
#: has workers (two) and waits for them, twenty times. Prints the tasks
#: done per thread and whether a thread is still waiting.
_GREEN_THREADS = '''
done = {}
def listing(name):
    count = 0
    for _ in range(20):
        futures = [executor.submit(eventlet.sleep, 0.005) for _ in range(4)]
        count += len(waiters.wait_for_all(futures, timeout=10).done)
    done[name] = count
threads = [threading.Thread(target=listing, args=(n,)) for n in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(60)
print(sorted(done.values()), any(t.is_alive() for t in threads))
''', 2


#: Two OS threads hand work to each other: the first's task holds the
#: pool's only worker until the second has queued its own task behind
#: it and waits for it. Prints the tasks each thread saw done and whether
#: a thread is still waiting.
_HANDOVER = '''
started, release = threading.Event(), threading.Event()
done = {}
def holding():
    started.set()
    release.wait(10)
    eventlet.sleep(0.3)  # the second thread is waiting by now
def first():
    future = executor.submit(holding)
    done['first'] = len(waiters.wait_for_all([future], timeout=5).done)
    eventlet.sleep(1)  # this thread's hub runs on
def second():
    started.wait(10)
    future = executor.submit(lambda: None)
    release.set()
    done['second'] = len(waiters.wait_for_all([future], timeout=5).done)
threads = [threading.Thread(target=first), threading.Thread(target=second)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(30)
print(done.get('first'), done.get('second'),
      any(t.is_alive() for t in threads))
''', 1


class TestGreenPoolsPerThread(base.TestCase):
    """Under eventlet, each OS thread's listings have their own workers.

    Green workers of their own hub: a pool shared by two hubs loses its
    wake-ups.
    """

    def run_threads(self, which, script=_GREEN_THREADS):
        body, workers = script
        done = subprocess.run(
            [sys.executable, '-c', _EVENTLET_PROCESS + body, which,
             str(workers)],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr)
        return done.stdout.strip(), done.stderr

    def test_each_thread_gets_every_task_done(self):
        out, err = self.run_threads('ours')
        self.assertEqual('[80, 80, 80, 80] False', out)
        self.assertNotIn('Cannot switch to a different thread', err)

    def test_a_task_queued_behind_another_threads_task_runs_at_home(self):
        out, err = self.run_threads('ours', _HANDOVER)
        self.assertEqual('1 1 False', out)
        self.assertNotIn('Cannot switch to a different thread', err)

    def test_one_pool_shared_by_the_threads_loses_wake_ups(self):
        """What the pool per hub prevents (eventlet's greenlet.error).

        The first thread's worker runs the second thread's queued task
        and wakes its waiter from the wrong hub.
        """
        _out, err = self.run_threads('shared', _HANDOVER)
        self.assertIn('Cannot switch to a different thread', err)
