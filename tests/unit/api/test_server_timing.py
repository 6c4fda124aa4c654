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

"""The Server-Timing header and log line of served lists."""

import hypothesis
from hypothesis import strategies as st

from nova_cellsched.api.middleware import server_timing
from tests import base
from tests.fixtures import server_timing_grammar as grammar


#: A loaded test machine (2 cores, several suites) must not fail these:
#: no deadline, no health check on generation speed.
SETTINGS = hypothesis.settings(
    deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])


def timings(**phases):
    t = server_timing.RequestTimings(started=0.0, served=True, listed=3)
    for name, seconds in phases.items():
        t.add(name, seconds)
    return t


class HeaderTest(base.TestCase):

    def test_phases_in_order_with_the_slowest_cell_named(self):
        t = timings(gather=0.5, merge=0.01, objects=0.2)
        t.cells = {'cell1': 0.3, 'cell "2"': 0.45}
        metrics = grammar.parse(server_timing.header(t, 1.0, cells=True))
        self.assertEqual(['total', 'gather', 'merge', 'objects', 'other'],
                         list(metrics))
        self.assertEqual('1000.0', metrics['total']['dur'])
        self.assertEqual('slowest cell "2" 450.0 ms',
                         metrics['gather']['desc'])
        self.assertEqual('290.0', metrics['other']['dur'])

    def test_down_cells_named_after_the_slowest(self):
        """The listing waited for a cell it gave up on: it is named."""
        t = timings(gather=3.0)
        t.cells = {'cell1': 0.02}
        t.down = ['cell4', 'cell3']
        metrics = grammar.parse(server_timing.header(t, 3.1, cells=True))
        self.assertEqual('slowest cell1 20.0 ms; down cell3, cell4',
                         metrics['gather']['desc'])
        t.cells = {}
        metrics = grammar.parse(server_timing.header(t, 3.1, cells=True))
        self.assertEqual('down cell3, cell4', metrics['gather']['desc'])

    def test_validation_is_a_phase_when_measured(self):
        metrics = grammar.parse(server_timing.header(
            timings(gather=0.1, validation=0.05), 0.2))
        self.assertIn('validation', metrics)

    @SETTINGS
    @hypothesis.given(
        phases=st.dictionaries(st.sampled_from(server_timing.PHASES),
                               st.floats(0, 100)),
        total=st.floats(0, 500),
        cells=st.dictionaries(st.text(max_size=20), st.floats(0, 100)),
        down=st.lists(st.text(max_size=20), max_size=3))
    def test_any_figures_parse_and_add_up_to_the_total(self, phases,
                                                       total, cells, down):
        t = timings(**phases)
        t.cells = cells
        t.down = down
        metrics = grammar.parse(server_timing.header(t, total, cells=True))
        parts = sum(float(m['dur']) for name, m in metrics.items()
                    if name != 'total')
        # Rounded to 0.1 ms each.
        self.assertLessEqual(parts, float(metrics['total']['dur'])
                             + 0.05 * len(metrics))
        self.assertGreaterEqual(float(metrics['other']['dur']), 0.0)


    @SETTINGS
    @hypothesis.given(
        phases=st.dictionaries(st.sampled_from(server_timing.PHASES),
                               st.floats(0, 100)),
        cells=st.dictionaries(st.text(min_size=1, max_size=20),
                              st.floats(0, 100)),
        down=st.lists(st.text(min_size=1, max_size=20), max_size=3))
    def test_without_cells_no_description_and_the_same_durations(
            self, phases, cells, down):
        """Not allowed cells: no cell named, timed or counted as down.

        The header is the phases' metrics alone, every ``dur`` what the
        caller allowed cells would get.
        """
        t = timings(**phases)
        t.cells = cells
        t.down = down
        blind = grammar.parse(server_timing.header(t, 2.0))
        self.assertEqual(
            {name: {'dur': metric['dur']} for name, metric in
             grammar.parse(server_timing.header(t, 2.0,
                                                cells=True)).items()},
            blind)

    def test_cells_are_off_unless_asked(self):
        t = timings(gather=3.0)
        t.cells = {'cell1': 0.02}
        t.down = ['cell4']
        value = server_timing.header(t, 3.1)
        self.assertNotIn('cell', value)
        self.assertNotIn('desc', value)
        self.assertNotIn('20.0', value)


