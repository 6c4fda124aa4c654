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

"""Tests of the parallel gather, the deadline and the refetch rounds.

Tasks run in a real ``futurist.ThreadPoolExecutor`` and block on real
``threading.Event`` / ``threading.Barrier`` objects (a busy process: a
thread kept from running) or on a socket whose peer says nothing (a
frozen cell database); nothing is patched. A hand-moved clock is used
only where a deadline must already be over. No test asserts an elapsed
time: slow machines must not fail them.

``tests/__init__.py`` puts nova in native threading mode, so the workers
are OS threads; :meth:`GatherTestCase.test_gather_tasks_run_concurrently`
checks that too.
"""

import collections
import socket
import threading
import time
import unittest

import futurist
import hypothesis
from hypothesis import strategies as st

from nova_cellsched.compat import adapter
from nova_cellsched import gather
from nova_cellsched.listing import sorting
from nova_cellsched import silence
from tests import base
from tests.fixtures import silent

# Long enough never to be reached when the code works, short enough that
# a broken implementation fails the test instead of hanging the run.
SAFETY = 10.0


class FakeClock:
    """A clock that moves only when the test says so."""

    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class Boom(Exception):
    pass


class ExecutorTestCase(base.TestCase):

    workers = 4

    def setUp(self):
        super().setUp()
        self.executor = futurist.ThreadPoolExecutor(
            max_workers=self.workers)
        # wait=False, as the lister does: a futurist worker notices the
        # shutdown only after idling for a second.
        self.addCleanup(self.executor.shutdown, wait=False)
        # Cleanups run last-in first-out: every event is set before the
        # executor is shut down, so no worker stays blocked.
        self.events = []
        self.addCleanup(self._release_all)

    def _release_all(self):
        for event in self.events:
            event.set()

    def event(self):
        event = threading.Event()
        self.events.append(event)
        return event

    def blocked_until(self, event, result):
        """A task that returns *result* once *event* is set."""
        def task():
            if not event.wait(SAFETY):
                raise AssertionError('event never set')
            return result
        return task

    def unanswered(self, result):
        """A task waiting on a peer that says nothing until the cleanup.

        A frozen cell database: the task sleeps in a socket read (its
        silence is counted, :mod:`nova_cellsched.silence`); it returns
        *result* once the test ends.
        """
        frozen = silent.Silence()
        # Before the executor's shutdown (LIFO).
        self.addCleanup(frozen.close)

        def task():
            frozen.wait(SAFETY)
            return result
        return task


class BudgetTestCase(base.TestCase):
    """A cell is charged only for the time its own futures ran."""

    def test_pending_deadline_starts_when_the_worker_begins(self):
        """Queued: the whole allowance, not counting down; then it runs."""
        clock = FakeClock()
        budget = gather.Budget(10.0, clock=clock)
        future = futurist.Future()
        deadline = budget.start(future, pending=True)
        self.assertTrue(deadline.pending)
        clock.advance(4.0)
        self.assertEqual(10.0, deadline.remaining())
        deadline.begin()
        self.assertFalse(deadline.pending)
        clock.advance(3.0)
        self.assertEqual(7.0, deadline.remaining())
        future.set_result('rows')
        # The four seconds in the queue are not charged.
        self.assertEqual(3.0, budget.spent)

    def test_a_future_that_never_began_is_charged_nothing(self):
        clock = FakeClock()
        budget = gather.Budget(10.0, clock=clock)
        future = futurist.Future()
        budget.start(future, pending=True)
        clock.advance(5.0)
        future.cancel()
        self.assertEqual(0.0, budget.spent)

    def test_budget_charges_a_future_from_start_to_completion(self):
        clock = FakeClock()
        budget = gather.Budget(10.0, clock=clock)
        future = futurist.Future()
        deadline = budget.start(future)
        self.assertEqual(10.0, deadline.remaining())
        clock.advance(3.0)
        self.assertEqual(10.0, budget.remaining())  # still running
        future.set_result('rows')
        self.assertEqual(3.0, budget.spent)
        self.assertEqual(7.0, budget.remaining())
        self.assertEqual(7.0, budget.start(futurist.Future()).remaining())

    def test_waiting_for_another_cell_is_not_charged(self):
        """A healthy cell keeps its budget while a hung one is waited on.

        Both cells start together; the healthy one answers at once, the
        hung one only at its deadline. The healthy cell's next request
        still gets (almost) its whole allowance.
        """
        executor = futurist.ThreadPoolExecutor(max_workers=2)
        self.addCleanup(executor.shutdown, wait=False)
        hang = threading.Event()
        self.addCleanup(hang.set)
        budgets = {'ok': gather.Budget(0.5), 'hung': gather.Budget(0.5)}
        futures = {'ok': executor.submit(lambda: 'rows'),
                   'hung': executor.submit(hang.wait, SAFETY)}
        outcomes = gather.gather(futures, {
            key: budgets[key].start(future)
            for key, future in futures.items()})
        self.assertEqual(gather.OK, outcomes['ok'].status)
        self.assertEqual(gather.TIMED_OUT, outcomes['hung'].status)
        self.assertEqual(0.5, outcomes['hung'].error.seconds)
        # The hung cell has not been charged yet (still running), but the
        # healthy cell was charged only for its own short query.
        self.assertGreater(budgets['ok'].remaining(), 0.25)

    def test_gather_waits_for_each_key_until_its_own_deadline(self):
        """A short deadline does not cut the wait for a longer one."""
        executor = futurist.ThreadPoolExecutor(max_workers=2)
        self.addCleanup(executor.shutdown, wait=False)
        hang = threading.Event()
        self.addCleanup(hang.set)
        slow = threading.Event()
        futures = {'short': executor.submit(hang.wait, SAFETY),
                   'long': executor.submit(slow.wait, SAFETY)}
        timer = threading.Timer(0.3, slow.set)
        timer.start()
        self.addCleanup(timer.cancel)
        outcomes = gather.gather(futures, {
            'short': gather.Deadline(0.05), 'long': gather.Deadline(SAFETY)})
        self.assertEqual(gather.TIMED_OUT, outcomes['short'].status)
        self.assertEqual(gather.OK, outcomes['long'].status)


