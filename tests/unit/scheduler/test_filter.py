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

"""Tests of ProjectCellFilter with nova's real objects and API database.

The cell mappings are real rows of nova's in-memory API database
(``nova.test.TestCase`` sets it up), read by the filter through
``nova_cellsched.scheduler.state.load_cell_infos``; host states are nova's
``FakeHostState`` and requests real ``RequestSpec`` objects.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching,
# which must happen before the rest of nova (and oslo) is imported.
from nova.tests.unit.scheduler import fakes  # isort: skip

import logging

import fixtures
from nova import context as nova_context
from nova.db.api import api as api_db
from nova import exception as nova_exception
from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler import request_filter as nova_request_filter
from oslo_utils.fixture import uuidsentinel as uuids
import sqlalchemy
import testscenarios

from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler import host_filter as filters
from nova_cellsched.scheduler import request_filter
from nova_cellsched.scheduler import state
from tests import base
from tests.fixtures import request_specs
from tests.fixtures import scheduler_state

# Keystone style project ids.
PROJ_A = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'     # dedicated_a
PROJ_B = '5b1e0a9f2c8d4e8fa1b2c3d4e5f60718'     # dedicated_b
PROJ_AB = '9a8b7c6d5e4f40312e1d0c9b8a7f6e5d'    # dedicated_a and _b
UNMAPPED = '1f2e3d4c5b6a47988796a5b4c3d2e1f0'   # named nowhere

CELLS = ('default1', 'default2', 'dedicated_a', 'dedicated_b', 'spare')
ALL = frozenset(CELLS)
DEFAULTS = frozenset(['default1', 'default2'])

# default2 is named by uuid: the filter must resolve both forms.
STD_DEFAULT = ['default1', '{default2}']
STD_PROJECTS = ('dedicated_a:%(a)s;%(ab)s,dedicated_b:%(b)s;%(ab)s'
                % {'a': PROJ_A, 'b': PROJ_B, 'ab': PROJ_AB})


class FilterTestBase(base.NovaTestCase):
    """A real API database holding cell0 and the cells of CELLS."""

    # cell0 only: the cells of the tests are created in setUp.
    NUMBER_OF_CELLS = 0

    def setUp(self):
        super().setUp()
        self.policy_state = self.useFixture(scheduler_state.FreshPolicy())
        self.ctxt = nova_context.get_admin_context()
        self.cells = {name: self._create_cell(name) for name in CELLS}

    def _create_cell(self, name, uuid=None, disabled=False):
        cell = objects.CellMapping(
            self.ctxt, uuid=uuid or getattr(uuids, name), name=name,
            transport_url='fake://', database_connection='fake://',
            disabled=disabled)
        cell.create()
        return cell

    def _uuid(self, name):
        return self.cells[name].uuid

    def _set_options(self, default, projects):
        """Set the options as a SIGHUP would.

        '{name}' stands for the uuid of cell name.
        """
        uuid_of = {name: cell.uuid for name, cell in self.cells.items()}
        self.flags(cells_default=[d.format_map(uuid_of) for d in default],
                   cells_projects=projects.format_map(uuid_of),
                   group='cellsched')
        scheduler_state.sighup(state.CONF)

    def _hosts(self, names=CELLS, per_cell=2):
        return [fakes.FakeHostState('%s-host%d' % (name, i),
                                    '%s-node%d' % (name, i),
                                    {'cell_uuid': self._uuid(name)})
                for name in names for i in range(per_cell)]

    def _spec(self, project_id, dest=None, cell=None, rebuild=False):
        """*dest*: ``'pinned'`` or ``'cross'`` for a move to cell *cell*."""
        return request_specs.request_spec(
            project_id, instance_uuid=uuids.instance, move=dest,
            cell=self.cells[cell] if cell else None, rebuild=rebuild)

    def _cells_of(self, hosts):
        by_uuid = {cell.uuid: name for name, cell in self.cells.items()}
        return {by_uuid.get(h.cell_uuid, h.cell_uuid) for h in hosts}

    def _log_lines(self, level, text):
        return [line for line in self.stdlog.logger.output.splitlines()
                if ' %s [' % level in line and text in line]


class DecisionTableTestCase(testscenarios.WithScenarios, FilterTestBase):
    """The truth table of the filter's docstring, one row per scenario.

    Every scenario offers two hosts in each cell of CELLS and says which
    cells' hosts pass.
    """

    default = STD_DEFAULT
    projects = STD_PROJECTS
    dest = None           # None, 'pinned' or 'cross'
    cell = None           # the cell of requested_destination
    rebuild = False
    hosts = CELLS

    scenarios = [
        # Both options empty: the filter is inert.
        ('empty_options_mapped_project', dict(
            default=[], projects='', project=PROJ_A, expected=ALL)),
        ('empty_options_any_project', dict(
            default=[], projects='', project=UNMAPPED, expected=ALL)),
        ('empty_options_same_cell_move', dict(
            default=[], projects='', project=UNMAPPED, dest='pinned',
            cell='spare', hosts=['spare'], expected={'spare'})),
        # New servers of a project named in cells_projects.
        ('mapped_project_own_cell_only', dict(
            project=PROJ_A, expected={'dedicated_a'})),
        ('mapped_project_other_dedicated_cell_only', dict(
            project=PROJ_B, expected={'dedicated_b'})),
        ('mapped_project_in_two_cells', dict(
            project=PROJ_AB, expected={'dedicated_a', 'dedicated_b'})),
        ('mapped_project_id_dashed_in_request', dict(
            project='0d5e63a0-e3e8-4e1e-9d4f-7e06ad7eb6b2',
            expected={'dedicated_a'})),
        ('mapped_project_never_gets_default_or_spare', dict(
            project=PROJ_A, hosts=['default1', 'default2', 'spare'],
            expected=set())),
        # New servers of any other project.
        ('unmapped_project_default_cells', dict(
            project=UNMAPPED, expected=DEFAULTS)),
        ('unmapped_project_not_dedicated_or_spare', dict(
            project=UNMAPPED, hosts=['dedicated_a', 'spare'],
            expected=set())),
        ('unmapped_project_without_default_cells', dict(
            default=[], project=UNMAPPED, expected=set())),
        ('only_defaults_restrict_everyone', dict(
            projects='', project=PROJ_A, expected=DEFAULTS)),
        ('default_cell_by_uuid', dict(
            default=['{default2}'], projects='', project=UNMAPPED,
            expected={'default2'})),
        ('dedicated_cell_by_uuid', dict(
            projects='{spare}:%s' % PROJ_A, project=PROJ_A,
            expected={'spare'})),
        # Same-cell moves: the conductor pinned the instance's cell.
        ('same_cell_move_into_spare_cell', dict(
            project=PROJ_A, dest='pinned', cell='spare',
            expected={'spare'})),
        ('same_cell_move_into_cell_of_other_project', dict(
            project=PROJ_A, dest='pinned', cell='dedicated_b',
            expected={'dedicated_b'})),
        ('same_cell_move_of_unmapped_project', dict(
            project=UNMAPPED, dest='pinned', cell='dedicated_a',
            expected={'dedicated_a'})),
        ('same_cell_move_project_with_unknown_cell', dict(
            projects='nope:%s' % PROJ_A, project=PROJ_A, dest='pinned',
            cell='default1', expected={'default1'})),
        # Cross-cell resize: placed like a new server.
        ('cross_cell_resize_mapped_project', dict(
            project=PROJ_A, dest='cross', cell='spare',
            expected={'dedicated_a'})),
        ('cross_cell_resize_unmapped_project', dict(
            project=UNMAPPED, dest='cross', cell='dedicated_b',
            expected=DEFAULTS)),
        ('targeted_cross_cell_resize_without_cell', dict(
            project=PROJ_B, dest='cross', cell=None,
            expected={'dedicated_b'})),
        ('destination_without_cell', dict(
            project=PROJ_B, dest='pinned', cell=None,
            expected={'dedicated_b'})),
        # Rebuild: the filter is not asked.
        ('rebuild_mapped_project', dict(
            project=PROJ_A, rebuild=True, expected=ALL)),
        ('rebuild_project_with_unknown_cell', dict(
            projects='nope:%s' % PROJ_A, project=PROJ_A, rebuild=True,
            expected=ALL)),
        # Fail closed: unknown cells grant nothing, never the defaults.
        ('project_mapped_only_to_unknown_cell', dict(
            projects='nope:%s' % PROJ_A, project=PROJ_A, expected=set())),
        ('project_mapped_to_unknown_uuid', dict(
            projects='%s:%s' % (uuids.nowhere, PROJ_A), project=PROJ_A,
            expected=set())),
        ('cell0_named_grants_nothing', dict(
            default=['cell0'], projects='', project=UNMAPPED,
            expected=set())),
        ('unknown_default_other_default_still_works', dict(
            default=['nope', 'default1'], project=UNMAPPED,
            expected={'default1'})),
        # Most cells are default cells: "auto" forbids the others.
        ('unmapped_project_mostly_default_cells', dict(
            default=['default1', '{default2}', 'spare'],
            projects='dedicated_a:%s' % PROJ_A, project=UNMAPPED,
            expected={'default1', 'default2', 'spare'})),
        ('mapped_project_mostly_default_cells', dict(
            default=['default1', '{default2}', 'spare'],
            projects='dedicated_a:%s' % PROJ_A, project=PROJ_A,
            expected={'dedicated_a'})),
    ]

    def test_filter_all(self):
        """filter_all keeps the hosts of the expected cells, in order."""
        self._set_options(self.default, self.projects)
        filt = filters.ProjectCellFilter()
        hosts = self._hosts(self.hosts)
        spec = self._spec(self.project, self.dest, self.cell, self.rebuild)

        passed = filt.filter_all(iter(hosts), spec)

        self.assertIsInstance(passed, list)
        self.assertEqual(set(self.expected), self._cells_of(passed))
        self.assertEqual([h for h in hosts if h in passed], passed)
        # Both hosts of each allowed cell.
        self.assertEqual(2 * len(self.expected), len(passed))
        # Host by host, the same answers.
        self.assertEqual(passed,
                         [h for h in hosts if filt.host_passes(h, spec)])

    def test_through_nova_filter_handler(self):
        """Nova's HostFilterHandler gets the same hosts from the filter."""
        self._set_options(self.default, self.projects)
        hosts = self._hosts(self.hosts)
        spec = self._spec(self.project, self.dest, self.cell, self.rebuild)
        handler = nova_filters.HostFilterHandler()
        passed = handler.get_filtered_objects(
            [filters.ProjectCellFilter()], hosts, spec, index=0)
        self.assertEqual(set(self.expected), self._cells_of(passed or []))


