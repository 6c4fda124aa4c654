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

"""Test helpers for the scheduler's process-wide policy (scheduler.state).

A nova-scheduler builds its shared policy once; tests build many
schedulers and filters in one process, each with its own options.
"""

import fixtures

from nova_cellsched.scheduler import periodic_sync
from nova_cellsched.scheduler import state


class FreshPolicy(fixtures.Fixture):
    """No shared policy when the test starts; the one it had, after.

    The next ProjectCellFilter (or pre-filter request) builds the policy
    from the options in force then, as a starting nova-scheduler does.

    :param shared: a :class:`state.SharedPolicy` to start with instead
        (one with a test clock, say).
    """

    def __init__(self, shared=None):
        super().__init__()
        self._shared = shared

    def _setUp(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state._shared', self._shared))
        # The periodic sync too: built afresh by the next filter, and
        # stopped at the end of the test if it runs.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.periodic_sync._worker', None))
        self.addCleanup(_stop_periodic_sync)

    def install(self, shared):
        """Make *shared* the process's policy until the fixture ends."""
        state._shared = shared


def _stop_periodic_sync():
    worker = periodic_sync.get()
    if worker is not None:
        worker.stop(timeout=60)


def sighup(conf_obj):
    """Apply *conf_obj*'s values now, as nova-scheduler's SIGHUP does.

    ``self.flags()`` changes values without running oslo.config's mutate
    hooks; this runs the ones the scheduler's policy and periodic sync
    registered.
    """
    state.reload_hook(conf_obj, {})
    periodic_sync.reload_hook(conf_obj, {})