class DeadlineTestCase(base.TestCase):

    def test_deadline_none_never_expires(self):
        clock = FakeClock()
        deadline = gather.Deadline(None, clock=clock)
        self.assertIsNone(deadline.remaining())
        clock.advance(1e9)
        self.assertIsNone(deadline.remaining())
        self.assertIsNone(deadline.seconds)

    def test_deadline_remaining_counts_down(self):
        clock = FakeClock()
        deadline = gather.Deadline(5.0, clock=clock)
        self.assertEqual(5.0, deadline.remaining())
        clock.advance(3.0)
        self.assertEqual(2.0, deadline.remaining())
        self.assertEqual(5.0, deadline.seconds)

    def test_deadline_remaining_never_negative(self):
        clock = FakeClock()
        deadline = gather.Deadline(1.0, clock=clock)
        clock.advance(1.0)
        self.assertEqual(0.0, deadline.remaining())
        clock.advance(50.0)
        self.assertEqual(0.0, deadline.remaining())

    def test_deadline_default_clock_is_monotonic(self):
        deadline = gather.Deadline(SAFETY)
        remaining = deadline.remaining()
        self.assertGreater(remaining, 0.0)
        self.assertLessEqual(remaining, SAFETY)


class OutcomeTestCase(base.TestCase):

    def test_outcome_ok_has_no_description(self):
        outcome = gather.Outcome(gather.OK, result=[1])
        self.assertTrue(outcome.ok)
        self.assertIsNone(outcome.describe())

    def test_outcome_failed_describes_type_and_message(self):
        outcome = gather.Outcome(gather.FAILED, error=Boom('cell down'))
        self.assertFalse(outcome.ok)
        self.assertEqual('Boom: cell down', outcome.describe())

    def test_cell_timeout_message_has_seconds(self):
        error = gather.CellTimeout(2.5)
        self.assertEqual(2.5, error.seconds)
        self.assertEqual('no answer within 2.5s', str(error))


