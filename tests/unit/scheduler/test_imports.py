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

"""Importing a scheduler module changes nothing in nova, and needs no cycle.

Each module is imported first, alone, in a fresh interpreter: what it
pulls in is then its own doing, and so is any change to nova's list of
request filters (only building ProjectCellFilter registers the
pre-filter).
"""

import ast
import json
import pathlib
import subprocess
import sys


import nova_cellsched
from tests import base

SCHEDULER = pathlib.Path(nova_cellsched.__file__).parent / 'scheduler'

PROBE = '''
import json, sys, importlib
from nova.scheduler import request_filter as nova_rf
def names():
    return ['%s.%s' % (f.__module__, f.__name__)
            for f in nova_rf.ALL_REQUEST_FILTERS]
before = names()
ours_before = sorted(m for m in sys.modules if m.startswith('nova_cellsched'))
importlib.import_module(sys.argv[1])
print(json.dumps({
    'before': before, 'after': names(), 'ours_before': ours_before,
    'loaded': sorted(m for m in sys.modules
                     if m.startswith('nova_cellsched.scheduler.'))}))
'''

#: module -> scheduler modules it must not load (directly or not).
MUST_NOT_LOAD = {
    'nova_cellsched.scheduler.decision': (
        'state', 'request_filter', 'host_filter'),
    'nova_cellsched.scheduler.state': ('request_filter', 'host_filter'),
    'nova_cellsched.scheduler.request_filter': ('host_filter',),
    'nova_cellsched.scheduler.host_filter': (),
    'nova_cellsched.filters': (),
}


class FreshImportTestCase(base.TestCase):

    def test_each_module_alone(self):
        """No module changes nova's request filters by being imported.

        And none loads the modules above it: the decision no adapter, the
        shared state no filter, the pre-filter not the host filter. (One
        interpreter per module, started together.)
        """
        probes = {module: subprocess.Popen(
            [sys.executable, '-c', PROBE, module], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True) for module in MUST_NOT_LOAD}
        results = {}
        for module, proc in probes.items():
            out, err = proc.communicate()
            self.assertEqual(0, proc.returncode, '%s: %s' % (module, err))
            results[module] = json.loads(out.strip().splitlines()[-1])
        for module, got in sorted(results.items()):
            self.assertEqual([], got['ours_before'], module)
            self.assertEqual(got['before'], got['after'],
                             'importing %s changed nova\'s request filters'
                             % module)
            for name in MUST_NOT_LOAD[module]:
                self.assertNotIn('nova_cellsched.scheduler.' + name,
                                 got['loaded'], module)
        self.assertIn('nova_cellsched.scheduler.request_filter',
                      results['nova_cellsched.filters']['loaded'])

    def test_decision_imports_no_nova(self):
        """The decision is pure: typed by mypy without nova."""
        code = ('import sys\n'
                'import nova_cellsched.scheduler.decision\n'
                'print(sorted(m for m in sys.modules'
                ' if m == "nova" or m.startswith("nova.")))\n')
        out = subprocess.run([sys.executable, '-c', code], check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual('[]', out.strip())


class NoCycleTestCase(base.TestCase):
    """The scheduler modules import each other one way only."""

    def _graph(self):
        graph = {}
        for path in SCHEDULER.glob('*.py'):
            name = path.stem
            deps = set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    if node.module == 'nova_cellsched.scheduler':
                        deps.update(a.name for a in node.names)
                    elif node.module.startswith('nova_cellsched.scheduler.'):
                        deps.add(node.module.rsplit('.', 1)[1])
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith('nova_cellsched.scheduler.'):
                            deps.add(alias.name.rsplit('.', 1)[1])
            graph[name] = deps - {name}
        return graph

    def test_no_import_cycle(self):
        graph = self._graph()
        self.assertIn('host_filter', graph)
        done, path = set(), []

        def visit(node):
            if node in path:
                self.fail('import cycle: %s' % ' -> '.join(
                    path[path.index(node):] + [node]))
            if node in done:
                return
            path.append(node)
            for dep in sorted(graph.get(node, ())):
                visit(dep)
            path.pop()
            done.add(node)

        for node in sorted(graph):
            visit(node)

    def test_request_filter_does_not_import_the_host_filter(self):
        self.assertNotIn('host_filter', self._graph()['request_filter'])
