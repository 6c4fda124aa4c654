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

"""In a nova venv built without upper-constraints, every part is on.

An operator who runs ``pip install nova==X`` with no constraints gets the
newest libraries nova's requirements allow (SQLAlchemy 2.1.9 for nova
34.0.0, 33.0.2 and 31.3.1 in November 2026), which no release's
upper-constraints pin. nova runs with them, so must the plugin: every
part the release can have (all but those its table ``LACKS``) is on in
``nova-cellsched check --api-paste`` and in the maintainers' "parts off".

Runs only against such a venv, named by ``NOVA_CELLSCHED_PLAIN_VENV``::

    python3.11 -m venv /tmp/plain-nova34
    /tmp/plain-nova34/bin/pip install nova==34.0.0
    /tmp/plain-nova34/bin/pip install -e <this checkout>
    NOVA_CELLSCHED_PLAIN_VENV=/tmp/plain-nova34 \\
        tools/venv python -m testtools.run tests.functional.test_plain_venv

The venv's Python runs this checkout (first on its ``PYTHONPATH``).
"""

import json
import os
import subprocess
import tempfile

import testtools

from tests import base

ENV_VAR = 'NOVA_CELLSCHED_PLAIN_VENV'
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PARTS = ('guard', 'keyset', 'lister', 'view', 'render', 'validation',
         'startup', 'min_version', 'bounded_reads', 'request_filter')
LIBRARIES = ('SQLAlchemy', 'oslo.db', 'oslo.serialization',
             'oslo.versionedobjects', 'jsonschema')

#: Run by the venv's Python: its nova, the libraries the parts rely on,
#: what its release's table lacks, and nova's api-paste.ini with the
#: filter added as the guide says (written to argv[1]).
_ABOUT = """
import importlib.metadata, json, os, sys
from nova_cellsched.compat import core
from nova_cellsched.demo import api
nova = importlib.metadata.version('nova')
tables = [r for r in core.tested()
          if r.version.split('.')[0] == nova.split('.')[0]]
print(json.dumps({
    'nova': nova,
    'libraries': {name: importlib.metadata.version(name)
                  for name in %r},
    'lacks': sorted(tables[-1].lacks) if tables else None,
    'paste': api.paste_with_filter(
        sys.argv[1], os.path.join(sys.prefix, 'etc', 'nova',
                                  'api-paste.ini')),
}))
""" % (LIBRARIES,)


class PlainVenvTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.venv = os.environ.get(ENV_VAR)
        if not self.venv:
            self.skipTest(
                '%s is not set: point it at a venv made with "pip install '
                'nova==X" and this checkout, without upper-constraints '
                '(see this module\'s docstring), to check that every part '
                'is on there' % ENV_VAR)
        self.env = dict(os.environ, PYTHONPATH=CHECKOUT)
        self.env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ['rm', '-rf', self.tmp])
        self.about = json.loads(self.run_venv(
            [self.bin('python'), '-c', _ABOUT, self.tmp]).splitlines()[-1])
        self.addDetail('venv', testtools.content.text_content(
            json.dumps(self.about, indent=1)))
        if self.about['lacks'] is None:
            self.skipTest('nova %s of %s is no tested release'
                          % (self.about['nova'], self.venv))

    def bin(self, name):
        return os.path.join(self.venv, 'bin', name)

    def run_venv(self, argv, status=0):
        result = subprocess.run(argv, cwd=self.tmp, env=self.env,
                                capture_output=True, text=True,
                                timeout=600, stdin=subprocess.DEVNULL)
        self.assertEqual(status, result.returncode,
                         'exit %d of %s:\n%s\n%s' % (
                             result.returncode, ' '.join(argv),
                             result.stdout[-3000:], result.stderr[-3000:]))
        return result.stdout

    def test_every_part_the_release_can_have_is_on(self):
        rows = json.loads(self.run_venv(
            [self.bin('nova-cellsched'), 'check', '--api-paste',
             self.about['paste'], '-f', 'json']))
        parts = {row['Section'][len('(part '):-1]: row['Result']
                 for row in rows if row['Section'].startswith('(part ')}
        self.assertEqual(
            {'guard', 'keyset', 'lister', 'view', 'render', 'validation',
             'startup', 'min_version'},
            set(parts))
        off = {name: result for name, result in parts.items()
               if result != 'fits'}
        self.assertEqual(self.about['lacks'], sorted(off), off)
        (nova_row,) = [row for row in rows
                       if row['Section'] == '(installed nova)']
        self.assertEqual('ok', nova_row['Result'])

    def test_the_maintainers_parts_off_agree(self):
        out = self.run_venv([self.bin('python'), '-m',
                             'cellsched_tools.maintainer'])
        (line,) = [line for line in out.splitlines()
                   if line.startswith('# parts off on nova ')]
        off = line.split(': ', 1)[1]
        if not self.about['lacks']:
            self.assertEqual('none', off)
            return
        named = [name for name in PARTS if off.startswith(name + ' (') or
                 '; %s (' % name in off]
        self.assertEqual(self.about['lacks'], sorted(named), off)