class GatherTestCase(ExecutorTestCase):

    def test_gather_cancelled_future_is_timed_out_not_raised(self):
        """A future cancelled before gather is an outcome, not an error."""
        future = futurist.Future()
        future.cancel()
        outcomes = gather.gather({'c': future}, gather.Deadline(1))
        self.assertEqual(gather.TIMED_OUT, outcomes['c'].status)
        self.assertIsInstance(outcomes['c'].error, gather.CellTimeout)

    def test_gather_all_ok(self):
        futures = {key: self.executor.submit(lambda k=key: [k, k * 2])
                   for key in range(3)}
        outcomes = gather.gather(futures, gather.Deadline(SAFETY))
        self.assertEqual({0, 1, 2}, set(outcomes))
        for key, outcome in outcomes.items():
            self.assertEqual(gather.OK, outcome.status)
            self.assertEqual([key, key * 2], outcome.result)
            self.assertIsNone(outcome.error)

    def test_run_round_exhausts_only_the_budget_that_timed_out(self):
        """A hung cell times out on its budget; the other keeps its own."""
        budgets = {'hung': gather.Budget(0.05),
                   'quick': gather.Budget(SAFETY)}
        outcomes = gather.run_round(self.executor.submit, {
            'hung': (self.unanswered([]), ()),
            'quick': (lambda: ['row'], ())}, budgets)
        self.assertEqual(gather.TIMED_OUT, outcomes['hung'].status)
        self.assertEqual(0.0, budgets['hung'].remaining())
        self.assertEqual(['row'], outcomes['quick'].result)
        self.assertGreater(budgets['quick'].remaining(), 0.0)

    def test_run_round_does_not_charge_the_wait_for_a_free_worker(self):
        """A task queued behind a busy pool is waited for, not timed out.

        One worker, held by another listing's task for longer than the
        cells' whole budget; the round's two cells queue behind it. Each
        is charged only from when the worker starts it, so both answer.
        """
        executor = futurist.ThreadPoolExecutor(max_workers=1)
        self.addCleanup(executor.shutdown, wait=False)
        busy = self.event()
        executor.submit(busy.wait, SAFETY)
        timer = threading.Timer(0.3, busy.set)
        self.addCleanup(timer.cancel)
        timer.start()
        budgets = {'c1': gather.Budget(0.1), 'c2': gather.Budget(0.1)}
        outcomes = gather.run_round(executor.submit, {
            'c1': (lambda: ['one'], ()), 'c2': (lambda: ['two'], ())},
            budgets)
        self.assertEqual({'c1': gather.OK, 'c2': gather.OK},
                         {k: o.status for k, o in outcomes.items()},
                         {k: o.describe() for k, o in outcomes.items()})
        self.assertEqual(['one'], outcomes['c1'].result)
        # Charged for their own (quick) run only.
        self.assertGreater(budgets['c1'].remaining(), 0.0)
        self.assertGreater(budgets['c2'].remaining(), 0.0)

    def test_run_round_times_out_a_started_task_at_its_budget(self):
        """Queued first, then hung: timed out once it ran its budget."""
        executor = futurist.ThreadPoolExecutor(max_workers=1)
        self.addCleanup(executor.shutdown, wait=False)
        busy = self.event()
        executor.submit(busy.wait, SAFETY)
        timer = threading.Timer(0.2, busy.set)
        self.addCleanup(timer.cancel)
        timer.start()
        budgets = {'hung': gather.Budget(0.1)}
        outcomes = gather.run_round(executor.submit, {
            'hung': (self.unanswered([]), ())}, budgets)
        self.assertEqual(gather.TIMED_OUT, outcomes['hung'].status)
        self.assertEqual(0.1, outcomes['hung'].error.seconds)

    def test_gather_empty_is_empty(self):
        self.assertEqual({}, gather.gather({}, gather.Deadline(SAFETY)))

    def test_gather_raising_task_failed_with_same_exception_object(self):
        """The outcome keeps the very exception raised, not a copy."""
        raised = Boom('cell2 database gone')

        def fail():
            raise raised

        futures = {'cell1': self.executor.submit(lambda: ['row']),
                   'cell2': self.executor.submit(fail)}
        outcomes = gather.gather(futures, gather.Deadline(SAFETY))
        self.assertEqual(gather.OK, outcomes['cell1'].status)
        self.assertEqual(['row'], outcomes['cell1'].result)
        failed = outcomes['cell2']
        self.assertEqual(gather.FAILED, failed.status)
        self.assertIs(raised, failed.error)
        self.assertIsNone(failed.result)
        self.assertIsNotNone(failed.error.__traceback__)

    def test_gather_blocked_task_timed_out_others_ok(self):
        """A cell hung past the deadline does not hold up the others."""
        hang = self.event()
        futures = {'fast1': self.executor.submit(lambda: [1]),
                   'hung': self.executor.submit(
                       self.blocked_until(hang, ['late'])),
                   'fast2': self.executor.submit(lambda: [2])}
        outcomes = gather.gather(futures, gather.Deadline(0.2))

        self.assertEqual(gather.OK, outcomes['fast1'].status)
        self.assertEqual([1], outcomes['fast1'].result)
        self.assertEqual(gather.OK, outcomes['fast2'].status)
        hung = outcomes['hung']
        self.assertEqual(gather.TIMED_OUT, hung.status)
        self.assertIsNone(hung.result)
        self.assertIsInstance(hung.error, gather.CellTimeout)
        self.assertEqual(0.2, hung.error.seconds)

        # The hung task was left to finish on its own; once released the
        # executor still runs new work.
        hang.set()
        self.assertEqual(['late'], futures['hung'].result(timeout=SAFETY))
        self.assertEqual('again', self.executor.submit(
            lambda: 'again').result(timeout=SAFETY))

    def test_gather_expired_deadline_reports_unfinished_timed_out(self):
        """Past the deadline, done tasks are ok and pending ones not."""
        clock = FakeClock()
        deadline = gather.Deadline(3.0, clock=clock)
        hang = self.event()
        done = self.executor.submit(lambda: ['done'])
        done.result(timeout=SAFETY)
        futures = {'done': done,
                   'hung': self.executor.submit(
                       self.blocked_until(hang, None))}
        clock.advance(10.0)
        outcomes = gather.gather(futures, deadline)
        self.assertEqual(gather.OK, outcomes['done'].status)
        self.assertEqual(gather.TIMED_OUT, outcomes['hung'].status)
        self.assertEqual(3.0, outcomes['hung'].error.seconds)

    def test_gather_tasks_run_concurrently(self):
        """N tasks meeting at a Barrier(N) all succeed.

        Only possible if all N run at the same time: run one after the
        other (or lazily, as nova's generator-fed scatter_gather does) the
        first task waits at the barrier alone, times out and breaks it.
        """
        n = self.workers
        barrier = threading.Barrier(n, timeout=SAFETY)

        def task():
            return barrier.wait(), threading.get_native_id()

        futures = {key: self.executor.submit(task) for key in range(n)}
        outcomes = gather.gather(futures, gather.Deadline(SAFETY * 2))
        self.assertEqual([gather.OK] * n,
                         [outcomes[k].status for k in range(n)],
                         [outcomes[k].describe() for k in range(n)])
        results = [outcomes[k].result for k in range(n)]
        # Barrier.wait gives each party a distinct index in range(n).
        self.assertEqual(set(range(n)), {index for index, _ in results})
        # OS threads, not green threads sharing one native thread.
        self.assertEqual(n, len({native for _, native in results}))


