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

"""When nova-api's other cell calls may skip a cell: StuckQueries.hanging."""

import testtools

from nova_cellsched.api import guard


class FakeClock:

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class HangingTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = FakeClock()
        self.stuck = guard.StuckQueries(clock=self.clock)

    def test_a_cell_is_not_hanging_by_default(self):
        self.assertFalse(self.stuck.hanging('c1'))

    def test_a_cell_held_down_hangs_for_that_long(self):
        self.stuck.hold_down('c1', 2.0)
        self.assertTrue(self.stuck.hanging('c1'))
        self.assertFalse(self.stuck.hanging('c2'))
        self.clock.now += 1.9
        self.assertTrue(self.stuck.hanging('c1'))
        self.clock.now += 0.2
        self.assertFalse(self.stuck.hanging('c1'))

    def test_a_later_hold_extends_an_earlier_one_never_shortens(self):
        self.stuck.hold_down('c1', 5.0)
        self.stuck.hold_down('c1', 1.0)
        self.clock.now += 4.0
        self.assertTrue(self.stuck.hanging('c1'))

    def test_a_cell_with_a_stuck_query_hangs_until_it_ends(self):
        query = guard.Query('c1')
        self.assertTrue(self.stuck.begin(query))
        self.stuck.abandon(query)
        self.clock.now += 1000
        self.assertTrue(self.stuck.hanging('c1'))
        self.stuck.end(query)
        self.assertFalse(self.stuck.hanging('c1'))

    def test_a_query_abandoned_before_it_started_does_not_hang_the_cell(self):
        query = guard.Query('c1')
        self.stuck.abandon(query)
        self.assertFalse(self.stuck.begin(query))
        self.assertFalse(self.stuck.hanging('c1'))
