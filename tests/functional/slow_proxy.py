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

"""A TCP proxy on 127.0.0.1 that makes a server slow: a delay line.

:class:`SlowProxy` listens on a free loopback port and connects each
client to the upstream ``host:port``. Every chunk read from either side
is forwarded to the other :attr:`SlowProxy.latency` seconds after it was
read (the latency in force when it was read), in order: a slow network
link, not a slow server (chunks in flight overlap, throughput is kept).
The latency can be changed at any time; 0 forwards at once.

Threads only (no event loop): an acceptor, and per connection a reader
and a writer for each direction. An upstream that refuses the
connection closes the client's at once, as a dead server behind a
router would. :meth:`SlowProxy.cleanUp` closes the listener and every
connection and joins the threads.
"""

import collections
import socket
import threading
import time

import fixtures

#: Bytes read at once from a socket.
CHUNK = 65536


class _Direction:
    """One way of one connection: chunks read from *src*, due on *dst*."""

    def __init__(self, proxy: 'SlowProxy', src: socket.socket,
                 dst: socket.socket, done: 'threading.Semaphore') -> None:
        self.proxy = proxy
        self.src = src
        self.dst = dst
        #: Released by each direction's writer as it ends; the second
        #: one to end closes both sockets.
        self.done = done
        self.queue: collections.deque[tuple[float, bytes]] = (
            collections.deque())
        self.ready = threading.Condition()
        self.eof = False

    def read(self) -> None:
        """Read chunks until EOF or error; stamp each with its due time."""
        try:
            while True:
                data = self.src.recv(CHUNK)
                due = time.monotonic() + self.proxy.latency
                with self.ready:
                    if not data:
                        break
                    self.queue.append((due, data))
                    self.ready.notify()
        except OSError:
            pass
        finally:
            with self.ready:
                self.eof = True
                self.ready.notify()

    def write(self) -> None:
        """Send each chunk when due; at EOF shut the other side's writes."""
        try:
            while True:
                with self.ready:
                    while not self.queue and not self.eof:
                        self.ready.wait()
                    if not self.queue:
                        break
                    # Left in the queue until sent: pending() counts it.
                    due, data = self.queue[0]
                pause = due - time.monotonic()
                if pause > 0:
                    self.proxy.stopping.wait(pause)
                if self.proxy.stopping.is_set():
                    break
                self.dst.sendall(data)
                with self.ready:
                    self.queue.popleft()
            self.dst.shutdown(socket.SHUT_WR)
        except OSError:
            # The other side is gone: so is this connection, and what
            # was still to be forwarded.
            with self.ready:
                self.queue.clear()
            self.proxy.close_pair(self.src, self.dst)
            return
        if not self.done.acquire(blocking=False):
            # The other way ended already: the connection is over.
            self.proxy.close_pair(self.src, self.dst)


class SlowProxy(fixtures.Fixture):
    """Forward 127.0.0.1:``port`` to *upstream_port*, with a latency.

    :param upstream_port: the server's port on *upstream_host*.
    :param latency: seconds each chunk waits before it is forwarded,
        either way; :attr:`latency` may be set at any time.
    :param upstream_host: the server's address (loopback).

    ``connections`` counts the client connections accepted so far.
    """

    def __init__(self, upstream_port: int, latency: float = 0.0,
                 upstream_host: str = '127.0.0.1') -> None:
        super().__init__()
        self.upstream = (upstream_host, upstream_port)
        self.latency = latency
        self.connections = 0

    def _setUp(self) -> None:
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._directions: list[_Direction] = []
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(128)
        self.port = int(self.listener.getsockname()[1])
        self.addCleanup(self._stop)
        self._spawn(self._accept, 'slow-proxy-accept')

    def _spawn(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name,
                                  daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _addr = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self._spawn(self._connect, 'slow-proxy-conn', client)

    def _connect(self, client: socket.socket) -> None:
        """Connect upstream (at once), then pump both ways."""
        with self._lock:
            self._sockets.add(client)
        try:
            server = socket.create_connection(self.upstream, timeout=10)
            server.settimeout(None)
        except OSError:
            self.close_pair(client)
            return
        with self._lock:
            self._sockets.add(server)
        if self.stopping.is_set():
            self.close_pair(client, server)
            return
        done = threading.Semaphore(1)
        for src, dst, name in ((client, server, 'up'),
                               (server, client, 'down')):
            direction = _Direction(self, src, dst, done)
            with self._lock:
                self._directions.append(direction)
            self._spawn(direction.read, 'slow-proxy-read-' + name)
            self._spawn(direction.write, 'slow-proxy-write-' + name)

    def pending(self) -> int:
        """Chunks read and not forwarded yet, both ways, all connections.

        0 once everything sent while the latency was on has arrived.
        """
        with self._lock:
            directions = list(self._directions)
        total = 0
        for direction in directions:
            with direction.ready:
                total += len(direction.queue)
        return total

    def close_pair(self, *socks: socket.socket) -> None:
        """Close *socks* (both ends of a connection), once."""
        for sock in socks:
            with self._lock:
                self._sockets.discard(sock)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _stop(self) -> None:
        self.stopping.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self._lock:
            socks = list(self._sockets)
        self.close_pair(*socks)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(5)


def closed_port():
    """A loopback port nothing listens on (connections are refused)."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port
