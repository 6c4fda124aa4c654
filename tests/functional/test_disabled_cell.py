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

"""A cell disabled in nova, with ProjectCellFilter and the pre-filter.

``nova-manage cell_v2 update_cell --disable`` and a SIGHUP stop
nova-scheduler from sending new servers to a cell: its HostManager
reads the hosts of its ``enabled_cells`` only, which it refreshes at
start and on SIGHUP, never in between; a move pinned to the cell by the
conductor still goes there. The plugin must keep that, with the
pre-filter off and on, in both forms of the default cells: the
reference in every test is the same request with the pre-filter off
(ProjectCellFilter alone, which is nova's own behaviour restricted to
the allowed cells).

The machinery of :mod:`.test_placement_prefilter` (API, conductor,
scheduler, fake computes, nova's in-process placement)::

    cell1  big1 big2 big3   cells_default
    cell2  small1 small2    dedicated:      cells_projects = cell2:MAPPED
    cell3  c3a c3b          named nowhere

A SIGHUP here is what oslo.service runs for one: ``CONF``'s mutate hooks
(``mutate_config_files()``), then the scheduler manager's ``reset()``
(nova refreshes its cell caches).
"""

# nova.tests first: importing it applies nova's eventlet monkey patching.
from nova.tests.functional import integrated_helpers  # noqa: F401,I001

import time

from nova import context as nova_context
from nova import objects
import testscenarios

from nova_cellsched.scheduler import state
from tests.functional import test_placement_prefilter as prefilter_base
from tests.functional import test_project_cell_filter as base

MAPPED = base.MAPPED
UNMAPPED = base.UNMAPPED


class DisabledCellTestBase(prefilter_base.PrefilterTestBase):
    """Helpers: disable, enable, rename a cell; a real SIGHUP."""

    def _update_cell(self, cell_name, name=None, disable=False,
                     enable=False):
        """``nova-manage cell_v2 update_cell --cell_uuid <cell> ...``.

        What its ``--name``, ``--disable`` and ``--enable`` save in the
        cell mapping; not the command itself, which also sets the
        database connection to ``[database] connection`` when none is
        given, and nova's test fixture finds a cell's database by that
        value.
        """
        cell = objects.CellMapping.get_by_uuid(
            nova_context.get_admin_context(), self.cell_uuids[cell_name])
        if name:
            cell.name = name
        if disable or enable:
            self.assertNotEqual(disable, enable)
            cell.disabled = disable
        cell.save()

    def _sighup(self):
        """What nova-scheduler runs on SIGHUP: mutate hooks, then reset.

        The scheduler manager's ``reset()`` (nova's SIGHUP handler), not
        the service's: that one also empties ``nova.context.CELL_CACHE``,
        where nova's test fixture keeps the cell databases.
        """
        state.CONF.mutate_config_files()
        self.scheduler_service.manager.reset()

    def _landing(self, project_id):
        """Boot one server: its cell, or 'NoValidHost'."""
        server = self._boot_any(project_id)
        if server['status'] == 'ERROR':
            self.assertNoValidHost(server)
            return 'NoValidHost'
        self.assertEqual('ACTIVE', server['status'])
        return self._cell_of(server)

    def _boot_any(self, project_id):
        """Boot one server; return it once ACTIVE, or ERROR with its fault.
        """
        body = self._build_server(flavor_id=base.FLAVOR_TINY,
                                  networks='none')
        server = self._api_for(project_id).post_server({'server': body})
        for _ in range(600):
            server = self.admin_api.get_server(server['id'])
            if server['status'] == 'ACTIVE' or (
                    server['status'] == 'ERROR' and 'fault' in server):
                return server
            time.sleep(0.05)
        self.fail('server %s is still %s after 30 seconds' % (
            server['id'], server['status']))

    def _outcomes(self, project_id):
        """The outcome with the pre-filter off, then on."""
        results = []
        for enabled in (False, True):
            self._prefilter(enabled)
            results.append(self._landing(project_id))
        return results