class PrefilterTableTestCase(testscenarios.WithScenarios, FilterTestBase):
    """The pre-filter against the filter's truth table, in each form.

    Every row of :class:`DecisionTableTestCase`, once per value of
    ``[cellsched] placement_prefilter_form``.
    """

    default = STD_DEFAULT
    projects = STD_PROJECTS
    dest = None
    cell = None
    rebuild = False
    hosts = CELLS

    scenarios = testscenarios.multiply_scenarios(
        DecisionTableTestCase.scenarios,
        [(form, dict(form=form)) for form in decision.FORMS])

    def _forbidden_form(self, passed):
        """The form the row should get: forbidden for a project not in
        cells_projects when the option says so, or says auto and the
        other cells are fewer than the default cells.
        """
        dedicated = self.project.replace('-', '') in self.projects
        others = len(CELLS) - len(passed)
        return not dedicated and (
            self.form == 'forbidden' or
            self.form == 'auto' and others < len(passed))

    def test_prefilter_matches_the_filter(self):
        """The placement pre-filter and the filter share one truth table.

        The filter is offered a host in every cell: the pre-filter adds
        nothing when every cell passes (inert, rebuild), fails the request
        when none does, forbids every other cell's aggregate for a
        same-cell move (the pinned cell's nodes need not be synced), and
        otherwise requires exactly the aggregates of the cells that pass,
        or, in the forbidden form for a project not in cells_projects,
        forbids exactly the aggregates of the cells that do not pass.
        """
        self._set_options(self.default, self.projects)
        self.flags(placement_prefilter=True,
                   placement_prefilter_form=self.form, group='cellsched')
        filt = filters.ProjectCellFilter()
        passed = self._cells_of(filt.filter_all(
            self._hosts(CELLS, per_cell=1),
            self._spec(self.project, self.dest, self.cell, self.rebuild)))
        spec = self._spec(self.project, self.dest, self.cell, self.rebuild)

        if not passed:
            self.assertRaises(nova_exception.RequestFilterFailed,
                              request_filter.require_cell_aggregates,
                              self.ctxt, spec)
            return
        applied = request_filter.require_cell_aggregates(self.ctxt, spec)

        dest = spec.requested_destination if (
            'requested_destination' in spec) else None
        aggregates = dest.aggregates if dest is not None and (
            'aggregates' in dest) else None
        forbidden = dest.forbidden_aggregates if dest is not None and (
            'forbidden_aggregates' in dest) else None
        if passed == ALL:
            self.assertFalse(applied)
            self.assertIsNone(aggregates)
            self.assertIsNone(forbidden)
        elif self.dest == 'pinned' and self.cell:
            self.assertTrue(applied)
            self.assertIsNone(aggregates)
            self.assertEqual({self._uuid(c) for c in CELLS
                              if c != self.cell}, forbidden)
        elif self._forbidden_form(passed):
            self.assertTrue(applied)
            self.assertIsNone(aggregates)
            self.assertEqual({self._uuid(c) for c in CELLS
                              if c not in passed}, forbidden)
        else:
            self.assertTrue(applied)
            self.assertEqual([','.join(sorted(self._uuid(c)
                                              for c in passed))],
                             aggregates)
            self.assertIsNone(forbidden)


