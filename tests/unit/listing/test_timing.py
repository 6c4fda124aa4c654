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

"""Tests of the listing timings: spans, summary, table, log and trace."""

import dataclasses
import json
import numbers
import threading


from nova_cellsched.listing import timing
from nova_cellsched.listing.timing import Span
from tests import base

U1 = '11111111-1111-4111-8111-111111111111'
U2 = '22222222-2222-4222-8222-222222222222'
U3 = '33333333-3333-4333-8333-333333333333'
CELLS = {U1: 'cell1', U2: 'cell2', U3: None}
STATUS = {U2: ('failed', 'Boom: lost connection')}


class FakeClock:
    """A clock that moves only when the test says so."""

    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def span(name, start, end, cell=None, tid=1, **args):
    return Span(name, start, end, tid, 'thread-%d' % tid, cell, args)


# One listing, by hand: times are exact binary fractions so the sums are
# exact too.
SPANS = (
    span('setup', 0.0, 0.5),
    span('gather', 0.0, 1.0, cells=3),
    span('wait', 0.0, 0.125, U1, tid=2),
    span('connect', 0.125, 0.25, U1, tid=2),
    span('execute', 0.25, 0.5, U1, tid=2),
    span('fetch', 0.5, 0.75, U1, tid=2, rows=3),
    span('wait', 0.0, 0.5, U2, tid=3),
    span('connect', 0.5, 1.0, U2, tid=3),
    span('refetch', 1.0, 1.5, cells=1),
    span('wait', 1.0, 1.125, U1, tid=2),
    span('execute', 1.125, 1.25, U1, tid=2),
    span('fetch', 1.25, 1.375, U1, tid=2, rows=2),
    span('merge', 1.5, 2.0, rows=5),
    span('view', 2.25, 2.5, rows=5),
    # Ignored: a cell not queried, and a worker phase without a cell.
    span('fetch', 0.0, 8.0, 'not-a-listed-cell', tid=4, rows=100),
    span('fetch', 0.0, 8.0, None, tid=4, rows=100),
)


def summary(spans=SPANS, total=3.0, cells=CELLS, status=STATUS):
    return timing.summarize(spans, total, cells, status)