@unittest.skipUnless(silence.supported(),
                     'this system does not tell what a thread waits on')
class SilenceTestCase(ExecutorTestCase):
    """A cell is charged its silence, never the process's busyness.

    A task kept from running (here: waiting for a lock, as a thread waits
    for the GIL or a CPU in a busy process) is not its cell's fault; a
    task whose database says nothing is.
    """

    def test_a_task_kept_from_running_past_its_budget_still_answers(self):
        """Regression: under load, healthy cells were reported down."""
        busy = threading.Lock()
        busy.acquire()
        timer = threading.Timer(0.5, busy.release)
        self.addCleanup(timer.cancel)
        timer.start()

        def starved():
            if not busy.acquire(timeout=SAFETY):
                raise AssertionError('never released')
            return ['row']

        budgets = {'c1': gather.Budget(0.1)}
        outcomes = gather.run_round(self.executor.submit,
                                    {'c1': (starved, ())}, budgets)
        self.assertEqual(gather.OK, outcomes['c1'].status,
                         outcomes['c1'].describe())
        self.assertEqual(['row'], outcomes['c1'].result)
        # Nothing charged: its thread never waited on its peer.
        self.assertEqual(0.1, budgets['c1'].remaining())

    def test_a_silent_peer_is_timed_out_beside_a_starved_task(self):
        """The same round: the frozen cell is down, the starved one not."""
        busy = self.event()
        timer = threading.Timer(0.5, busy.set)
        self.addCleanup(timer.cancel)
        timer.start()
        budgets = {'frozen': gather.Budget(0.2),
                   'starved': gather.Budget(0.2)}
        outcomes = gather.run_round(self.executor.submit, {
            'frozen': (self.unanswered([]), ()),
            'starved': (self.blocked_until(busy, ['row']), ())}, budgets)
        self.assertEqual(gather.TIMED_OUT, outcomes['frozen'].status)
        self.assertEqual(0.0, budgets['frozen'].remaining())
        self.assertEqual(['row'], outcomes['starved'].result)

    def test_silence_adds_up_over_the_cell_s_waits(self):
        """A cell answering late again and again runs out of budget.

        Each read waits 0.3 s for the peer: no one wait is the budget
        (0.5 s), but their sum is.
        """
        ours, peer = socket.socketpair()
        ours.settimeout(SAFETY)
        self.addCleanup(ours.close)
        self.addCleanup(peer.close)
        stop = self.event()

        def slow_peer():
            while not stop.wait(0.3):
                peer.sendall(b'x')

        sender = threading.Thread(target=slow_peer, daemon=True)
        sender.start()

        def reads():
            for _ in range(20):
                ours.recv(1)
            return ['all']

        budget = gather.Budget(0.5)
        outcomes = gather.run_round(self.executor.submit,
                                    {'slow': (reads, ())}, {'slow': budget})
        self.assertEqual(gather.TIMED_OUT, outcomes['slow'].status)

    def test_without_a_watch_the_wall_time_is_charged(self):
        """Budget(silent=False): a starved task is timed out (wall time).
        """
        busy = self.event()
        outcomes = gather.run_round(self.executor.submit, {
            'c1': (self.blocked_until(busy, ['row']), ())},
            {'c1': gather.Budget(0.1, silent=False)})
        self.assertEqual(gather.TIMED_OUT, outcomes['c1'].status)

    def test_a_watch_counts_only_a_sleep_on_io(self):
        """Asleep on a lock, nothing; asleep in a read, the time it slept.
        """
        lock = threading.Lock()
        lock.acquire()
        ours, peer = socket.socketpair()
        ours.settimeout(SAFETY)
        self.addCleanup(ours.close)
        self.addCleanup(peer.close)
        ready = threading.Event()
        native = []

        def sleeper():
            native.append(threading.get_native_id())
            ready.set()
            lock.acquire(timeout=SAFETY)
            ours.recv(1)

        thread = threading.Thread(target=sleeper, daemon=True)
        thread.start()
        ready.wait(SAFETY)
        clock = FakeClock()
        own = threading.get_native_id()
        watch = silence.watch(native[0], clock, own)
        self.assertIsNotNone(watch)
        for _ in range(3):
            threading.Event().wait(0.05)
            clock.advance(1.0)
            watch.sample()
        self.assertEqual(0.0, watch.silence)
        lock.release()
        # Until it sleeps in its read.
        for _ in range(int(SAFETY / 0.05)):
            threading.Event().wait(0.05)
            clock.advance(1.0)
            if watch.sample() > 0:
                break
        seen = watch.silence
        threading.Event().wait(0.05)
        clock.advance(1.0)
        self.assertEqual(seen + 1.0, watch.sample())
        peer.sendall(b'x')
        thread.join(SAFETY)
        # Not the sampler's own thread (green threads share it).
        self.assertIsNone(silence.watch(own, clock, own))


