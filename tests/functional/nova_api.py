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

import configparser
import os
import sys
import tempfile

import fixtures
from nova.tests.fixtures import conf as nova_conf_fixture

import nova_cellsched.api as cellsched_api

#: nova's api-paste.ini as installed with nova.
NOVA_API_PASTE = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
FILTER = 'cellsched'
APP = 'osapi_compute_app_v21'


def paste_with_filter(source: str = NOVA_API_PASTE) -> str:
    """nova's api-paste.ini text with ``cellsched`` before the app.

    As the README tells operators: a ``[filter:cellsched]`` section and
    the filter inserted just before ``osapi_compute_app_v21`` in every
    pipeline that ends with it.
    """
    parser = configparser.RawConfigParser()
    parser.optionxform = str  # keep the case of keys such as "/v2.1/+"
    with open(source) as f:
        parser.read_file(f)
    changed = 0
    for section in parser.sections():
        for key, value in parser.items(section):
            words = value.split()
            if key in ('keystone', 'pipeline', 'noauth2') and (
                    words and words[-1] == APP and FILTER not in words):
                parser.set(section, key,
                           ' '.join(words[:-1] + [FILTER, APP]))
                changed += 1
    assert changed >= 2, 'no pipeline ends with %s in %s' % (APP, source)
    parser.add_section('filter:' + FILTER)
    parser.set('filter:' + FILTER, 'paste.filter_factory',
               'nova_cellsched.api:filter_factory')
    path = os.path.join(tempfile.mkdtemp(prefix='cellsched-paste-'),
                        'api-paste.ini')
    with open(path, 'w') as f:
        parser.write(f)
    return path


_PASTE_PATH: str | None = None


def _paste_path() -> str:
    global _PASTE_PATH
    if _PASTE_PATH is None:
        _PASTE_PATH = paste_with_filter()
    return _PASTE_PATH


def _nova_lister_must_not_run(*args, **kwargs):
    raise AssertionError("nova's own instance lister ran with the "
                         'cellsched filter installed')


class CellschedInNovaApi(fixtures.Fixture):
    """nova-api with the cellsched filter, and nova's lister fenced off.

    Use it before the test's ``setUp`` chain runs: nova's ConfFixture
    then points ``[wsgi] api_paste_config`` at the filtered file, and
    every OSAPIFixture loads the pipeline (and so the filter) from it.

    :param must_list: check at cleanup that the test made at least one
        listing through the replacement.
    :param fence: make nova's own instance lister fail if called (off
        for tests that compare it with ours).
    """

    def __init__(self, must_list: bool = False, fence: bool = True) -> None:
        super().__init__()
        self.must_list = must_list
        self.fence = fence

    def _setUp(self) -> None:
        paste = _paste_path()
        original_setup = nova_conf_fixture.ConfFixture.setUp

        def conf_setup(conf_fixture):
            original_setup(conf_fixture)
            conf_fixture.conf.set_default('api_paste_config', paste,
                                          group='wsgi')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.conf.ConfFixture.setUp', conf_setup))
        if self.fence:
            self.useFixture(fixtures.MonkeyPatch(
                'nova.compute.instance_list.InstanceLister.'
                'get_records_sorted', _nova_lister_must_not_run))
        # Tests that call nova.compute.instance_list directly (no API):
        # install as the filter would.
        cellsched_api.install()
        self.addCleanup(cellsched_api.uninstall)
        before = cellsched_api.served()['cellsched']
        if self.must_list:
            self.addCleanup(self._check_served, before)

    def _check_served(self, before: int) -> None:
        after = cellsched_api.served()['cellsched']
        if after <= before:
            raise AssertionError('the test made no listing through the '
                                 'cellsched lister')
