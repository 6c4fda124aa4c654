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

"""The one base of every test, unit and functional.

:class:`TestCase` is oslotest's base (a timeout, output and log capture
as tox's ``OS_*`` variables ask, a temporary ``HOME``) with what this
plugin's tests share: ``flags()`` on nova's ``CONF``, as nova's tests
spell it, and the process-wide cell health forgotten around each test.

:class:`NovaTestCase` is the same base on nova's own ``test.TestCase``,
for tests that run nova's services in-process (its database and cell
fixtures, its API, its placement fixture): nova's setUp then does the
log capture, and oslotest's the timeout and output capture, as for
nova's own tests.

The harnesses (worlds, database servers, uwsgi) are fixtures in
:mod:`tests.fixtures`, not base classes.
"""

import sys

import nova.conf
from nova import test as nova_test
from oslo_config import fixture as config_fixture
from oslotest import base

from nova_cellsched import conf

#: Modules holding a process-wide :class:`nova_cellsched.health.CellHealth`
#: as ``HEALTH``: forgotten before and after each test, when loaded.
_HEALTH_HOLDERS = ('nova_cellsched.api.hooks.pool',
                   'nova_cellsched.scheduler.bounded_reads')


def _forget_cell_health() -> None:
    for name in _HEALTH_HOLDERS:
        module = sys.modules.get(name)
        if module is not None:
            module.HEALTH.forget()


class TestCase(base.BaseTestCase):
    """Base of every test of this plugin."""

    def setUp(self) -> None:
        super().setUp()
        _forget_cell_health()
        self.addCleanup(_forget_cell_health)
        self._flags_fixture = None

    def flags(self, **kw: object) -> None:
        """Override options of nova's ``CONF`` for this test.

        As nova's ``test.TestCase.flags``: ``group=`` names the group,
        every other keyword an option. The plugin's ``[cellsched]``
        options are registered first. oslo.config's mutate hooks do not
        run (see :func:`tests.fixtures.scheduler_state.sighup`).
        """
        if self._flags_fixture is None:
            conf.register_opts(nova.conf.CONF)
            self._flags_fixture = self.useFixture(
                config_fixture.Config(nova.conf.CONF))
        self._flags_fixture.config(**kw)


class NovaTestCase(nova_test.TestCase, TestCase):
    """:class:`TestCase` on nova's ``test.TestCase``.

    nova's setUp builds its world (configuration, databases and cell
    mappings, policy, logging); ``flags`` is nova's own. oslotest's base
    runs once under both (timeout and output capture, as for nova's own
    tests; nova turns oslotest's log capture off for its own
    ``StandardLogging``).
    """
