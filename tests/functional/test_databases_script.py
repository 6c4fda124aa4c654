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


"""``tools/databases``: the database set-up of the quick start and CI.

It runs against the machine's real servers, which other tests use: the
commands that would install or start a server (apt-get,
start-stop-daemon, pg_ctlcluster) are replaced by stand-ins on PATH that
only record their arguments, so nothing is installed, started or stopped.
"""

import os
import subprocess

import fixtures

from tests import base
from tests.fixtures import db

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, 'tools', 'databases')
MANAGING = ('apt-get', 'start-stop-daemon', 'pg_ctlcluster')


class DatabasesScriptTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.bin = self.useFixture(fixtures.TempDir()).path
        self.calls = os.path.join(self.bin, 'calls')
        for name in MANAGING:
            self.stand_in(name, 'echo "%s $*" >> %s'
                          % (name, self.calls))
        self.env = dict(os.environ, PATH=self.bin + ':' + os.environ['PATH'],
                        NOVA_CELLSCHED_DB_WAIT='1')
        for name in ('NOVA_CELLSCHED_TEST_MYSQL_URL',
                     'NOVA_CELLSCHED_TEST_POSTGRESQL_URL'):
            self.env.pop(name, None)

    def stand_in(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, 'w') as handle:
            handle.write('#!/bin/sh\n%s\n' % body)
        os.chmod(path, 0o755)

    def run_script(self):
        return subprocess.run([SCRIPT], env=self.env, capture_output=True,
                              text=True, timeout=120)

    def recorded(self):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as handle:
            return handle.read().splitlines()

    def test_running_servers_are_left_alone_every_time(self):
        """Both up: exit 0, says so, installs and starts nothing; twice."""
        for url in (db.MYSQL_URL, db.POSTGRESQL_URL):
            problem = db.server_available(url)
            if problem is not None:
                self.fail('%s is needed: %s' % (url, problem))
        for _ in range(2):
            done = self.run_script()
            self.assertEqual(0, done.returncode, done.stderr)
            self.assertIn('MariaDB is up', done.stdout)
            self.assertIn('PostgreSQL is up', done.stdout)
        self.assertEqual([], self.recorded())

    def test_a_server_given_by_url_is_not_managed(self):
        self.env['NOVA_CELLSCHED_TEST_MYSQL_URL'] = 'mysql+pymysql://x@h/'
        self.env['NOVA_CELLSCHED_TEST_POSTGRESQL_URL'] = 'postgresql://x@h/'
        self.stand_in('mariadb-admin', 'exit 1')
        self.stand_in('pg_isready', 'exit 1')
        done = self.run_script()
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('MariaDB: using NOVA_CELLSCHED_TEST_MYSQL_URL',
                      done.stdout)
        self.assertIn('PostgreSQL: using NOVA_CELLSCHED_TEST_POSTGRESQL_URL',
                      done.stdout)
        self.assertEqual([], self.recorded())

    def test_mariadb_not_answering_is_started(self):
        """MariaDB down: the script starts mariadbd (or installs it)."""
        self.stand_in('mariadb-admin', 'exit 1')
        done = self.run_script()
        self.assertEqual(1, done.returncode, done.stdout)
        self.assertIn('starting MariaDB', done.stdout)
        self.assertIn('MariaDB did not start', done.stderr)
        calls = self.recorded()
        if os.path.exists('/usr/sbin/mariadbd'):
            self.assertEqual(['start-stop-daemon --start --oknodo '
                              '--background --exec /usr/sbin/mariadbd'],
                             calls)
        else:
            self.assertTrue(calls[0].startswith('apt-get update'), calls)
