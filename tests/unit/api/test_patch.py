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

"""The nova-api filter's checks: install only into the nova it fits."""

import gc
import logging
import re
import sys
import threading

import fixtures
from nova.compute import instance_list as nova_instance_list
import nova.conf
from nova import context as nova_context
from nova.db.main import api as db_api
from nova import objects
from oslo_config import fixture as config_fixture
from oslo_db.sqlalchemy import utils as oslo_utils
import sqlalchemy as sa

from cellsched_tools import maintainer
import nova_cellsched.api as cellsched_api
from nova_cellsched.api.hooks import instance_list
from nova_cellsched.api.hooks import pool
from nova_cellsched.api.hooks import rows
from nova_cellsched.api.startup import install as patch
from nova_cellsched.api.startup import selftest
from nova_cellsched import compat
from nova_cellsched.compat import hashing
from nova_cellsched.compat import sources
from nova_cellsched.listing import sorting
from nova_cellsched.records import query as instance_query
from tests import base
from tests.fixtures import releases
from tests.fixtures import request_path
from tests.fixtures import selftests

CONF = nova.conf.CONF


def _changed_signature(ctx, filters, limit, marker, expected_attrs,
                       sort_keys, sort_dirs, cell_down_support=False,
                       new_argument=None):
    raise AssertionError('never called')


def _same_signature_other_body(columns_to_join):
    """nova's _manual_join_columns' signature; forgets the fault join."""
    manual = [c for c in columns_to_join
              if c in ('metadata', 'system_metadata', 'pci_devices')]
    return manual, [c for c in columns_to_join if c not in manual]


def _said_lines(output):
    """The lines logged, but for the INFO of a part the release lacks.

    nova 31 and 32 lack what the response validation needs: its part
    says so once at INFO (``compat.core``), beside the install's line.
    Those lines are checked to be exactly one per lacked part.
    """
    lines = [line for line in output.splitlines() if line]
    lacked = [line for line in lines if any(
        "part %s, which" % name in line and
        'is off: nova %s %s' % (releases.NOVA_VERSION, reason) in line
        for name, reason in releases.running_table().lacks.items())]
    assert len(lacked) == len(releases.running_table().lacks), lines
    return [line for line in lines if line not in lacked]


def _installed_with(nova_version):
    """The install line's release part, as a regular expression."""
    return (r'\(nova %s: \d+ relied-on sources checked, as tested with '
            r'nova %s; parts on: ' % (re.escape(nova_version),
                                      re.escape(nova_version)))


def _after_dropping_nulls(spec, values, bind=False):
    """A keyset condition as oslo.db's marker makes it: NULLs fall out.

    A NULL sort value is skipped, and ``<`` / ``>`` never match NULL.
    """
    alternatives, equal = [], []
    for key, direction, value in zip(spec.keys, spec.dirs, values):
        if value is None:
            continue
        column = instance_query.INSTANCES.c[key]
        after = (column > value if direction == sorting.ASC
                 else column < value)
        alternatives.append(sa.and_(*equal, after))
        equal.append(column == value)
    return sa.or_(*alternatives)


#: How long these tests wait for a self-test. Not the operator's bound
#: (:data:`selftest.TIMEOUT`, ``test_a_hanging_self_test_is_given_up_on``
#: tests giving up): a loaded test machine is slower than nova-api, and a
#: self-test given up on leaves its thread and nova's pools to the tests
#: after it in the same worker.
SELFTEST_WAIT = 300.0


