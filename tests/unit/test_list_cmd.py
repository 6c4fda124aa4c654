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


"""The command line's small helpers: output files, filters, pastable
commands.
"""

import os
import shlex
import sys
from unittest import mock

import fixtures

from nova_cellsched.cmd import list_cmd
from nova_cellsched import exception
from tests import base


class CheckWritableTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def assertRejected(self, path, problem):
        error = self.assertRaises(exception.InvalidListRequest,
                                  list_cmd.check_writable, 'stats', path)
        self.assertEqual(('stats', path), (error.argument, error.value))
        self.assertIn(problem, str(error))
        self.assertEqual(2, error.exit_code)

    def test_a_new_file_in_an_existing_directory_is_accepted(self):
        list_cmd.check_writable('stats', os.path.join(self.dir, 's.json'))
        list_cmd.check_writable('stats', None)
        self.assertEqual([], os.listdir(self.dir))

    def test_a_missing_directory_is_named(self):
        missing = os.path.join(self.dir, 'no', 'dir')
        self.assertRejected(os.path.join(missing, 's.json'),
                            'directory %s does not exist' % missing)

    def test_a_directory_is_not_a_file(self):
        self.assertRejected(self.dir, '%s is a directory' % self.dir)


class ParseFilterTestCase(base.TestCase):

    def test_key_and_value_are_stripped(self):
        self.assertEqual(('host', 'c1'), list_cmd.parse_filter(' host = c1 '))

    def test_an_empty_value_is_rejected(self):
        for text in ('vm_state=', 'host= '):
            error = self.assertRaises(exception.InvalidListRequest,
                                      list_cmd.parse_filter, text)
            self.assertIn('a value after "="', str(error))


class PastableCommandTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.top = os.path.realpath(self.useFixture(fixtures.TempDir()).path)
        os.makedirs(os.path.join(self.top, 'tools'))
        open(os.path.join(self.top, 'tools', 'venv'), 'w').close()
        self.useFixture(fixtures.MonkeyPatch('os.getcwd', lambda: self.top))

    def test_tools_venv_in_the_checkout_whose_venv_runs(self):
        self.useFixture(fixtures.MonkeyPatch(
            'sys.prefix', os.path.join(self.top, '.venv')))
        self.assertEqual('tools/venv nova-cellsched',
                         list_cmd.pastable_command())

    def test_full_path_elsewhere(self):
        self.useFixture(fixtures.MonkeyPatch('sys.prefix', '/elsewhere'))
        command = list_cmd.pastable_command()
        self.assertTrue(command.startswith(os.path.dirname(sys.executable)),
                        command)
        self.assertNotEqual('nova-cellsched', command.split()[0])

    def test_openstack_from_the_venv_or_the_checkout(self):
        self.useFixture(fixtures.MonkeyPatch('sys.prefix', '/elsewhere'))
        self.useFixture(fixtures.MonkeyPatch(
            'sys.executable', os.path.join(self.top, 'bin', 'python')))
        self.assertEqual('openstack', list_cmd.pastable_command('openstack'))
        self.useFixture(fixtures.MonkeyPatch(
            'sys.prefix', os.path.join(self.top, '.venv')))
        self.assertEqual('tools/venv openstack',
                         list_cmd.pastable_command('openstack'))


class ApiCommandsTestCase(base.TestCase):
    """The lines ``demo --api`` prints split into the intended argv."""

    def test_curl_and_openstack_split_as_meant(self):
        url = 'http://127.0.0.1:8774/v2.1'
        curl, openstack = list_cmd.api_commands(url, 'tools/venv openstack',
                                                'admin:admin')
        self.assertEqual(
            ['curl', '-i', '-H', 'X-Auth-Token: admin:admin', '-H',
             'OpenStack-API-Version: compute latest',
             url + '/servers/detail?all_tenants=1&limit=5'],
            shlex.split(curl))
        self.assertEqual(
            ['env', 'OS_COMPUTE_ENDPOINT_OVERRIDE=' + url, 'tools/venv',
             'openstack', '--os-auth-type', 'admin_token', '--os-token',
             'admin:admin', '--os-endpoint',
             'http://127.0.0.1:8774/identity/v3', 'server', 'list',
             '--all-projects', '--limit', '5'], shlex.split(openstack))


class DemoApiOptionsTestCase(base.TestCase):
    """``demo --api``'s options are refused before anything is built."""

    def check(self, *argv):
        command = list_cmd.Demo(mock.Mock(), mock.Mock())
        parsed = command.get_parser('demo').parse_args(list(argv))
        return command._check_api_options(parsed)

    def test_port_and_processes_need_api(self):
        for argv in (['--port', '8774'], ['--processes', '3']):
            error = self.assertRaises(exception.InvalidListRequest,
                                      self.check, *argv)
            self.assertIn('only with --api', str(error))
            self.assertEqual(2, error.exit_code)

    def test_bad_values_and_clean(self):
        for argv, text in ((['--port', '0'], 'a TCP port'),
                           (['--processes', '0'], 'a positive integer'),
                           (['--clean'], '--api or --clean')):
            error = self.assertRaises(exception.InvalidListRequest,
                                      self.check, '--api', *argv)
            self.assertIn(text, str(error))

    def test_no_uwsgi_is_one_line_exit_2(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.demo.api.UWSGI', '/nonexistent/bin/uwsgi'))
        error = self.assertRaises(exception.CannotServeApi, self.check,
                                  '--api')
        self.assertEqual(2, error.exit_code)
        self.assertEqual(1, len(str(error).splitlines()))
        self.assertIn('/nonexistent/bin/uwsgi is not installed', str(error))
        self.assertIn('uWSGI==2.0.31', str(error))
