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

"""The lister's engines read values exactly as the stock drivers do."""

import pymysql
import sqlalchemy as sa

from nova_cellsched.records import query as instance_query
from tests.fixtures import db

#: DATETIME and TIMESTAMP values as MariaDB sends them, edge cases
#: included: fractions of every length, NULL, the zero date (which
#: fromisoformat refuses), the calendar's ends.
VALUES = """SELECT
    CAST('2024-03-01 12:34:56' AS DATETIME),
    CAST('2024-03-01 12:34:56.5' AS DATETIME(1)),
    CAST('2024-03-01 12:34:56.123' AS DATETIME(3)),
    CAST('2024-03-01 12:34:56.123456' AS DATETIME(6)),
    CAST(NULL AS DATETIME),
    CAST('0000-00-00 00:00:00' AS DATETIME),
    CAST('1000-01-01 00:00:00' AS DATETIME),
    CAST('9999-12-31 23:59:59.999999' AS DATETIME(6)),
    TIMESTAMP('2038-01-19 03:14:07'),
    CURRENT_TIMESTAMP(6)"""


class DatetimeTest(db.FunctionalTestCase):
    """DATETIME values read through fromisoformat equal the driver's own."""

    def _compare(self, driver, connect):
        url = sa.engine.url.make_url(db.MYSQL_URL)
        ours_url = url.set(drivername='mysql+' + driver)
        engine = instance_query.create_engine(
            ours_url.render_as_string(hide_password=False), io_timeout=10)
        self.addCleanup(engine.dispose)
        with engine.connect() as conn:
            ours = tuple(conn.execute(sa.text(VALUES)).one())
        stock = connect(host=url.host, port=url.port or 3306,
                        user=url.username, password=url.password or '')
        self.addCleanup(stock.close)
        cursor = stock.cursor()
        cursor.execute(VALUES)
        expected = cursor.fetchone()
        cursor.close()
        # CURRENT_TIMESTAMP differs between the two queries: compare types.
        self.assertEqual(expected[:-1], ours[:-1])
        self.assertEqual([type(v) for v in expected],
                         [type(v) for v in ours])
        return ours

    def test_pymysql_datetimes_equal_the_stock_converter(self):
        ours = self._compare('pymysql', pymysql.connect)
        # PyMySQL hands the zero date back as text.
        self.assertEqual('0000-00-00 00:00:00', ours[5])

    def test_mysqlclient_datetimes_equal_the_stock_converter(self):
        try:
            import MySQLdb
        except ImportError:
            self.skipTest('mysqlclient is not installed')
        ours = self._compare('mysqldb', MySQLdb.connect)
        # mysqlclient turns the zero date into None.
        self.assertIsNone(ours[5])