class _Base(base.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()
        # nova's instance query needs it (its regular expression operator);
        # nova-api always has it.
        self.useFixture(config_fixture.Config(CONF)).config(
            connection='sqlite://', group='database')
        self.addCleanup(cellsched_api.uninstall)
        self.useFixture(selftests.SelfTestsEnded(self.id()))


class TestInstall(_Base):

    def setUp(self):
        super().setUp()
        self.originals = (nova_instance_list.get_instance_objects_sorted,
                          nova_instance_list.get_instances_sorted,
                          db_api.sqlalchemyutils)

    def test_install_swaps_both_functions_and_uninstall_restores(self):
        """install() puts ours in nova's module; uninstall() gives back."""
        self.assertTrue(cellsched_api.install())
        self.assertIs(instance_list.get_instance_objects_sorted,
                      nova_instance_list.get_instance_objects_sorted)
        self.assertIs(instance_list.get_instances_sorted,
                      nova_instance_list.get_instances_sorted)
        self.assertIsNot(oslo_utils, db_api.sqlalchemyutils)
        # Everything but paginate_query is oslo.db's.
        self.assertIs(oslo_utils.sanitize_db_url,
                      db_api.sqlalchemyutils.sanitize_db_url)
        self.assertTrue(cellsched_api.uninstall())
        self.assertEqual(self.originals,
                         (nova_instance_list.get_instance_objects_sorted,
                          nova_instance_list.get_instances_sorted,
                          db_api.sqlalchemyutils))

    def test_install_and_uninstall_are_idempotent(self):
        self.assertTrue(cellsched_api.install())
        self.assertFalse(cellsched_api.install())
        self.assertTrue(cellsched_api.is_installed())
        self.assertTrue(cellsched_api.uninstall())
        self.assertFalse(cellsched_api.uninstall())
        self.assertFalse(cellsched_api.is_installed())

    def test_changed_signature_refuses_and_changes_nothing(self):
        """A nova function with another signature: nothing is replaced."""
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.instance_list.get_instance_objects_sorted',
            _changed_signature))
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertEqual(1, len(error.problems))
        self.assertIn('get_instance_objects_sorted', error.problems[0])
        self.assertIn('new_argument=None', error.problems[0])
        self.assertIs(_changed_signature,
                      nova_instance_list.get_instance_objects_sorted)
        self.assertIs(self.originals[1],
                      nova_instance_list.get_instances_sorted)
        self.assertIs(oslo_utils, db_api.sqlalchemyutils)
        self.assertFalse(cellsched_api.is_installed())

    def test_another_release_with_the_tested_sources_installs(self):
        """A point release that changed none of the relied-on sources.

        The version is not what is checked: the sources are, each
        against every tested version of it.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'importlib.metadata.version', lambda name: '34.0.1'))
        patch.check()
        self.assertTrue(cellsched_api.install())
        self.assertIs(instance_list.get_instances_sorted,
                      nova_instance_list.get_instances_sorted)

    def test_changed_body_with_the_same_signature_refuses(self):
        """A relied-on function whose source changed: nothing replaced.

        The signature is the same; the body is not (here: the fault join
        is no longer made by hand).
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api._manual_join_columns',
            _same_signature_other_body))
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertEqual(1, len(error.problems), error.problems)
        problem = error.problems[0]
        self.assertIn('nova.db.main.api._manual_join_columns(columns_to_join)'
                      ': source differs from the tested ones', problem)
        # Unchanged since nova 31: one hash, every tested release.
        tested = compat.tested()
        (expected,) = {r.hashes['nova.db.main.api._manual_join_columns']
                       for r in tested}
        found = hashing.source_hash(_same_signature_other_body)
        self.assertIn('expected %s (nova %s), found %s'
                      % (expected[:16],
                         ', '.join(r.version for r in tested), found[:16]),
                      problem)
        self.assertIn('relied on: the joins nova makes by hand', problem)
        self.assertEqual(self.originals,
                         (nova_instance_list.get_instance_objects_sorted,
                          nova_instance_list.get_instances_sorted,
                          db_api.sqlalchemyutils))
        self.assertFalse(cellsched_api.is_installed())

    def test_changed_model_relationship_refuses(self):
        """nova's models are relied on too: a changed one is refused."""
        class Instance:
            tags = None

        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.models.Instance', Instance))
        error = self.assertRaises(patch.IncompatibleNova, patch.check)
        self.assertEqual(1, len(error.problems), error.problems)
        self.assertIn('nova.db.main.models.Instance: source differs',
                      error.problems[0])

    def test_keyset_state_made_before_monkey_patching_refuses(self):
        """Paging state shared by green threads would page others' queries.

        As if eventlet had patched ``threading.local`` after the import.
        """
        class GreenLocal:
            pass

        self.useFixture(fixtures.MonkeyPatch('threading.local', GreenLocal))
        error = self.assertRaises(patch.IncompatibleNova, patch.check)
        self.assertIn('nova_cellsched.api.hooks.keyset was made before '
                      'threading was monkey-patched',
                      '; '.join(error.problems))

    def test_missing_function_refuses(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api.instance_get_by_uuid', None))
        del db_api.instance_get_by_uuid
        error = self.assertRaises(patch.IncompatibleNova, patch.check)
        self.assertIn('nova.db.main.api.instance_get_by_uuid is missing',
                      error.problems[0])

    def test_filter_factory_on_mismatch_logs_once_and_passes_through(self):
        """nova-api still starts: one error line, nova's lister stays."""
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api._manual_join_columns',
            _same_signature_other_body))
        make_filter = cellsched_api.filter_factory({})
        app = object()
        self.assertIs(app, make_filter(app))
        self.assertFalse(cellsched_api.is_installed())
        self.assertIs(self.originals[0],
                      nova_instance_list.get_instance_objects_sorted)
        lines = [line for line in logs.output.splitlines() if line]
        self.assertEqual(1, len(lines), lines)
        self.assertIn('_manual_join_columns(columns_to_join): source '
                      'differs', lines[0])
        self.assertIn("nova's own lister stays in use", lines[0])

    def test_filter_factory_installs_and_says_so_in_one_line(self):
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        make_filter = cellsched_api.filter_factory({}, unused='x')
        seen = []

        def app(environ, start_response):
            seen.append(environ['PATH_INFO'])
            start_response('200 OK', [('X-Nova', 'yes')])
            return [b'nova']

        wrapped = make_filter(app)
        headers = []
        body = wrapped({'PATH_INFO': '/v2.1/flavors'},
                       lambda status, h, exc_info=None: headers.extend(h))
        self.assertEqual([b'nova'], list(body))
        self.assertEqual(['/v2.1/flavors'], seen)
        self.assertEqual([('X-Nova', 'yes')], headers)
        self.assertTrue(cellsched_api.is_installed())
        lines = _said_lines(logs.output)
        self.assertEqual(1, len(lines), lines)
        self.assertRegex(lines[0], r'nova-cellsched serves nova-api server '
                         r'lists ' + _installed_with(releases.NOVA_VERSION) +
                         re.escape(', '.join(releases.api_parts_on())) +
                         r'; nova\.compute\.instance_list replaced; ')
        # Nothing ran a self-test to report on.
        self.assertNotIn('self-test', lines[0])

    def test_filter_factory_with_the_lister_off_says_nova_serves(self):
        """api_lister = false at start: installed, and the line says so."""
        self.useFixture(config_fixture.Config(CONF)).config(
            api_lister=False, group='cellsched')
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        cellsched_api.filter_factory({})
        self.assertTrue(cellsched_api.is_installed())
        lines = _said_lines(logs.output)
        self.assertEqual(1, len(lines), lines)
        self.assertNotIn('serves nova-api server lists', lines[0])
        self.assertRegex(lines[0], r"nova-cellsched is installed in "
                         r"nova-api but nova's own lister serves the server "
                         r"lists: \[cellsched\] api_lister = False " +
                         _installed_with(releases.NOVA_VERSION))
        self.assertIn("api_lister = True and a reload of nova-api's "
                      'workers (uwsgi: SIGHUP to the master) make '
                      'nova-cellsched serve them', lines[0])


