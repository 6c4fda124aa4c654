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

"""nova's own server-list suites, with the cellsched filter in nova-api.

Every test class below is one of nova 34's (from the wheel's
``nova/tests``), run unchanged except for the fixture
``tests.fixtures.nova_api.CellschedInNovaApi``: nova-api loads an
``api-paste.ini`` with the ``cellsched`` filter in its ``/v2`` and
``/v2.1`` pipelines, exactly as an operator configures it,
so the filter's factory installs the replacement lister; and nova's own
instance lister is made to fail if anything calls it, so a test that
lists servers can only pass through ours. The listing classes also
check that every test was served by the replacement.

nova's concurrency mode is chosen per process at import time: run as
the suite runs (``tests/__init__.py``), these tests use native threads;
:class:`EventletMode` runs the list-path suites and the tests of the
server suites that list servers (:data:`LISTS`) again in child processes
with eventlet monkey patching (``OS_NOVA_DISABLE_EVENTLET_PATCHING=0``),
nova-api's other mode, a group per child (:data:`EVENTLET_RUNS`). The
server suites' other tests (boot, resize, rebuild, volumes, ...) do not
reach the filter's lister, validation or view lookups, only its place in
the pipeline, and run once: in nova's /v2.1 pipeline
(``ServersTestV21``), not again in the legacy /v2 one (``ServersTest``
runs its four tests that list).

Not run from nova's unit ``compute/test_instance_list.py``: the tests
that hand ``nova.context.scatter_gather_cells`` a mock returning
``RecordWrapper`` lists (``test_get_instances_with_down_cells``,
``..._by_not_skipping_down_cells``, ``..._with_cell_down_support``) or
mock ``instance_get_all_by_filters_sort`` and count its batched calls
(``TestInstanceListBig``): they test the internal protocol of nova's
lister (lazy per-cell generators of wrapped records, nova's batching
calls), which the replacement does not have. Their behaviour (down
cells skipped, reported, or failing the request; batching by nova's
options) is tested through nova's API by the functional classes here
and by ``test_nova_api.py``.
"""

# nova.tests first: it applies nova's concurrency mode (eventlet monkey
# patching unless disabled) before the rest of nova is imported.
from nova.tests.functional import integrated_helpers  # noqa: F401 isort:skip

import io
import os
import subprocess
import sys
import tempfile
import typing
import unittest

import fixtures
import nova.conf
from nova.tests.functional.compute import test_instance_list as func_il
from nova.tests.functional.regressions import test_bug_1670627
from nova.tests.functional.regressions import test_bug_1689692
from nova.tests.functional import test_list_servers_ip_filter
from nova.tests.functional import test_servers
from nova.tests.functional.wsgi import test_servers as wsgi_test_servers
from nova.tests.unit.compute import test_instance_list as unit_il
import subunit
import testscenarios
import testtools

from nova_cellsched import compat
from tests import base
from tests.fixtures import nova_api


# Warnings nova's own tests cause, not our code: oslo.utils deprecated
# ``timeutils.set_time_override``, which nova's ``ServersTest`` still
# calls. Ignored in these tests only, so a passing run prints one line
# per test (stestr prints a passing test's captured stderr).
def nova_test_warnings() -> fixtures.WarningsFilter:
    return fixtures.WarningsFilter([
        {'action': 'ignore', 'category': DeprecationWarning,
         'message': r'(set_time_override|clear_time_override|'
                    r'advance_time_\w+) is deprecated'},
    ])


def _test_names(case: type) -> list[str]:
    return unittest.TestLoader().getTestCaseNames(case)