class DisabledCellTest(testscenarios.WithScenarios, DisabledCellTestBase):
    """A disabled cell gets what nova gives it, pre-filter off or on."""

    scenarios = [('member_of', dict(form='member_of')),
                 ('forbidden', dict(form='forbidden'))]

    def setUp(self):
        super().setUp()
        self.flags(placement_prefilter_form=self.form, group='cellsched')
        self._sync()

    def test_project_of_disabled_cell_gets_no_valid_host_as_in_nova(self):
        """Dedicated to a disabled cell: NoValidHost, as in nova.

        cell2, MAPPED's only cell, is disabled and nova-scheduler is
        SIGHUP'd: nova does not read cell2's hosts, so the boot fails
        with the pre-filter off; with it on it fails the same way (the
        pre-filter used to name cell2 to nova's HostManager, which then
        read cell2's hosts although the cell is disabled). Enabled again
        and SIGHUP'd, cell2 gets MAPPED's servers again.
        """
        self._update_cell('cell2', disable=True)
        self._sighup()
        self.assertEqual(['NoValidHost', 'NoValidHost'],
                         self._outcomes(MAPPED))
        # Other projects are not affected.
        self.assertEqual(['cell1', 'cell1'], self._outcomes(UNMAPPED))

        self._update_cell('cell2', enable=True)
        self._sighup()
        self.assertEqual(['cell2', 'cell2'], self._outcomes(MAPPED))

    def test_only_default_cell_disabled_gives_no_valid_host_as_in_nova(self):
        """The one default cell disabled: NoValidHost for unmapped projects.

        In the member_of form the pre-filter asks placement for cell1's
        aggregate only, the case where it used to name cell1.
        """
        self._update_cell('cell1', disable=True)
        self._sighup()
        self.assertEqual(['NoValidHost', 'NoValidHost'],
                         self._outcomes(UNMAPPED))
        self.assertEqual(['cell2', 'cell2'], self._outcomes(MAPPED))

        self._update_cell('cell1', enable=True)
        self._sighup()
        self.assertEqual(['cell1', 'cell1'], self._outcomes(UNMAPPED))

    def test_disable_and_enable_apply_at_the_sighup_as_in_nova(self):
        """Between ``update_cell`` and the SIGHUP nova uses the old state.

        nova-scheduler reads its enabled cells at start and on SIGHUP
        only: a cell disabled since still gets servers, a cell enabled
        since still gets none, until the SIGHUP; the pre-filter does the
        same, and sees the change at the SIGHUP, not after ``[cellsched]
        cell_cache_ttl`` (300 seconds by default).
        """
        self._update_cell('cell2', disable=True)
        self.assertEqual(['cell2', 'cell2'], self._outcomes(MAPPED))
        self._sighup()
        self.assertEqual(['NoValidHost', 'NoValidHost'],
                         self._outcomes(MAPPED))
        # The policy read the cells at the SIGHUP: it says so.
        self.assertIn("[cellsched] cell disabled in nova 'cell2'",
                      self.stdlog.logger.output)

        self._update_cell('cell2', enable=True)
        self.assertEqual(['NoValidHost', 'NoValidHost'],
                         self._outcomes(MAPPED))
        self._sighup()
        self.assertEqual(['cell2', 'cell2'], self._outcomes(MAPPED))

    def test_move_pinned_to_disabled_cell_stays_there_as_in_nova(self):
        """nova honours the pinned cell of a move, disabled or not.

        A server of MAPPED in cell2; cell2 disabled and SIGHUP'd: a cold
        migration (the conductor pins cell2) goes to cell2's other host.
        """
        self._prefilter(True)
        server = self._boot(MAPPED)
        self.assertEqual('cell2', self._cell_of(server))
        self._update_cell('cell2', disable=True)
        self._sighup()

        source = server['OS-EXT-SRV-ATTR:host']
        server = self._migrate_server(server)
        self.assertEqual('VERIFY_RESIZE', server['status'])
        self.assertEqual('cell2', self._cell_of(server))
        self.assertNotEqual(source, server['OS-EXT-SRV-ATTR:host'])
        self._confirm_resize(server)


class SighupReadsCellsTest(DisabledCellTestBase):
    """Every SIGHUP reads the cell mappings again, options changed or not."""

    def test_renamed_cell_seen_at_sighup_not_after_cell_cache_ttl(self):
        """A cell renamed to the name the options use works after SIGHUP.

        ``cells_projects`` names 'smallcell', which no cell has: MAPPED
        gets NoValidHost. cell2 is renamed 'smallcell'; the options do
        not change, ``cell_cache_ttl`` is an hour, and the SIGHUP alone
        makes the scheduler resolve the name.
        """
        self.flags(cell_cache_ttl=3600, group='cellsched')
        self._set_cells(default=['cell1'], projects='smallcell:' + MAPPED)
        self.assertEqual('NoValidHost', self._landing(MAPPED))

        self._update_cell('cell2', name='smallcell')
        self._sighup()
        self.assertEqual('cell2', self._landing(MAPPED))