class RecorderTestCase(base.TestCase):

    def test_recorder_times_are_relative_to_origin(self):
        clock = FakeClock()
        recorder = timing.Recorder(clock=clock)
        clock.now += 1.5
        self.assertEqual(1.5, recorder.now())

    def test_recorder_span_records_body_and_extra_args(self):
        clock = FakeClock()
        recorder = timing.Recorder(clock=clock)
        clock.now += 1.0
        with recorder.span('fetch', U1, what='rows') as extra:
            clock.now += 0.5
            extra['rows'] = 7
        (recorded,) = recorder.spans()
        self.assertEqual('fetch', recorded.name)
        self.assertEqual(U1, recorded.cell)
        self.assertEqual(1.0, recorded.start)
        self.assertEqual(1.5, recorded.end)
        self.assertEqual(0.5, recorded.duration)
        self.assertEqual({'what': 'rows', 'rows': 7}, dict(recorded.args))
        self.assertEqual(threading.current_thread().name,
                         recorded.thread_name)

    def test_recorder_span_recorded_when_body_raises(self):
        recorder = timing.Recorder()

        def failing():
            with recorder.span('execute', U1):
                raise ValueError('query failed')

        self.assertRaises(ValueError, failing)
        self.assertEqual(['execute'], [s.name for s in recorder.spans()])

    def test_recorder_spans_in_start_order(self):
        recorder = timing.Recorder(clock=FakeClock())
        recorder.add('view', 3.0, 4.0)
        recorder.add('gather', 0.0, 1.0)
        recorder.add('merge', 1.0, 3.0)
        self.assertEqual(['gather', 'merge', 'view'],
                         [s.name for s in recorder.spans()])

    def test_recorder_collects_spans_from_many_threads(self):
        """Each span names the thread that recorded it."""
        recorder = timing.Recorder()
        per_thread = 50
        seen = {}
        start = threading.Barrier(4, timeout=10)

        def work(cell):
            me = threading.current_thread()
            seen[me.name] = me.native_id
            start.wait()
            for i in range(per_thread):
                with recorder.span('fetch', cell, rows=i):
                    pass
                recorder.add('wait', 0.0, 0.0, cell)

        threads = [threading.Thread(target=work, args=('cell%d' % i,),
                                    name='worker-%d' % i)
                   for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
            self.assertFalse(thread.is_alive())

        spans = recorder.spans()
        self.assertEqual(4 * per_thread * 2, len(spans))
        for i in range(4):
            mine = [s for s in spans if s.thread_name == 'worker-%d' % i]
            self.assertEqual(per_thread * 2, len(mine))
            self.assertEqual({'cell%d' % i}, {s.cell for s in mine})
            self.assertEqual({seen['worker-%d' % i]},
                             {s.thread_id for s in mine})
        self.assertEqual(4, len({s.thread_id for s in spans}))

    def test_span_duration_never_negative(self):
        self.assertEqual(0.0, span('fetch', 2.0, 1.0).duration)


class SummarizeTestCase(base.TestCase):

    def test_summarize_caller_phases(self):
        timings = summary()
        self.assertEqual(3.0, timings.total)
        self.assertEqual(0.5, timings.setup)
        # gather = first batches + refetch waits.
        self.assertEqual(1.0 + 0.5, timings.gather)
        # Refetch rounds happen before the merge, not inside it.
        self.assertEqual(0.5, timings.merge)
        self.assertEqual(0.25, timings.view)
        self.assertGreaterEqual(
            timings.total,
            timings.setup + timings.gather + timings.merge + timings.view)

    def test_summarize_refetch_rounds_count_as_gather(self):
        timings = summary(spans=(span('merge', 2.0, 3.0),
                                 span('refetch', 0.0, 2.0)))
        self.assertEqual(1.0, timings.merge)
        self.assertEqual(2.0, timings.gather)

    def test_summarize_sums_worker_phases_per_cell(self):
        cells = {c.cell_uuid: c for c in summary().cells}
        self.assertEqual({U1, U2, U3}, set(cells))
        one = cells[U1]
        self.assertEqual(0.125 + 0.125, one.wait)
        self.assertEqual(0.125, one.connect)
        # Every batch's statement counts as execute time of its cell.
        self.assertEqual(0.25 + 0.125, one.execute)
        self.assertEqual(0.25 + 0.125, one.fetch)
        self.assertEqual(one.connect + one.execute + one.fetch, one.query)
        two = cells[U2]
        self.assertEqual((0.5, 0.5, 0.0, 0.0),
                         (two.wait, two.connect, two.execute, two.fetch))

    def test_summarize_rows_and_batches_from_fetch_spans(self):
        cells = {c.cell_uuid: c for c in summary().cells}
        self.assertEqual((5, 2), (cells[U1].rows, cells[U1].batches))
        self.assertEqual((0, 0), (cells[U2].rows, cells[U2].batches))
        self.assertEqual((0, 0), (cells[U3].rows, cells[U3].batches))

    def test_summarize_status_and_error_per_cell(self):
        cells = {c.cell_uuid: c for c in summary().cells}
        self.assertEqual(('ok', None), (cells[U1].status, cells[U1].error))
        self.assertEqual(('failed', 'Boom: lost connection'),
                         (cells[U2].status, cells[U2].error))
        self.assertEqual(('ok', None), (cells[U3].status, cells[U3].error))

    def test_summarize_cells_ordered_by_name_then_uuid(self):
        self.assertEqual([U3, U1, U2],
                         [c.cell_uuid for c in summary().cells])
        self.assertEqual([None, 'cell1', 'cell2'],
                         [c.cell_name for c in summary().cells])

    def test_summarize_cells_in_natural_name_order(self):
        """cell2 before cell10 in the stats, as in the table."""
        names = {'%08d-0000-4000-8000-000000000000' % i: name
                 for i, name in enumerate(['cell10', 'cell-a', 'cell2',
                                           'cell1'])}
        timings = timing.summarize((), 1.0, names, {})
        self.assertEqual(['cell1', 'cell2', 'cell10', 'cell-a'],
                         [c.cell_name for c in timings.cells])

    def test_summarize_ignores_spans_of_unlisted_cells(self):
        timings = summary()
        self.assertEqual(5, sum(c.rows for c in timings.cells))
        self.assertEqual(SPANS, timings.spans)

    def test_timings_are_immutable(self):
        timings = summary()
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          timings, 'total', 0.0)
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          timings.cells[0], 'rows', 0)
        self.assertIsInstance(timings.cells, tuple)
        self.assertIsInstance(timings.spans, tuple)

    def test_timings_as_dict_is_json(self):
        data = json.loads(json.dumps(summary().as_dict()))
        self.assertEqual({'total': 3.0, 'setup': 0.5, 'gather': 1.5,
                          'merge': 0.5, 'view': 0.25},
                         data['seconds'])
        self.assertEqual(3, len(data['cells']))
        by_uuid = {c['uuid']: c for c in data['cells']}
        one = by_uuid[U1]
        self.assertEqual('cell1', one['name'])
        self.assertEqual(5, one['rows'])
        self.assertEqual(2, one['batches'])
        self.assertEqual('ok', one['status'])
        self.assertIsNone(one['error'])
        self.assertEqual({'wait', 'connect', 'execute', 'fetch', 'query'},
                         set(one['seconds']))
        self.assertEqual(0.375, one['seconds']['fetch'])
        self.assertEqual('failed', by_uuid[U2]['status'])
        self.assertEqual('Boom: lost connection', by_uuid[U2]['error'])
        self.assertIsNone(by_uuid[U3]['name'])