def with_filter(base: type, must_list: bool | None = None,
                must_validate: bool = False,
                lists: frozenset[str] | None = None,
                only_listing: bool = False) -> type:
    """*base* (a nova test class) run with ``nova_api.CellschedInNovaApi``.

    :param must_list: every test lists through the filter (True), or no
        check (None).
    :param lists: the tests that list, and only they
        (:data:`LISTS`); each test checks it is or is not among them.
    :param only_listing: run only the tests in *lists* (the others are
        another suite's too).
    """

    def setUp(self):
        listing = must_list
        if lists is not None:
            listing = self._testMethodName in lists
        self.useFixture(nova_api.CellschedInNovaApi(
            must_list=listing, must_validate=must_validate))
        base.setUp(self)
        # After nova's WarningsFixture, whose "once" filter for
        # DeprecationWarning comes first otherwise.
        self.useFixture(nova_test_warnings())

    attrs = {
        'setUp': setUp, '__module__': __name__, 'LISTS': lists,
        '__doc__': "nova's %s.%s, served by the cellsched filter."
        % (base.__module__, base.__name__)}
    if only_listing:
        # None: not a test method for unittest's loader.
        attrs.update((name, None) for name in _test_names(base)
                     if name not in (lists or ()))
    return type(base.__name__, (base,), attrs)


#: The tests of nova's server suites that list servers through the filter
#: (GET /servers or /servers/detail): they run in both of nova's
#: concurrency modes (:class:`EventletMode`). The suites' other tests
#: never reach the filter's lister, validation or view lookups (they only
#: pass through its place in the pipeline) and run in the suite's own
#: mode alone. Each test checks its entry at cleanup: one listed here
#: that lists nothing fails, and so does one left out that lists.
LISTS: dict[str, frozenset[str]] = {
    'ServersTest': frozenset({
        'test_create_and_delete_server', 'test_create_multiple_servers',
        'test_create_server_with_metadata', 'test_get_servers'}),
    'ServersTestV21': frozenset({
        'test_create_and_delete_server', 'test_create_multiple_servers',
        'test_create_server_with_metadata', 'test_get_servers'}),
    'ServersTestV219': frozenset({
        'test_create_server_with_description',
        'test_rebuild_server_with_description',
        'test_update_server_with_description',
        'test_version_compatibility'}),
    # Every test of ServerTestV269 lists (down cells at 2.69).
    'ServerTestV269': frozenset({
        'test_get_servers_detail_all_tenants_with_down_cells',
        'test_get_servers_detail_filters',
        'test_get_servers_detail_limits_with_down_cells',
        'test_get_servers_detail_limits_with_down_cells_the_500_gift',
        'test_get_servers_detail_marker_in_down_cells',
        'test_get_servers_detail_marker_sorting',
        'test_get_servers_detail_non_admin_with_deleted_flag',
        'test_get_servers_detail_with_down_cells',
        'test_get_servers_with_down_cells'}),
    'ServersPreSchedulingTestCase': frozenset({
        'test_instance_list_build_request_marker_ip_filter',
        'test_instance_list_from_buildrequests',
        'test_instance_list_from_buildrequests_old_service',
        'test_instance_list_from_buildrequests_with_tags'}),
    'EnforceVolumeBackedForZeroDiskFlavorTestCase': frozenset(),
    'ResizeCheckInstanceHostTestCase': frozenset(),
    'TestDeleteFromCell0CheckQuota': frozenset(),
}


# nova's cross-cell lister tests (functional, three cells).
InstanceListTestCase = with_filter(func_il.InstanceListTestCase,
                                   must_list=True)
TestInstanceListObjects = with_filter(func_il.TestInstanceListObjects,
                                      must_list=True)

# nova-api end to end. ServersTestV21 is ServersTest at /v2.1: the same
# tests through nova's other pipeline, where the filter stands the same
# way. The legacy /v2 pipeline runs only the tests that list.
ServersTest = with_filter(test_servers.ServersTest,
                          lists=LISTS['ServersTest'], only_listing=True)
ServersTestV21 = with_filter(test_servers.ServersTestV21,
                             lists=LISTS['ServersTestV21'])
ServersTestV219 = with_filter(test_servers.ServersTestV219,
                              lists=LISTS['ServersTestV219'])
