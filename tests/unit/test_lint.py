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


"""The lint gate runs with the tests, so it cannot rot unnoticed.

The commands are those of tox.ini's ``pep8`` environment (ruff, hacking's
H checks through flake8, mypy on the typed pure modules), read from
tox.ini so that there is one list. Each runs with the linters installed
next to this Python (test-requirements.txt lists them); a linter that is
not installed is skipped, not failed.

The pep8 environment has only the three linters, the test virtualenv
has nova and every dependency: mypy runs with ``--no-site-packages`` so
that it sees the same thing in both (every third-party module unknown,
``Any``), and the gate passes or fails alike wherever it runs.
"""

import configparser
import os
import pathlib
import shlex
import subprocess
import sys

import testtools

from tests import base

TOP = pathlib.Path(__file__).resolve().parents[2]


def pep8_commands() -> list[list[str]]:
    """The ``commands`` of tox.ini's ``[testenv:pep8]``, split."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(TOP / 'tox.ini')
    return [shlex.split(line) for line in
            tox['testenv:pep8']['commands'].strip().splitlines()
            if line.strip()]


class LintTestCase(base.TestCase):

    def test_pep8_environment_runs_the_three_linters(self):
        self.assertEqual(['ruff', 'flake8', 'mypy'],
                         [argv[0] for argv in pep8_commands()])

    def test_mypy_passes_as_in_a_venv_with_only_the_linters(self):
        """mypy gives the pep8 env's verdict here: no installed packages.

        In ``tox -e pep8`` nova, SQLAlchemy, oslo.* are not installed, so
        what they return is ``Any``, which strict mypy refuses to return
        from a typed function (``no-any-return``). The command must say
        ``--no-site-packages`` (the test venv then sees what the pep8
        env sees); ``test_mypy_passes`` runs it.
        """
        argv = next(a for a in pep8_commands() if a[0] == 'mypy')
        self.assertIn('--no-site-packages', argv,
                      'without it, mypy in the test venv does not see '
                      'what it sees in tox -e pep8')


def _make_test(argv: list[str]):
    def test(self: testtools.TestCase) -> None:
        tool = os.path.join(os.path.dirname(sys.executable), argv[0])
        if not os.path.exists(tool):
            self.skipTest('%s is not installed next to %s'
                          % (argv[0], sys.executable))
        done = subprocess.run([tool] + argv[1:], cwd=TOP,
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(0, done.returncode, '%s:\n%s%s' % (
            shlex.join(argv), done.stdout[-5000:], done.stderr[-2000:]))
    test.__doc__ = '``%s`` passes.' % shlex.join(argv[:3])
    return test


for _argv in pep8_commands():
    setattr(LintTestCase, 'test_%s_passes' % _argv[0], _make_test(_argv))
