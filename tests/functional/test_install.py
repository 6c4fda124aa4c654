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

"""Installing the checkout beside nova changes nothing else.

pip's own resolver answers, in a new virtualenv: what ``pip install
nova==X`` installs, and what ``pip install nova==X <this checkout>``
installs. The two sets must be the same but for nova-cellsched itself:
no library of nova's is upgraded, downgraded or added because of this
package's requirements. X is the nova of the test run's own
environment. Nothing is installed (``--dry-run``); pip asks the package
index, as any install does.

Was wrong: ``SQLAlchemy<2.1`` (a test-fixture constraint) in
``requirements.txt`` downgraded a fresh nova 34 virtualenv's SQLAlchemy
2.1.9 to 2.0.x, and ``PyMySQL`` (a driver nova does not require) was
added to it; ``nova>=34.0.0`` upgraded the nova of a nova 33 virtualenv.

And in a virtualenv as that release's deployments have it: nova and the
libraries of its upper-constraints, as ``tools/releases/novaNN.txt``
pins them for the nova of the test run (each supported release runs
this module: ``tools/nova-release-tests``), then this checkout installed
into it as the installation guide says (no constraints): ``pip freeze``
after is ``pip freeze`` before plus nova-cellsched. With a checkout of
openstack/requirements at hand (``NOVA_CELLSCHED_REQUIREMENTS_REPO``),
the same with that release's whole upper-constraints file, and every pin
of the pin file checked against it.
"""

import contextlib
import fcntl
import importlib.metadata
import json
import os
import re
import subprocess
import sys

import fixtures
from packaging import utils

from tests import base
from tests.fixtures.releases import pins_of

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@contextlib.contextmanager
def building_the_checkout():
    """One pip at a time builds this checkout.

    setuptools builds in the checkout itself (``build/``, the egg-info):
    two builds at once (two test workers, or two release runs) remove
    each other's files ("No such file or directory: 'nova_cellsched'").
    """
    path = os.path.join(os.environ.get('TMPDIR', '/tmp'),
                        'nova-cellsched-build-%s.lock'
                        % os.stat(TOP).st_ino)
    with open(path, 'a') as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class InstallChangesNothingTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        # A virtualenv of its own: pip's resolver starts from nothing,
        # as in a new nova virtualenv.
        subprocess.run([sys.executable, '-m', 'venv', '--without-pip',
                        os.path.join(self.tmp, 'venv')], check=True,
                       timeout=120)

    def resolve(self, name, *requirements):
        """name -> version that ``pip install <requirements>`` would install.

        pip runs from this test run's environment with ``--python`` set to
        the new virtualenv, so nothing this environment holds counts as
        already installed.
        """
        report = os.path.join(self.tmp, name + '.json')
        result = subprocess.run(
            [sys.executable, '-m', 'pip',
             '--python', os.path.join(self.tmp, 'venv', 'bin', 'python'),
             'install', '--dry-run', '--quiet', '--disable-pip-version-check',
             '--report', report] + list(requirements),
            capture_output=True, text=True, timeout=900)
        self.assertEqual(0, result.returncode,
                         'pip install --dry-run %s failed:\n%s'
                         % (' '.join(requirements), result.stderr[-3000:]))
        with open(report) as handle:
            installed = json.load(handle)['install']
        return {item['metadata']['name'].lower().replace('_', '-'):
                item['metadata']['version'] for item in installed}

    def test_installing_into_novas_environment_adds_only_itself(self):
        nova = 'nova==%s' % importlib.metadata.version('nova')
        alone = self.resolve('nova', nova)
        with building_the_checkout():
            both = self.resolve('both', nova, TOP)
        self.assertIn('nova-cellsched', both)
        del both['nova-cellsched']
        changed = {name: (alone.get(name), both.get(name))
                   for name in set(alone) | set(both)
                   if alone.get(name) != both.get(name)}
        self.assertEqual({}, changed,
                         'name: (with %s alone, with nova-cellsched too)'
                         % nova)


RELEASES = os.path.join(TOP, 'tools', 'releases')
REQUIREMENTS_REPO = 'NOVA_CELLSCHED_REQUIREMENTS_REPO'
#: A distribution's name as pip compares them (PEP 503).
canonical = utils.canonicalize_name


def upper_constraints_file(repo, commit, path):
    """Write *repo*'s upper-constraints.txt at *commit* to *path*.

    Only for upper-constraints' ``===`` lines that apply to this Python
    (environment markers are kept: pip evaluates them).
    """
    text = subprocess.run(
        ['git', '-C', repo, 'show', '%s:upper-constraints.txt' % commit],
        capture_output=True, text=True, check=True, timeout=60).stdout
    with open(path, 'w') as handle:
        handle.write(text)
    return text


