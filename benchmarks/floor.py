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

"""The floor of a server-list response: plain SQL and JSON, nothing else.

``bench_api_e2e.py`` times it beside stock nova-api and ours: what no
nova-api can go below with nova's database schema, the same database
driver and nova's JSON encoder. No nova import but nova's JSON encoder.
"""

import concurrent.futures
import json
import threading
import time
import types
from typing import Any

import sqlalchemy as sa


class Floor:
    """The floor of a response: its rows read with plain SQL, its body encoded.

    What no nova-api can go below with nova's database and nova's JSON:
    the servers of the page read from their cells in parallel (a thread
    per cell, as ours asks the cells, at most :attr:`THREADS`; each
    thread keeps one PyMySQL connection to each database server, so that
    50 cells on one server cost no more connections than MariaDB's
    defaults allow beside two nova-api processes),
    each table the body draws on at the request's microversion read by
    the page's uuids (instances, ``instance_info_caches``,
    ``instance_extra``'s flavor and trusted certificates,
    ``instance_metadata``, ``block_device_mapping``; ``tags`` from 2.26,
    ``instance_system_metadata`` from 2.73) as plain tuples, then the page's
    body (as stock nova answered it, decoded before the clock starts)
    encoded with nova's ``jsonutils.dumps``. No HTTP, no policy, no
    rendering, no merge: where the servers are is known before the
    clock starts (their ``instance_mappings``), not found out.
    """

    #: (the microversion from which the body draws on it, the query).
    QUERIES = (
        ((2, 1), 'SELECT * FROM `{db}`.instances WHERE uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, network_info '
                 'FROM `{db}`.instance_info_caches '
                 'WHERE instance_uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, flavor, trusted_certs '
                 'FROM `{db}`.instance_extra WHERE instance_uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, `key`, value '
                 'FROM `{db}`.instance_metadata '
                 'WHERE deleted = 0 AND instance_uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, volume_id, delete_on_termination '
                 'FROM `{db}`.block_device_mapping WHERE deleted = 0 AND '
                 'instance_uuid IN (%s)'),
        ((2, 26), 'SELECT resource_id, tag FROM `{db}`.tags '
                  'WHERE resource_id IN (%s)'),
        ((2, 73), 'SELECT instance_uuid, `key`, value '
                  'FROM `{db}`.instance_system_metadata '
                  'WHERE instance_uuid IN (%s)'),
    )

    #: Threads at most (cells read at once).
    THREADS = 16

    def __init__(self, world: types.SimpleNamespace) -> None:
        #: Cell name -> (its server's URL without a database, database).
        self.cells: dict[str, tuple[str, str]] = {}
        for name, cell in world.cells.items():
            url = sa.engine.url.make_url(cell.url)
            self.cells[name] = (
                url.set(database='').render_as_string(hide_password=False),
                str(url.database))
        #: The API database, where the page's servers are placed.
        self.api = sa.create_engine(world.api_url)
        self.engines = {server: sa.create_engine(
            server, pool_size=self.THREADS, max_overflow=0)
            for server, _db in self.cells.values()}
        self.local = threading.local()
        self.connections: list[Any] = []
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max(1, min(len(self.cells), self.THREADS)))

    def close(self) -> None:
        self.pool.shutdown()
        for connection in self.connections:
            connection.close()
        for engine in self.engines.values():
            engine.dispose()
        self.api.dispose()

    def _connection(self, server: str) -> Any:
        """This thread's connection to *server*, opened once."""
        mine = getattr(self.local, 'connections', None)
        if mine is None:
            mine = self.local.connections = {}
        if server not in mine:
            mine[server] = self.engines[server].raw_connection()
            with self.lock:
                self.connections.append(mine[server])
        return mine[server]

    def placed(self, uuids: list[str]) -> dict[str, list[str]]:
        """*uuids* by the name of their cell (not timed)."""
        by_cell: dict[str, list[str]] = {}
        if not uuids:
            return by_cell
        with self.api.connect() as conn:
            rows = conn.execute(sa.text(
                'SELECT m.instance_uuid, c.name FROM instance_mappings m '
                'JOIN cell_mappings c ON c.id = m.cell_id '
                'WHERE m.instance_uuid IN :uuids').bindparams(
                    sa.bindparam('uuids', expanding=True)),
                {'uuids': uuids}).all()
        for uuid, cell in rows:
            by_cell.setdefault(cell, []).append(uuid)
        return by_cell

    def _read(self, cell: str, uuids: list[str],
              version: tuple[int, ...]) -> dict[str, int]:
        """Rows read of each table in *cell*, for *uuids*."""
        server, database = self.cells[cell]
        cursor = self._connection(server).cursor()
        marks = ', '.join(['%s'] * len(uuids))
        rows: dict[str, int] = {}
        try:
            for since, query in self.QUERIES:
                if version < since:
                    continue
                cursor.execute(query.format(db=database) % marks, uuids)
                table = query.split(' FROM `{db}`.', 1)[1].split()[0]
                rows[table] = len(cursor.fetchall())
        finally:
            cursor.close()
            # End the read's transaction: no metadata lock outlives it
            # (the run drops its databases at the end, also on Ctrl-C).
            self._connection(server).rollback()
        return rows

    def measure(self, body: bytes, version: str
                ) -> tuple[float, dict[str, int]]:
        """Read *body*'s rows and encode *body* once.

        :param version: the request's microversion (``2.1``).
        :returns: (seconds, rows read per table).
        """
        from oslo_serialization import jsonutils

        decoded = json.loads(body)
        by_cell = self.placed([server['id'] for server in decoded['servers']])
        at = tuple(int(n) for n in version.split('.'))
        start = time.perf_counter()
        futures = [self.pool.submit(self._read, cell, uuids, at)
                   for cell, uuids in by_cell.items()]
        read = [future.result() for future in futures]
        jsonutils.dumps(decoded)
        seconds = time.perf_counter() - start
        rows: dict[str, int] = {}
        for counts in read:
            for table, count in counts.items():
                rows[table] = rows.get(table, 0) + count
        return seconds, rows
