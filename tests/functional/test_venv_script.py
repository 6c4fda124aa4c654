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

"""``tools/venv``: the command runs where the caller stands.

The venv of this test run is the one ``tools/venv`` is pointed at
(``NOVA_CELLSCHED_VENV``); it is only used when its stamp for the
checkout's requirements exists, so the test never installs anything.
"""

import hashlib
import json
import os
import subprocess
import sys

import fixtures

from nova_cellsched.demo import world as demo
from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, 'tools', 'venv')


def stamp_of(venv):
    """The stamp ``tools/venv`` leaves once *venv* holds the requirements."""
    digest = hashlib.sha1()
    for name in ('requirements.txt', 'test-requirements.txt', 'setup.cfg'):
        with open(os.path.join(TOP, name), 'rb') as handle:
            digest.update(handle.read())
    return os.path.join(venv, '.nova-cellsched-' + digest.hexdigest()[:12])


class VenvScriptTest(base.TestCase):

    def setUp(self):
        super().setUp()
        venv = sys.prefix
        if not os.path.exists(stamp_of(venv)):
            self.skipTest('%s has no tools/venv stamp for these requirements'
                          ' (running it would install)' % venv)
        self.env = dict(os.environ, NOVA_CELLSCHED_VENV=venv)
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def venv(self, *argv, cwd):
        return subprocess.run([SCRIPT] + list(argv), cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=300)

    def test_command_runs_in_the_callers_directory(self):
        """Not in the repository root: relative paths resolve here."""
        here = os.path.join(self.tmp, 'sub')
        os.mkdir(here)
        with open(os.path.join(here, 'input.txt'), 'w') as handle:
            handle.write('found')
        done = self.venv('python', '-c',
                         'import os; print(os.getcwd()); '
                         'print(open("input.txt").read())', cwd=here)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertEqual([os.path.realpath(here), 'found'],
                         done.stdout.split())
        self.assertNotIn('installing', done.stderr)

    def test_demo_config_and_trace_relative_to_the_caller(self):
        """``cd cellsched-demo && ../tools/venv ... --config-file nova.conf``.

        The relative nova.conf is read, and the relative ``--trace`` file
        is written, in the caller's directory (not the repository root).
        """
        world = demo.build(os.path.join(self.tmp, 'cellsched-demo'),
                           cells=1, instances=10)
        here = os.path.dirname(world.config_file)
        trace = 'venv-test-trace-%d.json' % os.getpid()
        self.addCleanup(lambda: os.path.exists(os.path.join(TOP, trace))
                        and os.unlink(os.path.join(TOP, trace)))
        done = self.venv('nova-cellsched', '--config-file', 'nova.conf',
                         'list', '-f', 'json', '--trace', trace, cwd=here)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertEqual(world.instances - world.deleted,
                         len(json.loads(done.stdout)))
        self.assertTrue(os.path.exists(os.path.join(here, trace)))
        self.assertFalse(os.path.exists(os.path.join(TOP, trace)))