@unittest.skipIf(adapter.threading_mode(),
                 'nova runs on native threads here')
class GreenSilenceTestCase(base.TestCase):
    """Under eventlet, a cell is charged its silence, not the hub's load.

    The tasks run on eventlet green threads (futurist's green executor)
    of the test's own OS thread, as nova-api's do on nova 31 and 32, and
    wait on green sockets. Run by the per-release tests
    (``tools/releases/ci.txt``: nova 31 to 33 run in eventlet mode,
    ``tests/__init__.py``; nova 34's threading mode forbids eventlet).
    """

    def setUp(self):
        super().setUp()
        self.executor = futurist.GreenThreadPoolExecutor(max_workers=4)
        self.addCleanup(self.executor.shutdown, wait=False)

    def pair(self):
        """A green socket and its peer, closed after the test."""
        from eventlet.green import socket as green_socket

        ours, peer = green_socket.socketpair()
        ours.settimeout(SAFETY)
        # The peer first: a task still reading ends (it reads b'').
        self.addCleanup(ours.close)
        self.addCleanup(peer.close)
        return ours, peer

    def test_an_answer_kept_waiting_by_a_busy_green_thread_is_no_silence(
            self):
        """Regression: answered cells were reported down (wall time).

        The hog answers for the waiting task's peer, then computes for
        three budgets without yielding: the answer waits in the socket,
        and the task cannot run to read it.
        """
        import eventlet

        ours, peer = self.pair()

        def waiting():
            return ours.recv(1)

        def hog():
            eventlet.sleep(0.05)    # the other task waits in its read
            peer.sendall(b'x')
            end = time.monotonic() + 0.6
            while time.monotonic() < end:
                pass
            return b'done'

        budgets = {'waiting': gather.Budget(0.2), 'hog': gather.Budget(0.2)}
        outcomes = gather.run_round(self.executor.submit, {
            'waiting': (waiting, ()), 'hog': (hog, ())}, budgets)
        self.assertEqual(
            {'waiting': (gather.OK, b'x'), 'hog': (gather.OK, b'done')},
            {key: (outcome.status, outcome.result)
             for key, outcome in outcomes.items()})
        # At most the looks before the answer, never the hog's time.
        self.assertLess(budgets['waiting'].spent, 0.2)
        self.assertEqual(0.0, budgets['hog'].spent)

    def test_a_silent_peer_is_timed_out(self):
        """A frozen cell on a green thread is down after its budget."""
        ours, _peer = self.pair()
        budget = gather.Budget(0.2)
        outcomes = gather.run_round(
            self.executor.submit, {'frozen': (ours.recv, (1,))},
            {'frozen': budget})
        self.assertEqual(gather.TIMED_OUT, outcomes['frozen'].status)
        self.assertEqual(0.0, budget.remaining())

    def test_a_silent_peer_in_a_green_select_is_timed_out(self):
        """A wait in eventlet's select() is a wait on I/O too."""
        from eventlet.green import select as green_select

        ours, _peer = self.pair()
        budget = gather.Budget(0.2)
        outcomes = gather.run_round(
            self.executor.submit,
            {'frozen': (green_select.select, ([ours], [], [], SAFETY))},
            {'frozen': budget})
        self.assertEqual(gather.TIMED_OUT, outcomes['frozen'].status)
        self.assertEqual(0.0, budget.remaining())

    def test_a_green_watch_counts_only_a_sleep_on_io(self):
        """Parked on an event, nothing; parked in a read, the time slept.
        """
        import eventlet
        from eventlet import event

        ours, peer = self.pair()
        go = event.Event()
        clock = FakeClock()
        own = threading.get_native_id()
        watches = []

        def sleeper():
            watches.append(silence.watch(threading.get_native_id(), clock,
                                         own))
            go.wait()
            first = ours.recv(1)
            go.wait()   # reset and sent again: at once
            return [first, ours.recv(1)]

        thread = eventlet.spawn(sleeper)
        eventlet.sleep(0)
        (watch,) = watches
        self.assertIsInstance(watch, silence.GreenWatch)
        for _ in range(3):
            eventlet.sleep(0.01)
            clock.advance(1.0)
            watch.sample()
        self.assertEqual(0.0, watch.silence)
        go.send()
        eventlet.sleep(0.01)    # it reads, and waits
        for expected in (0.0, 1.0, 2.0):
            clock.advance(1.0)
            self.assertEqual(expected, watch.sample())
        # Answered, read, and a new wait on the same socket between two
        # looks: the new wait is counted from the look that sees it.
        peer.sendall(b'x')
        go.reset()
        go.send()
        eventlet.sleep(0.01)
        for expected in (2.0, 3.0):
            clock.advance(1.0)
            self.assertEqual(expected, watch.sample())
        # An answer not read yet: the peer spoke, nothing more counts.
        peer.sendall(b'y')
        clock.advance(1.0)
        self.assertEqual(3.0, watch.sample())
        self.assertEqual([b'x', b'y'], thread.wait())
        # The test's own OS thread is no green thread: no watch.
        self.assertIsNone(silence.watch(own, clock, own))


