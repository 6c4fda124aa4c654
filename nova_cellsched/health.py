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

"""The cells this process found not answering, held down for a while.

A cell whose bounded read did not answer (it timed out, or its database
refused the connection) is *held down* for ``hold_down`` seconds: the
reads that consult :class:`CellHealth` in that time do not wait for it
(they report it down at once, as for a cell that did not answer), while
one probe at a time, about every ``probe_interval`` seconds (jittered
by half of it either way, so that the API workers of a region do not
probe in step), reads it in the background. A probe that answers ends
the hold-down at once; one that does not extends it. Once the hold-down
ends without a probe answering, the next read asks the cell and waits
for it as usual.

=================  =============================  ========================
the cell           a read                          a probe
=================  =============================  ========================
healthy            asks it, waits for it           none
held down          reports it down, does not wait  one at a time, in the
                                                   background, when due
held, probe ok     (the hold-down ends)            -
hold-down over     asks it, waits for it           none
=================  =============================  ========================

Per process: each nova-api worker learns of a cell's trouble by its own
reads. Nothing here changes what a read answers about a healthy cell.

No nova import.
"""

from collections.abc import Callable
import dataclasses
import random
import threading
import time

from oslo_db import exception as db_exception
from oslo_log import log as logging

from nova_cellsched import guard

LOG = logging.getLogger(__name__)


def not_answering(error: BaseException | None) -> bool:
    """Whether a bounded read's *error* says its cell did not answer.

    Its database refused or dropped the connection, or kept silent past
    the read's I/O bound (:func:`nova_cellsched.guard.io_timeout` ends
    it with a lost connection, which oslo.db raises as
    ``DBConnectionError``). Any other error is the cell's answer.
    """
    return isinstance(error, (guard.ConnectFailed,
                              db_exception.DBConnectionError))


@dataclasses.dataclass
class _Held:
    until: float
    next_probe: float
    why: str
    probing: bool = False


class CellHealth:
    """Per cell: held down after a read it did not answer, or healthy.

    :param hold_down: seconds a cell stays held down after a failed read
        (0: never held).
    :param probe_interval: seconds between probes of a held cell, about.
    """

    def __init__(self, hold_down: float = 0.0, probe_interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 jitter: Callable[[float, float], float] = random.uniform
                 ) -> None:
        self.hold_down = hold_down
        self.probe_interval = probe_interval
        self._clock = clock
        self._jitter = jitter
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}

    def configure(self, hold_down: float, probe_interval: float) -> None:
        """New settings; a cell held down now keeps its hold-down."""
        with self._lock:
            self.hold_down = hold_down
            self.probe_interval = probe_interval

    def _next_probe(self, now: float) -> float:
        half = self.probe_interval / 2
        return now + self._jitter(self.probe_interval - half,
                                  self.probe_interval + half)

    def failed(self, cell: str, why: str) -> None:
        """*cell* did not answer a bounded read: hold it down (again)."""
        if self.hold_down <= 0:
            return
        now = self._clock()
        with self._lock:
            held = self._held.get(cell)
            new = held is None or now >= held.until
            if held is None:
                held = self._held[cell] = _Held(
                    0.0, self._next_probe(now), why)
            held.until = now + self.hold_down
            held.why = why
        if new:
            LOG.warning('Cell %(cell)s did not answer (%(why)s): reads in '
                        'this process do not wait for it for %(hold).0f s, '
                        'while a probe reads it about every %(probe).1f s',
                        {'cell': cell, 'why': why, 'hold': self.hold_down,
                         'probe': self.probe_interval})

    def answered(self, cell: str) -> None:
        """*cell* answered a read: healthy from now on."""
        with self._lock:
            held = self._held.pop(cell, None)
        if held is not None:
            LOG.info('Cell %s answers again: reads wait for it again', cell)

    def held(self, cell: str) -> bool:
        """Whether reads should not wait for *cell* now."""
        now = self._clock()
        with self._lock:
            held = self._held.get(cell)
            return held is not None and now < held.until

    def claim_probe(self, cell: str) -> bool:
        """Whether the caller should probe *cell* now.

        True when it is held, its probe is due and none runs; the caller
        must then call :meth:`probed`.
        """
        now = self._clock()
        with self._lock:
            held = self._held.get(cell)
            if (held is None or now >= held.until or held.probing or
                    now < held.next_probe):
                return False
            held.probing = True
            return True

    def probed(self, cell: str, answered: bool, why: str = '') -> None:
        """How the probe :meth:`claim_probe` gave ended."""
        if answered:
            self.answered(cell)
            return
        now = self._clock()
        with self._lock:
            held = self._held.get(cell)
            if held is None:
                return
            held.probing = False
            held.next_probe = self._next_probe(now)
            held.until = max(held.until, now + self.hold_down)
            held.why = why or held.why

    def snapshot(self) -> dict[str, float]:
        """Cell -> seconds of hold-down left, for the cells held now."""
        now = self._clock()
        with self._lock:
            return {cell: held.until - now
                    for cell, held in self._held.items() if now < held.until}

    def forget(self) -> None:
        """Hold no cell: in a forked child, or a test.

        A new lock: a thread of the parent may have held the old one.
        """
        self._lock = threading.Lock()
        self._held = {}
