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

import logging
import threading

import fixtures
from nova.compute import instance_list as nova_instance_list
import nova.conf
from nova import context as nova_context
from nova.db.main import api as db_api
from nova import objects
from oslo_config import fixture as config_fixture
from oslo_db.sqlalchemy import utils as oslo_utils
from oslotest import base
import sqlalchemy as sa

import nova_cellsched.api as cellsched_api
from nova_cellsched.api import instance_list
from nova_cellsched.api import patch
from nova_cellsched.api import rows
from nova_cellsched.api import selftest
from nova_cellsched import compat
from nova_cellsched.compat import hashing
from nova_cellsched.compat import maintainer
from nova_cellsched.listing import query as instance_query
from nova_cellsched.listing import sorting

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


class _Base(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()
        # nova's instance query needs it (its regular expression operator);
        # nova-api always has it.
        self.useFixture(config_fixture.Config(CONF)).config(
            connection='sqlite://', group='database')
        self.addCleanup(cellsched_api.uninstall)


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
        self.assertIn('nova_cellsched.api.keyset was made before threading '
                      'was monkey-patched', '; '.join(error.problems))

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
        lines = [line for line in logs.output.splitlines() if line]
        self.assertEqual(1, len(lines), lines)
        self.assertRegex(lines[0], r'nova-cellsched serves nova-api server '
                         r'lists \(nova 34\.0\.0: \d+ relied-on sources '
                         r'checked, as tested with nova 34\.0\.0; parts on: '
                         r'guard, keyset, lister, view, validation; '
                         r'self-test passed in [0-9.]+ s')

    def test_filter_factory_with_the_lister_off_says_nova_serves(self):
        """api_lister = false at start: installed, and the line says so."""
        self.useFixture(config_fixture.Config(CONF)).config(
            api_lister=False, group='cellsched')
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        cellsched_api.filter_factory({})
        self.assertTrue(cellsched_api.is_installed())
        lines = [line for line in logs.output.splitlines() if line]
        self.assertEqual(1, len(lines), lines)
        self.assertNotIn('serves nova-api server lists', lines[0])
        self.assertRegex(lines[0], r"nova-cellsched is installed in "
                         r"nova-api but nova's own lister serves the server "
                         r"lists: \[cellsched\] api_lister = False \(nova "
                         r"34\.0\.0: \d+ relied-on sources checked, as "
                         r"tested with nova 34\.0\.0; parts on: ")
        self.assertIn("api_lister = True and a reload of nova-api's "
                      'workers (uwsgi: SIGHUP to the master) make '
                      'nova-cellsched serve them', lines[0])


class TestSelfTest(_Base):
    """install() lists both ways on a private database first."""

    def _assert_nova_untouched(self):
        self.assertFalse(cellsched_api.is_installed())
        self.assertIsNot(instance_list.get_instances_sorted,
                         nova_instance_list.get_instances_sorted)
        self.assertIsNot(instance_list.scatter_gather_cells,
                         nova_context.scatter_gather_cells)
        self.assertIs(oslo_utils, db_api.sqlalchemyutils)

    def test_real_nova_passes_the_checks_and_the_self_test(self):
        patch.check()
        problems, _seconds = selftest.run()
        self.assertEqual([], problems)

    def test_keyset_paging_that_drops_nulls_is_caught(self):
        """Pages after a NULL sort value lose servers: nothing installed."""
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.listing.query.after_condition',
            _after_dropping_nulls))
        patch.check()  # the static checks cannot see it
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertTrue(error.problems)
        for problem in error.problems:
            self.assertTrue(problem.startswith('self-test '), problem)
        self.assertIn('nova lists', ' '.join(error.problems))
        self._assert_nova_untouched()

    def test_joined_rows_not_made_one_per_server_are_caught(self):
        """SQLAlchemy's Query read otherwise: tags-any lists twice.

        keyset.one_row_per_instance reads Query internals; were they to
        read as "no join" (another SQLAlchemy), a server with two of the
        tags would be listed twice. The self-test's tags-any case sees
        it: nothing installed.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.keyset.one_row_per_instance',
            lambda query: query))
        patch.check()  # the static checks cannot see it
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertIn('self-test any of the tags', ' '.join(error.problems))
        self._assert_nova_untouched()

    def test_sqlalchemy_query_internals_are_fingerprinted(self):
        """Another Query.join or Query.options: refused before the test."""
        from sqlalchemy.orm import query as sa_query

        self.assertEqual([], compat.check(['keyset'])['keyset'])
        original = sa_query.Query.join

        def join(self, target, onclause=None, *, isouter=False, full=False):
            return original(self, target, onclause, isouter=isouter,
                            full=full)

        # Set by hand: fixtures.MonkeyPatch would wrap it with the
        # original's __wrapped__, which the fingerprint follows.
        sa_query.Query.join = join
        self.addCleanup(setattr, sa_query.Query, 'join', original)
        found = compat.check(['lister'])['lister']
        self.assertEqual(1, len(found), found)
        self.assertIn('sqlalchemy.orm.query.Query.join', found[0])
        self.assertIn('Query._setup_joins', found[0])
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertEqual(found, error.problems)
        self._assert_nova_untouched()

    def test_rows_loader_that_drops_a_column_is_caught(self):
        """Plain rows without a column: nothing installed."""
        dropped = rows._columns

        def columns(model):
            return tuple(c for c in dropped(model)
                         if c.key != 'display_description')

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.rows._columns', columns))
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertIn('display_description', ' '.join(error.problems))
        self._assert_nova_untouched()

    def test_rows_loader_that_loses_a_value_is_caught(self):
        """Plain rows with one wrong value: the objects differ."""
        load = rows.Loader.load

        def loses_a_tag(loader, query):
            found = load(loader, query)
            for row in found:
                if row.get('tags'):
                    row['tags'] = row['tags'][:1]
            return found

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.rows.Loader.load', loses_a_tag))
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertIn('servers differ at', ' '.join(error.problems))
        self.assertIn('.tags.', ' '.join(error.problems))
        self._assert_nova_untouched()

    def test_self_test_leaves_nova_state_as_it_was(self):
        """Its cells leave CELL_CACHE; nova's marker lookup is back.

        And no worker pool it started outlives it (nova's or ours): a
        uwsgi master that forks after loading the app must not hand its
        workers pools whose threads they do not have.
        """
        from nova import thread_pool_factory

        self.assertEqual({}, thread_pool_factory.FACTORY._all_executors)
        cache = dict(nova_context.CELL_CACHE)
        lookup = objects.InstanceMapping.__dict__['get_by_instance_uuid']
        served = cellsched_api.served()
        self.assertEqual([], selftest.run()[0])
        self.assertEqual(cache, nova_context.CELL_CACHE)
        self.assertIs(lookup,
                      objects.InstanceMapping.__dict__['get_by_instance_uuid'])
        self.assertEqual(served, cellsched_api.served())
        self.assertFalse(compat.is_on('keyset'))
        self.assertEqual({}, thread_pool_factory.FACTORY._all_executors)
        self.assertIsNone(instance_list._EXECUTOR)

    def test_self_test_runs_the_replacement_with_api_lister_off(self):
        """[cellsched] api_lister = false at start: ours is still tested."""
        self.useFixture(config_fixture.Config(CONF)).config(
            api_lister=False, group='cellsched')
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.listing.query.after_condition',
            _after_dropping_nulls))
        problems, _seconds = selftest.run()
        self.assertTrue(problems)
        self.assertFalse(CONF.cellsched.api_lister)

    def test_a_hanging_self_test_is_given_up_on(self):
        """A replacement that never answers: a problem, not a hang."""
        release = threading.Event()
        self.addCleanup(release.set)

        def hangs(*args, **kwargs):
            release.wait()
            raise AssertionError('released')

        problems, _seconds = selftest.run(hangs, timeout=0.5)
        self.assertEqual(['self-test did not finish within 0.5 s'], problems)

    def test_without_database_connection_the_self_test_refuses(self):
        self.useFixture(config_fixture.Config(CONF)).config(
            connection=None, group='database')
        problems, _seconds = selftest.run()
        self.assertEqual(['self-test could not run: [database] connection '
                          "is not set (nova's instance queries need it)"],
                         problems)


class TestMaintainerTool(base.BaseTestCase):
    """``python -m nova_cellsched.compat.maintainer`` for maintainers."""

    def test_prints_the_table_for_the_running_nova(self):
        """Its output is the tested release's file, byte for byte."""
        out = []
        self.assertEqual(0, maintainer.main([], out.append))
        text = ''.join(out)
        self.assertIn('0 of %d relied-on sources equal no tested version'
                      % len(maintainer.current()[0]), text)
        block = text[text.index('# Licensed under'):]
        from nova_cellsched.compat import sources_nova34
        with open(sources_nova34.__file__) as f:
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

    def test_the_old_command_name_still_runs_it(self):
        from nova_cellsched.api import fingerprint
        self.assertIs(maintainer.main, fingerprint.main)

    def test_hash_ignores_indentation_blank_and_comment_lines(self):
        self.assertEqual(
            hashing.normalise('def f():\n    # why\n\n    return 1\n'),
            hashing.normalise('    def f():\n        return 1'))
        self.assertNotEqual(
            hashing.normalise('def f():\n    return 1'),
            hashing.normalise('def f():\n    return 2'))