ServerTestV269 = with_filter(test_servers.ServerTestV269,
                             lists=LISTS['ServerTestV269'])
ServersPreSchedulingTestCase = with_filter(
    wsgi_test_servers.ServersPreSchedulingTestCase,
    lists=LISTS['ServersPreSchedulingTestCase'])
EnforceVolumeBackedForZeroDiskFlavorTestCase = with_filter(
    wsgi_test_servers.EnforceVolumeBackedForZeroDiskFlavorTestCase,
    lists=LISTS['EnforceVolumeBackedForZeroDiskFlavorTestCase'])
ResizeCheckInstanceHostTestCase = with_filter(
    wsgi_test_servers.ResizeCheckInstanceHostTestCase,
    lists=LISTS['ResizeCheckInstanceHostTestCase'])
TestListServersIpFilter = with_filter(
    test_list_servers_ip_filter.TestListServersIpFilter, must_list=True,
    must_validate=True)
ServerListLimitMarkerCell0Test = with_filter(
    test_bug_1689692.ServerListLimitMarkerCell0Test, must_list=True,
    must_validate=True)
TestDeleteFromCell0CheckQuota = with_filter(
    test_bug_1670627.TestDeleteFromCell0CheckQuota,
    lists=LISTS['TestDeleteFromCell0CheckQuota'])


class UnitTestInstanceList(with_filter(unit_il.TestInstanceList)):
    """nova's unit tests of the module's behaviour (see the docstring)."""

    def _not_applicable(self):
        self.skipTest("tests nova's internal lister protocol; see "
                      'tests.functional.test_nova_api_suites')

    test_get_instances_with_down_cells = _not_applicable
    test_get_instances_by_not_skipping_down_cells = _not_applicable
    test_get_instances_with_cell_down_support = _not_applicable


class ResponseValidation(base.NovaTestCase):
    """The suites run with nova's test setting and the fast path."""

    def test_error_mode_and_fast_validation_installed(self):
        """nova's ConfFixture sets ``[api] response_validation = error``
        (a body nova's validator rejects fails nova's test); the filter's
        validation is in place and on.
        """
        conf = nova.conf.CONF
        self.assertEqual('error', conf.api.response_validation)
        self.assertTrue(compat.is_on('validation'))
        self.assertTrue(conf.cellsched.api_fast_validation)


ResponseValidation = with_filter(ResponseValidation)


class ConcurrencyMode(base.TestCase):
    """The module runs in the mode its environment asks for."""

    def test_mode_is_the_one_asked_for(self):
        from nova import utils as nova_utils
        threads = os.environ.get(
            'OS_NOVA_DISABLE_EVENTLET_PATCHING', '').lower() in (
                '1', 'true', 'yes')
        self.assertEqual(threads, nova_utils.concurrency_mode_threading())


#: The eventlet runs, one child process each: nova's list-path suites
#: whole, and the tests of the server suites that list (:data:`LISTS`),
#: in two groups of about equal length, so that the test runner's two
#: workers share them (stestr hands a fresh clone's tests out
#: round-robin). Every suite of this module is in exactly one group
#: (``test_every_suite_runs_under_eventlet``).
EVENTLET_RUNS: dict[str, tuple[str, ...]] = {
    'listers': ('InstanceListTestCase', 'TestInstanceListObjects',
                'UnitTestInstanceList', 'ServerListLimitMarkerCell0Test',
                'TestListServersIpFilter'),
    'servers': tuple(LISTS) + ('ResponseValidation',),
}


def _eventlet_tests(suite: str) -> list[str]:
    """The ids of the tests of *suite* that its eventlet run runs."""
    case = globals()[suite]
    lists = getattr(case, 'LISTS', None)
    return ['%s.%s.%s' % (__name__, suite, name)
            for name in _test_names(case)
            if lists is None or name in lists]