class LogLineTest(base.TestCase):

    def test_per_cell_times_and_down_cells(self):
        t = timings(gather=2.0)
        t.cells = {'cell1': 0.2, 'cell2': 2.0}
        t.down = ['cell3']
        fmt, args = server_timing.log_line(t, 2.5)
        line = fmt % args
        self.assertIn('Listed 3 servers in 2500.0 ms', line)
        self.assertIn('cell1 200.0 ms, cell2 2000.0 ms', line)
        self.assertIn('down: cell3; held: -', line)

    def test_held_cells_are_named_after_the_down_ones(self):
        t = timings(gather=0.1)
        t.down = ['cell3', 'cell4']
        t.held = ['cell4']
        fmt, args = server_timing.log_line(t, 0.2)
        self.assertIn('down: cell3, cell4; held: cell4', fmt % args)
        value = server_timing.header(t, 0.2, cells=True)
        self.assertIn('down cell3, cell4; held cell4', value)
        self.assertNotIn('cell4', server_timing.header(t, 0.2))


class MiddlewareTest(base.TestCase):

    def call(self, serves, enabled=(True, False), audience=(True, False)):
        logged = []
        asked = []

        def app(environ, start_response):
            if serves:
                timings = server_timing.current()
                timings.served = True
                timings.cells = {'cell7': 0.001}
                timings.down = ['cell9']
                with server_timing.phase('gather'):
                    pass
            start_response('200 OK', [('Content-Type', 'text/plain')])
            return [b'ok']

        def who(environ):
            asked.append(environ['who'])
            return audience

        middleware = server_timing.Middleware(
            app, lambda: enabled, lambda info, fmt, args: logged.append(
                (info, fmt % args)), who)
        seen = {}

        def start_response(status, headers, exc_info=None):
            seen['headers'] = dict(headers)

        body = middleware({'who': 'caller'}, start_response)
        self.assertEqual([b'ok'], body)
        self.assertIsNone(server_timing.current())
        # Asked once per served list with the header on, never otherwise.
        self.assertEqual(['caller'] if serves and enabled[0] else [], asked)
        return seen['headers'], logged

    def test_a_served_list_gets_the_header_and_a_log_line(self):
        headers, logged = self.call(serves=True)
        grammar.parse(headers['Server-Timing'])
        self.assertEqual(1, len(logged))
        self.assertFalse(logged[0][0])  # DEBUG unless asked

    def test_other_requests_get_neither(self):
        headers, logged = self.call(serves=False)
        self.assertNotIn('Server-Timing', headers)
        self.assertEqual([], logged)

    def test_cells_named_only_for_whom_the_audience_allows(self):
        headers, logged = self.call(serves=True)
        self.assertNotIn('cell', headers['Server-Timing'])
        self.assertIn('cell7', logged[0][1])  # logs are the operator's
        self.assertIn('down: cell9', logged[0][1])
        headers, _logged = self.call(serves=True, audience=(True, True))
        self.assertEqual(
            'slowest cell7 1.0 ms; down cell9',
            grammar.parse(headers['Server-Timing'])['gather']['desc'])

    def test_caller_not_allowed_no_header_but_the_log_line(self):
        headers, logged = self.call(serves=True, audience=(False, True))
        self.assertNotIn('Server-Timing', headers)
        self.assertEqual(1, len(logged))

    def test_option_off_no_header_but_the_log_line(self):
        headers, logged = self.call(serves=True, enabled=(False, True))
        self.assertNotIn('Server-Timing', headers)
        self.assertTrue(logged[0][0])  # INFO when asked
