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

"""A cell held down after a read it did not answer: the truth table.

A hand-moved clock and a jitter that takes the low or high end: the
rules, not the time they take.
"""

import logging

import fixtures
import hypothesis
from hypothesis import stateful
from hypothesis import strategies as st

from nova_cellsched import health
from tests import base


class Clock:

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def low(a, b):
    return a


def high(a, b):
    return b


class CellHealthTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = Clock()
        self.logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.cells = health.CellHealth(30.0, 2.0, clock=self.clock,
                                       jitter=low)

    def test_a_healthy_cell_is_not_held_and_not_probed(self):
        self.assertFalse(self.cells.held('c1'))
        self.assertFalse(self.cells.claim_probe('c1'))
        self.assertEqual({}, self.cells.snapshot())

    def test_a_cell_that_did_not_answer_is_held_for_the_hold_down(self):
        self.cells.failed('c1', 'CellTimeout: no answer within 3.0s')
        self.assertTrue(self.cells.held('c1'))
        self.assertFalse(self.cells.held('c2'))
        self.clock.now += 29.9
        self.assertTrue(self.cells.held('c1'))
        self.clock.now += 0.1
        self.assertFalse(self.cells.held('c1'))
        self.assertIn('Cell c1 did not answer (CellTimeout: no answer '
                      'within 3.0s): reads in this process do not wait for '
                      'it for 30 s', self.logs.output)

    def test_one_probe_at_a_time_when_due(self):
        self.cells.failed('c1', 'x')
        # Jittered between 1 and 3 s: due at 1 s with the low end.
        self.assertFalse(self.cells.claim_probe('c1'))
        self.clock.now += 1.0
        self.assertTrue(self.cells.claim_probe('c1'))
        self.assertFalse(self.cells.claim_probe('c1'))
        self.clock.now += 10.0
        self.assertFalse(self.cells.claim_probe('c1'), 'one at a time')

    def test_a_probe_that_answers_ends_the_hold_down_at_once(self):
        self.cells.failed('c1', 'x')
        self.clock.now += 1.0
        self.assertTrue(self.cells.claim_probe('c1'))
        self.cells.probed('c1', True)
        self.assertFalse(self.cells.held('c1'))
        self.assertEqual({}, self.cells.snapshot())
        self.assertIn('Cell c1 answers again', self.logs.output)

    def test_a_probe_that_does_not_answer_extends_the_hold_down(self):
        self.cells.failed('c1', 'x')
        self.clock.now += 25.0
        self.assertTrue(self.cells.claim_probe('c1'))
        self.clock.now += 4.0
        self.cells.probed('c1', False, 'CellTimeout: no answer')
        self.assertEqual({'c1': 30.0}, self.cells.snapshot())
        # The next probe is due an interval (jittered) later.
        self.assertFalse(self.cells.claim_probe('c1'))
        self.clock.now += 1.0
        self.assertTrue(self.cells.claim_probe('c1'))

    def test_the_jitter_spreads_probes_over_half_an_interval_each_way(self):
        late = health.CellHealth(30.0, 2.0, clock=self.clock, jitter=high)
        late.failed('c1', 'x')
        self.clock.now += 2.9
        self.assertFalse(late.claim_probe('c1'))
        self.clock.now += 0.1
        self.assertTrue(late.claim_probe('c1'))

    def test_an_answer_ends_the_hold_down(self):
        self.cells.failed('c1', 'x')
        self.cells.answered('c1')
        self.assertFalse(self.cells.held('c1'))

    def test_no_hold_down_holds_nothing(self):
        cells = health.CellHealth(0.0, 1.0, clock=self.clock)
        cells.failed('c1', 'x')
        self.assertFalse(cells.held('c1'))
        self.assertEqual('', self.logs.output)

    def test_after_the_hold_down_nothing_is_probed(self):
        self.cells.failed('c1', 'x')
        self.clock.now += 30.0
        self.assertFalse(self.cells.claim_probe('c1'))

    def test_forget_holds_nothing(self):
        self.cells.failed('c1', 'x')
        self.cells.forget()
        self.assertFalse(self.cells.held('c1'))


class HealthMachine(stateful.RuleBasedStateMachine):
    """Any sequence of reads, probes and time: the rules always hold.

    A cell is held exactly while its last failure (or failed probe) is
    less than the hold-down ago and no answer came since; at most one
    probe of it runs at a time.
    """

    HOLD = 10.0

    def __init__(self):
        super().__init__()
        self.clock = Clock()
        self.cells = health.CellHealth(self.HOLD, 1.0, clock=self.clock,
                                       jitter=low)
        self.until = None
        self.probing = False

    @stateful.rule(seconds=st.floats(0.0, 15.0))
    def wait(self, seconds):
        self.clock.now += seconds

    @stateful.rule()
    def fail(self):
        self.cells.failed('c', 'x')
        self.until = self.clock.now + self.HOLD

    @stateful.rule()
    def answer(self):
        self.cells.answered('c')
        self.until, self.probing = None, False

    @stateful.rule()
    def claim(self):
        claimed = self.cells.claim_probe('c')
        if claimed:
            assert not self.probing
            assert self.until is not None and self.clock.now < self.until
            self.probing = True

    @stateful.rule(answered=st.booleans())
    def end_probe(self, answered):
        if not self.probing:
            return
        self.cells.probed('c', answered)
        self.probing = False
        if answered:
            self.until = None
        else:
            self.until = max(self.until, self.clock.now + self.HOLD)

    @stateful.invariant()
    def held_exactly_while_in_the_hold_down(self):
        expected = self.until is not None and self.clock.now < self.until
        assert self.cells.held('c') == expected


class HealthMachineTest(HealthMachine.TestCase):

    settings = hypothesis.settings(max_examples=50, deadline=None)

    def setUp(self):
        super().setUp()
        # Its lines are the other tests' to check: not printed here.
        logger = logging.getLogger(health.__name__)
        handler = logging.NullHandler()
        logger.addHandler(handler)
        self.addCleanup(logger.removeHandler, handler)
        propagate, logger.propagate = logger.propagate, False
        self.addCleanup(setattr, logger, 'propagate', propagate)
