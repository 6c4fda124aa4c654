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

"""One declarative list, matched as a set, each part falling back alone."""

import dataclasses
import importlib
import inspect
import logging
import sys

import fixtures
import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids
import sqlalchemy as sa

import nova_cellsched.api as cellsched_api
from nova_cellsched import compat
from nova_cellsched.compat import adapter
from nova_cellsched.compat import core
from nova_cellsched.compat import parts
from tests import base
from tests.fixtures import releases

CONF = nova.conf.CONF
VIEWS = 'nova.api.openstack.compute.views.servers'


def _get_pinned_az(self, context, instance, provided_az):
    """nova's _get_pinned_az as a later release might change it."""
    return provided_az or instance.availability_zone


def _nova_attributes():
    """(owner, attribute) -> id of every attribute of nova's modules.

    Module attributes, and those of every class defined in a nova
    module: what a swap into nova changes.
    """
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == 'nova' or
                                  name.startswith('nova.')):
            continue
        for key, value in list(vars(module).items()):
            found[(name, key)] = id(value)
            if (inspect.isclass(value) and
                    getattr(value, '__module__', None) == name):
                for attr, member in list(vars(value).items()):
                    found[('%s:%s' % (name, value.__qualname__), attr)] = (
                        id(member))
    return found


def _listeners():
    """Our SQLAlchemy listeners that are in place now."""
    return {(t.target, t.event) for p in parts.PARTS for t in p.targets
            if isinstance(t, parts.Listen) and sa.event.contains(
                core._owner(t.target), t.event,
                core._ours(t.listener))}


def _running_table():
    """The tested table of the running nova (say 34.0.0)."""
    return releases.running_table()


def _later_point_release():
    """An untested point release of the running series (34.0.0: 34.0.7)."""
    major, minor, patch = releases.NOVA_VERSION.split('.')[:3]
    return '%s.%s.%d' % (major, minor, int(patch) + 5)


def _without_lacked(found):
    """*found* (part -> problems) less the parts this release lacks.

    nova 31 and 32 lack what the response validation needs: there its
    problems are exactly that reason (checked here).
    """
    lacks = _running_table().lacks
    for name, why in lacks.items():
        if name in found:
            assert found[name] == ['nova %s %s' % (releases.NOVA_VERSION,
                                                   why)], found[name]
    return {name: problems for name, problems in found.items()
            if name not in lacks}


def _off_lines(output):
    """The "is off" lines logged, but those of a part the release lacks."""
    lacks = _running_table().lacks
    return [line for line in output.splitlines() if 'is off' in line and
            not any("part %s, which" % name in line for name in lacks)]


class _Base(base.TestCase):

    def _changed_pinned_az(self):
        """nova's ViewBuilder._get_pinned_az is another function now.

        Set by hand: fixtures.MonkeyPatch would give it the original's
        ``__wrapped__``, which the hasher follows.
        """
        from nova.api.openstack.compute.views import servers as views
        original = views.ViewBuilder.__dict__['_get_pinned_az']
        views.ViewBuilder._get_pinned_az = _get_pinned_az
        self.addCleanup(setattr, views.ViewBuilder, '_get_pinned_az',
                        original)

    def _with_release(self, version, changes, lacks=None):
        """The running nova's table plus *version*, its hashes changed so.

        Only these two releases are tested meanwhile.
        """
        tested = _running_table()
        other = dataclasses.replace(
            tested, version=version,
            hashes=dict(tested.hashes, **changes), lacks=dict(lacks or {}))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.compat.core.tested',
            lambda: tuple(sorted((tested, other),
                                 key=lambda r: core.version_key(r.version)))))
        return tested, other

    def setUp(self):
        super().setUp()
        objects.register_all()
        self.useFixture(config_fixture.Config(CONF)).config(
            connection='sqlite://', group='database')
        # Each test starts with no part on, whatever an earlier test in
        # this process left on (the scheduler's request_filter, say).
        compat.restore()
        self.addCleanup(compat.restore)
        self.addCleanup(cellsched_api.uninstall)