class PrefilterNamedDestinationTestCase(testscenarios.WithScenarios,
                                        FilterTestBase):
    """Requests that name their host or node get nothing from the pre-filter.

    nova asks placement for that node only (``in_tree``), so no host of
    the project's cells can be cut; a forced host skips every host filter
    in nova, a requested one is still checked by ProjectCellFilter. Even a
    project that may use no cell is not failed by the pre-filter then.
    """

    scenarios = [
        ('forced_host', dict(force_hosts=['h1'])),
        ('forced_node', dict(force_nodes=['n1'])),
        ('forced_host_project_without_cells', dict(
            force_hosts=['h1'], project=PROJ_B,
            projects='nope:%s' % PROJ_B)),
        ('requested_host_boot_2_74', dict(dest={'host': 'h1'})),
        ('requested_node_boot_2_74', dict(dest={'node': 'n1'})),
        ('requested_host_and_node', dict(dest={'host': 'h1',
                                               'node': 'n1'})),
        ('migrate_or_evacuate_to_host_pinned_cell', dict(
            dest={'host': 'h1'}, cell='spare')),
        ('cross_cell_resize_to_host', dict(
            dest={'host': 'h1', 'allow_cross_cell_move': True})),
    ]

    project = PROJ_A
    projects = STD_PROJECTS
    force_hosts = None
    force_nodes = None
    dest = None
    cell = None

    def _named_spec(self, named=True):
        spec = self._spec(self.project)
        if named:
            spec.force_hosts = self.force_hosts
            spec.force_nodes = self.force_nodes
        if self.dest is not None or self.cell is not None:
            fields = dict(self.dest or {}) if named else {
                k: v for k, v in (self.dest or {}).items()
                if k not in ('host', 'node')}
            if self.cell:
                fields['cell'] = self.cells[self.cell]
            spec.requested_destination = objects.Destination(**fields)
        return spec

    def test_nothing_added(self):
        self._set_options(STD_DEFAULT, self.projects)
        self.flags(placement_prefilter=True, group='cellsched')
        filters.ProjectCellFilter()
        spec = self._named_spec()
        self.assertFalse(request_filter.require_cell_aggregates(
            self.ctxt, spec))
        if 'requested_destination' in spec:
            dest = spec.requested_destination
            self.assertIsNone(dest.aggregates)
            self.assertIsNone(dest.forbidden_aggregates)

    def test_same_request_without_the_host_is_restricted(self):
        """The control: without the named host the pre-filter applies."""
        self._set_options(STD_DEFAULT, self.projects)
        self.flags(placement_prefilter=True, group='cellsched')
        filters.ProjectCellFilter()
        spec = self._named_spec(named=False)
        if self.project == PROJ_B:
            self.assertRaises(nova_exception.RequestFilterFailed,
                              request_filter.require_cell_aggregates,
                              self.ctxt, spec)
        else:
            self.assertTrue(request_filter.require_cell_aggregates(
                self.ctxt, spec))


