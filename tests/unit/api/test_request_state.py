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

"""One request's state (:mod:`nova_cellsched.api.middleware.request_state`).

Each request sees its own state from its entry to its response, and no
other request ever sees it: not one served at the same time by another
thread or green thread, not the next one served by the same thread, not
a listing worker. Outside a request there is none.
"""

import concurrent.futures
import contextvars
import os
import subprocess
import sys
import tempfile
import threading

from nova import context as nova_context

from nova_cellsched.api.hooks import instance_list
from nova_cellsched.api.hooks import pool
from nova_cellsched.api.hooks import stuck
from nova_cellsched.api.middleware import request_state
from nova_cellsched.api.middleware import server_timing
from tests import base
from tests.fixtures import nova_cells as cells


def _threading():
    """Whether nova runs on native threads in this process.

    The adapter's answer (nova 31 has no threading mode and no
    ``concurrency_mode_threading``; it always runs on eventlet).
    """
    return pool._threading()


#: Seconds a test waits for its threads at most (a hang fails, not blocks).
SAFETY = 30


def _note(state, name):
    """What a request leaves in its state: its own name everywhere."""
    state.given_up = frozenset({name})
    state.listed = {name: name}
    state.timings.down.append(name)


def _seen(state):
    """Every name a request finds in its state."""
    return (set(state.given_up) | set(state.listed or ()) |
            set(state.timings.down))


def _request(name, meet):
    """A request: note its name, let the other note, read back.

    :returns: (names in the state it started with, names in the state
        current at the end, the state current after the request).
    """
    with request_state.scope() as state:
        _note(state, name)
        meet()
        seen = _seen(state)
        also = _seen(request_state.current())
    return seen, also, request_state.current()


def _middleware(app):
    """The paste filter's middleware around *app*, header and log off."""
    return server_timing.Middleware(
        app, lambda: (False, False), lambda info, fmt, args: None,
        lambda environ: (False, False))


class ScopeTest(base.TestCase):

    def setUp(self):
        super().setUp()
        # Each test in a context of its own: nothing leaks between them.
        self.context = contextvars.Context()

    def run_in_context(self, function, *args):
        return self.context.run(function, *args)

    def test_there_is_no_state_outside_a_request(self):
        self.assertIsNone(self.run_in_context(request_state.current))
        self.assertIsNone(self.run_in_context(server_timing.current))

    def test_a_request_sees_its_state_and_nothing_once_it_ends(self):
        def request():
            with request_state.scope() as state:
                self.assertIs(state, request_state.current())
                self.assertIs(state.timings, server_timing.current())
                self.assertIsNone(state.listed)
                self.assertEqual(frozenset(), state.given_up)
            return request_state.current()

        self.assertIsNone(self.run_in_context(request))

    def test_the_state_is_gone_when_the_request_raises(self):
        def request():
            with request_state.scope():
                raise ValueError('the application failed')

        self.assertRaises(ValueError, self.run_in_context, request)
        self.assertIsNone(self.run_in_context(request_state.current))

    def test_the_next_request_on_the_same_thread_starts_afresh(self):
        """What request ids were compared for: a thread's next request."""
        def two_requests():
            with request_state.scope() as first:
                _note(first, 'first')
            with request_state.scope() as second:
                return _seen(second)

        self.assertEqual(set(), self.run_in_context(two_requests))

    def test_an_inner_scope_gives_the_outer_one_back(self):
        def nested():
            with request_state.scope() as outer:
                with request_state.scope() as inner:
                    self.assertIsNot(outer, inner)
                return request_state.current() is outer

        self.assertTrue(self.run_in_context(nested))

    def test_a_pool_worker_sees_no_request_unless_given_its_context(self):
        """Listing workers run outside the request: they cannot leak it.

        A task submitted with the request's context shares the
        request's own state object (what a task that needs it gets).
        """
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.addCleanup(pool.shutdown)

        def request():
            with request_state.scope() as state:
                plain = pool.submit(request_state.current).result(SAFETY)
                given = pool.submit(contextvars.copy_context().run,
                                    request_state.current).result(SAFETY)
                return state, plain, given

        state, plain, given = self.run_in_context(request)
        self.assertIsNone(plain)
        self.assertIs(state, given)
        # The worker that ran inside the request's context holds nothing.
        self.assertIsNone(pool.submit(request_state.current).result(SAFETY))


