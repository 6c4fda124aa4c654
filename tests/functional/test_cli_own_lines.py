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

"""``nova-cellsched`` prints its own lines only, and imports what it needs.

Each command runs as a process of its own, under ``python -W default``
so that any Python warning would be printed (eventlet's deprecation is
a ``DeprecationWarning`` before eventlet 0.41, hidden by default). Was
wrong: eventlet's 8-line ``EventletDeprecationWarning`` came before the
output of every command wherever choosing nova's threading mode imports
eventlet (nova 32 and 33 through oslo.concurrency; nova 34 when the
environment asks for eventlet), and under ``-W default`` the libraries'
deprecations (oslo.policy's rules, webob's ``cgi``) came before
``list``'s table.
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile

from tests import base
from tests.functional.test_cli import COMMAND

#: ``nova-cellsched`` (argv[1:]), as its console script runs it.
CONSOLE = '''
import sys
from nova_cellsched.cmd.cellsched import console_main
sys.argv[0] = 'nova-cellsched'
sys.exit(console_main())
'''

#: The command under ``-W default``: a warning Python would hide is shown.
WARNED = [sys.executable, '-W', 'default', '-c', CONSOLE]

#: The command, with a warning where a library's would be: while nova's
#: threading mode is chosen, before the options are read.
EARLY_WARNING = [sys.executable, '-W', 'default', '-c', '''
import warnings
from nova_cellsched.cmd import cellsched
choose = cellsched._use_native_threads
def warned():
    warnings.warn('a library warned at start-up', DeprecationWarning)
    choose()
cellsched._use_native_threads = warned
''' + CONSOLE]

#: The command, printing the modules it imported on exit (stderr).
MODULES = '''
import atexit
import sys
atexit.register(lambda: sys.__stderr__.write('MODULES %s\\n' % ' '.join(
    sorted(sys.modules))))
''' + CONSOLE


def run(command, *args, env=None, cwd=None):
    """(exit code, stdout, stderr) of *command* with *args*."""
    environ = dict(os.environ)
    environ.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
    environ.update(env or {})
    proc = subprocess.run(list(command) + list(args), env=environ, cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


class OwnLinesTest(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.top = tempfile.mkdtemp(prefix='ncs-own-lines-')
        cls.addClassCleanup(shutil.rmtree, cls.top, True)
        world = os.path.join(cls.top, 'world')
        code, _out, err = run(COMMAND, 'demo', '--cells', '2',
                              '--instances', '20', '--dir', world,
                              cwd=cls.top)
        assert code == 0, err
        cls.conf = os.path.join(world, 'nova.conf')

    def test_help_prints_no_warning(self):
        code, out, err = run(WARNED, '--help')
        self.assertEqual(0, code, err)
        self.assertTrue(out.startswith('usage: nova-cellsched'), out)
        self.assertEqual('', err)

    def test_list_prints_no_warning(self):
        """The table on stdout; nothing on stderr, not even -W's lines."""
        code, out, err = run(WARNED, '--config-file', self.conf, 'list',
                             '--limit', '3')
        self.assertEqual(0, code, err)
        self.assertEqual(3, out.count('| vm-cell'), out)
        self.assertEqual('', err)

    def test_eventlet_chosen_by_the_environment_prints_no_warning(self):
        """Where nova imports eventlet, its deprecation is not printed.

        ``OS_NOVA_DISABLE_EVENTLET_PATCHING=0`` makes nova 34 import
        eventlet while the command chooses the threading mode, as
        choosing it does on nova 32 and 33 whatever the environment.
        nova's line that eventlet's mode is deprecated is for its
        services; the command is not one.
        """
        env = {'OS_NOVA_DISABLE_EVENTLET_PATCHING': '0'}
        code, out, err = run(WARNED, '--help', env=env)
        self.assertEqual(0, code, err)
        self.assertTrue(out.startswith('usage: nova-cellsched'), out)
        self.assertEqual('', err)

    def test_verbose_shows_the_python_warnings(self):
        """-v shows them, start-up's included; --debug alone does not.

        --debug adds tracebacks only: bad input is one line with it too.
        """
        for options, shown in (((), False), (('-v',), True),
                               (('--debug',), False)):
            code, out, err = run(EARLY_WARNING, *options, '--help')
            self.assertEqual(0, code, err)
            self.assertTrue(out.startswith('usage: nova-cellsched'), out)
            self.assertEqual(shown, 'a library warned at start-up' in err,
                             (options, err))

    def test_list_imports_what_it_needs(self):
        """Not nova's API, eventlet, nova.config or every nova object.

        nova's API took over a second of start-up; eventlet is what the
        native threading mode avoids; ``nova.config`` (the main database
        layer and RPC) and every nova object (``objects.register_all``)
        are a nova service's start-up, not a listing's.
        """
        code, out, err = run([sys.executable, '-c', MODULES],
                             '--config-file', self.conf, 'list', '--limit',
                             '3')
        self.assertEqual(0, code, err)
        self.assertEqual(3, out.count('| vm-cell'), out)
        modules = next(line for line in err.splitlines()
                       if line.startswith('MODULES ')).split()[1:]
        self.assertIn('nova_cellsched.records.lister', modules)
        unwanted = ['nova.api', 'nova.compute.api', 'nova.compute.manager',
                    'nova.config', 'nova.objects.instance', 'nova.scheduler']
        if int(importlib.metadata.version('nova').split('.')[0]) >= 34:
            # Older nova imports it itself (nova.utils: eventlet.tpool).
            unwanted.append('eventlet')
        self.assertEqual([], [m for m in modules if m in unwanted or
                              m.startswith(tuple(u + '.' for u in unwanted))])