class PrefilterTestCase(FilterTestBase):
    """The placement pre-filter's option, log lines and registration."""

    def setUp(self):
        super().setUp()
        self._set_options(STD_DEFAULT, STD_PROJECTS)
        self.filt = filters.ProjectCellFilter()

    def test_option_off_adds_nothing(self):
        """The option defaults to off, and is read on every request."""
        spec = self._spec(PROJ_A)
        self.assertFalse(request_filter.require_cell_aggregates(
            self.ctxt, spec))
        self.assertNotIn('requested_destination', spec)
        self.flags(placement_prefilter=True, group='cellsched')
        self.assertTrue(request_filter.require_cell_aggregates(
            self.ctxt, spec))
        self.assertEqual([self._uuid('dedicated_a')],
                         spec.requested_destination.aggregates)

    def test_adds_to_aggregates_other_filters_required(self):
        """Nova's own filters' aggregates stay: the sets are AND'ed."""
        self.flags(placement_prefilter=True, group='cellsched')
        spec = self._spec(UNMAPPED)
        spec.requested_destination = objects.Destination()
        spec.requested_destination.require_aggregates([uuids.tenant_agg])
        request_filter.require_cell_aggregates(self.ctxt, spec)
        self.assertEqual(
            [uuids.tenant_agg, ','.join(sorted(
                [self._uuid('default1'), self._uuid('default2')]))],
            spec.requested_destination.aggregates)

    def test_no_cell_fails_with_log_line_naming_project_and_options(self):
        self.flags(placement_prefilter=True, group='cellsched')
        self._set_options(['default1'], 'nope:%s' % PROJ_A)
        exc = self.assertRaises(nova_exception.RequestFilterFailed,
                                request_filter.require_cell_aggregates,
                                self.ctxt, self._spec(PROJ_A))
        self.assertIn(PROJ_A, str(exc))
        lines = self._log_lines('WARNING', 'may use no cell')
        self.assertEqual(1, len(lines), self.stdlog.logger.output)
        self.assertIn(PROJ_A, lines[0])
        self.assertIn("cells_projects='nope:%s'" % PROJ_A, lines[0])
        self.assertIn("cells_default='default1'", lines[0])

    def test_filter_and_prefilter_decide_with_one_policy(self):
        """A new mapping reaches both at once, through the shared policy.

        Building another filter does not start another policy.
        """
        shared = state.get()
        filters.ProjectCellFilter()
        self.assertIs(shared, state.get())
        self.flags(placement_prefilter=True, group='cellsched')
        self._set_options(['spare'], 'default1:%s' % PROJ_A)
        spec = self._spec(PROJ_A)
        request_filter.require_cell_aggregates(self.ctxt, spec)
        self.assertEqual([self._uuid('default1')],
                         spec.requested_destination.aggregates)
        self.assertEqual({'default1'}, self._cells_of(
            self.filt.filter_all(self._hosts(), self._spec(PROJ_A))))

    def test_registered_once_even_after_reload(self):
        """Registering again, or from a reloaded module, keeps one entry.

        A reload makes a new function object with the same module and
        name; it replaces the stale one in place.
        """
        def stale(ctxt, spec):
            return False
        stale.__module__ = request_filter.entry().__module__
        stale.__name__ = 'require_cell_aggregates'
        first = nova_request_filter.ALL_REQUEST_FILTERS[0]
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            [first, stale]))
        for _ in range(3):
            self.assertTrue(request_filter.register())
        self.assertEqual([first, request_filter.entry()],
                         nova_request_filter.ALL_REQUEST_FILTERS)

    def test_nova_calls_our_entry_timed_as_its_own(self):
        """The entry in nova's list is ``request_filter.nova_entry``.

        It runs the pre-filter, and nova's trace_request_filter times it
        under the pre-filter's name, as the guide says.
        """
        self.flags(placement_prefilter=True, group='cellsched')
        ours = request_filter.entry()
        self.assertIs(request_filter.nova_entry, ours)
        # setUp's filter registered it.
        self.assertIn(ours, nova_request_filter.ALL_REQUEST_FILTERS)
        traced = self.useFixture(fixtures.FakeLogger(
            name='nova.scheduler.request_filter', level=logging.DEBUG))
        spec = self._spec(PROJ_A)
        self.assertTrue(ours(self.ctxt, spec))
        self.assertEqual([self._uuid('dedicated_a')],
                         spec.requested_destination.aggregates)
        self.assertIn("Request filter 'require_cell_aggregates' took",
                      traced.output)

    def test_building_the_filter_registers_the_prefilter_once(self):
        """nova-scheduler building the filter is what registers it."""
        first = nova_request_filter.ALL_REQUEST_FILTERS[0]
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS', [first]))
        filters.ProjectCellFilter()
        filters.ProjectCellFilter()
        self.assertEqual([first, request_filter.entry()],
                         nova_request_filter.ALL_REQUEST_FILTERS)

    def test_registering_logs_one_line_with_the_state_and_form(self):
        """Adding the pre-filter says at INFO whether it is on, and how."""
        def lines():
            return self._log_lines('INFO', 'pre-filter registered')

        first = nova_request_filter.ALL_REQUEST_FILTERS[0]
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS', [first]))
        # setUp's filter may have logged it already, into nova's own list.
        before = len(lines())
        self.assertTrue(request_filter.register())
        self.assertEqual(before + 1, len(lines()))
        self.assertIn('registered: off, placement is asked as without the '
                      'plugin ([cellsched] placement_prefilter = False, '
                      'placement_prefilter_form = auto;', lines()[-1])
        # Already in the list: nothing added, nothing logged.
        self.assertTrue(request_filter.register())
        self.assertEqual(before + 1, len(lines()))

        self.flags(placement_prefilter=True,
                   placement_prefilter_form='forbidden', group='cellsched')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS', [first]))
        self.assertTrue(request_filter.register())
        self.assertEqual(before + 2, len(lines()))
        self.assertIn('registered: on ([cellsched] placement_prefilter = '
                      'True, placement_prefilter_form = forbidden;',
                      lines()[-1])

    def test_not_a_list_is_a_warning_not_an_error(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            (lambda ctxt, spec: False,)))
        self.assertFalse(request_filter.register())
        self.assertEqual(1, len(self._log_lines(
            'WARNING', 'pre-filter is not registered')))
        self.assertEqual(1, len(nova_request_filter.ALL_REQUEST_FILTERS))


