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

"""A real placement API over HTTP on 127.0.0.1, for commands to reach.

:class:`PlacementServer` runs placement's WSGI app (its own in-memory
database, noauth2) on a free loopback port in a thread of this process;
a subprocess reaches it with keystoneauth's ``admin_token`` plugin
(:meth:`PlacementServer.nova_conf` writes that ``[placement]`` section).
"""

import threading
from typing import Any
from wsgiref import simple_server

import fixtures
from placement import deploy
from placement.tests.functional.fixtures import placement as placement_fx


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class PlacementServer(fixtures.Fixture):
    """placement on ``endpoint`` (``http://127.0.0.1:PORT``)."""

    def _setUp(self) -> None:
        fixture = self.useFixture(placement_fx.PlacementFixture(
            use_intercept=False))
        server = simple_server.make_server(
            '127.0.0.1', 0, deploy.loadapp(fixture.conf_fixture.conf),
            handler_class=_QuietHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.endpoint = 'http://127.0.0.1:%d' % server.server_port


def nova_conf(endpoint: str) -> str:
    """nova.conf's ``[placement]`` section reaching *endpoint*.

    keystoneauth's ``admin_token`` with token ``admin``, which
    placement's noauth2 accepts.
    """
    return ('[placement]\nauth_type = admin_token\nendpoint = %s\n'
            'token = admin\n' % endpoint)
