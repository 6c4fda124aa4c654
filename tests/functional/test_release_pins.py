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

"""``python -m cellsched_tools.pins``: a pin file from git.

Against a small openstack/requirements made here (git init, one
upper-constraints.txt on master and one on a stable branch), then, with
a checkout of the real one at hand (``NOVA_CELLSCHED_REQUIREMENTS_REPO``,
as ``test_install``), each hand-kept pin file written again from the
commit its header names. nova and placement versions are given: the
package index is not asked.
"""

import os
import re
import subprocess
import sys

import fixtures
from packaging import utils

from cellsched_tools import pins

from tests import base

RELEASES = pins.releases_dir()
PROG = 'python -m cellsched_tools.pins'


def read(path):
    with open(path) as handle:
        return handle.read()


def pins_of(text):
    """canonical name -> version of a pin file's ``name==version`` lines."""
    return {utils.canonicalize_name(m.group(1)): m.group(2)
            for m in re.finditer(r'^([A-Za-z0-9_.-]+)==(\S+)', text, re.M)}


def header_of(text):
    """(branch, commit, date) of a pin file's upper-constraints line."""
    return re.search(r'^# upper-constraints: (\S+) ([0-9a-f]{40}) '
                     r'\((\S+)\)$', text, re.M).groups()


def services(text):
    """The --nova and --placement arguments a pin file's own pins give."""
    kept = pins_of(text)
    return ['--nova', kept['nova'], '--placement',
            kept['openstack-placement']]