class ConcurrentRequestsTest(base.TestCase):
    """Two requests served at the same time never see each other's."""

    def test_in_threads(self):
        barrier = threading.Barrier(2)
        results = {}

        def serve(name):
            results[name] = _request(
                name, lambda: barrier.wait(SAFETY))

        threads = [threading.Thread(target=serve, args=(name,))
                   for name in ('req-1', 'req-2')]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SAFETY)
        self.assertEqual(
            {'req-1': ({'req-1'}, {'req-1'}, None),
             'req-2': ({'req-2'}, {'req-2'}, None)}, results)


class MiddlewareTest(base.TestCase):
    """The paste filter's middleware scopes the state to each request."""

    def test_the_application_runs_in_a_state_gone_after_the_response(self):
        states = []

        def app(environ, start_response):
            states.append(request_state.current())
            start_response('200 OK', [])
            return [b'ok']

        middleware = _middleware(app)
        self.assertEqual([b'ok'], middleware({}, lambda *args: None))
        self.assertEqual([b'ok'], middleware({}, lambda *args: None))
        self.assertIsNotNone(states[0])
        self.assertIsNot(states[0], states[1])
        self.assertIsNone(request_state.current())

    def test_the_state_is_gone_when_the_application_raises(self):
        def app(environ, start_response):
            _note(request_state.current(), 'failed')
            raise RuntimeError('nova failed')

        middleware = _middleware(app)
        self.assertRaises(RuntimeError, middleware, {}, lambda *args: None)
        self.assertIsNone(request_state.current())

    def test_concurrent_requests_in_threads_through_one_middleware(self):
        barrier = threading.Barrier(2)
        seen = {}

        def app(environ, start_response):
            state = request_state.current()
            _note(state, environ['name'])
            barrier.wait(SAFETY)
            seen[environ['name']] = _seen(state)
            start_response('200 OK', [])
            return [b'ok']

        middleware = _middleware(app)
        threads = [threading.Thread(target=middleware,
                                    args=({'name': name}, lambda *a: None))
                   for name in ('req-1', 'req-2')]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SAFETY)
        self.assertEqual({'req-1': {'req-1'}, 'req-2': {'req-2'}}, seen)


