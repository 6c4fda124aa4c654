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

"""A peer that says nothing until released: a frozen cell, in a test.

A listing charges a cell only for the time its query's thread sleeps
waiting on I/O (:mod:`nova_cellsched.silence`); a task blocked on a
``threading.Event`` waits on a lock, as a busy process does, and is
never charged. :class:`Silence` has ``threading.Event``'s ``wait``,
``set`` and ``is_set``, but its waiters sleep in ``select()`` on a
socket whose peer sends nothing until :meth:`Silence.set`: to the
listing they are queries on a frozen database.
"""

import select
import socket
import threading


class Silence:
    """``threading.Event``'s interface; its waiters wait on a socket."""

    def __init__(self) -> None:
        self._ours, self._peer = socket.socketpair()
        self._lock = threading.Lock()
        self._set = False

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep on the socket until :meth:`set`; False after *timeout*."""
        readable, _, _ = select.select([self._ours], [], [], timeout)
        return bool(readable)

    def set(self) -> None:
        """End of the silence: every waiter, now and later, wakes."""
        with self._lock:
            if not self._set:
                self._set = True
                self._peer.shutdown(socket.SHUT_WR)

    def is_set(self) -> bool:
        return self._set

    def close(self) -> None:
        """Wake every waiter and close both ends."""
        self.set()
        self._ours.close()
        self._peer.close()