def runs_of(**cells):
    """cell -> [(key,)] from cell=[keys...]."""
    return {cell: [(k,) for k in keys] for cell, keys in cells.items()}


class RunRoundGateTestCase(ExecutorTestCase):

    # How long each submit gives the tasks already submitted to start:
    # without the gate they would, with it they must not.
    CHANCE = 0.2

    def test_no_task_starts_before_the_last_is_submitted(self):
        """The tasks of a round start together, after the last submit."""
        started = {key: threading.Event() for key in 'abc'}
        early = []

        def submit(*args):
            future = self.executor.submit(*args)
            # Every task submitted so far had its chance to run.
            early.extend(k for k, e in started.items()
                         if e.wait(self.CHANCE))
            return future

        outcomes = gather.run_round(submit, {
            key: (lambda k: started[k].set() or k, (key,))
            for key in started}, {key: gather.Budget(SAFETY)
                                  for key in started})
        self.assertEqual([], early)
        self.assertEqual({'a': 'a', 'b': 'b', 'c': 'c'},
                         {k: o.result for k, o in outcomes.items()})

    def test_a_failed_submit_opens_the_gate_for_the_submitted_ones(self):
        """No task already submitted waits for ever; the error is raised."""
        submitted = []

        def submit(*args):
            if len(submitted) == 2:
                raise Boom('executor is shut down')
            future = self.executor.submit(*args)
            submitted.append(future)
            return future

        self.assertRaises(Boom, gather.run_round, submit, {
            key: (str.upper, (key,)) for key in 'abc'},
            {key: gather.Budget(SAFETY) for key in 'abc'})
        self.assertEqual(['A', 'B'], [f.result(SAFETY) for f in submitted])