class GivenUpTest(base.TestCase):
    """nova's later cell calls skip what this request's listing gave up on.

    Only within that request: any other request (a quota count, a
    server's own page), and anything outside a request, asks the cell.
    """

    def setUp(self):
        super().setUp()
        # nova's scatter_gather_cells starts nova's executors, and logs.
        nova = self.useFixture(cells.NoIOCells(self.id()))
        self.logs, self.ctx = nova.logs, nova.ctx
        self.cell = cells.cell(3)

    def ask(self):
        answer = pool.scatter_gather_cells(
            self.ctx, [self.cell], 5, lambda cctxt: 'asked')
        return answer[self.cell.uuid]

    def test_outside_a_request_the_cell_is_asked(self):
        self.assertEqual('asked', self.ask())

    def test_the_request_whose_listing_gave_up_does_not_ask_again(self):
        with request_state.scope() as state:
            state.given_up = frozenset({self.cell.uuid})
            self.assertIs(nova_context.did_not_respond_sentinel, self.ask())
        self.assertIn("Cell %s did not answer this request's listing in "
                      'time and is not asked again by this request'
                      % self.cell.uuid, self.logs.output)

    def test_the_next_request_asks_again(self):
        with request_state.scope() as state:
            state.given_up = frozenset({self.cell.uuid})
        with request_state.scope():
            self.assertEqual('asked', self.ask())

    def test_a_later_listing_adds_to_what_the_request_gave_up(self):
        """Regression: a listing replaced the cells given up before it."""
        tripped = cells.cell(4)
        for _ in range(instance_list.CONF.cellsched.
                       api_stuck_queries_per_cell):
            query = stuck.Query(tripped.uuid)
            pool.STUCK.begin(query)
            pool.STUCK.abandon(query)
            self.addCleanup(pool.STUCK.end, query)
        with request_state.scope() as state:
            state.given_up = frozenset({self.cell.uuid})
            _lister, rows = instance_list.get_instances_sorted(
                self.ctx, {}, None, None, [], None, None,
                cell_mappings=[tripped])
            self.assertEqual([], list(rows))
            self.assertEqual({self.cell.uuid, tripped.uuid}, state.given_up)

    def test_a_request_served_at_the_same_time_asks(self):
        barrier = threading.Barrier(2)
        answers = {}

        def listing_gave_up():
            with request_state.scope() as state:
                state.given_up = frozenset({self.cell.uuid})
                barrier.wait(SAFETY)
                barrier.wait(SAFETY)
                answers['gave up'] = self.ask()

        def other():
            with request_state.scope():
                barrier.wait(SAFETY)
                answers['other'] = self.ask()
                barrier.wait(SAFETY)

        threads = [threading.Thread(target=f)
                   for f in (listing_gave_up, other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SAFETY)
        self.assertEqual({'gave up': nova_context.did_not_respond_sentinel,
                          'other': 'asked'}, answers)


class GreenThreadsTest(base.TestCase):
    """As nova-api under eventlet: requests in green threads.

    Runs in a process in nova's eventlet mode only (see
    :class:`EventletModeTest`, which starts one).
    """

    def setUp(self):
        super().setUp()
        if _threading():
            self.skipTest('eventlet mode only (EventletModeTest runs it)')

    def test_two_requests(self):
        """As nova-api under eventlet: green threads of one OS thread."""
        import eventlet
        order = []

        def meet():
            order.append('wait')
            # Let the other green thread run its request's first half.
            eventlet.sleep(0)
            eventlet.sleep(0)

        first = eventlet.spawn(_request, 'req-1', meet)
        second = eventlet.spawn(_request, 'req-2', meet)
        results = {'req-1': first.wait(), 'req-2': second.wait()}
        # Both requests were inside their scopes at the same time.
        self.assertEqual(['wait', 'wait'], order)
        self.assertEqual(
            {'req-1': ({'req-1'}, {'req-1'}, None),
             'req-2': ({'req-2'}, {'req-2'}, None)}, results)
        self.assertIsNone(request_state.current())

    def test_two_requests_through_one_middleware(self):
        import eventlet
        seen = {}

        def app(environ, start_response):
            state = request_state.current()
            _note(state, environ['name'])
            eventlet.sleep(0)
            eventlet.sleep(0)
            seen[environ['name']] = _seen(request_state.current())
            start_response('200 OK', [])
            return [b'ok']

        middleware = _middleware(app)
        threads = [eventlet.spawn(middleware, {'name': name},
                                  lambda *a: None)
                   for name in ('req-1', 'req-2')]
        for thread in threads:
            thread.wait()
        self.assertEqual({'req-1': {'req-1'}, 'req-2': {'req-2'}}, seen)


    def test_a_late_task_of_a_green_pool_is_green(self):
        """A task queued past its wait runs on a green thread, its future
        green too: futurist cannot wait on green and native ones at once.
        """
        import eventlet
        import futurist

        from nova_cellsched import gather

        executor = futurist.GreenThreadPoolExecutor(max_workers=1)
        self.addCleanup(executor.shutdown, wait=False)
        release = threading.Event()
        self.addCleanup(release.set)
        executor.submit(release.wait, SAFETY)
        eventlet.sleep(0)
        outcomes = gather.run_round(
            executor.submit, {'c1': (lambda: ['row'], ())},
            {'c1': gather.Budget(SAFETY)}, gather.Deadline(0.2))
        self.assertEqual(['row'], outcomes['c1'].result,
                         outcomes['c1'].describe())
        self.assertFalse(release.is_set(), 'waited for the busy worker')


class EventletModeTest(base.TestCase):
    """:class:`GreenThreadsTest` in a child process in eventlet mode."""

    def test_green_thread_requests(self):
        if not _threading():
            self.skipTest('this is the eventlet run')
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='0')
        name = '%s.%s' % (__name__, GreenThreadsTest.__name__)
        # Files, not pipes: under eventlet a child writing to a pipe has
        # been seen to hang.
        with tempfile.TemporaryFile() as out:
            proc = subprocess.run(
                [sys.executable, '-m', 'testtools.run', name], env=env,
                stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, timeout=300, check=False)
            out.seek(0)
            report = out.read().decode(errors='replace')
        self.assertEqual(0, proc.returncode, report)
        # Both ran in eventlet mode (none skipped).
        self.assertIn('Ran 3 tests', report)
        self.assertNotIn('skip', report.lower())
