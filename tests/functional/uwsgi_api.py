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

"""A real nova-api for the tests: nova 34 under uwsgi, as fixtures.

The machinery is :mod:`nova_cellsched.demo.api` (``nova-cellsched demo
--api`` serves the demo world with it): the nova.conf, the
``api-paste.ini`` with the noauth stand-in for keystone's ``authtoken``
and the ``cellsched`` filter where the guide puts it, the uwsgi ini
written as devstack writes it, and the neutron stand-in. Here they are
fixtures on a :class:`tests.functional.mariadb_server.World`.
"""

import os
import sys
from typing import Any

import fixtures

from nova_cellsched.demo import api as demo_api
from tests.functional import mariadb_server as mdb
from tests.functional import nova_api

#: The uwsgi binary: the one installed in this venv, or the override.
UWSGI = os.environ.get('NOVA_CELLSCHED_TEST_UWSGI',
                       os.path.join(os.path.dirname(sys.executable),
                                    'uwsgi'))
TOKEN = demo_api.TOKEN
NOAUTH = demo_api.NOAUTH
FILTER = nova_api.FILTER
APP = nova_api.APP
noauth_filter_factory = demo_api.noauth_filter_factory
write_paste = demo_api.write_paste
pipelines = demo_api.pipelines
UwsgiError = demo_api.UwsgiError
BOUNDED_MODULE = demo_api.BOUNDED_MODULE
NOVA_MODULE = demo_api.NOVA_MODULE


def unavailable() -> str | None:
    """Why uwsgi cannot run here, or None."""
    return demo_api.uwsgi_missing(UWSGI) or mdb.unavailable()


class FakeNeutron(fixtures.Fixture):
    """:class:`demo_api.NeutronStandIn` as a fixture: no port, no group."""

    def _setUp(self) -> None:
        self.stand_in = demo_api.NeutronStandIn()
        self.stand_in.start()
        self.addCleanup(self.stand_in.stop)
        self.url = self.stand_in.url


class UwsgiNovaApi(fixtures.Fixture, demo_api.UwsgiNovaApi):
    """nova-api under uwsgi on 127.0.0.1, on *world*'s databases.

    :param world: a :class:`tests.functional.mariadb_server.World`;
        nova-api's own ``[database]`` is its first cell besides cell0.

    The other parameters are :class:`demo_api.UwsgiNovaApi`'s. ``url``
    is the compute endpoint (``.../v2.1``); ``log`` uwsgi's log
    (nova-api's log lines included).
    """

    def __init__(self, world: Any, neutron_url: str,
                 **kwargs: Any) -> None:
        fixtures.Fixture.__init__(self)
        first = next(c for c in world.cells.values() if c.name != 'cell0')
        demo_api.UwsgiNovaApi.__init__(self, world.api_url, first.url,
                                       neutron_url, uwsgi=UWSGI, **kwargs)
        self.world = world

    def _setUp(self) -> None:
        problem = unavailable()
        if problem:
            raise UwsgiError(problem)
        self.addCleanup(self.shutdown)
        self.launch()
