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

"""``tools/nova-release-check NN``: the maintainers' path in one command.

Bad input is refused in one line before anything is built. The whole
path runs against a release virtualenv this checkout has built already
(``tools/nova-release-venv 33``, or 31, 32), its stamp current: the
test never installs. The tested side is this run's own Python and nova
(34.0.0), so the release's report beside it is real: nova 33 read
against nova 34's table alone shows each source the two tables differ
in, as a diff of the two novas' texts.
"""

import hashlib
import os
import re
import subprocess
import sys

import fixtures

from nova_cellsched.compat import core
from nova_cellsched.compat import hashing
from nova_cellsched.compat import sources
from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, 'tools', 'nova-release-check')
ME = 'tools/nova-release-check'


def run(*argv, env=None, timeout=900):
    result = subprocess.run([SCRIPT] + list(argv), cwd=TOP,
                            capture_output=True, text=True, timeout=timeout,
                            env=env)
    return result.returncode, result.stdout, result.stderr


def release_stamp(release, venv):
    """The stamp ``tools/nova-release-venv`` leaves in a current *venv*.

    Its inputs concatenated, comments (from the first ``#`` and the
    blanks before it) and blank lines taken out, as its ``sed`` does.
    """
    names = [os.path.join('tools', 'releases', 'nova%d.txt' % release),
             'requirements.txt', 'test-requirements.txt', 'setup.cfg',
             os.path.join('tools', 'nova-release-venv')]
    text = ''
    for name in names:
        with open(os.path.join(TOP, name)) as handle:
            text += handle.read()
    kept = [re.sub(r'\s*#.*', '', line) for line in text.split('\n')]
    if text.endswith('\n'):
        kept.pop()
    digest = hashlib.sha1(''.join(
        line + '\n' for line in kept if line.strip()).encode()).hexdigest()
    return os.path.join(venv, '.nova-cellsched-' + digest[:12])


class BadInputTest(base.TestCase):
    """Exit 2, one line on stderr, nothing built or run."""

    def assert_refused(self, argv, message, env=None):
        status, out, err = run(*argv, env=env, timeout=120)
        self.assertEqual(2, status, err)
        self.assertEqual('', out)
        self.assertEqual([message], err.splitlines())

    def refusal(self, what):
        return '%s: error: %s (%s --help describes the options)' % (
            ME, what, ME)

    def test_no_release(self):
        self.assert_refused([], self.refusal(
            "expected a nova major release such as 35, got ''"))

    def test_a_release_that_is_no_number(self):
        self.assert_refused(['epoxy'], self.refusal(
            "expected a nova major release such as 35, got 'epoxy'"))

    def test_an_unknown_option(self):
        self.assert_refused(['33', '--bogus'], self.refusal(
            "unknown option '--bogus'"))

    def test_an_option_without_its_value(self):
        self.assert_refused(['33', '--against'], self.refusal(
            'expected a value after --against, got none'))

    def test_a_tested_side_without_nova(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        subprocess.run([sys.executable, '-m', 'venv', '--without-pip',
                        tmp], check=True, timeout=120)
        python = os.path.join(tmp, 'bin', 'python')
        self.assert_refused(['33', '--tested-python', python], self.refusal(
            'expected --tested-python to be the Python of a virtualenv '
            'with a tested nova, got %s (no nova there)' % python))

    def test_a_new_release_without_openstack_requirements(self):
        env = {name: value for name, value in os.environ.items()
               if name != 'NOVA_CELLSCHED_REQUIREMENTS_REPO'}
        self.assertFalse(os.path.exists(os.path.join(
            TOP, 'tools', 'releases', 'nova99.txt')))
        self.assert_refused(
            ['99', '--tested-python', sys.executable],
            'python -m cellsched_tools.pins: error: expected a '
            'checkout of openstack/requirements (--requirements PATH or '
            '$NOVA_CELLSCHED_REQUIREMENTS_REPO), got none', env=env)


class ReleaseCheckTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.newest = core.tested()[-1]
        if hashing.nova_version() != self.newest.version:
            self.skipTest('the tested side is this run\'s nova, expected %s,'
                          ' got %s' % (self.newest.version,
                                       hashing.nova_version()))
        override = os.environ.get('NOVA_CELLSCHED_RELEASE_VENV')
        for release in (33, 31, 32):
            venv = override or os.path.join(TOP, '.venv-nova%d' % release)
            if os.path.exists(release_stamp(release, venv)):
                break
        else:
            self.skipTest('no release virtualenv of this checkout is '
                          'current (tools/nova-release-venv 33 builds one;'
                          ' running the command would install)')
        self.release = release
        self.table = core.tested()[[r.version.split('.')[0] for r in
                                    core.tested()].index(str(release))]

    def test_a_tested_release_fits_and_its_tests_run(self):
        status, out, err = run(
            str(self.release), '--tested-python', sys.executable,
            r'^tests\.unit\.scheduler\.test_decision_snapshot\.', '--',
            '--concurrency', '1')

        self.assertEqual(0, status, err[-3000:])
        lines = out.splitlines()
        self.assertEqual(
            ['%s: nova %s against tested nova %s: 0 of %d relied-on '
             'sources equal no tested version' % (
                 ME, self.table.version,
                 ', '.join(r.version for r in core.tested()),
                 len(self.newest.hashes)),
             '%s: parts off on nova %s: %s' % (
                 ME, self.table.version, '; '.join(
                     '%s (nova %s %s)' % (name, self.table.version, why)
                     for name, why in self.table.lacks.items()) or 'none')],
            lines[-3:-1])
        self.assertRegex(lines[-1], r'^nova%d: [1-9]\d* passed, 0 failed, '
                         r'0 skipped$' % self.release)
        # The table written beside the venv is the tested one.
        path = re.search(r'^# The table with nova \S+: (\S+) ', out,
                         re.M).group(1)
        with open(path) as written, open(sources.__file__) as kept:
            self.assertEqual(kept.read(), written.read())

    def test_beside_nova_34_alone_each_difference_is_a_diff(self):
        differ = [name for name, digest in self.newest.hashes.items()
                  if self.table.hashes.get(name) != digest]

        status, out, err = run(str(self.release), '--against', '34',
                               '--tested-python', sys.executable,
                               '--report-only')

        self.assertEqual(1, status, err[-3000:])
        self.assertEqual(differ, re.findall(r'^## (\S+)$', out, re.M))
        for name in differ:
            start = out.index('## %s\n' % name)
            block = out[start:out.find('\n\n', start)]
            self.assertRegex(block, r'\n--- nova 34\.0\.0 \(tested\) \S+:\d+'
                                    r'\n\+\+\+ nova %s \S+:\d+\n@@ '
                             % re.escape(self.table.version))
        self.assertEqual(
            '%s: nova %s against tested nova 34.0.0: %d of %d relied-on '
            'sources equal no tested version' % (
                ME, self.table.version, len(differ),
                len(self.newest.hashes)),
            out.splitlines()[-2])
        self.assertNotRegex(out, r'(?m)^nova%d: ' % self.release)