class ProjectCellFilterTestCase(FilterTestBase):

    def setUp(self):
        super().setUp()
        self._set_options(STD_DEFAULT, STD_PROJECTS)

    def test_no_host_passed_is_logged(self):
        """An empty result is explained at info level."""
        self._set_options(STD_DEFAULT, 'nope:%s' % PROJ_A)
        filt = filters.ProjectCellFilter()
        hosts = self._hosts(['default1', 'spare'], per_cell=1)
        self.assertEqual([], filt.filter_all(hosts, self._spec(PROJ_A)))
        lines = self._log_lines('INFO', 'No host passed')
        self.assertEqual(1, len(lines), self.stdlog.logger.output)
        self.assertIn(
            'No host passed: project %s may use cells none, the 2 candidate '
            'host(s) are in cells %s (see [cellsched] cells_default and '
            'cells_projects)' % (PROJ_A, sorted([self._uuid('default1'),
                                                 self._uuid('spare')])),
            lines[0])
        # And the unknown cell was reported when the cells were loaded.
        self.assertEqual(1, len(self._log_lines('WARNING',
                                                "unknown cell 'nope'")))

    def test_no_host_logged_with_allowed_cells(self):
        filt = filters.ProjectCellFilter()
        hosts = self._hosts(['spare'], per_cell=1)
        self.assertEqual([], filt.filter_all(hosts, self._spec(PROJ_A)))
        self.assertIn("may use cells ['%s']" % self._uuid('dedicated_a'),
                      self._log_lines('INFO', 'No host passed')[0])

    def test_nothing_logged_when_hosts_pass(self):
        filt = filters.ProjectCellFilter()
        self.assertTrue(filt.filter_all(self._hosts(), self._spec(PROJ_A)))
        self.assertEqual([], self._log_lines('INFO', 'No host passed'))

    def test_no_hosts(self):
        filt = filters.ProjectCellFilter()
        self.assertEqual([], filt.filter_all([], self._spec(PROJ_A)))

    def test_ambiguous_cell_name_in_database(self):
        """Two real cell mappings with one name: the name grants nothing."""
        twin1 = self._create_cell('twin', uuids.twin1)
        twin2 = self._create_cell('twin', uuids.twin2)
        self._set_options(['twin', 'default1'], 'twin:%s' % PROJ_A)
        filt = filters.ProjectCellFilter()
        hosts = [fakes.FakeHostState('t1', 'n1', {'cell_uuid': twin1.uuid}),
                 fakes.FakeHostState('t2', 'n2', {'cell_uuid': twin2.uuid})
                 ] + self._hosts(['default1'], per_cell=1)
        self.assertEqual([], filt.filter_all(hosts, self._spec(PROJ_A)))
        self.assertEqual(['default1-host0'],
                         [h.host for h in filt.filter_all(
                             hosts, self._spec(UNMAPPED))])
        warnings = self._log_lines('WARNING', "ambiguous cell name 'twin'")
        self.assertEqual(1, len(warnings))
        self.assertIn(', '.join(sorted([twin1.uuid, twin2.uuid])),
                      warnings[0])

    def test_cell_disabled_in_nova_is_reported(self):
        self._create_cell('off', uuids.off, disabled=True)
        self._set_options(['default1', 'off'], '')
        filt = filters.ProjectCellFilter()
        filt.filter_all(self._hosts(['default1']), self._spec(UNMAPPED))
        self.assertEqual(1, len(self._log_lines(
            'WARNING', "cell disabled in nova 'off'")))

    def test_cell_created_after_filter_is_built_seen_at_sighup(self):
        """Cells are read when the filter is built, and on every SIGHUP.

        As nova's HostManager reads its cells just before it builds its
        filters, and again on SIGHUP (it reads no host of a cell created
        in between until then).
        """
        self._set_options(['late'], '')
        filt = filters.ProjectCellFilter()
        self.assertEqual(1, len(self._log_lines('WARNING',
                                                "unknown cell 'late'")))
        late = self._create_cell('late', uuids.late)
        hosts = [fakes.FakeHostState('l1', 'n1', {'cell_uuid': late.uuid})]
        # Read a moment ago: not again for an unknown host's cell yet.
        self.assertEqual([], filt.filter_all(hosts, self._spec(UNMAPPED)))
        scheduler_state.sighup(state.CONF)
        self.assertEqual(hosts, filt.filter_all(hosts, self._spec(UNMAPPED)))

    def test_cell_created_after_first_request(self):
        """A host in a cell the filter does not know reloads the cells.

        The reload is rate limited, so the shared policy is built the
        same way (same options, same loader from the API database) but
        with a clock the test moves.
        """
        self._set_options(['late'], '')
        clock = FakeClock()
        self.policy_state.install(state.SharedPolicy(
            state.CONF, state.load_cell_infos, clock=clock))
        filt = filters.ProjectCellFilter()
        spec = self._spec(UNMAPPED)
        self.assertEqual([], filt.filter_all(self._hosts(['default1']),
                                             spec))
        self.assertEqual(1, len(self._log_lines('WARNING',
                                                "unknown cell 'late'")))

        late = self._create_cell('late', uuids.late)
        hosts = [fakes.FakeHostState('l1', 'n1', {'cell_uuid': late.uuid})]
        # Within the interval the cells are not read again.
        clock.now += 1
        self.assertEqual([], filt.filter_all(hosts, spec))
        clock.now += 10
        self.assertEqual(hosts, filt.filter_all(hosts, spec))
        # Known now: no reload for hosts of known cells.
        clock.now += 100
        self.assertEqual(hosts, filt.filter_all(hosts, spec))

    def test_option_change_takes_effect_on_next_request(self):
        filt = filters.ProjectCellFilter()
        hosts = self._hosts()
        self.assertEqual({'dedicated_a'}, self._cells_of(
            filt.filter_all(hosts, self._spec(PROJ_A))))
        self._set_options(['spare'], 'default1:%s' % PROJ_A)
        self.assertEqual({'default1'}, self._cells_of(
            filt.filter_all(hosts, self._spec(PROJ_A))))
        self.assertEqual({'spare'}, self._cells_of(
            filt.filter_all(hosts, self._spec(UNMAPPED))))
        self.assertEqual(1, len(self._log_lines(
            'INFO', "[cellsched] options changed: cells_default='spare'")))
        # Back to empty: inert again.
        self._set_options([], '')
        self.assertEqual(ALL, self._cells_of(
            filt.filter_all(hosts, self._spec(PROJ_A))))

    def test_malformed_value_at_construction_raises(self):
        self._set_options(STD_DEFAULT, 'dedicated_a')
        exc = self.assertRaises(InvalidCellsMapping,
                                filters.ProjectCellFilter)
        self.assertEqual('cells_projects', exc.option)
        self.assertEqual('dedicated_a', exc.token)
        self._set_options(['default1:%s' % PROJ_A], '')
        exc = self.assertRaises(InvalidCellsMapping,
                                filters.ProjectCellFilter)
        self.assertEqual('cells_default', exc.option)

    def test_malformed_value_after_start_keeps_old_mapping(self):
        filt = filters.ProjectCellFilter()
        hosts = self._hosts()
        self.assertEqual({'dedicated_a'}, self._cells_of(
            filt.filter_all(hosts, self._spec(PROJ_A))))
        self._set_options(['spare'], 'default1:%s default2' % PROJ_A)
        for _ in range(3):
            self.assertEqual({'dedicated_a'}, self._cells_of(
                filt.filter_all(hosts, self._spec(PROJ_A))))
            self.assertEqual(DEFAULTS, self._cells_of(
                filt.filter_all(hosts, self._spec(UNMAPPED))))
        errors = self._log_lines('ERROR', 'Ignoring the new [cellsched]')
        self.assertEqual(1, len(errors))
        self.assertIn('contains whitespace', errors[0])

    def test_filter_runs_once_per_request(self):
        """Nova skips it for the later instances of a multi-create."""
        filt = filters.ProjectCellFilter()
        self.assertTrue(filt.run_filter_for_index(0))
        self.assertFalse(filt.run_filter_for_index(1))
        hosts = self._hosts()
        handler = nova_filters.HostFilterHandler()
        self.assertEqual(hosts, handler.get_filtered_objects(
            [filt], hosts, self._spec(PROJ_A), index=1))

    def test_listed_in_nova_filter_classes(self):
        """Nova's filter loader accepts the class path."""
        handler = nova_filters.HostFilterHandler()
        classes = handler.get_matching_classes(
            ['nova_cellsched.filters.ProjectCellFilter'])
        self.assertEqual([filters.ProjectCellFilter], classes)


