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

"""The bounded entry point runs nova-api in the mode nova's own gives.

``nova_cellsched.wsgi.osapi_compute`` stands where uwsgi names nova's
``nova.wsgi.osapi_compute``; each chooses eventlet or native threads
before anything else. Each case runs both choices in a fresh
interpreter of the installed release (nova's: the lines of its module
before it builds the application; ours: the same lines of ours, which
call :func:`as_nova_chooses`) and compares
what each process then runs on. Part of every release's run
(``tools/releases/tests.txt``): on nova 31 and 32 the entry point once
called a ``patch(backend=...)`` those releases do not have, and
nova-api under uwsgi loaded no application.
"""

import ast
import os
import subprocess
import sys

import nova.wsgi

from tests import base
from tests.fixtures import releases

def osapi_compute_path() -> str:
    """Our entry module's file, found without importing it.

    Importing it builds nova-api's application.
    """
    import importlib.util

    spec = importlib.util.find_spec('nova_cellsched.wsgi.osapi_compute')
    assert spec is not None and spec.origin is not None
    return spec.origin


NOVA_MODULE = os.path.join(os.path.dirname(nova.wsgi.__file__),
                           'osapi_compute.py')
# Whether threads and sockets are eventlet's (without importing eventlet:
# nova 34 in native threads refuses that import).
REPORT = (
    'import socket, threading\n'
    'print(threading._start_new_thread.__module__.startswith("eventlet"), '
    'socket.socket.__module__.startswith("eventlet"))\n')


def preamble(path: str) -> str:
    """An entry module's lines before it builds the application.

    Both modules set ``NAME`` right after their imports.
    """
    with open(path) as handle:
        lines = handle.read().splitlines()
    end = next(n for n, line in enumerate(lines) if line.startswith('NAME'))
    return '\n'.join(lines[:end]) + '\n'


NOVAS = preamble(NOVA_MODULE)
OURS = preamble(osapi_compute_path())


class EntryPointConcurrencyTest(base.TestCase):

    def run_python(self, code: str, variable: str | None) -> list[str]:
        env = dict(os.environ)
        env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
        if variable is not None:
            env['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = variable
        done = subprocess.run([sys.executable, '-c', code + REPORT],
                              capture_output=True, text=True, timeout=300,
                              env=env)
        self.assertEqual(0, done.returncode, done.stderr[-3000:])
        return done.stdout.splitlines()

    def test_same_mode_as_novas_entry_point(self):
        for variable in (None, '1', '0'):
            novas = self.run_python(NOVAS, variable)[-1]
            ours = self.run_python(OURS, variable)[-1]
            self.assertEqual(novas, ours, 'OS_NOVA_DISABLE_EVENTLET_PATCHING'
                             '=%s' % variable)

    def test_releases_default_mode(self):
        """Unset: eventlet on nova 31 and 32, native threads from 33."""
        eventlet = releases.NOVA_MAJOR < 33
        self.assertEqual('%s %s' % (eventlet, eventlet),
                         self.run_python(OURS, None)[-1])

    def test_what_chooses_it(self):
        code = ('from nova_cellsched.wsgi import concurrency\n'
                'print(concurrency.as_nova_chooses())\n')
        self.assertEqual(
            'nova.api.openstack' if releases.NOVA_MAJOR < 33
            else 'threading by default', self.run_python(code, None)[-2])


def init_call_arguments(path: str) -> list[str]:
    """The names an entry module passes to ``init_application``."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == 'init_application'):
            return [arg.id for arg in node.args
                    if isinstance(arg, ast.Name)]
    raise AssertionError('no init_application call in %s' % path)


class EntryPointArgumentsTest(base.TestCase):
    """Ours builds nova's application with what nova's module passes."""

    def test_same_arguments_as_novas_entry_point(self):
        with open(osapi_compute_path()) as handle:
            source = handle.read()
        # Everything but the build itself (``application = None`` on).
        code = source[:source.index('\napplication = None')] + (
            '\nnames = {NAME: "NAME", PROG: "PROG"}\n'
            'args = init_arguments()\n'
            'inspect.signature(wsgi_app.init_application).bind(*args)\n'
            'print(" ".join(names[a] for a in args))\n')
        done = subprocess.run([sys.executable, '-c', code],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(0, done.returncode, done.stderr[-3000:])
        self.assertEqual(init_call_arguments(NOVA_MODULE),
                         done.stdout.split())
