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

"""nova-api with the cellsched filter in its paste pipeline, for tests."""

import logging

import fixtures
from nova.tests.fixtures import conf as nova_conf_fixture
import testtools.content

import nova_cellsched.api as cellsched_api
from nova_cellsched.api.validation import validator as validation
from nova_cellsched.compat import core as compat_core
from nova_cellsched.demo import api as demo_api

#: nova's api-paste.ini as installed with nova.
NOVA_API_PASTE = demo_api.NOVA_API_PASTE
FILTER = demo_api.FILTER
APP = demo_api.APP
#: nova's api-paste.ini with ``cellsched`` before the app, in a directory.
paste_with_filter = demo_api.paste_with_filter


def _nova_lister_must_not_run(*args, **kwargs):
    raise AssertionError("nova's own instance lister ran with the "
                         'cellsched filter installed')


class CellschedInNovaApi(fixtures.Fixture):
    """nova-api with the cellsched filter, and nova's lister fenced off.

    Use it before the test's ``setUp`` chain runs: nova's ConfFixture
    then points ``[wsgi] api_paste_config`` at the filtered file, and
    every OSAPIFixture loads the pipeline (and so the filter) from it.
    The filter is installed as soon as nova's ConfFixture has set nova's
    test configuration, as nova-api loads it after reading nova.conf.

    :param must_list: check at cleanup that the test made at least one
        listing through the replacement; ``None``: no check either way;
        ``False``: check that it made none (a test that runs in both of
        nova's concurrency modes only where it lists:
        :mod:`tests.functional.test_nova_api_suites`).
    :param fence: make nova's own instance lister fail if called (off
        for tests that compare it with ours).
    :param must_validate: check at cleanup that the filter's response
        validation accepted at least one server list by itself.
    :param check_validation: check at cleanup that no server-list
        response was handed to nova's validator that nova then accepted
        (the filter's validator gives nova's verdict on nova's own
        bodies), and none was validated by nova's decorators instead
        (off for tests that turn ``[cellsched] api_fast_validation``
        off).
    """

    def __init__(self, must_list: bool | None = None, fence: bool = True,
                 must_validate: bool = False,
                 check_validation: bool = True) -> None:
        super().__init__()
        self.must_list = must_list
        self.fence = fence
        self.must_validate = must_validate
        self.check_validation = check_validation

    def _setUp(self) -> None:
        # The file lives as long as the fixture: nothing is left in /tmp.
        paste = paste_with_filter(self.useFixture(fixtures.TempDir()).path)
        original_setup = nova_conf_fixture.ConfFixture.setUp

        def conf_setup(conf_fixture):
            original_setup(conf_fixture)
            conf_fixture.conf.set_default('api_paste_config', paste,
                                          group='wsgi')
            self._install()

        self._installed = False
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.conf.ConfFixture.setUp', conf_setup))
        self.addCleanup(cellsched_api.uninstall)

    def _install(self) -> None:
        """Install as the filter would, then fence nova's lister off.

        For tests that call nova.compute.instance_list directly (no API)
        too.
        """
        if self._installed:
            return
        self._installed = True
        # This runs before the test's own log capture (nova's
        # StandardLogging in its setUp) is in place: without one here,
        # install()'s INFO line went to the stdout handler nova.test's
        # import gives the root logger, and so into the output of every
        # passing test. Kept as a detail instead.
        with fixtures.FakeLogger(level=logging.INFO) as install_log:
            cellsched_api.install()
            logged = install_log.output
        self.addDetail('cellsched-install-log',
                       testtools.content.text_content(logged))
        if self.fence:
            self.useFixture(fixtures.MonkeyPatch(
                'nova.compute.instance_list.InstanceLister.'
                'get_records_sorted', _nova_lister_must_not_run))
        before = cellsched_api.served()['cellsched']
        if self.must_list is not None:
            self.addCleanup(self._check_served, before, self.must_list)
        # A nova release that validates no server-list response (nova
        # 31 and 32: compat's LACKS) has nothing to check: the part is
        # off there and nova answers unvalidated, as without the filter.
        if self.check_validation and compat_core.lacking(
                'validation') is None:
            self.addCleanup(self._check_validated, validation.validated())

    def _check_validated(self, before: dict[str, int]) -> None:
        after = validation.validated()
        for how in ('nova_accepted', 'off'):
            if after[how] != before[how]:
                raise AssertionError(
                    '%d server-list responses validated as %s (expected '
                    'none): %s' % (after[how] - before[how], how, after))
        if self.must_validate and after['fast'] <= before['fast']:
            raise AssertionError('no server list was validated by the '
                                 'cellsched validator')

    def _check_served(self, before: int, expected: bool) -> None:
        after = cellsched_api.served()['cellsched']
        if expected and after <= before:
            raise AssertionError('the test made no listing through the '
                                 'cellsched lister')
        if not expected and after > before:
            raise AssertionError(
                'the test made %d listings through the cellsched lister, '
                'and is not among the tests marked as listing '
                '(tests.functional.test_nova_api_suites.LISTS): add it '
                'there, so that it runs in both concurrency modes'
                % (after - before))