def _skipped_in(test_ids: typing.Iterable[str]) -> int:
    """How many of the tests *test_ids* skip on purpose."""
    skipped = 0
    for test_id in test_ids:
        suite, name = test_id.split('.')[-2:]
        if (getattr(globals()[suite], name) is
                UnitTestInstanceList._not_applicable):
            skipped += 1
    return skipped


class EventletMode(testscenarios.WithScenarios, base.TestCase):
    """The suites above, with nova-api in eventlet mode."""

    scenarios = [(name, {'suites': suites})
                 for name, suites in EVENTLET_RUNS.items()]

    suites: tuple[str, ...] = ()

    def test_suites_pass_with_eventlet(self):
        """Run this group's suites in a child with eventlet monkey patching.

        The child runs :class:`ConcurrencyMode` too: it fails unless the
        child really is in eventlet mode.
        """
        from nova import utils as nova_utils
        if not nova_utils.concurrency_mode_threading():
            self.skipTest('this is the eventlet run')
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='0')
        tests = [test_id for suite in self.suites
                 for test_id in _eventlet_tests(suite)]
        names = tests + ['%s.ConcurrencyMode' % __name__]
        # Files, not pipes: under eventlet the child hangs writing to a
        # pipe (seen with nova's logging), whoever reads it.
        with tempfile.TemporaryFile() as out, \
                tempfile.TemporaryFile() as err:
            proc = subprocess.run(
                [sys.executable, '-c', CHILD_RUNNER] + names,
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                timeout=1800, check=False)
            out.seek(0)
            err.seek(0)
            stream, errors = out.read(), err.read()[-5000:]
        summary = subunit_summary(stream)
        self.assertEqual([], summary.failed, errors)
        self.assertEqual(0, proc.returncode, errors)
        # Every test of the group ran, the named skips alone skipped.
        self.assertEqual(len(tests) + 1, summary.run, summary)
        self.assertEqual(_skipped_in(tests), summary.skipped, summary)


class EventletRunsCoverTheModule(base.TestCase):
    """No suite of this module is left out of the eventlet runs."""

    def test_every_suite_runs_under_eventlet(self):
        suites = {name for name, value in globals().items()
                  if isinstance(value, type) and
                  issubclass(value, unittest.TestCase) and
                  value.__module__ == __name__ and _test_names(value)}
        grouped = [suite for group in EVENTLET_RUNS.values()
                   for suite in group]
        self.assertEqual(len(grouped), len(set(grouped)), grouped)
        self.assertEqual(
            suites - {'EventletMode', 'EventletRunsCoverTheModule',
                      'ConcurrencyMode'},
            set(grouped))

    def test_the_listing_tests_are_tests_of_their_suites(self):
        """:data:`LISTS` names tests the running nova's suites have."""
        for suite, names in LISTS.items():
            self.assertEqual(set(), names - set(_test_names(
                globals()[suite])), suite)
            self.assertIs(names, globals()[suite].LISTS, suite)

    def test_both_groups_run_tests(self):
        for group, suites in EVENTLET_RUNS.items():
            self.assertGreater(sum(len(_eventlet_tests(suite))
                                   for suite in suites), 10, group)


#: subunit.run, then exit at once: under eventlet, threads nova's
#: fixtures leave behind would otherwise keep the child from exiting.
CHILD_RUNNER = '''
import os, sys
from subunit import run
try:
    run.main()
except SystemExit as exit:
    sys.stdout.flush()
    os._exit(exit.code or 0)
'''


class Summary(typing.NamedTuple):
    run: int
    skipped: int
    failed: list


def subunit_summary(stream: bytes) -> Summary:
    """Tests run, skipped and failed in a subunit v2 byte stream."""
    result = testtools.StreamSummary()
    result.startTestRun()
    subunit.ByteStreamToStreamResult(
        io.BytesIO(stream), non_subunit_name='stdout').run(result)
    result.stopTestRun()
    return Summary(result.testsRun, len(result.skipped),
                   [test.id() for test, _ in result.errors +
                    result.failures])
