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

"""The per-release test lists name tests that exist.

``tools/releases/tests.txt`` is the whole per-release list (``tox -e
novaNN``); ``tools/releases/ci.txt`` is what ``.ci/run`` runs on each
release, a part of it. A regex that names a module no longer there
would select nothing, silently.
"""

import pathlib
import re

from tests import base


TOP = pathlib.Path(__file__).resolve().parents[2]
RELEASES = TOP / 'tools' / 'releases'


def regexes(name: str) -> list[str]:
    """The list's regexes: its lines without comments and blanks."""
    lines = (RELEASES / name).read_text().splitlines()
    return [line.split('#', 1)[0].strip() for line in lines
            if line.split('#', 1)[0].strip()]


def module_of(regex: str) -> pathlib.Path:
    """The test module a regex ``^tests\\.<pkg>\\.<module>\\.`` names."""
    match = re.match(r'^\^((?:[a-z_]+\\\.)+)', regex)
    assert match, regex
    parts = match.group(1).split('\\.')[:-1]
    return TOP.joinpath(*parts)


class ReleaseListsTest(base.TestCase):

    def test_ci_list_is_part_of_the_whole_list(self):
        whole = regexes('tests.txt')
        self.assertEqual([], [regex for regex in regexes('ci.txt')
                              if regex not in whole])

    def test_every_regex_names_a_test_module_or_package(self):
        for name in ('tests.txt', 'ci.txt'):
            for regex in regexes(name):
                path = module_of(regex)
                self.assertTrue(
                    path.is_dir() or path.with_suffix('.py').is_file(),
                    '%s: %s names %s, which is not there'
                    % (name, regex, path))
