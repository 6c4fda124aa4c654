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

"""One request, one policy: a SIGHUP during a decision is not half seen.

The policy cache reads its clock whenever a request takes its state
(to see whether the cell mappings are older than ``max_age``). The clock
here delivers a SIGHUP (``PolicyCache.reset`` with new options, what the
mutate hook does) at its n-th reading, for every n a request can reach:
whatever the moment, the request's answer is the old configuration's or
the new one's, never a mix. Requests are nova's real ``RequestSpec``.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching.
from nova.tests.unit.scheduler import fakes  # noqa: F401  # isort: skip

import testscenarios

from nova_cellsched.scheduler import decision
from tests import base
from tests.fixtures import request_specs

CELL_A = decision.CellInfo('4cf0a6c4-1d5e-4e4a-9a6c-0a1ecf7d7b14', 'cellA')
CELL_B = decision.CellInfo('b0b6d6c2-2a4f-4f53-9d1c-6f0e2f3a4b5c', 'cellB')
CELL_C = decision.CellInfo('c1d2e3f4-0a1b-4c2d-8e3f-405162738495', 'cellC')
PROJECT = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'

# Before the SIGHUP the project is dedicated to cellB; after it, it is
# a default-cell project (cellA). In the forbidden form the two answers
# are "required {B}" and "forbidden {B, C}"; mixing the first's allowed
# cells with the second's "not dedicated" gives "forbidden {A, C}".
BEFORE = (('cellA',), 'cellB:%s' % PROJECT)
AFTER = (('cellA',), '')


class SighupClock:
    """A clock that runs *sighup* once, at its *at*-th reading from arming.
    """

    def __init__(self, at, sighup):
        self.at = at
        self.sighup = sighup
        self.readings = None

    def arm(self):
        self.readings = 0

    def __call__(self):
        if self.readings is not None:
            self.readings += 1
            if self.readings == self.at:
                self.readings = None
                self.sighup()
        return 1000.0


class SnapshotPerRequestTestCase(testscenarios.WithScenarios,
                                 base.TestCase):

    scenarios = [('forbidden', dict(form=decision.FORM_FORBIDDEN)),
                 ('member_of', dict(form=decision.FORM_MEMBER_OF))]

    def _cache(self, clock=lambda: 1000.0):
        cache = decision.PolicyCache(
            BEFORE, lambda: [CELL_A, CELL_B, CELL_C], clock=clock,
            max_age=3600)
        cache.reset()
        return cache

    def _scope(self, cache):
        scope = decision.placement_scope(
            cache, request_specs.request_spec(PROJECT), self.form)
        return scope.required, scope.forbidden

    def test_sighup_at_any_moment_gives_one_configuration(self):
        before = self._scope(self._cache())
        after_cache = self._cache()
        after_cache.reset(AFTER)
        after = self._scope(after_cache)
        self.assertNotEqual(before, after)

        answers = set()
        for at in range(1, 6):
            holder = {}
            clock = SighupClock(at, lambda: holder['cache'].reset(AFTER))
            cache = holder['cache'] = self._cache(clock)
            clock.arm()
            got = self._scope(cache)
            self.assertIn(got, (before, after),
                          'a SIGHUP at clock reading %d gave a mix' % at)
            answers.add(got)
            if clock.readings is not None:
                # Not reached during the request: SIGHUP now.
                clock.readings = None
                cache.reset(AFTER)
            self.assertEqual(after, self._scope(cache))
        # The request took its state once, before its one clock reading:
        # a SIGHUP meanwhile is for the next request.
        self.assertEqual({before}, answers)

    def test_scope_says_which_state_it_was_decided_with(self):
        cache = self._cache()
        scope = decision.placement_scope(
            cache, request_specs.request_spec(PROJECT), self.form)
        taken = cache.snapshot()
        self.assertIs(taken, scope.decided_with)
        cache.reset(AFTER)
        # The request keeps its state; the cache moved on.
        self.assertIs(taken, scope.decided_with)
        self.assertIsNot(taken, cache.snapshot())
        self.assertEqual('cellB:%s' % PROJECT,
                         scope.decided_with.mapping.render_projects())
