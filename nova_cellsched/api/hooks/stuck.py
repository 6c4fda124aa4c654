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

"""Per cell, the queries a listing gave up on that still run.

A thread cannot be killed: a query sent to a cell database that stops
answering keeps its worker and its connection until the driver gives
up. :class:`StuckQueries` counts them per cell; at a cap the listing
reports the cell down at once instead of sending it another query (a
circuit breaker that closes by itself when the stuck queries end). It
is read by listings only.
"""

import collections
import dataclasses
import threading


@dataclasses.dataclass
class Query:
    """One query sent to one cell, as :class:`StuckQueries` tracks it."""

    cell: str
    started: bool = False
    finished: bool = False
    abandoned: bool = False


class StuckQueries:
    """Per cell, the queries given up on that are still running."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stuck: collections.Counter[str] = collections.Counter()

    def forget(self) -> None:
        """Count nothing: in a forked child, whose threads are gone."""
        self._lock = threading.Lock()
        self._stuck = collections.Counter()

    def count(self, cell: str) -> int:
        with self._lock:
            return self._stuck[cell]

    def snapshot(self) -> dict[str, int]:
        """Cell uuid -> stuck queries, for cells that have any."""
        with self._lock:
            return {cell: n for cell, n in self._stuck.items() if n}

    def begin(self, query: Query) -> bool:
        """Mark *query* running; False if it was given up on already."""
        with self._lock:
            if query.abandoned:
                return False
            query.started = True
            return True

    def end(self, query: Query) -> None:
        with self._lock:
            query.finished = True
            if query.abandoned and query.started:
                self._stuck[query.cell] -= 1

    def abandon(self, query: Query) -> None:
        """The listing stopped waiting for *query*.

        Counted as stuck only while it runs: one that never started will
        not start any more (see :meth:`begin`).
        """
        with self._lock:
            if query.finished or query.abandoned:
                return
            query.abandoned = True
            if query.started:
                self._stuck[query.cell] += 1