class RenderTestCase(base.TestCase):

    def test_format_table_names_cells_and_statuses(self):
        table = timing.format_table(summary())
        for text in ('cell1', 'cell2', U3, 'failed', 'ok',
                     'Boom: lost connection', 'Gather ms', '3000.0',
                     '500.0', '1500.0'):
            self.assertIn(text, table)

    def test_format_table_orders_cells_naturally(self):
        """cell0, cell2, cell10: numbers in names compare by value."""
        cells = {U1: 'cell10', U2: 'cell2', U3: 'cell0'}
        table = timing.format_table(summary(cells=cells))
        rows = [line.split('|')[1].strip() for line in table.splitlines()
                if line.startswith('| cell')]
        self.assertEqual(['cell0', 'cell2', 'cell10'], rows)

    def test_natural_key_orders_numbers_by_value(self):
        names = ['cell10', 'cell1', 'b', 'cell2', 'cell0', 'a10', 'a9']
        self.assertEqual(['a9', 'a10', 'b', 'cell0', 'cell1', 'cell2',
                          'cell10'], sorted(names, key=timing.natural_key))

    def test_log_lines_format_with_percent(self):
        lines = timing.log_lines(summary())
        self.assertEqual(1 + len(CELLS), len(lines))
        texts = [fmt % args for fmt, args in lines]
        self.assertIn('Listed 3 cell(s) in 3.000s', texts[0])
        self.assertIn('setup 0.500s, gather 1.500s', texts[0])
        self.assertIn('Cell %s: ok, 0 row(s)' % U3, texts[1])
        self.assertIn('Cell cell1: ok, 5 row(s) in 2 batch(es)', texts[2])
        self.assertTrue(texts[3].startswith('Cell cell2: failed'))
        self.assertTrue(texts[3].endswith(': Boom: lost connection'))