def _options():
    """Every ``[database]`` and ``[cellsched]`` option: value, origin.

    The origin shows an override even where it sets the value the
    option had.
    """
    from nova_cellsched import conf as conf_mod

    options = {}
    for group in ('database', conf_mod.GROUP_NAME):
        for name in sorted(CONF[group]):
            # None for an option oslo.config has no location of.
            location = CONF.get_location(name, group)
            options[(group, name)] = (
                CONF[group][name],
                location and (location.location, location.detail))
    return options


def _process_state(options=True):
    """What of the process a self-test changes, as it is now.

    The garbage collector's switch, nova's ``InstanceMapping`` marker
    lookup (the class attribute), nova's ``CELL_CACHE`` (the dict and
    each entry's objects) and, with *options*, :func:`_options`.
    """
    state = {
        'gc enabled': gc.isenabled(),
        'InstanceMapping.get_by_instance_uuid':
            objects.InstanceMapping.__dict__['get_by_instance_uuid'],
        'CELL_CACHE': (id(nova_context.CELL_CACHE), {
            key: tuple(id(item) for item in value)
            for key, value in nova_context.CELL_CACHE.items()}),
    }
    if options:
        state['options'] = _options()
    return state


class _Watch(request_path.EveryThread):
    """The process state at Python calls, in every thread, in a block.

    ``sys.setprofile`` for the calling thread, ``threading.setprofile``
    for the threads started inside the block (a self-test runs in its
    own). :func:`_process_state` without the options at every call, the
    options (slower to read) at every :data:`OPTIONS_EVERY`-th.
    :attr:`changed`: each key of the state seen other than at entry,
    with the first function called while it was; :attr:`calls`, how
    many calls were watched.
    """

    OPTIONS_EVERY = 500

    def __init__(self):
        self.before = _process_state()
        self.changed = {}
        self.calls = 0
        self._lock = threading.Lock()
        # What the state is made of, for the check at every call.
        self._cache = nova_context.CELL_CACHE
        self._entries = list(self._cache.items())
        self._lookup = objects.InstanceMapping.__dict__[
            'get_by_instance_uuid']
        self._mapping = objects.InstanceMapping
        self._gc = gc.isenabled()

    def _same(self):
        """The state but the options, as at entry (fast: every call)."""
        cache = nova_context.CELL_CACHE
        return (gc.isenabled() is self._gc and
                self._mapping.__dict__.get('get_by_instance_uuid') is
                self._lookup and cache is self._cache and
                len(cache) == len(self._entries) and
                all(cache.get(key) is value for key, value in self._entries))

    def _profile(self, frame, event, arg):
        if event != 'call':
            return
        if len(self.changed) == len(self.before):
            # Every part of the state seen changed: nothing more to see
            # in this thread.
            sys.setprofile(self._previous[
                0 if threading.current_thread() is self._owner else 1])
            return
        with self._lock:
            self.calls += 1
            options = self.calls % self.OPTIONS_EVERY == 0
            if self._same() and not options:
                return
            now = _process_state(options=options)
            for key, value in now.items():
                if value != self.before[key]:
                    self.changed.setdefault(key, frame.f_code.co_qualname)