class ReleaseEnvironmentTest(base.TestCase):
    """Installing into a virtualenv of this release changes nothing.

    A real install (not ``--dry-run``): the freeze before and after is
    what an operator would see.
    """

    def setUp(self):
        super().setUp()
        self.nova = importlib.metadata.version('nova')
        self.major = self.nova.split('.')[0]
        self.pin_file = os.path.join(RELEASES, 'nova%s.txt' % self.major)
        if not os.path.exists(self.pin_file):
            self.skipTest('nova %s is not a supported release (no %s)'
                          % (self.nova, self.pin_file))
        with open(self.pin_file) as handle:
            self.pin_text = handle.read()
        self.pins = pins_of(self.pin_text)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.venv = os.path.join(self.tmp, 'venv')
        subprocess.run([sys.executable, '-m', 'venv', '--without-pip',
                        self.venv], check=True, timeout=120)

    def pip(self, *argv, timeout=900):
        # Without the test run's PYTHONPATH: a checkout on it (with its
        # egg-info) would be in the new virtualenv's freeze already.
        env = {name: value for name, value in os.environ.items()
               if name != 'PYTHONPATH'}
        result = subprocess.run(
            [sys.executable, '-m', 'pip', '--python',
             os.path.join(self.venv, 'bin', 'python'),
             '--disable-pip-version-check'] + list(argv),
            capture_output=True, text=True, timeout=timeout, env=env)
        self.assertEqual(0, result.returncode,
                         'pip %s failed:\n%s' % (' '.join(argv),
                                                  result.stderr[-3000:]))
        return result.stdout

    def freeze(self):
        """name -> version, or the URL of what was installed from one.

        (``pip freeze`` writes ``name @ file:///...`` for a checkout.)
        """
        frozen = {}
        for line in self.pip('freeze', '--all', timeout=120).splitlines():
            for separator in ('==', ' @ '):
                if separator in line:
                    name, version = line.split(separator, 1)
                    frozen[canonical(name.strip())] = version.strip()
                    break
        return frozen

    def assert_install_changes_nothing(self, constraints):
        self.pip('install', '--quiet', '-c', constraints,
                 'nova==%s' % self.pins['nova'])
        before = self.freeze()
        self.assertEqual(self.pins['nova'], before['nova'])
        self.assertNotIn('nova-cellsched', before)
        with building_the_checkout():
            self.pip('install', '--quiet', TOP)
        after = self.freeze()
        self.assertIn('nova-cellsched', after)
        del after['nova-cellsched']
        changed = {name: (before.get(name), after.get(name))
                   for name in set(before) | set(after)
                   if before.get(name) != after.get(name)}
        self.assertEqual({}, changed,
                         'name: (before, after installing nova-cellsched)'
                         ' in a nova %s virtualenv made with %s'
                         % (self.pins['nova'], constraints))

    def test_pin_file_is_this_release(self):
        """The test run's nova is the one its release's pins name."""
        self.assertEqual(self.nova, self.pins['nova'],
                         '%s names another point release' % self.pin_file)

    def test_installing_into_a_release_virtualenv_changes_nothing(self):
        self.assert_install_changes_nothing(self.pin_file)

    def upper_constraints(self):
        """This release's upper-constraints, read where the pins were."""
        repo = os.environ.get(REQUIREMENTS_REPO)
        if not repo:
            self.skipTest(
                '%s is not set: the pins of %s are checked against the '
                "real upper-constraints only where a checkout of "
                'openstack/requirements is at hand (CI reaches the package'
                ' index only, and nothing fetched is committed)'
                % (REQUIREMENTS_REPO, os.path.basename(self.pin_file)))
        where = re.search(r'^# upper-constraints: (\S+) ([0-9a-f]{40})',
                          self.pin_text, re.M)
        self.assertIsNotNone(where, '%s names no upper-constraints commit'
                             % self.pin_file)
        path = os.path.join(self.tmp, 'upper-constraints.txt')
        return path, upper_constraints_file(repo, where.group(2), path)

    def test_pins_are_the_upper_constraints(self):
        """Each pin is upper-constraints', or says why not on its line."""
        _path, text = self.upper_constraints()
        upper = {}
        for line in text.splitlines():
            match = re.match(r'^([A-Za-z0-9_.-]+)===([^;\s]+)(;.*)?$', line)
            if match and "python_version=='3.9'" not in (match.group(3)
                                                         or ''):
                upper[canonical(match.group(1))] = match.group(2)
        differ = {}
        for line in self.pin_text.splitlines():
            match = re.match(r'^([A-Za-z0-9_.-]+)==([^\s#]+)\s*(#.*)?$',
                             line)
            if not match:
                continue
            name, version = canonical(match.group(1)), match.group(2)
            if name in ('nova', 'openstack-placement'):
                continue  # services: not in upper-constraints
            said = 'upper-constraints says %s' % upper.get(name)
            if upper.get(name) != version and said not in (match.group(3)
                                                           or ''):
                differ[name] = (version, upper.get(name))
        self.assertEqual({}, differ, 'name: (%s, upper-constraints)'
                         % os.path.basename(self.pin_file))

    def test_installing_under_the_real_upper_constraints_changes_nothing(
            self):
        path, text = self.upper_constraints()
        # Where the pin file deliberately differs (its line says so), its
        # pin: upper-constraints' own would not install this nova.
        upper = pins_of(text)
        own = {}
        for line in self.pin_text.splitlines():
            match = re.match(r'^([A-Za-z0-9_.-]+)==([^\s#]+)', line)
            if match and (canonical(match.group(1)) not in upper
                          or 'upper-constraints says' in line):
                own[canonical(match.group(1))] = match.group(2)
        lines = [line for line in text.splitlines()
                 if canonical(re.split(r'[=;<>!~ ]', line)[0]) not in own
                 or not re.match(r'^[A-Za-z0-9_.-]+===', line)]
        lines += ['%s==%s' % item for item in sorted(own.items())]
        with open(path, 'w') as handle:
            handle.write('\n'.join(lines) + '\n')
        self.assert_install_changes_nothing(path)
