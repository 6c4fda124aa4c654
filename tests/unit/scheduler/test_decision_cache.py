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

"""Tests of the reload rules of PolicyCache, with real callables."""

import logging

import fixtures

from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler.decision import CellInfo
from tests import base

CELL_A = CellInfo('4cf0a6c4-1d5e-4e4a-9a6c-0a1ecf7d7b14', 'cellA')
CELL_E = CellInfo('b0b6d6c2-2a4f-4f53-9d1c-6f0e2f3a4b5c', 'cellE')
CELL_NEW = CellInfo('c1d2e3f4-0a1b-4c2d-8e3f-405162738495', 'cellNew')

INTERVAL = 10.0


class Options:
    """The two raw options, as nova-scheduler's mutate hook pushes them."""

    def __init__(self, default=(), projects=''):
        self.default = list(default)
        self.projects = projects

    def raw(self):
        return tuple(self.default), self.projects


class Cells:
    """The API database: a list of cells, or an error to raise."""

    def __init__(self, *cells):
        self.cells = list(cells)
        self.error = None
        self.loads = 0

    def __call__(self):
        self.loads += 1
        if self.error is not None:
            raise self.error
        return list(self.cells)


class Clock:
    """A monotonic clock that only moves when told to."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class PolicyCacheTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name=decision.__name__, level=logging.DEBUG,
            format='%(levelname)s %(message)s'))
        self.options = Options(['cellA'], 'cellE:p1')
        self.cells = Cells(CELL_A, CELL_E)
        self.clock = Clock()

    def _cache(self):
        return decision.PolicyCache(self.options.raw(), self.cells,
                                        min_refresh_interval=INTERVAL,
                                        clock=self.clock)

    def _sighup(self, cache, **kwargs):
        """The mutate hook: push the options in force, read the cells."""
        return cache.reset(self.options.raw(), **kwargs)

    def _lines(self, level, text):
        return [line for line in self.log.output.splitlines()
                if line.startswith(level + ' ') and text in line]

    def test_cells_are_loaded_on_first_use(self):
        cache = self._cache()
        self.assertEqual(0, self.cells.loads)
        pol = cache.current()
        self.assertEqual(1, self.cells.loads)
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(frozenset([CELL_A.uuid]), pol.allowed_cells('p2'))

    def test_requests_read_no_option(self):
        """Between two resets every request gets the same policy."""
        cache = self._cache()
        pol = cache.current()
        self.options.projects = 'cellA:p1'     # not pushed
        self.clock.now += 3600
        for _ in range(3):
            self.assertIs(pol, cache.current())
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(1, self.cells.loads)

    def test_no_reparse_when_the_raw_value_is_unchanged(self):
        """Same values, even in new objects: same mapping, nothing logged.
        """
        cache = self._cache()
        mapping = cache.mapping
        cache.current()
        self.options.default = ['cellA']          # equal, new list
        self.options.projects = ''.join(['cellE', ':p1'])
        for _ in range(3):
            self._sighup(cache)
        self.assertIs(mapping, cache.mapping)
        self.assertEqual('', self.log.output)

    def test_option_change_reparses_and_reloads_cells(self):
        cache = self._cache()
        old_mapping = cache.mapping
        cache.current()
        self.cells.cells.append(CELL_NEW)
        self.options.projects = 'cellNew:p1'
        pol = self._sighup(cache)
        self.assertIsNot(old_mapping, cache.mapping)
        self.assertEqual((('cellNew', ('p1',)),), cache.mapping.projects)
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset([CELL_NEW.uuid]), pol.allowed_cells('p1'))
        self.assertIs(pol, cache.current())
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(1, len(self._lines(
            'INFO', "options changed: cells_default='cellA' "
                    "cells_projects='cellNew:p1'")))

    def test_malformed_initial_value_raises(self):
        self.options.projects = 'cellE'
        exc = self.assertRaises(InvalidCellsMapping, self._cache)
        self.assertEqual('cells_projects', exc.option)
        self.assertEqual('cellE', exc.token)
        self.assertEqual(0, self.cells.loads)
        self.options.projects = ''
        self.options.default = ['cellA:p1']
        exc = self.assertRaises(InvalidCellsMapping, self._cache)
        self.assertEqual('cells_default', exc.option)

    def test_malformed_later_value_keeps_the_last_good_mapping(self):
        """The bad value is logged once at error and not used."""
        cache = self._cache()
        good_mapping = cache.mapping
        cache.current()
        self.options.projects = 'cellE:p1,cellA'
        for _ in range(5):
            pol = self._sighup(cache)
            self.assertIs(good_mapping, cache.mapping)
            self.assertIs(pol, cache.current())
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        errors = self._lines('ERROR', 'Ignoring the new [cellsched] options')
        self.assertEqual(1, len(errors))
        self.assertIn("'cellA'", errors[0])
        self.assertIn('last good mapping stays in force', errors[0])
        # Every SIGHUP read the cells all the same.
        self.assertEqual(6, self.cells.loads)

        # A good value after the bad one is taken...
        self.options.projects = 'cellA:p1'
        self.assertEqual(frozenset([CELL_A.uuid]),
                         self._sighup(cache).allowed_cells('p1'))
        # ... and a bad one after that is logged again.
        self.options.projects = 'cellA:p1:p2'
        self.assertEqual(frozenset([CELL_A.uuid]),
                         self._sighup(cache).allowed_cells('p1'))
        self.assertEqual(2, len(self._lines('ERROR', 'Ignoring the new')))

    def test_each_new_malformed_value_is_logged(self):
        cache = self._cache()
        cache.current()
        for bad in ('x', 'y', 'x'):
            self.options.projects = bad
            self._sighup(cache)
            self._sighup(cache)
        self.assertEqual(3, len(self._lines('ERROR', 'Ignoring the new')))

    def test_malformed_value_again_after_revert_is_logged(self):
        """good -> bad -> good (unchanged) -> same bad: log it again.

        Going back to the value in force is no reparse, but it must
        forget the rejected value, or a second SIGHUP with the same bad
        value would leave no trace in the log.
        """
        cache = self._cache()
        cache.current()
        self.options.projects = 'bad'
        self._sighup(cache)
        self.options.projects = 'cellE:p1'
        self._sighup(cache)
        self.options.projects = 'bad'
        self._sighup(cache)
        self.assertEqual(2, len(self._lines('ERROR', 'Ignoring the new')))

    def test_refresh_cells_is_rate_limited(self):
        self.options.default = ['cellNew']
        cache = self._cache()
        cache.current()
        self.assertEqual(1, self.cells.loads)
        self.cells.cells.append(CELL_NEW)

        self.clock.now += INTERVAL - 0.5
        pol = cache.refresh_cells().policy
        self.assertEqual(1, self.cells.loads)
        self.assertEqual(frozenset(), pol.allowed_cells('p2'))

        self.clock.now += 0.5
        pol = cache.refresh_cells().policy
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset([CELL_NEW.uuid]), pol.allowed_cells('p2'))
        self.assertIs(pol, cache.current())

        # The interval counts from the last load.
        self.clock.now += INTERVAL - 0.5
        cache.refresh_cells()
        self.assertEqual(2, self.cells.loads)
        self.clock.now += 0.5
        cache.refresh_cells()
        self.assertEqual(3, self.cells.loads)

    def test_failing_load_keeps_the_last_good_cells(self):
        cache = self._cache()
        good = cache.current()
        self.cells.error = RuntimeError('database is gone')
        self.clock.now += INTERVAL
        pol = cache.refresh_cells().policy
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(good.cells, pol.cells)
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(frozenset([CELL_A.uuid]), pol.allowed_cells('p2'))
        errors = self._lines('ERROR', 'Cannot load the cell mappings')
        self.assertEqual(1, len(errors))
        self.assertIn('keeping the last known cells: database is gone',
                      errors[0])
        # Not retried on every call: the failed load counts as a load.
        cache.refresh_cells()
        cache.current()
        self.assertEqual(2, self.cells.loads)

        # An option change resolves the new mapping against those cells.
        self.options.projects = 'cellA:p1'
        pol = self._sighup(cache)
        self.assertEqual(3, self.cells.loads)
        self.assertEqual(frozenset([CELL_A.uuid]), pol.allowed_cells('p1'))

    def test_first_load_failing_resolves_nothing_and_retries(self):
        self.cells.error = OSError('connection refused')
        cache = self._cache()
        pol = cache.current()
        self.assertEqual(1, self.cells.loads)
        self.assertTrue(pol.restricted)
        self.assertEqual(frozenset(), pol.allowed_cells('p1'))
        self.assertEqual(frozenset(), pol.allowed_cells('p2'))
        errors = self._lines('ERROR', 'Cannot load the cell mappings')
        self.assertEqual(1, len(errors))
        self.assertIn('keeping the mapping unresolved', errors[0])
        # Nothing is known, so no cell is reported as unknown.
        self.assertEqual([], self._lines('WARNING', ''))

        # Not hammered: no retry within the interval.
        self.clock.now += INTERVAL / 2
        cache.current()
        self.assertEqual(1, self.cells.loads)

        self.cells.error = None
        self.clock.now += INTERVAL / 2
        pol = cache.current()
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(frozenset([CELL_A.uuid]), pol.allowed_cells('p2'))
        self.assertIs(pol, cache.current())
        self.assertEqual(2, self.cells.loads)

    def test_first_load_failing_does_not_restrict_empty_options(self):
        self.options.default = []
        self.options.projects = ''
        self.cells.error = OSError('connection refused')
        pol = self._cache().current()
        self.assertIsNone(pol.allowed_cells('p1'))

    def test_problems_are_logged_as_warnings(self):
        self.options.default = ['cellA', 'nope']
        cache = self._cache()
        cache.current()
        warnings = self._lines('WARNING', "[cellsched] unknown cell 'nope'")
        self.assertEqual(1, len(warnings))
        # Not again on a plain current().
        cache.current()
        self.assertEqual(1, len(self._lines('WARNING', 'unknown cell')))


class CellCacheAgeTestCase(PolicyCacheTestCase):
    """[cellsched] cell_cache_ttl: renamed cells are seen without restart."""

    def _aged_cache(self, ttl):
        return decision.PolicyCache(
            self.options.raw(), self.cells, min_refresh_interval=INTERVAL,
            clock=self.clock, max_age=ttl)

    def test_cells_reloaded_on_the_first_request_after_max_age(self):
        cache = self._aged_cache(300)
        cache.current()
        self.clock.now += 299
        cache.current()
        self.assertEqual(1, self.cells.loads)
        # cellA is renamed in nova; the options still name it 'cellA'.
        self.cells.cells = [CellInfo(CELL_A.uuid, 'cellRenamed'), CELL_E]
        self.clock.now += 1
        pol = cache.current()
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset(), pol.allowed_cells('p2'))

    def test_zero_max_age_never_reloads_by_age(self):
        cache = self._aged_cache(0)
        cache.current()
        self.clock.now += 10 ** 6
        cache.current()
        self.assertEqual(1, self.cells.loads)

    def test_max_age_is_pushed_by_reset(self):
        """The option is mutable: a SIGHUP gives the cache its new value."""
        cache = self._aged_cache(0)
        cache.current()
        self._sighup(cache, max_age=30)
        self.assertEqual(2, self.cells.loads)
        self.clock.now += 29
        cache.current()
        self.assertEqual(2, self.cells.loads)
        self.clock.now += 1
        cache.current()
        self.assertEqual(3, self.cells.loads)
        # A reset that gives no age keeps the one in force.
        self._sighup(cache)
        self.clock.now += 30
        cache.current()
        self.assertEqual(5, self.cells.loads)


class ResetTestCase(PolicyCacheTestCase):
    """reset(): what nova-scheduler does with its cells at start and SIGHUP.
    """

    CELL0 = CellInfo('00000000-0000-0000-0000-000000000000', 'cell0')

    def _aged_cache(self):
        return decision.PolicyCache(
            self.options.raw(), self.cells, min_refresh_interval=INTERVAL,
            clock=self.clock, max_age=3600)

    def test_no_scheduling_cells_before_a_reset(self):
        cache = self._aged_cache()
        cache.current()
        self.assertIsNone(cache.scheduling_cells)
        self.clock.now += INTERVAL
        cache.refresh_cells()
        self.assertEqual(2, self.cells.loads)
        self.assertIsNone(cache.scheduling_cells)

    def test_reset_reads_cells_whatever_their_age_and_the_options(self):
        """A disabled and a renamed cell seen at once, one load each time.
        """
        self.cells.cells = [self.CELL0, CELL_A, CELL_E]
        cache = self._aged_cache()
        cache.reset()
        self.assertEqual(1, self.cells.loads)
        self.assertEqual(frozenset([CELL_A.uuid, CELL_E.uuid]),
                         cache.scheduling_cells)

        # cellE disabled, cellA renamed; the options are the same and
        # the cells were read a second ago, within the rate limit too.
        self.cells.cells = [self.CELL0,
                            CellInfo(CELL_A.uuid, 'cellRenamed'),
                            CellInfo(CELL_E.uuid, 'cellE', disabled=True)]
        self.clock.now += 1
        self.assertEqual(frozenset([CELL_A.uuid]),
                         cache.current().allowed_cells('p2'))
        pol = cache.reset()
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset([CELL_A.uuid]), cache.scheduling_cells)
        self.assertEqual(frozenset(), pol.allowed_cells('p2'))
        self.assertIs(pol, cache.current())
        self.assertEqual(1, len(self._lines(
            'WARNING', "[cellsched] cell disabled in nova 'cellE'")))

    def test_reset_with_new_options_loads_the_cells_once(self):
        cache = self._aged_cache()
        cache.reset()
        self.cells.cells.append(CELL_NEW)
        self.options.projects = 'cellNew:p1'
        pol = self._sighup(cache)
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset([CELL_NEW.uuid]), pol.allowed_cells('p1'))
        self.assertIn(CELL_NEW.uuid, cache.scheduling_cells)

    def test_reset_with_malformed_options_still_reads_the_cells(self):
        cache = self._aged_cache()
        cache.reset()
        self.cells.cells = [CELL_A, CellInfo(CELL_E.uuid, 'cellE',
                                             disabled=True)]
        self.options.projects = 'cellE'
        pol = self._sighup(cache)
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset([CELL_A.uuid]), cache.scheduling_cells)
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(1, len(self._lines('ERROR', 'Ignoring the new')))

    def test_only_a_reset_changes_the_scheduling_cells(self):
        """Loads for age and unknown cells leave them as nova has them
        until its next SIGHUP.
        """
        cache = self._aged_cache()
        cache.reset()
        self.cells.cells = [CellInfo(CELL_A.uuid, 'cellA', disabled=True),
                            CELL_E, CELL_NEW]
        self.clock.now += 3600
        cache.current()
        self.clock.now += INTERVAL
        cache.refresh_cells()
        self.assertEqual(3, self.cells.loads)
        self.assertEqual(frozenset([CELL_A.uuid, CELL_E.uuid]),
                         cache.scheduling_cells)
        cache.reset()
        self.assertEqual(frozenset([CELL_E.uuid, CELL_NEW.uuid]),
                         cache.scheduling_cells)

    def test_failed_reset_keeps_the_last_scheduling_cells(self):
        """nova's failed refresh keeps its old cells too."""
        cache = self._aged_cache()
        cache.reset()
        self.cells.error = RuntimeError('database is gone')
        pol = cache.reset()
        self.assertEqual(2, self.cells.loads)
        self.assertEqual(frozenset([CELL_A.uuid, CELL_E.uuid]),
                         cache.scheduling_cells)
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(1, len(self._lines(
            'ERROR', 'Cannot load the cell mappings')))