class TestMatchedAsASet(_Base):

    def test_a_source_passes_if_it_equals_any_tested_version(self):
        """Another tested release with another ``detail``: ours passes.

        The running nova's source equals its own release's version only
        (34.0.0 on nova 34); the part fits.
        """
        name = VIEWS + '.ViewBuilder.detail'
        self._with_release('35.0.0', {name: 'f' * 64})
        self.assertEqual({'lister': [], 'guard': [], 'keyset': [],
                          'view': []},
                         compat.check(['view']))
        self.assertEqual([releases.NOVA_VERSION],
                         core.releases_matching(['view']))
        self.assertEqual([releases.NOVA_VERSION, '35.0.0'],
                         core.releases_matching(['startup']))

    def test_an_untouched_point_release_passes_every_part(self):
        version = _later_point_release()
        self.useFixture(fixtures.MonkeyPatch(
            'importlib.metadata.version', lambda name: version))
        found = compat.check()
        self.assertEqual(sorted(_running_table().lacks),
                         sorted(name for name, problems in found.items()
                                if problems))
        self.assertTrue(cellsched_api.install())
        self.assertEqual(releases.api_parts_on(), compat.on())


    def test_a_table_per_release_is_found(self):
        """Every tested release of ``sources.py``, oldest first.

        Each table has a hash for every relied-on source, and the adapter
        has every function the parts take from it.
        """
        self.assertEqual(['31.3.1', '32.2.1', '33.0.2', '34.0.0'],
                         [r.version for r in core.tested()])
        names = {s.name for s in parts.all_sources()}
        needed = {t.replacement.split(':')[1] for p in parts.PARTS
                  for t in p.targets
                  if getattr(t, 'replacement', '').startswith('adapter:')}
        needed |= {'raise_if_too_old', 'threading_mode', 'nova_pools',
                   'reset_nova_pools'}
        self.assertEqual(set(), {n for n in needed
                                 if not callable(getattr(adapter, n, None))})
        for release in core.tested():
            self.assertEqual(names, set(release.hashes), release.version)
            self.assertLessEqual(set(release.lacks), set(parts.BY_NAME))

    def test_a_source_equal_to_an_older_release_passes(self):
        """Matched as a set: an older release's version of a source passes.

        nova's ``target_cell`` taken out of the running release's table
        and an older tested release whose versions the running sources
        all equal: the lister (and what needs it) stays on.
        """
        name = 'nova.context.target_cell'
        running = _running_table()
        changed = dataclasses.replace(
            running, hashes=dict(running.hashes, **{name: 'f' * 64}))
        older = dataclasses.replace(running, version='30.9.9', lacks={})
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.compat.core.tested', lambda: (older, changed)))
        self.assertEqual([], compat.check(['lister'])['lister'])
        self.assertEqual(['30.9.9'], core.releases_matching(['lister']))

    def test_sources_of_two_releases_but_no_one_release_are_off(self):
        """Each source equals a tested release's, none has them all: off.

        As a nova whose ``InstanceList.fill_faults`` is another
        release's and whose view is this one's: the running table's
        ``fill_faults`` and another release's ``detail`` are changed, so
        that each running source equals one of the two, the view's
        sources together neither. One WARNING names both sources and
        their releases.
        """
        faults = 'nova.objects.instance.InstanceList.fill_faults'
        list_view = VIEWS + '.ViewBuilder.detail'
        running = _running_table()
        other = dataclasses.replace(
            running, version='35.0.0', lacks={},
            hashes=dict(running.hashes, **{list_view: 'f' * 64}))
        this = dataclasses.replace(
            running, hashes=dict(running.hashes, **{faults: 'e' * 64}))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.compat.core.tested', lambda: (this, other)))
        (problem,) = compat.check(['view'])['view']
        self.assertEqual(
            'its sources each equal a tested nova release but no one '
            'release has them all, so this nova is no tested release: '
            '%s equals nova %s; %s equals nova 35.0.0'
            % (list_view, releases.NOVA_VERSION, faults), problem)
        self.assertEqual([], core.releases_matching(['view']))
        self.assertIsNone(core.lacking('view'))
        self.assertEqual([], compat.check(['lister'])['lister'])

        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        found = compat.install(['lister', 'view'])
        self.assertEqual([problem], found['view'])
        self.assertEqual(['guard', 'keyset', 'lister'], compat.on())
        (said,) = [line for line in logs.output.splitlines()
                   if 'is off' in line]
        self.assertIn("nova-cellsched's part view, which", said)
        self.assertIn(problem, said)
        self.assertIn('To fix: install the nova-cellsched release tested '
                      'with this nova', said)

    def test_the_running_release_matches_every_part(self):
        """Its own table: every part's sources equal the running release's."""
        for part in parts.PARTS:
            self.assertIn(releases.NOVA_VERSION,
                          core.releases_matching([part.name]), part.name)


