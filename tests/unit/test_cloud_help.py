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

"""``tools/cloud --help``: the commands a user runs, and what up changes.

The script runs as a user runs it (``tools/cloud --help``, in a process
of its own); it starts nothing.
"""

import os
import re
import subprocess
import sys

from tests import base


TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def cloud(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, VIRTUAL_ENV=os.path.dirname(
        os.path.dirname(sys.executable)), COLUMNS='80')
    return subprocess.run([os.path.join(TOP, 'tools', 'cloud'), *args],
                          env=env, capture_output=True, text=True,
                          timeout=120, check=False)


class CloudHelpTest(base.TestCase):

    def assertSaysWhatUpChanges(self, text: str) -> None:
        flat = ' '.join(text.split())
        self.assertIn("MariaDB's global max_connections to 1024", flat)
        self.assertIn('until down puts the old value back', flat)
        self.assertIn('RabbitMQ is left running after down', flat)
        self.assertIn('doc/source/contributor/index.rst', flat)

    def test_help_lists_the_commands_and_says_what_up_changes(self):
        result = cloud('--help')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertNotIn('SUPPRESS', result.stdout)
        # The internal neutron stand-in (up starts it) is not offered.
        self.assertNotIn('neutron-stand-in', result.stdout)
        self.assertRegex(result.stdout,
                         r'usage: tools/cloud .*\{up,status,down\}')
        for command in ('up', 'status', 'down'):
            self.assertRegex(result.stdout,
                             r'(?m)^\s+%s\s+\S' % re.escape(command))
        self.assertSaysWhatUpChanges(result.stdout)

    def test_up_help_says_what_it_changes(self):
        result = cloud('up', '--help')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertNotIn('SUPPRESS', result.stdout)
        self.assertSaysWhatUpChanges(result.stdout)

    def test_no_command_names_the_users_commands(self):
        result = cloud()
        self.assertEqual(2, result.returncode)
        self.assertIn('required: {up,status,down}', result.stderr)

    def test_an_option_without_a_value_is_exit_2_before_anything(self):
        """Refused before up starts anything: exit 2, one error line."""
        for flag, name, service in (
                ('api-option', 'list_cell_timeout', 'nova-api'),
                ('scheduler-option', 'scheduler_cell_timeout',
                 'nova-scheduler')):
            result = cloud('--dir', os.path.join(TOP, 'no-such-cloud'),
                           'up', '--' + flag, name)
            self.assertEqual(2, result.returncode, result.stderr)
            (error,) = [line for line in result.stderr.splitlines()
                        if 'error:' in line]
            self.assertIn("expected --%s NAME=VALUE (a [cellsched] option "
                          "of %s), got '%s'" % (flag, service, name), error)
            self.assertEqual('', result.stdout)
            self.assertFalse(os.path.exists(os.path.join(TOP,
                                                         'no-such-cloud')))