class ChromeTraceTestCase(base.TestCase):

    def recorded(self):
        """Timings of spans recorded by the caller and three workers."""
        recorder = timing.Recorder()
        # All workers stay alive until every one has recorded its spans:
        # a thread id may be reused once its thread has ended.
        done = threading.Barrier(len(CELLS), timeout=10)
        with recorder.span('gather', cells=3):
            def work(cell):
                with recorder.span('execute', cell):
                    pass
                with recorder.span('fetch', cell) as extra:
                    extra['rows'] = 4
                    # Not JSON-able: the trace must turn it into text.
                    extra['marker'] = frozenset([cell])
                done.wait()

            threads = [threading.Thread(target=work, args=(uuid,),
                                        name='cell-worker-%d' % i)
                       for i, uuid in enumerate(CELLS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
        with recorder.span('merge'):
            pass
        return timing.summarize(recorder.spans(), recorder.now(), CELLS,
                                STATUS)

    def assertNumber(self, value):
        self.assertIsInstance(value, numbers.Real)
        self.assertNotIsInstance(value, bool)
        self.assertGreaterEqual(value, 0)

    def test_chrome_trace_is_json_with_trace_events(self):
        trace = json.loads(json.dumps(timing.chrome_trace(self.recorded())))
        self.assertIn('traceEvents', trace)
        self.assertEqual(len(CELLS) * 2 + 2,
                         len([e for e in trace['traceEvents']
                              if e['ph'] == 'X']))

    def test_chrome_trace_complete_events_are_well_formed(self):
        trace = timing.chrome_trace(self.recorded())
        complete = [e for e in trace['traceEvents'] if e['ph'] == 'X']
        self.assertTrue(complete)
        for event in complete:
            for field in ('name', 'ph', 'ts', 'dur', 'pid', 'tid'):
                self.assertIn(field, event)
            self.assertNumber(event['ts'])
            self.assertNumber(event['dur'])
            self.assertIsInstance(event['tid'], int)
            self.assertIsInstance(event['pid'], int)

    def test_chrome_trace_names_every_thread(self):
        trace = timing.chrome_trace(self.recorded())
        events = trace['traceEvents']
        used = {e['tid'] for e in events if e['ph'] == 'X'}
        named = {e['tid']: e['args']['name'] for e in events
                 if e['ph'] == 'M' and e['name'] == 'thread_name'}
        self.assertEqual(used, set(named))
        self.assertEqual(4, len(used))
        self.assertEqual({threading.current_thread().name,
                          'cell-worker-0', 'cell-worker-1',
                          'cell-worker-2'}, set(named.values()))

    def test_chrome_trace_has_process_name(self):
        trace = timing.chrome_trace(self.recorded(), process_name='demo')
        process = [e for e in trace['traceEvents']
                   if e['ph'] == 'M' and e['name'] == 'process_name']
        self.assertEqual(1, len(process))
        self.assertEqual('demo', process[0]['args']['name'])

    def test_chrome_trace_event_names_and_args(self):
        trace = timing.chrome_trace(summary())
        complete = [e for e in trace['traceEvents'] if e['ph'] == 'X']
        names = {e['name'] for e in complete}
        self.assertIn('gather', names)
        self.assertIn('fetch cell1', names)
        # An unnamed cell is shown by uuid.
        self.assertNotIn('fetch None', names)
        fetch = [e for e in complete if e['name'] == 'fetch cell1']
        self.assertEqual([500000.0, 1250000.0], [e['ts'] for e in fetch])
        self.assertEqual([250000.0, 125000.0], [e['dur'] for e in fetch])
        self.assertEqual({U1}, {e['args']['cell_uuid'] for e in fetch})
        self.assertEqual([3, 2], [e['args']['rows'] for e in fetch])
        self.assertEqual('cell', fetch[0]['cat'])

    def test_chrome_trace_other_data_has_summary(self):
        trace = timing.chrome_trace(summary())
        self.assertEqual(3.0, trace['otherData']['total_seconds'])
        self.assertEqual(0.5, trace['otherData']['merge_seconds'])
        self.assertEqual(0.5, trace['otherData']['setup_seconds'])


class SpansTraceTest(base.TestCase):
    """spans_trace: the trace of spans recorded by anything, not a listing.
    """

    def spans(self):
        clock = FakeClock()
        recorder = timing.Recorder(clock=clock)
        with recorder.span('api.post', instance=U1):
            clock.now += 0.25
        recorder.add('lock.wait', 0.5, 0.75, lock='compute_resources',
                     holders=frozenset(['a']))
        done = threading.Event()

        def work():
            with recorder.span('scheduler.select_destinations'):
                clock.now += 0.5
            done.set()

        thread = threading.Thread(target=work, name='rpc-worker')
        thread.start()
        thread.join(10)
        self.assertTrue(done.is_set())
        return recorder.spans()

    def test_events_are_json_in_microseconds(self):
        trace = json.loads(json.dumps(timing.spans_trace(
            self.spans(), 'boot storm')))
        complete = sorted((e for e in trace['traceEvents']
                           if e['ph'] == 'X'), key=lambda e: e['ts'])
        self.assertEqual(['api.post', 'scheduler.select_destinations',
                          'lock.wait'], [e['name'] for e in complete])
        self.assertEqual([0.0, 250000.0, 500000.0],
                         [e['ts'] for e in complete])
        self.assertEqual([250000.0, 500000.0, 250000.0],
                         [e['dur'] for e in complete])
        self.assertEqual({'instance': U1}, complete[0]['args'])
        # Not JSON-able values become text.
        self.assertEqual("frozenset({'a'})", complete[2]['args']['holders'])
        self.assertEqual({}, trace['otherData'])

    def test_process_and_threads_are_named(self):
        trace = timing.spans_trace(self.spans(), 'boot storm')
        meta = {(e['name'], e['tid']): e['args']['name']
                for e in trace['traceEvents'] if e['ph'] == 'M'}
        self.assertEqual('boot storm', meta[('process_name', 0)])
        used = {e['tid'] for e in trace['traceEvents'] if e['ph'] == 'X'}
        named = {tid: name for (kind, tid), name in meta.items()
                 if kind == 'thread_name'}
        self.assertEqual(used, set(named))
        self.assertIn('rpc-worker', named.values())

    def test_category_and_other_data(self):
        trace = timing.spans_trace(
            self.spans(), 'boot storm',
            category=lambda span: span.name.split('.')[0],
            other_data={'servers': 3})
        cats = {e['name']: e['cat'] for e in trace['traceEvents']
                if e['ph'] == 'X'}
        self.assertEqual({'api.post': 'api', 'lock.wait': 'lock',
                          'scheduler.select_destinations': 'scheduler'},
                         cats)
        self.assertEqual({'servers': 3}, trace['otherData'])

    def test_cell_spans_named_after_their_cell(self):
        spans = [Span('fetch', 0.0, 1.0, 1, 'main', U1),
                 Span('fetch', 1.0, 2.0, 1, 'main', U3)]
        trace = timing.spans_trace(spans, 'p', cell_names={U1: 'cell1'})
        complete = [e for e in trace['traceEvents'] if e['ph'] == 'X']
        self.assertEqual(['fetch cell1', 'fetch %s' % U3],
                         [e['name'] for e in complete])
        self.assertEqual(['cell', 'cell'], [e['cat'] for e in complete])
        self.assertEqual(U3, complete[1]['args']['cell_uuid'])