class TestAdapterGates(base.TestCase):
    """The adapter's gates: by nova's version, at the point of difference."""

    def test_the_gate_is_novas_major_version(self):
        self.assertEqual(33, adapter._major('33.0.9'))
        self.assertEqual(31, adapter._major('31.0.0.0rc1'))
        self.assertEqual(int(releases.NOVA_VERSION.split('.')[0]),
                         adapter.NOVA)

    def test_a_nova_without_a_version_takes_the_newest_path(self):
        self.assertGreater(adapter._major('unknown'),
                           int(core.tested()[-1].version.split('.')[0]))

    def test_novas_thread_model_is_the_one_it_runs(self):
        """Green threads exactly when eventlet has patched ``threading``."""
        patched = 'eventlet' in sys.modules and sys.modules[
            'eventlet'].patcher.is_monkey_patched('thread')
        self.assertEqual(not patched, adapter.threading_mode())

    def test_novas_pools_are_found_and_stopped(self):
        """A pool nova starts is seen, and stopped with nova's own calls.

        nova 31 keeps no pool (a green thread per call); from nova 32 its
        ``scatter_gather_cells`` starts its cell worker pool, wherever
        that release keeps it.
        """
        cell = objects.CellMapping(
            uuid=uuids.cell, name='cell', transport_url='none:///',
            database_connection='sqlite://')
        self.assertEqual(
            {uuids.cell: 42}, nova_context.scatter_gather_cells(
                nova_context.get_admin_context(), [cell], 30,
                lambda cctxt: 42))
        if adapter.NOVA < 32:
            self.assertEqual([], adapter.nova_pools())
            return
        self.assertNotEqual([], adapter.nova_pools())
        adapter.reset_nova_pools()
        self.assertEqual([], adapter.nova_pools())


class TestLackingRelease(_Base):
    """A release that lacks what a part needs: off, said once at INFO."""

    def test_a_part_its_release_lacks_stays_off_and_says_why(self):
        """Sources equal to that release's only: off with its reason.

        The view lookups, which every tested release has, stand for the
        part (nova 31 and 32 lack the response validation for real).
        """
        reason = 'has no view lookups per cell'
        self._with_release('35.0.0', {
            'nova.api.validation.query_schema': 'f' * 64,
        }, lacks={'view': reason})
        # The running nova's view sources equal both tables, and only one
        # lacks it: on.
        self.assertEqual([], compat.check(['view'])['view'])
        self.assertIsNone(core.lacking('view'))

        lacking = (dataclasses.replace(_running_table(),
                                       lacks={'view': reason}),)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.compat.core.tested', lambda: lacking))
        said_reason = 'nova %s %s' % (releases.NOVA_VERSION, reason)
        self.assertEqual(said_reason, core.lacking('view'))
        self.assertEqual([said_reason], compat.check(['view'])['view'])
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        found = compat.install(['lister', 'view'])
        self.assertEqual([said_reason], found['view'])
        self.assertEqual(['guard', 'keyset', 'lister'], compat.on())
        self.assertEqual([], [line for line in logs.output.splitlines()
                              if 'WARNING' in line or 'To fix' in line])
        (said,) = [line for line in logs.output.splitlines()
                   if 'is off' in line]
        self.assertIn("nova-cellsched's part view, which reads what the "
                      "server list's view shows from the listed cells only "
                      '(api.view.lookups), is off: %s.' % said_reason, said)

    def test_a_changed_source_is_not_mistaken_for_a_lacking_release(self):
        """Sources equal to no table: the usual WARNING, not the reason."""
        table = _running_table()
        really_lacks = bool(table.lacks)
        changed = (dataclasses.replace(
            table, hashes=dict(table.hashes, **{
                'nova.api.validation.query_schema': 'f' * 64}),
            lacks={'validation': 'has no response schemas'}),)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.compat.core.tested', lambda: changed))
        self.assertIsNone(core.lacking('validation'))
        # First the source; then, where nova has no response schemas (31,
        # 32), what the part's checks find missing: never the reason.
        problem, *checks = compat.check(['validation'])['validation']
        self.assertIn('nova.api.validation.query_schema', problem)
        self.assertIn('source differs from the tested ones', problem)
        self.assertEqual(really_lacks, bool(checks), checks)
        self.assertNotIn('has no response schemas', ' '.join(checks))


