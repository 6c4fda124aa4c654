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
added to it.
"""

import importlib.metadata
import json
import os
import subprocess
import sys

import fixtures
from oslotest import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class InstallChangesNothingTest(base.BaseTestCase):

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
        both = self.resolve('both', nova, TOP)
        self.assertIn('nova-cellsched', both)
        del both['nova-cellsched']
        changed = {name: (alone.get(name), both.get(name))
                   for name in set(alone) | set(both)
                   if alone.get(name) != both.get(name)}
        self.assertEqual({}, changed,
                         'name: (with %s alone, with nova-cellsched too)'
                         % nova)
