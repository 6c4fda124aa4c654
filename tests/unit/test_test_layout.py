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

"""The tests' own layout: one base, harnesses in ``tests/fixtures``.

Every test of this plugin is a :class:`tests.base.TestCase`; the two it
is not are nova's own tests run with a part on (they keep nova's
classes) and hypothesis' state machines. ``tests/unit`` and
``tests/functional`` hold tests only; worlds, servers and helpers are
fixtures, and the demo is called by the fixtures and by the demo's own
tests, not by every test that needs cells.
"""

import ast
import importlib
import inspect
import pathlib
import unittest

from hypothesis import stateful

from tests import base

TESTS = pathlib.Path(__file__).resolve().parents[1]

#: Test modules that test the demo (or the commands built on it), and so
#: import it.
DEMO_TESTS = frozenset({
    'functional/test_cli_edges.py', 'functional/test_cli_operator_path.py',
    'functional/test_cloud.py', 'functional/test_demo_api.py',
    'functional/test_plain_venv.py', 'functional/test_readme.py',
    'functional/test_schema_copy.py',
    'functional/test_seed_request_specs.py',
    'functional/test_uwsgi_guide.py', 'functional/test_venv_script.py',
    'unit/test_demo_stop_session.py',
})


def _test_modules():
    for kind in ('unit', 'functional'):
        yield from sorted((TESTS / kind).rglob('test_*.py'))


def _is_novas_own(cls):
    """A test class of nova's tree, or one only adding a part to it."""
    return any(klass.__module__.startswith('nova.tests.')
               for klass in cls.__mro__[1:])


def _is_state_machine(cls):
    """The ``TestCase`` of a hypothesis rule-based state machine."""
    return any(klass.__module__ == stateful.__name__
               for klass in cls.__mro__[1:])


class TestTestLayout(base.TestCase):

    def test_every_test_derives_from_the_one_base(self):
        others = []
        for path in _test_modules():
            name = '.'.join(path.relative_to(TESTS.parent).with_suffix(
                '').parts)
            try:
                module = importlib.import_module(name)
            except unittest.SkipTest:
                continue
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if (cls.__module__ != name or
                        not issubclass(cls, unittest.TestCase) or
                        issubclass(cls, base.TestCase) or
                        _is_novas_own(cls) or _is_state_machine(cls)):
                    continue
                others.append('%s.%s' % (name, cls.__qualname__))
        self.assertEqual([], others,
                         'test classes not on tests.base.TestCase')

    def test_test_directories_hold_tests_only(self):
        for kind in ('unit', 'functional'):
            for path in sorted((TESTS / kind).rglob('*.py')):
                self.assertTrue(
                    path.name == '__init__.py' or
                    path.name.startswith('test_'),
                    '%s is not a test module: harnesses go to '
                    'tests/fixtures' % path.relative_to(TESTS))

    def test_only_the_demos_tests_import_the_demo(self):
        importers = set()
        for path in _test_modules():
            for node in ast.walk(ast.parse(path.read_text())):
                modules = ([node.module or ''] if isinstance(
                    node, ast.ImportFrom) else
                    [a.name for a in node.names] if isinstance(
                        node, ast.Import) else [])
                if any(m == 'nova_cellsched.demo' or
                       m.startswith('nova_cellsched.demo.')
                       for m in modules):
                    importers.add(str(path.relative_to(TESTS)))
        self.assertEqual(set(), importers - DEMO_TESTS,
                         'build worlds with tests.fixtures.worlds')