class TestPerPartFallback(_Base):

    def test_a_changed_view_function_turns_off_only_the_view_lookups(self):
        """One WARNING naming the function and what to do; the rest on.

        And one for the renderer, which renders through the view's
        hooks: off with it, saying so.
        """
        self._changed_pinned_az()
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.assertTrue(cellsched_api.install())
        on = [name for name in releases.api_parts_on()
              if name not in ('view', 'render')]
        self.assertEqual(on, compat.on())
        warnings = _off_lines(logs.output)
        self.assertEqual(2, len(warnings), logs.output)
        self.assertIn("nova-cellsched's part render, which renders served "
                      'server lists from the listed rows (api.view.render), '
                      'is off: needs view, which is off.', warnings[1])
        self.assertIn("nova-cellsched's part view, which reads what the "
                      "server list's view shows from the listed cells only",
                      warnings[0])
        self.assertIn(VIEWS + '.ViewBuilder._get_pinned_az(self, context, '
                      'instance, provided_az): source differs from the '
                      'tested ones', warnings[0])
        self.assertIn("Meanwhile nova's view builder reads", warnings[0])
        self.assertIn('To fix: install the nova-cellsched release tested '
                      'with this nova', warnings[0])
        (info,) = [line for line in logs.output.splitlines()
                   if 'nova-cellsched serves' in line]
        self.assertIn('parts on: %s;' % ', '.join(on), info)
        from nova.api.openstack.compute.views import servers as views
        self.assertEqual(VIEWS,
                         views.ViewBuilder.__dict__['index'].__module__)

    def test_check_says_which_part_is_off(self):
        self._changed_pinned_az()
        found = _without_lacked(compat.check())
        self.assertEqual(['view', 'render'],
                         [n for n, p in found.items() if p])
        self.assertIn('ViewBuilder._get_pinned_az', found['view'][0])

    def test_a_changed_lister_source_turns_off_what_requires_it(self):
        """The view lookups need the lister's listing: off with it."""
        def _manual_join_columns(columns_to_join):
            return [], list(columns_to_join)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api._manual_join_columns', _manual_join_columns))
        found = compat.install(['view', 'validation'], warn=False)
        self.assertTrue(found['lister'])
        self.assertEqual(['needs lister, which is off'], found['view'])
        # The validation does not need it: not refused for it (where the
        # release lacks the validation, for that only).
        self.assertEqual([], _without_lacked(found).get('validation', []))
        # Nothing half-installed: what only the lister needed is out.
        self.assertEqual([n for n in releases.api_parts_on()
                          if n == 'validation'], compat.on())