class PinsCommand(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def pins(self, *argv):
        """(status, stdout, stderr) of the command."""
        env = {name: value for name, value in os.environ.items()
               if name != pins.REQUIREMENTS_REPO}
        result = subprocess.run([sys.executable, '-m',
                                 'cellsched_tools.pins'] + list(argv),
                                capture_output=True, text=True, timeout=300,
                                env=env)
        return result.returncode, result.stdout, result.stderr

    def git(self, repo, *argv):
        return subprocess.run(
            ['git', '-C', repo, '-c', 'user.name=test', '-c',
             'user.email=test@example.org'] + list(argv),
            capture_output=True, text=True, check=True,
            timeout=60).stdout.strip()


class SmallRequirementsRepoTest(PinsCommand):
    """An openstack/requirements of two commits, made here.

    master's upper-constraints is nova 34's pins, stable/2026.1's nova
    33's (``===``, as upper-constraints writes them).
    """

    def setUp(self):
        super().setUp()
        self.repo = os.path.join(self.tmp, 'requirements')
        os.mkdir(self.repo)
        self.git(self.repo, 'init', '-q', '-b', 'master')
        self.kept = {major: read(os.path.join(RELEASES, 'nova%d.txt'
                                              % major))
                     for major in (33, 34)}
        self.commit(34)
        self.git(self.repo, 'branch', 'stable/2026.1')
        self.git(self.repo, 'checkout', '-q', 'stable/2026.1')
        self.commit(33)
        self.git(self.repo, 'checkout', '-q', 'master')
        self.out = os.path.join(self.tmp, 'nova.txt')

    def commit(self, major):
        lines = ['%s===%s' % item for item in pins_of(self.kept[major])
                 .items() if item[0] not in ('nova', 'openstack-placement')]
        with open(os.path.join(self.repo, 'upper-constraints.txt'),
                  'w') as handle:
            handle.write('\n'.join(lines) + '\n')
        self.git(self.repo, 'add', 'upper-constraints.txt')
        self.git(self.repo, 'commit', '-q', '-m', 'nova %d' % major)

    def test_a_release_reads_its_stable_branch(self):
        status, _out, err = self.pins(
            '33', '--requirements', self.repo, '--output', self.out,
            *services(self.kept[33]))

        self.assertEqual(0, status, err)
        written = read(self.out)
        self.assertEqual(pins_of(self.kept[33]), pins_of(written))
        commit = self.git(self.repo, 'rev-parse', 'stable/2026.1')
        self.assertEqual(('stable/2026.1', commit, self.git(
            self.repo, 'log', '-1', '--format=%cd', '--date=short',
            commit)), header_of(written))
        # The hand-kept file but for the commit read.
        self.assertEqual(re.sub(r'(?m)^# upper-constraints: .*$', '',
                                self.kept[33]),
                         re.sub(r'(?m)^# upper-constraints: .*$', '',
                                written))
        self.assertEqual('%s: wrote %s: nova 33.0.2, placement 15.0.0, the '
                         'libraries of nova34.txt at stable/2026.1 %s (%s)\n'
                         % (PROG, self.out, commit[:12],
                            header_of(written)[2]), err)

    def test_a_release_without_its_branch_reads_master_and_says_so(self):
        status, _out, err = self.pins(
            '35', '--requirements', self.repo, '--output', self.out,
            '--nova', '35.0.0', '--placement', '17.0.0')

        self.assertEqual(0, status, err)
        self.assertEqual('%s: %s has no stable/2027.1 yet: reading master'
                         % (PROG, self.repo), err.splitlines()[0])
        written = read(self.out)
        self.assertTrue(written.startswith(
            '# nova 35.x (2027.1, SLURP): its newest point release,\n'
            '# nova 35.0.0, and'), written[:200])
        self.assertEqual('master', header_of(written)[0])
        expected = dict(pins_of(self.kept[34]), nova='35.0.0')
        expected['openstack-placement'] = '17.0.0'
        self.assertEqual(expected, pins_of(written))

    def test_a_commit_is_named_with_its_branch(self):
        commit = self.git(self.repo, 'rev-parse', 'stable/2026.1')
        status, out, err = self.pins(
            '33', '--requirements', self.repo, '--ref', commit[:10],
            '--output', '-', *services(self.kept[33]))

        self.assertEqual(0, status, err)
        self.assertEqual('stable/2026.1', header_of(out)[0])
        self.assertEqual(commit, header_of(out)[1])

    def test_a_clone_has_the_branch_as_origins(self):
        clone = os.path.join(self.tmp, 'clone')
        subprocess.run(['git', 'clone', '-q', self.repo, clone], check=True,
                       timeout=60)
        status, out, err = self.pins(
            '33', '--requirements', clone, '--output', '-',
            *services(self.kept[33]))

        self.assertEqual(0, status, err)
        self.assertEqual('stable/2026.1', header_of(out)[0])
        self.assertEqual(pins_of(self.kept[33]), pins_of(out))

    def test_a_library_upper_constraints_lacks_exits_1(self):
        template = os.path.join(self.tmp, 'template.txt')
        with open(template, 'w') as handle:
            handle.write(self.kept[34] + 'oslo.gone==1.0.0\n')
        status, _out, err = self.pins(
            '33', '--requirements', self.repo, '--output', self.out,
            '--template', template, *services(self.kept[33]))

        self.assertEqual(1, status, err)
        commit = self.git(self.repo, 'rev-parse', 'stable/2026.1')
        self.assertEqual('%s: not in upper-constraints at %s: oslo.gone '
                         '(their lines say so)' % (PROG, commit[:12]),
                         err.splitlines()[-1])
        self.assertIn('\n# oslo.gone: not in upper-constraints at ',
                      read(self.out))

    def assert_bad_input(self, argv, message):
        status, out, err = self.pins(*argv)
        self.assertEqual(2, status, err)
        self.assertEqual('', out)
        self.assertEqual(['%s: error: %s' % (PROG, message)],
                         err.splitlines())

    def test_bad_input_is_one_line_and_exit_2(self):
        self.assert_bad_input(
            ['3x', '--requirements', self.repo],
            "expected a nova major release such as 35, got '3x'")
        self.assert_bad_input(
            ['35'], 'expected a checkout of openstack/requirements '
            '(--requirements PATH or $NOVA_CELLSCHED_REQUIREMENTS_REPO), '
            'got none')
        self.assert_bad_input(
            ['35', '--requirements', self.tmp], 'expected a checkout (or '
            'bare mirror) of openstack/requirements, got %s: not a git '
            'repository' % self.tmp)
        self.assert_bad_input(
            ['35', '--requirements', self.repo, '--ref', 'stable/1999.1'],
            "expected a branch or commit of %s, got 'stable/1999.1'"
            % self.repo)
        self.assert_bad_input(
            ['35', '--requirements', self.repo, '--template',
             '/nonexistent.txt'], 'expected a pin file as --template, got '
            '/nonexistent.txt (No such file or directory)')
        self.assert_bad_input(
            ['35', '--bogus'], 'unrecognized arguments: --bogus (%s --help '
            'lists the options)' % PROG)


class RealRequirementsTest(PinsCommand):
    """Each hand-kept pin file, written again from the commit it names."""

    def setUp(self):
        super().setUp()
        self.repo = os.environ.get(pins.REQUIREMENTS_REPO)
        if not self.repo:
            self.skipTest(
                '%s is not set: the pin files are written again from the '
                "real upper-constraints only where a checkout of "
                'openstack/requirements is at hand (CI reaches the package'
                ' index only, and nothing fetched is committed)'
                % pins.REQUIREMENTS_REPO)

    def written_again(self, major):
        kept = read(os.path.join(RELEASES, 'nova%d.txt' % major))
        status, out, err = self.pins(
            str(major), '--requirements', self.repo, '--ref',
            header_of(kept)[1], '--output', '-', *services(kept))
        self.assertEqual(0, status, err)
        return kept, out

    def test_31_32_33_are_what_the_command_writes(self):
        for major in (31, 32, 33):
            kept, written = self.written_again(major)
            self.assertEqual(pins_of(kept), pins_of(written),
                             'nova%d.txt' % major)
            self.assertEqual(kept, written, 'nova%d.txt' % major)

    def test_34_but_for_the_pins_that_say_why(self):
        """Two pins newer than the snapshot's, each saying why.

        nova 34.0.0 needs two libraries newer than the snapshot named:
        those two lines say what upper-constraints says.
        """
        kept, written = self.written_again(34)
        said = {
            utils.canonicalize_name(m.group(1)): m.group(2)
            for m in re.finditer(
                r'^([A-Za-z0-9_.-]+)==\S+\s+# upper-constraints says (\S+)',
                kept, re.M)}
        self.assertEqual({'keystoneauth1', 'oslo-versionedobjects'},
                         set(said))
        self.assertEqual(dict(pins_of(kept), **said), pins_of(written))