class TestServingInstall(_Base):
    """What the paste filter does in a serving nova-api worker.

    It changes nothing of the process but the declared parts' targets
    (``tests/unit/compat/test_compat.py`` checks those are exactly
    what installing changes in nova): no self-test, which turns the
    garbage collector off, swaps a class attribute of nova's
    ``InstanceMapping``, fills ``CELL_CACHE`` and overrides an option
    while it runs. Its guard is the relied-on sources' tested versions.
    """

    def setUp(self):
        super().setUp()
        # A cell nova-api has already talked to, as nova's own start-up
        # check leaves it: the guard part closes its idle connections
        # when it turns on, and nothing else of it may change.
        cell = objects.CellMapping(
            uuid='2f1f1a0e-6f5d-4c55-9d0e-3a1b3c7f0c11', name='cell1',
            database_connection='sqlite://', transport_url='none:///')
        self.addCleanup(nova_context.CELL_CACHE.pop, cell.uuid, None)
        with nova_context.target_cell(
                nova_context.get_admin_context(), cell) as cctxt:
            self.assertIsNotNone(cctxt.db_connection)

    def _serve(self, api_lister):
        """The filter loaded as nova-api loads it; (before, after, watch)."""
        self.useFixture(config_fixture.Config(CONF)).config(
            api_lister=api_lister, group='cellsched')
        before = _process_state()
        with _Watch() as watch:
            wrapped = cellsched_api.filter_factory({})(object())
        self.assertTrue(cellsched_api.is_installed())
        self.assertIsInstance(wrapped, cellsched_api.server_timing.Middleware)
        # The options were read while it ran, not only at its ends.
        self.assertGreater(watch.calls, 2 * watch.OPTIONS_EVERY)
        return before, _process_state(), watch

    def test_serving_install_changes_no_process_wide_state(self):
        """Before, after and at every call in between: the same state."""
        before, after, watch = self._serve(api_lister=True)
        self.assertIn('2f1f1a0e-6f5d-4c55-9d0e-3a1b3c7f0c11',
                      before['CELL_CACHE'][1])
        self.assertEqual(before, after)
        self.assertEqual({}, watch.changed)

    def test_with_the_lister_off_no_option_is_overridden(self):
        """api_lister = false at start: it stays as it was, untouched."""
        before, after, watch = self._serve(api_lister=False)
        self.assertEqual(before, after)
        self.assertEqual({}, watch.changed)
        self.assertFalse(CONF.cellsched.api_lister)

    def test_a_difference_only_the_self_test_sees_does_not_stop_it(self):
        """The self-test finds it; the serving install does not look.

        Pages that lose servers after a NULL sort value: no relied-on
        source changed, so the lister installs; ``check --selftest``
        (here :func:`selftest.run`, as it calls it) names the
        difference.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.listing.order.after_condition',
            _after_dropping_nulls))
        self.assertTrue(cellsched_api.install())
        cellsched_api.uninstall()
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertIn('nova lists', ' '.join(problems))

    def test_the_watch_sees_what_a_self_test_changes(self):
        """The watch of the tests above, shown to see a self-test.

        What install() ran before (and ``check --selftest`` runs now):
        every change is given back after, but not while it runs.
        """
        self.useFixture(config_fixture.Config(CONF)).config(
            api_lister=False, group='cellsched')
        before = _process_state()
        with _Watch() as watch:
            # Watched, every call is slower: more time than nova-api's.
            self.assertEqual([], selftest.run(timeout=SELFTEST_WAIT)[0])
        self.assertEqual(set(before), set(watch.changed))
        # Given back after (but for the options oslo.db registers on
        # first use, which stay registered).
        del before['options']
        self.assertEqual(before, _process_state(options=False))


class TestSelfTest(_Base):
    """The self-test lists both ways on a private database.

    ``nova-cellsched check --selftest`` runs it
    (``tests/functional/test_cli_selftest.py``); install() does not
    (:class:`TestServingInstall`).
    """

    def _assert_nova_untouched(self):
        self.assertFalse(cellsched_api.is_installed())
        self.assertIsNot(instance_list.get_instances_sorted,
                         nova_instance_list.get_instances_sorted)
        self.assertIsNot(pool.scatter_gather_cells,
                         nova_context.scatter_gather_cells)
        self.assertIs(oslo_utils, db_api.sqlalchemyutils)

    def test_real_nova_passes_the_checks_and_the_self_test(self):
        patch.check()
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertEqual([], problems)

    def test_keyset_paging_that_drops_nulls_is_caught(self):
        """Pages after a NULL sort value lose servers: a difference."""
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.listing.order.after_condition',
            _after_dropping_nulls))
        patch.check()  # the static checks cannot see it
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertTrue(problems)
        for problem in problems:
            self.assertTrue(problem.startswith('self-test '), problem)
        self.assertIn('nova lists', ' '.join(problems))
        self._assert_nova_untouched()

    def test_joined_rows_not_made_one_per_server_are_caught(self):
        """SQLAlchemy's Query read otherwise: tags-any lists twice.

        keyset.one_row_per_instance reads Query internals; were they to
        read as "no join" (another SQLAlchemy), a server with two of the
        tags would be listed twice. The self-test's tags-any case sees
        it.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.keyset.one_row_per_instance',
            lambda query: query))
        patch.check()  # the static checks cannot see it
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertIn('self-test any of the tags', ' '.join(problems))
        self._assert_nova_untouched()

    def test_sqlalchemy_query_internals_are_checked_by_behaviour(self):
        """Query.join read otherwise: refused before the test; else on.

        Another Query.join that still records its joins in
        ``Query._setup_joins`` (another SQLAlchemy release) fits; one that
        does not is refused, naming SQLAlchemy.
        """
        from sqlalchemy.orm import query as sa_query

        self.assertEqual([], compat.check(['keyset'])['keyset'])
        original = sa_query.Query.join

        def join(self, target, *args, **kwargs):
            return original(self, target, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'sqlalchemy.orm.query.Query.join', join))
        self.assertEqual([], compat.check(['lister'])['lister'])

        def join_elsewhere(self, target, *args, **kwargs):
            joined = original(self, target, *args, **kwargs)
            joined._setup_joins = ()
            return joined

        self.useFixture(fixtures.MonkeyPatch(
            'sqlalchemy.orm.query.Query.join', join_elsewhere))
        found = compat.check(['lister'])['lister']
        self.assertEqual(1, len(found), found)
        self.assertIn('SQLAlchemy %s (installed)' % sa.__version__, found[0])
        self.assertIn('Query._setup_joins', found[0])
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertEqual(found, error.problems)
        self._assert_nova_untouched()

    def test_rows_loader_that_drops_a_column_is_caught(self):
        """Plain rows without a column: a difference."""
        dropped = rows._columns

        def columns(model):
            return tuple(c for c in dropped(model)
                         if c.key != 'display_description')

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.rows._columns', columns))
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertIn('display_description', ' '.join(problems))
        self._assert_nova_untouched()

    def test_rows_loader_that_loses_a_value_is_caught(self):
        """Plain rows with one wrong value: the objects differ."""
        load = rows.Loader.load

        def loses_a_tag(loader, query, ordered):
            found = load(loader, query, ordered)
            for row in found:
                if row.get('tags'):
                    row['tags'] = row['tags'][:1]
            return found

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.rows.Loader.load', loses_a_tag))
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertIn('servers differ at', ' '.join(problems))
        self.assertIn('.tags.', ' '.join(problems))
        self._assert_nova_untouched()

    def test_self_test_leaves_nova_state_as_it_was(self):
        """Its cells leave CELL_CACHE; nova's marker lookup is back.

        And no worker pool it started outlives it (nova's or ours): a
        uwsgi master that forks after loading the app must not hand its
        workers pools whose threads they do not have (where nova keeps
        them differs by release: the adapter reads them).
        """
        from nova_cellsched.compat import adapter

        nova_pools = adapter.nova_pools
        self.assertEqual([], nova_pools())
        cache = dict(nova_context.CELL_CACHE)
        lookup = objects.InstanceMapping.__dict__['get_by_instance_uuid']
        served = cellsched_api.served()
        self.assertEqual([], selftest.run(timeout=SELFTEST_WAIT)[0])
        self.assertEqual(cache, nova_context.CELL_CACHE)
        self.assertIs(lookup,
                      objects.InstanceMapping.__dict__['get_by_instance_uuid'])
        self.assertEqual(served, cellsched_api.served())
        self.assertFalse(compat.is_on('keyset'))
        self.assertEqual([], nova_pools())
        self.assertIsNone(pool._EXECUTOR)

    def test_self_test_runs_the_replacement_with_api_lister_off(self):
        """[cellsched] api_lister = false at start: ours is still tested."""
        self.useFixture(config_fixture.Config(CONF)).config(
            api_lister=False, group='cellsched')
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.listing.order.after_condition',
            _after_dropping_nulls))
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertTrue(problems)
        self.assertFalse(CONF.cellsched.api_lister)

    def test_a_hanging_self_test_is_given_up_on(self):
        """A replacement that never answers: a problem, not a hang.

        The problem says what the self-test was doing, and a WARNING
        where (its stack); released, it ends (:class:`SelfTestsEnded`
        waits for it after the test).
        """
        release = threading.Event()
        self.addCleanup(release.set)

        def hangs(*args, **kwargs):
            release.wait()
            raise AssertionError('released')

        logs = self.useFixture(fixtures.FakeLogger(
            name=selftest.__name__, level=logging.WARNING))
        problems, _seconds = selftest.run(hangs, timeout=0.5)
        (problem,) = problems
        listing = 'listing default order (sort [] [], limit 4, marker none)'
        # Where it was depends on how far it got in 0.5 s.
        doing = re.fullmatch(
            r'self-test did not finish within 0\.5 s \(it was (.+)\)',
            problem).group(1)
        self.assertIn(doing, ('making its databases', 'writing its servers',
                              listing))
        self.assertIn('it was %s, at:' % doing, logs.output)
        if doing == listing:
            self.assertIn(', in hangs\n', logs.output)

    def test_without_database_connection_the_self_test_refuses(self):
        self.useFixture(config_fixture.Config(CONF)).config(
            connection=None, group='database')
        problems, _seconds = selftest.run(timeout=SELFTEST_WAIT)
        self.assertEqual(['self-test could not run: [database] connection '
                          "is not set (nova's instance queries need it)"],
                         problems)


