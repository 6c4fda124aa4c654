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

"""The pure core never imports nova: a spec, checked two ways."""

import ast
import importlib
import os
import subprocess
import sys

from tests import base


#: The modules that decide (cells, policy, order, rounds, gathering,
#: aggregates) without nova: testable, and the same on every release.
PURE = ('nova_cellsched.scheduler.mapping',
        'nova_cellsched.scheduler.decision',
        'nova_cellsched.scheduler.decision',
        'nova_cellsched.scheduler.aggregates',
        'nova_cellsched.listing.sorting',
        'nova_cellsched.listing.rounds',
        'nova_cellsched.gather',
        'nova_cellsched.silence',
        'nova_cellsched.compat.parts',
        'nova_cellsched.compat.hashing')


class TestPureCore(base.TestCase):

    def test_imports_where_nova_cannot_be_imported(self):
        """Each pure module imports in a Python where nova is not there."""
        script = ('import importlib, sys\n'
                  'sys.modules["nova"] = None\n'
                  'for name in sys.argv[1:]:\n'
                  '    importlib.import_module(name)\n'
                  'print(sorted(m for m, v in sys.modules.items()\n'
                  '             if v is not None and (\n'
                  '                 m == "nova" or m.startswith("nova."))))\n')
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))
        env = dict(os.environ, PYTHONPATH=root)
        done = subprocess.run([sys.executable, '-c', script, *PURE],
                              capture_output=True, text=True, env=env,
                              timeout=120, check=False)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertEqual('[]\n', done.stdout)

    def test_no_function_imports_nova_either(self):
        """Not at module level, and not inside a function (called later)."""
        for name in PURE:
            path = importlib.util.find_spec(name).origin
            with open(path) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    modules = [node.module or '']
                else:
                    continue
                for module in modules:
                    self.assertFalse(
                        module == 'nova' or module.startswith('nova.'),
                        '%s imports %s (line %d)' % (name, module,
                                                     node.lineno))