class TestRestoreAndCompleteness(_Base):

    def test_the_list_declares_every_attribute_installing_changes(self):
        """Install changes nova's attributes exactly as PARTS says.

        And restore gives nova back exactly the attributes it had.
        """
        # Once before, so that what installing imports is imported.
        self.assertTrue(cellsched_api.install())
        compat.install(['startup', 'request_filter', 'bounded_reads'])
        compat.restore()
        cellsched_api.uninstall()
        before = _nova_attributes()
        from nova.scheduler import request_filter as nova_rf
        filters = list(nova_rf.ALL_REQUEST_FILTERS)

        self.assertTrue(cellsched_api.install())
        found = compat.install(['startup', 'request_filter',
                                'bounded_reads'])
        self.assertEqual({'startup': [], 'guard': [], 'request_filter': [],
                          'bounded_reads': []}, found)
        after = _nova_attributes()
        changed = {key for key in after if after[key] != before.get(key)}
        # Every part, but one the release lacks (it stays off).
        lacks = _running_table().lacks
        self.assertEqual(sorted(p.name for p in parts.PARTS
                                if p.name not in lacks),
                         sorted(compat.on()))
        on = [p for p in parts.PARTS if compat.is_on(p.name)]
        declared = {(t.owner, t.attribute) for p in on
                    for t in p.targets if isinstance(t, parts.Swap)}
        self.assertEqual(declared, changed)
        self.assertEqual(
            {(t.target, t.event) for p in on for t in p.targets
             if isinstance(t, parts.Listen)}, _listeners())
        appended = [f for f in nova_rf.ALL_REQUEST_FILTERS
                    if f not in filters]
        declared_entries = [
            getattr(importlib.import_module(t.replacement.split(':')[0]),
                    t.replacement.split(':')[1])
            for p in on for t in p.targets if isinstance(t, parts.Append)]
        self.assertEqual(declared_entries, appended)

        self.assertEqual(sorted(p.name for p in on),
                         sorted(compat.restore()))
        self.assertEqual(before, _nova_attributes())
        self.assertEqual(filters, nova_rf.ALL_REQUEST_FILTERS)
        self.assertEqual(set(), _listeners())

    def test_restore_leaves_a_later_swap_by_someone_else(self):
        """Only what is still ours is put back."""
        from nova.compute import instance_list as nova_instance_list

        novas = nova_instance_list.get_instances_sorted
        self.addCleanup(setattr, nova_instance_list, 'get_instances_sorted',
                        novas)
        self.assertTrue(cellsched_api.install())
        theirs = object()
        nova_instance_list.get_instances_sorted = theirs
        compat.restore(['lister'])
        self.assertIs(theirs, nova_instance_list.get_instances_sorted)

    def test_a_part_asked_for_stays_when_its_dependant_goes(self):
        compat.install(['guard'])
        self.assertTrue(cellsched_api.install())
        cellsched_api.uninstall()
        self.assertEqual(['guard'], compat.on())


class TestAdapterHooks(_Base):
    """The listing's calls on nova go through the one adapter."""

    def _adapter_with(self, **changed):
        for name, value in changed.items():
            self.useFixture(fixtures.MonkeyPatch(
                'nova_cellsched.compat.adapter.' + name, value))
        return adapter

    def test_the_listing_asks_nova_through_the_adapter(self):
        from nova_cellsched.api.hooks import instance_list

        asked = []

        def cells_to_list(ctx):
            asked.append(ctx)
            return []

        def all_cells():
            # What nova lists when the project's cell list is empty.
            asked.append('all cells')
            return []

        module = self._adapter_with(cells_to_list=cells_to_list,
                                    all_cells=all_cells)
        self.assertIs(module, instance_list.adapter)
        # nova's module calls ours for the rows, as in nova-api.
        self.assertTrue(cellsched_api.install())
        ctx = nova_context.get_admin_context()
        found, down = instance_list.get_instance_objects_sorted(
            ctx, {}, None, None, [], None, None)
        self.assertEqual([ctx, 'all cells'], asked)
        self.assertEqual(([], []), (list(found), down))

    def test_a_down_cell_fails_the_listing_with_the_adapters_error(self):
        from nova_cellsched.api.hooks import instance_list
        from nova_cellsched import gather

        def not_responding(cell_uuid):
            return RuntimeError('cell %s: down, as the adapter says'
                                % cell_uuid)

        self._adapter_with(not_responding=not_responding)
        self.useFixture(config_fixture.Config(CONF)).config(
            list_records_by_skipping_down_cells=False, group='api')
        cells = instance_list.CellsLister()
        cells.record('cell-1', gather.Outcome(gather.FAILED,
                                              error=OSError('gone')))
        error = self.assertRaises(RuntimeError, instance_list.check_down,
                                  cells, False)
        self.assertEqual('cell cell-1: down, as the adapter says',
                         str(error))

    def test_the_request_filter_entry_is_registered_once(self):
        """nova's list gets ``request_filter.nova_entry``, once, and nova's
        tracing names it as nova names its own filters.
        """
        from nova.scheduler import request_filter as nova_rf

        from nova_cellsched.scheduler import request_filter

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            list(nova_rf.ALL_REQUEST_FILTERS)))
        self.assertTrue(request_filter.register())
        self.assertTrue(request_filter.register())
        self.assertIs(request_filter.nova_entry, request_filter.entry())
        self.assertEqual(1, nova_rf.ALL_REQUEST_FILTERS.count(
            request_filter.nova_entry))
        self.assertEqual('require_cell_aggregates',
                         request_filter.nova_entry.__name__)