class ForbiddenFormTestCase(base.TestCase):
    """Which form the pre-filter uses for the default cells."""

    def test_auto_forbids_only_when_other_cells_are_fewer(self):
        three, two = frozenset('abc'), frozenset('de')
        self.assertTrue(decision.forbidden_form('auto', three, two))
        self.assertFalse(decision.forbidden_form('auto', two, three))
        self.assertFalse(decision.forbidden_form('auto', two, frozenset('fg')))
        self.assertTrue(decision.forbidden_form('auto', two, frozenset()))

    def test_explicit_forms_decide_alone(self):
        one, many = frozenset('a'), frozenset('bcdef')
        self.assertTrue(decision.forbidden_form('forbidden', one, many))
        self.assertFalse(decision.forbidden_form('member_of', many, one))

    def test_unknown_form_names_the_option_and_the_choices(self):
        exc = self.assertRaises(ValueError, decision.forbidden_form,
                                'not_in', frozenset('a'), frozenset('b'))
        self.assertIn('placement_prefilter_form', str(exc))
        self.assertIn('auto, member_of, forbidden', str(exc))
        self.assertIn("'not_in'", str(exc))


class PinnedCellTestCase(base.TestCase):
    """pinned_cell() over the forms requested_destination takes."""

    def test_forms(self):
        cell = objects.CellMapping(uuid=uuids.cell)
        spec = objects.RequestSpec(project_id=PROJ_A)
        self.assertIsNone(decision.pinned_cell(spec))
        spec.requested_destination = None
        self.assertIsNone(decision.pinned_cell(spec))
        spec.requested_destination = objects.Destination(host='h1')
        self.assertIsNone(decision.pinned_cell(spec))
        spec.requested_destination = objects.Destination(cell=None)
        self.assertIsNone(decision.pinned_cell(spec))
        spec.requested_destination = objects.Destination(cell=cell)
        self.assertEqual(uuids.cell, decision.pinned_cell(spec))
        spec.requested_destination = objects.Destination(
            cell=cell, allow_cross_cell_move=False)
        self.assertEqual(uuids.cell, decision.pinned_cell(spec))
        spec.requested_destination = objects.Destination(
            cell=cell, allow_cross_cell_move=True)
        self.assertIsNone(decision.pinned_cell(spec))


