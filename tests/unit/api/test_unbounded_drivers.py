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

"""Cells whose driver the listing cannot bound are named once, with advice.

Only PyMySQL connections obey a worker's I/O bound. A cell reached by
mysqlclient or libpq without a timeout in its URL can hold a worker as
long as its server does not answer: the operator is told once per cell
and process which URL parameters bound it, without the URL itself.
"""

import logging

import fixtures
from nova import context as nova_context
from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_cellsched.api.hooks import driver_advice
from nova_cellsched.api.hooks import instance_list
from nova_cellsched.api.hooks import pool
from nova_cellsched.api.startup import service_versions as startup
from tests import base

PASSWORD = 'pw-b0a7c1'


class TestAdvice(base.TestCase):
    """unbounded_driver_advice: URL scheme and parameters -> advice."""

    def advice(self, scheme, seconds=120.0, **query):
        return driver_advice.unbounded_driver_advice(scheme, query, seconds)

    def test_pymysql_is_bounded_by_the_listing(self):
        for scheme in ('mysql+pymysql', 'mariadb+pymysql', 'MYSQL+PyMySQL'):
            self.assertIsNone(self.advice(scheme), scheme)

    def test_mysqlclient_without_read_timeout_is_told_what_to_add(self):
        """mysql:// is mysqlclient's, as in SQLAlchemy."""
        for scheme in ('mysql', 'mysql+mysqldb', 'mariadb',
                       'mariadb+mysqldb'):
            advice = self.advice(scheme, seconds=15.0)
            self.assertIn('read_timeout=15', advice, scheme)
            self.assertIn('write_timeout=15', advice, scheme)
            self.assertIn('connect_timeout=15', advice, scheme)
            self.assertIn('mysql+pymysql://', advice, scheme)

    def test_mysqlclient_with_read_timeout_needs_nothing(self):
        self.assertIsNone(self.advice('mysql+mysqldb', read_timeout='30'))
        self.assertIsNone(self.advice('mysql', read_timeout='30',
                                      charset='utf8'))

    def test_libpq_says_what_bounds_it(self):
        """No client read timeout exists: name the bounds there are."""
        for scheme in ('postgresql', 'postgresql+psycopg2',
                       'postgresql+psycopg'):
            advice = self.advice(scheme, seconds=8.0)
            self.assertIn('no read timeout', advice, scheme)
            self.assertIn('connect_timeout=8', advice, scheme)
            self.assertIn('tcp_user_timeout=8000', advice, scheme)
            self.assertIn('keepalives_idle=8', advice, scheme)
            self.assertIn('statement_timeout%3D8000', advice, scheme)

    def test_libpq_with_tcp_user_timeout_needs_nothing(self):
        self.assertIsNone(self.advice('postgresql+psycopg2',
                                      tcp_user_timeout='120000'))

    def test_other_mysql_and_postgresql_drivers_are_named(self):
        advice = self.advice('mysql+mysqlconnector', seconds=3.2)
        self.assertIn('mysqlconnector', advice)
        self.assertIn('about 4 s', advice)
        self.assertIn('pg8000', self.advice('postgresql+pg8000'))

    def test_other_databases_need_nothing(self):
        for scheme in ('sqlite', 'sqlite+pysqlite', 'fake'):
            self.assertIsNone(self.advice(scheme), scheme)

    def test_no_bound_suggests_twice_the_default_cell_timeout(self):
        self.assertIn('read_timeout=120', self.advice('mysql', None))


class TestWarning(base.TestCase):
    """One WARNING per cell and process, naming the cell, never the URL."""

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.driver_advice._WARNED', set()))

    def cell(self, url, name='cell1', uuid=uuids.cell1):
        cell = objects.CellMapping(uuid=uuid, name=name,
                                   transport_url='fake://')
        if url is not None:
            cell.database_connection = url
        return cell

    def warnings(self):
        return [line for line in self.log.output.splitlines()
                if 'not bounded' in line]

    def test_mysqlclient_cell_is_named_once_without_its_url(self):
        cell = self.cell('mysql+mysqldb://nova:%s@db-host-1/nova_cell1'
                         '?charset=utf8' % PASSWORD)
        for _ in range(3):
            driver_advice.warn_unbounded_cell(cell, 20.0)
        lines = self.warnings()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('cell1 (%s)' % uuids.cell1, lines[0])
        self.assertIn('read_timeout=20', lines[0])
        for secret in (PASSWORD, 'db-host-1', 'nova_cell1'):
            self.assertNotIn(secret, self.log.output)

    def test_each_cell_is_warned_about_once(self):
        for uuid, name in ((uuids.a, 'a'), (uuids.b, None), (uuids.a, 'a')):
            driver_advice.warn_unbounded_cell(
                self.cell('postgresql://nova@pg/nova', name, uuid), 20.0)
        lines = self.warnings()
        self.assertEqual(2, len(lines), lines)
        self.assertIn('a (%s)' % uuids.a, lines[0])
        self.assertIn('Cell %s:' % uuids.b, lines[1])

    def test_bounded_and_unreadable_urls_are_quiet(self):
        """nova's own tests name cells' databases with plain names."""
        for url in ('mysql+pymysql://nova@db/nova',
                    'mysql://nova@db/nova?read_timeout=5',
                    'sqlite://', 'cell1', None):
            driver_advice.warn_unbounded_cell(
                self.cell(url, uuid=getattr(uuids, 'quiet%s' % url)), 20.0)
        self.assertEqual([], self.warnings())

    def test_connection_parameters_count_as_the_url(self):
        """oslo.db appends ``[database] connection_parameters`` to it."""
        driver_advice.warn_unbounded_cell(
            self.cell('mysql://nova@db/nova'), 20.0,
            'read_timeout=20&write_timeout=20')
        self.assertEqual([], self.warnings())

    def test_the_api_listing_warns_when_it_first_targets_the_cell(self):
        """nova-api's lister asks for advice when it targets each cell."""
        self.flags(list_cell_timeout=4, group='cellsched')
        listing = instance_list._Listing(
            nova_context.get_admin_context(), {}, [],
            instance_list.sort_order(None, None))
        cells = [self.cell('mysql+mysqldb://nova:%s@db/c1' % PASSWORD),
                 self.cell('mysql+pymysql://nova@db/c2', 'cell2',
                           uuids.cell2)]
        listing.targeted(cells)
        listing.targeted(cells)
        lines = self.warnings()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('cell1 (%s)' % uuids.cell1, lines[0])
        self.assertIn('read_timeout=8', lines[0])
        self.assertNotIn(PASSWORD, self.log.output)

    def test_the_start_up_check_warns_at_start(self):
        """nova-api's start-up check asks each cell: it warns then.

        The cell's server is not there (a closed port): the check reports
        it as not answering, and the warning was given before the query.
        """
        self.addCleanup(pool.shutdown)
        cell = self.cell('mysql+mysqldb://nova:%s@127.0.0.1:1/c1'
                         % PASSWORD)
        _minimum, outcomes = startup.minimum_version(
            nova_context.get_admin_context(), [cell], 2.0)
        self.assertFalse(outcomes[cell.uuid].ok)
        lines = self.warnings()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('cell1 (%s)' % uuids.cell1, lines[0])
        self.assertIn('read_timeout=4', lines[0])
        self.assertNotIn(PASSWORD, self.log.output)
