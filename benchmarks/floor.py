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
import time
import types
from typing import Any

import sqlalchemy as sa


class Floor:
    """The floor of a response: its rows read with plain SQL, its body encoded.

    What no nova-api can go below with nova's database and nova's JSON:
    the servers of the page read from their cells with one PyMySQL
    connection per cell, in parallel (threads, as ours asks the cells),
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
        ((2, 1), 'SELECT * FROM instances WHERE uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, network_info '
                 'FROM instance_info_caches WHERE instance_uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, flavor, trusted_certs '
                 'FROM instance_extra WHERE instance_uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, `key`, value FROM instance_metadata '
                 'WHERE deleted = 0 AND instance_uuid IN (%s)'),
        ((2, 1), 'SELECT instance_uuid, volume_id, delete_on_termination '
                 'FROM block_device_mapping WHERE deleted = 0 AND '
                 'instance_uuid IN (%s)'),
        ((2, 26), 'SELECT resource_id, tag FROM tags '
                  'WHERE resource_id IN (%s)'),
        ((2, 73), 'SELECT instance_uuid, `key`, value '
                  'FROM instance_system_metadata '
                  'WHERE instance_uuid IN (%s)'),
    )

    def __init__(self, world: types.SimpleNamespace) -> None:
        self.world = world
        self.engines = {name: sa.create_engine(cell.url)
                        for name, cell in world.cells.items()}
        self.connections: dict[str, Any] = {}
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max(1, len(self.engines)))

    def close(self) -> None:
        self.pool.shutdown()
        for connection in self.connections.values():
            connection.close()
        for engine in self.engines.values():
            engine.dispose()

    def placed(self, body: bytes) -> dict[str, list[str]]:
        """The page's uuids by the name of their cell (not timed)."""
        uuids = [server['id'] for server in json.loads(body)['servers']]
        by_cell: dict[str, list[str]] = {}
        if not uuids:
            return by_cell
        engine = sa.create_engine(self.world.api_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(sa.text(
                    'SELECT m.instance_uuid, c.name FROM instance_mappings m '
                    'JOIN cell_mappings c ON c.id = m.cell_id '
                    'WHERE m.instance_uuid IN :uuids').bindparams(
                        sa.bindparam('uuids', expanding=True)),
                    {'uuids': uuids}).all()
        finally:
            engine.dispose()
        for uuid, cell in rows:
            by_cell.setdefault(cell, []).append(uuid)
        return by_cell

    def _read(self, cell: str, uuids: list[str],
              version: tuple[int, ...]) -> dict[str, int]:
        """Rows read of each table in *cell*, for *uuids*."""
        if cell not in self.connections:
            self.connections[cell] = self.engines[cell].raw_connection()
        cursor = self.connections[cell].cursor()
        marks = ', '.join(['%s'] * len(uuids))
        rows: dict[str, int] = {}
        try:
            for since, query in self.QUERIES:
                if version < since:
                    continue
                cursor.execute(query % marks, uuids)
                table = query.split(' FROM ', 1)[1].split()[0]
                rows[table] = len(cursor.fetchall())
        finally:
            cursor.close()
        return rows

    def measure(self, body: bytes, version: str
                ) -> tuple[float, dict[str, int]]:
        """Read *body*'s rows and encode *body* once.

        :param version: the request's microversion (``2.1``).
        :returns: (seconds, rows read per table).
        """
        from oslo_serialization import jsonutils

        by_cell = self.placed(body)
        decoded = json.loads(body)
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
