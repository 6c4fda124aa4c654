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

"""The slow TCP proxy the fault tests put in front of a cell database.

An echo server on loopback stands for the database: bytes go through
the proxy both ways, unchanged and in order, each way late by the
latency in force, which can be switched on and off while connected.
No database, no nova.
"""

import socket
import threading
import time


from tests import base
from tests.fixtures import slow_proxy


class EchoServer:
    """Echoes every byte back on each connection; a thread per client."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,),
                             daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                conn.sendall(data)

    def close(self) -> None:
        try:
            # Wakes the accepting thread; a bare close would not.
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class SlowProxyTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.echo = EchoServer()
        self.addCleanup(self.echo.close)
        self.proxy = self.useFixture(slow_proxy.SlowProxy(self.echo.port))

    def connect(self):
        client = socket.create_connection(('127.0.0.1', self.proxy.port),
                                          timeout=10)
        self.addCleanup(client.close)
        return client

    def round_trip(self, client, data):
        """Send *data*, read it back whole: (bytes, seconds)."""
        start = time.monotonic()
        client.sendall(data)
        got = b''
        while len(got) < len(data):
            chunk = client.recv(65536)
            if not chunk:
                break
            got += chunk
        return got, time.monotonic() - start

    def test_forwards_both_ways_unchanged(self):
        """Bytes reach the server and its answer the client, in order."""
        client = self.connect()
        data = bytes(range(256)) * 2000   # many chunks
        got, _ = self.round_trip(client, data)
        self.assertEqual(data, got)
        self.assertEqual(1, self.proxy.connections)

    def test_delays_each_way_and_can_be_switched(self):
        """A round trip takes two latencies while on; none once off.

        What is on its way counts as pending until it is forwarded.
        """
        client = self.connect()
        self.proxy.latency = 0.5
        start = time.monotonic()
        client.sendall(b'ping')
        time.sleep(0.1)
        self.assertEqual(1, self.proxy.pending())
        got = client.recv(4)
        seconds = time.monotonic() - start
        self.assertEqual(b'ping', got)
        # The writer takes a chunk off its queue just after sending it:
        # the client can read it a moment before pending() drops.
        settle = time.monotonic() + 5.0
        while self.proxy.pending() and time.monotonic() < settle:
            time.sleep(0.01)
        self.assertEqual(0, self.proxy.pending())
        # Two crossings of 0.5 s each; a generous ceiling for a busy box.
        self.assertGreaterEqual(seconds, 1.0)
        self.assertLess(seconds, 10.0)
        self.proxy.latency = 0.0
        got, seconds = self.round_trip(client, b'pong')
        self.assertEqual(b'pong', got)
        self.assertLess(seconds, 0.9)

    def test_end_of_stream_is_forwarded(self):
        """The client's EOF reaches the server, which closes: EOF back."""
        client = self.connect()
        client.sendall(b'bye')
        client.shutdown(socket.SHUT_WR)
        got = b''
        while True:
            chunk = client.recv(4096)
            if not chunk:
                break
            got += chunk
        self.assertEqual(b'bye', got)

    def test_refused_upstream_closes_the_client(self):
        """A dead server behind the proxy: the client sees EOF at once."""
        with socket.socket() as unused:
            unused.bind(('127.0.0.1', 0))
            port = unused.getsockname()[1]
        dead = self.useFixture(slow_proxy.SlowProxy(port))
        client = socket.create_connection(('127.0.0.1', dead.port),
                                          timeout=10)
        self.addCleanup(client.close)
        try:
            self.assertEqual(b'', client.recv(10))
        except ConnectionResetError:
            pass