class TestMaintainerTool(base.TestCase):
    """``python -m cellsched_tools.maintainer`` for maintainers."""

    def test_prints_the_table_for_the_running_nova(self):
        """A tested release's run prints the one table as it is."""
        out = []
        self.assertEqual(0, maintainer.main([], out.append))
        text = ''.join(out)
        self.assertIn('0 of %d relied-on sources equal no tested version'
                      % len(maintainer.current()[0]), text)
        block = text[text.index('# Licensed under'):]
        # A tested release's run prints the table as it is, byte for byte.
        with open(sources.__file__) as f:
            self.assertEqual(f.read(), block)

    def test_names_what_changed(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api._manual_join_columns',
            _same_signature_other_body))
        out = []
        self.assertEqual(1, maintainer.main([], out.append))
        text = ''.join(out)
        self.assertIn('1 of %d relied-on sources equal no tested version'
                      % len(maintainer.current()[0]), text)
        self.assertIn('#   nova.db.main.api._manual_join_columns (part '
                      'lister; relied on: the joins nova makes by hand)',
                      text)

    def test_hash_ignores_indentation_blank_and_comment_lines(self):
        self.assertEqual(
            hashing.normalise('def f():\n    # why\n\n    return 1\n'),
            hashing.normalise('    def f():\n        return 1'))
        self.assertNotEqual(
            hashing.normalise('def f():\n    return 1'),
            hashing.normalise('def f():\n    return 2'))
