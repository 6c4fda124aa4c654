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

"""requirements.txt accepts what every supported release's deployments run.

pip installs a requirement only when nothing installed satisfies it (its
default ``only-if-needed`` strategy). So installing this package into a
virtualenv of a release's pins changes nothing there exactly when each
of its requirements names a library the release has, at a version the
requirement accepts. Checked here for every release at once, from
``tools/releases/novaNN.txt``; ``tests/functional/test_install.py`` asks
pip itself, on the running release (and, in each release's whole
per-release list, on that release).
"""

import pathlib

from packaging import requirements
from packaging import utils

from tests import base
from tests.fixtures import releases

TOP = pathlib.Path(__file__).resolve().parents[2]


def requirements_of(path: pathlib.Path) -> list[requirements.Requirement]:
    """The requirement lines of *path* (comments and blanks left out)."""
    found = []
    for line in path.read_text().splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            found.append(requirements.Requirement(line))
    return found


class RequirementsAcceptEveryReleaseTest(base.TestCase):

    def test_every_release_pins_every_requirement_at_an_accepted_version(
            self):
        pin_files = sorted(
            (TOP / 'tools' / 'releases').glob('nova[0-9]*.txt'))
        self.assertEqual(['nova31.txt', 'nova32.txt', 'nova33.txt',
                          'nova34.txt'], [path.name for path in pin_files])
        ours = requirements_of(TOP / 'requirements.txt')
        wrong = {}
        for path in pin_files:
            pins = releases.pins_of(path.read_text())
            for requirement in ours:
                pinned = pins.get(utils.canonicalize_name(requirement.name))
                if pinned is None or not requirement.specifier.contains(
                        pinned, prereleases=True):
                    wrong['%s: %s' % (path.name, requirement)] = pinned
        self.assertEqual({}, wrong, 'requirement: the release\'s pin '
                         '(None: not pinned there); widen requirements.txt '
                         'or pin the library in the release\'s file')