class QueuedTaskTestCase(ExecutorTestCase):
    """A busy pool costs a round its wait, never a cell's answer.

    A pool whose workers are all held (by tasks of frozen cells of other
    requests) must not make a round wait for a worker past its wait, nor
    report a healthy cell as not answering: a task still queued then is
    run at once on a thread of its own, under its cell's budget.
    """

    #: A round's wait for a worker in these tests.
    WAIT = 0.3
    #: What the workers' holders are released after, if nothing else
    #: releases them first: far past the wait.
    HELD = 5.0

    def held_pool(self, workers, held):
        """A pool of *workers* threads, *held* of them blocked."""
        executor = futurist.ThreadPoolExecutor(max_workers=workers)
        self.addCleanup(executor.shutdown, wait=False)
        frozen = self.event()
        timer = threading.Timer(self.HELD, frozen.set)
        self.addCleanup(timer.cancel)
        timer.start()
        started = threading.Barrier(held + 1)

        def hold():
            started.wait(SAFETY)
            frozen.wait(SAFETY)

        for _ in range(held):
            executor.submit(hold)
        # Every holder runs before the round is submitted.
        started.wait(SAFETY)
        return executor, frozen

    def drain(self, executor):
        """Wait until the pool ran (or skipped) everything queued now."""
        executor.submit(lambda: None).result(SAFETY)

    def counting(self):
        """(a task answering [cell] that counts its runs, the counts)."""
        ran = collections.Counter()
        lock = threading.Lock()

        def answer(cell):
            with lock:
                ran[cell] += 1
            return [cell]

        return answer, ran

    def test_a_task_queued_past_its_wait_runs_at_once_elsewhere(self):
        """The only worker is held; the cell still answers, in time.

        Its task runs once, on a thread of its own, and not again once
        the worker is free; the round did not wait for the worker.
        """
        executor, frozen = self.held_pool(workers=1, held=1)
        answer, ran = self.counting()
        budgets = {'c1': gather.Budget(self.WAIT)}
        outcomes = gather.run_round(
            executor.submit, {'c1': (answer, ('c1',))}, budgets,
            gather.Deadline(self.WAIT))
        self.assertFalse(frozen.is_set(), 'waited for the busy worker')
        self.assertEqual(gather.OK, outcomes['c1'].status,
                         outcomes['c1'].describe())
        self.assertEqual(['c1'], outcomes['c1'].result)
        self.assertGreater(budgets['c1'].remaining(), 0.0)
        frozen.set()
        self.drain(executor)
        self.assertEqual({'c1': 1}, dict(ran))

    def test_a_late_task_that_hangs_is_timed_out_at_its_budget(self):
        """Run late, then hung: timed out when it ran its whole budget."""
        executor, frozen = self.held_pool(workers=1, held=1)
        budgets = {'hung': gather.Budget(self.WAIT)}
        outcomes = gather.run_round(
            executor.submit, {'hung': (self.unanswered([]), ())},
            budgets, gather.Deadline(self.WAIT))
        self.assertFalse(frozen.is_set(), 'waited for the busy worker')
        self.assertEqual(gather.TIMED_OUT, outcomes['hung'].status)
        self.assertEqual(self.WAIT, outcomes['hung'].error.seconds)
        self.assertEqual(0.0, budgets['hung'].remaining())

    def test_a_running_task_is_waited_for_until_its_budget(self):
        """A task that answers after the wait but within its budget is ok.
        """
        release = self.event()
        timer = threading.Timer(self.WAIT * 2, release.set)
        self.addCleanup(timer.cancel)
        timer.start()
        outcomes = gather.run_round(self.executor.submit, {
            'slow': (self.blocked_until(release, ['late row']), ()),
            'quick': (lambda: ['row'], ())},
            {'slow': gather.Budget(SAFETY), 'quick': gather.Budget(SAFETY)},
            gather.Deadline(self.WAIT))
        self.assertEqual(['late row'], outcomes['slow'].result)
        self.assertEqual(['row'], outcomes['quick'].result)

    def test_a_round_past_its_wait_still_asks_every_cell(self):
        """A wait already over (the request used it up): cells still answer.
        """
        clock = FakeClock()
        wait = gather.Deadline(1.0, clock=clock)
        clock.advance(1.0)
        executor, frozen = self.held_pool(workers=1, held=1)
        answer, ran = self.counting()
        outcomes = gather.run_round(
            executor.submit, {'c1': (answer, ('c1',)),
                              'c2': (answer, ('c2',))},
            {'c1': gather.Budget(SAFETY), 'c2': gather.Budget(SAFETY)},
            wait)
        self.assertFalse(frozen.is_set(), 'waited for the busy worker')
        self.assertEqual({'c1': ['c1'], 'c2': ['c2']},
                         {k: o.result for k, o in outcomes.items()})
        frozen.set()
        self.drain(executor)
        self.assertEqual({'c1': 1, 'c2': 1}, dict(ran))

    def test_without_a_wait_a_queued_task_is_waited_for(self):
        """No wait: the queued task runs on the pool, when a worker frees.
        """
        executor, frozen = self.held_pool(workers=1, held=1)
        timer = threading.Timer(self.WAIT * 2, frozen.set)
        self.addCleanup(timer.cancel)
        timer.start()
        outcomes = gather.run_round(
            executor.submit, {'c1': (lambda: ['row'], ())},
            {'c1': gather.Budget(self.WAIT)})
        self.assertEqual(['row'], outcomes['c1'].result)
        self.assertTrue(frozen.is_set())

    @hypothesis.settings(max_examples=12, deadline=None)
    @hypothesis.given(workers=st.integers(1, 4), held=st.integers(0, 4),
                      cells=st.integers(1, 6))
    def test_a_busy_pool_never_costs_an_answer(self, workers, held, cells):
        """Any pool, any load: every cell answers, each task runs once,
        and the round ended with the pool still held.

        The pool has *workers* threads, *held* of them (at most all)
        blocked for far longer than the wait.
        """
        held = min(held, workers)
        executor, frozen = self.held_pool(workers, held)
        answer, ran = self.counting()
        keys = ['cell%d' % n for n in range(cells)]
        outcomes = gather.run_round(
            executor.submit, {key: (answer, (key,)) for key in keys},
            {key: gather.Budget(SAFETY) for key in keys},
            gather.Deadline(self.WAIT))
        self.assertFalse(frozen.is_set(), 'waited for the busy workers')
        self.assertEqual({key: [key] for key in keys},
                         {k: o.result for k, o in outcomes.items()})
        frozen.set()
        self.drain(executor)
        self.assertEqual(dict.fromkeys(keys, 1), dict(ran))