class NamedDestinationTestCase(base.TestCase):
    """named_destination() over the ways a request names its host or node.
    """

    def _named(self, spec):
        """The answer and its log text, or None."""
        target = decision.named_destination(spec)
        return None if target is None else (target, str(target))

    def test_forms(self):
        named = decision.NamedDestination
        spec = objects.RequestSpec(project_id=PROJ_A)
        self.assertIsNone(self._named(spec))
        spec.force_hosts = None
        spec.force_nodes = []
        spec.requested_destination = None
        self.assertIsNone(self._named(spec))
        spec.requested_destination = objects.Destination(
            cell=objects.CellMapping(uuid=uuids.cell))
        self.assertIsNone(self._named(spec))
        spec.requested_destination = objects.Destination(node=None)
        self.assertIsNone(self._named(spec))
        spec.requested_destination = objects.Destination(node='n1')
        self.assertEqual((named(False, 'node', 'n1'), 'requested node n1'),
                         self._named(spec))
        spec.requested_destination = objects.Destination(host='h1',
                                                         node='n1')
        self.assertEqual((named(False, 'host', 'h1'), 'requested host h1'),
                         self._named(spec))
        spec.force_nodes = ['n2']
        self.assertEqual((named(True, 'node', 'n2'), 'forced node n2'),
                         self._named(spec))
        spec.force_hosts = ['h2', 'h3']
        self.assertEqual((named(True, 'host', 'h2,h3'),
                          'forced host h2,h3'), self._named(spec))


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class PrefilterNamedCellTestCase(FilterTestBase):
    """The one cell the pre-filter names to nova's HostManager.

    nova's HostManager reads the hosts of a named cell even when it is
    disabled, and otherwise those of the enabled cells it read at start
    or on the last SIGHUP: only a cell enabled then, and still enabled,
    is named.
    """

    def setUp(self):
        super().setUp()
        self.flags(placement_prefilter=True,
                   placement_prefilter_form='member_of', group='cellsched')
        self._set_options(['default1'], 'dedicated_a:%s' % PROJ_A)

    def _named(self, project_id):
        """The cell the pre-filter named for a new server, or None."""
        spec = self._spec(project_id)
        self.assertTrue(request_filter.require_cell_aggregates(
            self.ctxt, spec))
        dest = spec.requested_destination
        self.assertEqual(1, len(dest.aggregates))
        if 'cell' in dest and dest.cell is not None:
            self.assertFalse(dest.allow_cross_cell_move)
            return dest.cell.uuid
        return None

    def _disable(self, name, disabled=True):
        cell = self.cells[name]
        cell.disabled = disabled
        cell.save()

    def test_enabled_cell_is_named(self):
        filters.ProjectCellFilter()
        self.assertEqual(self._uuid('dedicated_a'), self._named(PROJ_A))
        self.assertEqual(self._uuid('default1'), self._named(UNMAPPED))

    def test_cell_disabled_at_start_is_not_named(self):
        self._disable('dedicated_a')
        filters.ProjectCellFilter()
        self.assertIsNone(self._named(PROJ_A))
        self.assertEqual(self._uuid('default1'), self._named(UNMAPPED))

    def test_cell_disabled_since_start_is_not_named_once_read(self):
        """Not named once the policy cache reads the cells again.

        The cell mapping named is the one the cache read, not read back
        per request: until the cache's next read (``cell_cache_ttl``, or
        a SIGHUP) the cell is named, as nova's HostManager still reads it
        then from its enabled cells (nova reads them again at the SIGHUP
        only).
        """
        self.flags(cell_cache_ttl=300, group='cellsched')
        clock = FakeClock()
        self.policy_state.install(state.SharedPolicy(
            state.CONF, state.load_cell_infos, clock=clock))
        filters.ProjectCellFilter()
        self._disable('dedicated_a')
        self.assertEqual(self._uuid('dedicated_a'), self._named(PROJ_A))
        clock.now += 300
        self.assertIsNone(self._named(PROJ_A))
        scheduler_state.sighup(state.CONF)
        self.assertIsNone(self._named(PROJ_A))

    def test_cell_disabled_since_start_is_not_named_after_sighup(self):
        filters.ProjectCellFilter()
        self._disable('dedicated_a')
        scheduler_state.sighup(state.CONF)
        self.assertIsNone(self._named(PROJ_A))

    def test_one_cell_request_reads_no_cell_mapping(self):
        """The named cell is the cache's nova CellMapping, not read back.

        Every statement on the API database's engine is counted: a
        one-cell request runs none (it used to read the cell mapping by
        uuid on every request); a SIGHUP reads the cell mappings.
        """
        filters.ProjectCellFilter()
        self._named(PROJ_A)
        engine = api_db.get_engine()
        statements = []

        def count(conn, cursor, statement, *args):
            statements.append(statement)

        sqlalchemy.event.listen(engine, 'before_cursor_execute', count)
        self.addCleanup(sqlalchemy.event.remove, engine,
                        'before_cursor_execute', count)
        for project, name in ((PROJ_A, 'dedicated_a'),
                              (UNMAPPED, 'default1'),
                              (PROJ_A, 'dedicated_a')):
            spec = self._spec(project)
            self.assertTrue(request_filter.require_cell_aggregates(
                self.ctxt, spec))
            cell = spec.requested_destination.cell
            self.assertIsInstance(cell, objects.CellMapping)
            self.assertEqual(self._uuid(name), cell.uuid)
            self.assertEqual(self.cells[name].database_connection,
                             cell.database_connection)
        self.assertEqual([], statements)

        scheduler_state.sighup(state.CONF)
        self.assertTrue(any('cell_mappings' in statement
                            for statement in statements), statements)

    def test_cell_enabled_since_start_is_named_after_sighup_only(self):
        """nova reads no host of it before the SIGHUP either."""
        self._disable('default1')
        filters.ProjectCellFilter()
        self._disable('default1', False)
        self.assertIsNone(self._named(UNMAPPED))
        scheduler_state.sighup(state.CONF)
        self.assertEqual(self._uuid('default1'), self._named(UNMAPPED))
