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

"""Tests of the parallel gather, the deadline and the cell streams.

Tasks run in a real ``futurist.ThreadPoolExecutor`` and block on real
``threading.Event`` / ``threading.Barrier`` objects; nothing is patched.
A hand-moved clock is used only where a deadline must already be over.
No test asserts an elapsed time: slow machines must not fail them.

``tests/__init__.py`` puts nova in native threading mode, so the workers
are OS threads; :meth:`GatherTestCase.test_gather_tasks_run_concurrently`
checks that too.
"""

import threading

import futurist
from oslotest import base

from nova_cellsched import gather
from nova_cellsched import sorting

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


class ExecutorTestCase(base.BaseTestCase):

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


class BudgetTestCase(base.BaseTestCase):
    """A cell is charged only for the time its own futures ran."""

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


class DeadlineTestCase(base.BaseTestCase):

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


class OutcomeTestCase(base.BaseTestCase):

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


class CellStreamTestCase(ExecutorTestCase):

    def setUp(self):
        super().setUp()
        self.failures = {}
        self.calls = []
        self.batches = []
        self.refetches = []

    def submit_after(self, last):
        """Fetch the next prepared batch in a worker thread."""
        self.calls.append(last)
        batch = self.batches.pop(0)
        if isinstance(batch, BaseException):
            def task():
                raise batch
        elif callable(batch):
            task = batch
        else:
            def task():
                return list(batch)
        return self.executor.submit(task)

    def stream(self, first, batch_size, budget=None, **kwargs):
        return gather.CellStream(
            'cell1', first, self.submit_after, batch_size,
            budget or gather.Budget(SAFETY), self.failures,
            on_refetch=lambda *args: self.refetches.append(args), **kwargs)

    def test_stream_first_batch_only_when_batch_size_none(self):
        stream = self.stream([1, 2, 3], None)
        self.assertEqual([1, 2, 3], list(stream))
        self.assertEqual([], self.calls)
        self.assertEqual(3, stream.rows_yielded)
        self.assertEqual(1, stream.batches)

    def test_stream_short_first_batch_stops_without_refetch(self):
        stream = self.stream([1, 2], 3)
        self.assertEqual([1, 2], list(stream))
        self.assertEqual([], self.calls)
        self.assertEqual([], self.refetches)
        self.assertEqual({}, self.failures)

    def test_stream_full_batch_refetches_after_last_row(self):
        self.batches = [[4, 5, 6], [7]]
        stream = self.stream([1, 2, 3], 3)
        self.assertEqual([1, 2, 3, 4, 5, 6, 7], list(stream))
        self.assertEqual([3, 6], self.calls)
        self.assertEqual(3, stream.batches)
        self.assertEqual(7, stream.rows_yielded)
        self.assertEqual({}, self.failures)
        self.assertEqual(['cell1', 'cell1'],
                         [key for key, _, _ in self.refetches])

    def test_stream_refetches_only_when_batch_used_up(self):
        """The next batch is asked for only once the last row is taken."""
        self.batches = [[3, 4]]
        stream = iter(self.stream([1, 2], 2))
        self.assertEqual(1, next(stream))
        self.assertEqual(2, next(stream))
        self.assertEqual([], self.calls)
        self.assertEqual(3, next(stream))
        self.assertEqual([2], self.calls)

    def test_stream_empty_refetch_stops(self):
        self.batches = [[]]
        stream = self.stream([1, 2], 2)
        self.assertEqual([1, 2], list(stream))
        self.assertEqual([2], self.calls)
        self.assertEqual(2, stream.batches)
        self.assertEqual({}, self.failures)

    def test_stream_counts_rows_taken_mid_batch(self):
        """A merge that stops inside a batch is counted row by row."""
        stream = self.stream([1, 2, 3], None)
        rows = iter(stream)
        next(rows)
        next(rows)
        self.assertEqual(2, stream.rows_yielded)

    def test_stream_empty_batch_stops_without_refetch(self):
        """An empty batch ends the stream even if it counts as 'full'."""
        stream = self.stream([], 0)
        self.assertEqual([], list(stream))
        self.assertEqual([], self.calls)
        self.assertEqual(0, stream.rows_yielded)

    def test_stream_failing_refetch_recorded_with_original_exception(self):
        raised = Boom('lost connection')
        self.batches = [raised, [99]]
        stream = self.stream(['a', 'b'], 2)
        self.assertEqual(['a', 'b'], list(stream))
        self.assertEqual(['b'], self.calls)
        outcome = self.failures['cell1']
        self.assertEqual(gather.FAILED, outcome.status)
        self.assertIs(raised, outcome.error)
        self.assertEqual(1, stream.batches)
        self.assertEqual(1, len(self.refetches))

    def test_stream_refetch_timeout_recorded_as_timed_out(self):
        """A cell whose budget is spent gets no more time for a refetch."""
        clock = FakeClock()
        budget = gather.Budget(2.0, clock=clock)
        earlier = futurist.Future()
        budget.start(earlier)
        clock.advance(5.0)
        earlier.set_result(None)  # the first batch took all of it
        hang = self.event()
        self.batches = [self.blocked_until(hang, [3, 4])]
        stream = self.stream([1, 2], 2, budget=budget)
        self.assertEqual([1, 2], list(stream))
        outcome = self.failures['cell1']
        self.assertEqual(gather.TIMED_OUT, outcome.status)
        self.assertIsInstance(outcome.error, gather.CellTimeout)
        self.assertEqual(2.0, outcome.error.seconds)

    def test_stream_on_refetch_gets_times_from_clock(self):
        ticks = iter(range(10, 100))
        self.batches = [[3]]
        stream = self.stream([1, 2], 2, clock=lambda: next(ticks))
        self.assertEqual([1, 2, 3], list(stream))
        self.assertEqual([('cell1', 10, 11)], self.refetches)

    def test_stream_merged_with_limit_does_not_refetch_needlessly(self):
        """A merge that stops at its limit asks no cell for more rows."""
        self.batches = [[5, 6]]
        streams = [self.stream([1, 3], 2),
                   gather.CellStream('cell2', [2, 4], self.submit_after,
                                     2, gather.Budget(SAFETY),
                                     self.failures)]
        merged = list(sorting.merge(streams, key=lambda r: r, limit=3))
        self.assertEqual([1, 2, 3], merged)
        self.assertEqual([], self.calls)