class RefetchSizesTestCase(base.TestCase):
    """Which cells a further round asks, and for how many rows."""

    def test_refetch_without_limit_asks_every_open_cell_for_a_batch(self):
        runs = runs_of(a=[1, 2], b=[3, 4], c=[5])
        self.assertEqual({'a': 2, 'b': 2},
                         gather.refetch_sizes(runs, {'a', 'b'}, 2, None,
                                              grow=False))

    def test_refetch_without_limit_grows_with_what_a_cell_gave(self):
        """Every row is needed: twice what it gave, at least a batch."""
        runs = runs_of(a=[1, 2], b=list(range(3, 13)))
        self.assertEqual({'a': 5, 'b': 20},
                         gather.refetch_sizes(runs, {'a', 'b'}, 5, None))

    def test_refetch_grows_a_cell_that_holds_the_whole_page(self):
        """A project living in one cell: twice the rows it gave.

        The other cells gave nothing; the cell's share of what the page
        misses is all of it, so its growth is the bound until the last
        round, which asks just for the rows the page still misses.
        """
        runs = runs_of(a=list(range(30)), **{'e%d' % i: [] for i in
                                             range(49)})
        self.assertEqual({'a': 60},
                         gather.refetch_sizes(runs, {'a'}, 30, 1000))
        self.assertEqual({'a': 30},
                         gather.refetch_sizes(runs, {'a'}, 30, 1000,
                                              grow=False))
        runs['a'] = [(k,) for k in range(810)]
        self.assertEqual({'a': 190},
                         gather.refetch_sizes(runs, {'a'}, 30, 1000))

    def test_refetch_skips_a_cell_whose_last_row_is_past_the_limit(self):
        """b's last row (key 9) ranks 5th: with limit 4 it is not needed."""
        runs = runs_of(a=[1, 2, 3], b=[4, 9])
        self.assertEqual({'a': 1},
                         gather.refetch_sizes(runs, {'a', 'b'}, 3, 4))

    def test_refetch_asks_at_most_what_the_cell_can_still_contribute(self):
        """a's last row ranks 2nd of limit 5: at most 3 more rows."""
        runs = runs_of(a=[1, 2], b=[3, 4])
        self.assertEqual({'a': 2, 'b': 1},
                         gather.refetch_sizes(runs, {'a', 'b'}, 2, 5,
                                              grow=False))
        self.assertEqual({'a': 3, 'b': 1},
                         gather.refetch_sizes(runs, {'a', 'b'}, 2, 5))
        self.assertEqual({'a': 3, 'b': 1},
                         gather.refetch_sizes(runs, {'a', 'b'}, 10, 5))

    def test_refetch_asks_a_sparse_cell_for_its_share_with_margin(self):
        """a holds 10 of the 91 rows up to its last: 10/91 of 109 x 1.25."""
        b_keys = [k for k in range(1, 100) if k % 10]
        runs = runs_of(a=list(range(0, 100, 10)), b=b_keys)
        self.assertEqual({'a': 15},
                         gather.refetch_sizes(runs, {'a'}, 100, 200))

    def test_refetch_asks_a_dense_cell_for_all_it_can_give(self):
        """a holds every row up to its last: it may fill the whole page."""
        runs = runs_of(a=list(range(100)), b=list(range(1000, 1100)))
        self.assertEqual({'a': 50},
                         gather.refetch_sizes(runs, {'a'}, 100, 150))

    def test_refetch_done_when_limit_rows_precede_every_open_cell(self):
        runs = runs_of(a=[1, 2], b=[3, 4])
        self.assertEqual({}, gather.refetch_sizes(runs, {'b'}, 2, 3))
        self.assertEqual({}, gather.refetch_sizes(runs, set(), 2, 3))

    def test_refetch_counts_equal_keys_in_other_cells_as_before(self):
        """A tie with the last row still takes a place before the cut."""
        runs = runs_of(a=[1, 5], b=[5, 6])
        self.assertEqual({}, gather.refetch_sizes(runs, {'a'}, 2, 3))
        self.assertEqual({'a': 1}, gather.refetch_sizes(runs, {'a'}, 2, 4))

    @hypothesis.settings(deadline=None, max_examples=300)
    @hypothesis.given(
        cells=st.lists(st.lists(st.integers(0, 50), max_size=40),
                       min_size=1, max_size=8),
        batch_size=st.integers(1, 12),
        limit=st.one_of(st.none(), st.integers(1, 120)),
        grow=st.booleans())
    def test_rounds_find_the_global_first_rows(self, cells, batch_size,
                                               limit, grow):
        """Rounds driven by refetch_sizes give the true first rows.

        Each cell holds sorted keys; a round fetches from each cell the
        rows after its last one, as the lister does. The merged answer is
        the first *limit* keys of all cells, and no cell was asked for
        more rows in a round than it was allowed: a batch, or with
        *grow* twice the rows it gave when that is more.
        """
        data = {str(i): sorted(keys) for i, keys in enumerate(cells)}
        # A row's first item is its sort key, unique as the listing's are
        # (they end in the uuid): (key, cell, position).
        rows = {c: [((k, c, i),) for i, k in enumerate(keys)]
                for c, keys in data.items()}
        runs = {c: rows[c][:batch_size] for c in rows}
        open_cells = {c for c in runs if len(runs[c]) >= batch_size}
        rounds = 0
        while open_cells:
            wanted = gather.refetch_sizes(runs, open_cells, batch_size,
                                          limit, grow=grow)
            if not wanted:
                break
            rounds += 1
            self.assertLess(rounds, 1000)
            for cell, size in wanted.items():
                self.assertLessEqual(size, max(
                    batch_size, 2 * len(runs[cell]) if grow else 0))
                got = rows[cell][len(runs[cell]):len(runs[cell]) + size]
                runs[cell] = runs[cell] + got
                if len(got) < size:
                    open_cells.discard(cell)
        merged = list(sorting.merge(runs.values(), key=lambda r: r,
                                    limit=limit))
        everything = sorted(r for run in rows.values() for r in run)
        expected = everything if limit is None else everything[:limit]
        self.assertEqual(expected, merged)
