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

"""Nova scheduler host filter: send each project's servers to its cells.

Enable it in nova.conf of nova-scheduler::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_cellsched.filters.ProjectCellFilter
    enabled_filters = ComputeFilter,...,ProjectCellFilter

nova has no entry point for request filters: when nova-scheduler builds
this filter (it builds the enabled filters once, at start), the filter
registers its placement half,
:func:`~nova_cellsched.scheduler.request_filter.require_cell_aggregates`,
and sets up the periodic sync of the cell aggregates
(:mod:`~nova_cellsched.scheduler.periodic_sync`, started only with
``[cellsched] aggregate_sync_interval``). Importing this module changes
nothing in nova.
"""

from typing import Any

from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_cellsched.scheduler import bounded_reads
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler import periodic_sync
from nova_cellsched.scheduler import request_filter
from nova_cellsched.scheduler import state

LOG = logging.getLogger(__name__)


class ProjectCellFilter(filters.BaseHostFilter):
    """Send new servers only to the cells allowed for their project.

    ``D`` is ``[cellsched] cells_default``, ``P(p)`` the cells that
    ``[cellsched] cells_projects`` dedicates to project ``p``:

    ======================================  ==============================
    request                                 host passes when its cell is
    ======================================  ==============================
    D and cells_projects both empty         any cell (filter is inert)
    new server, p named in cells_projects   in P(p), never a D cell
    new server, p not named                 in D
    new server, cell in neither option      never (the cell is disabled)
    same-cell move (cell pinned by the      the instance's cell, even if
    conductor: resize, migrate, evacuate,   disabled or not allowed for p
    unshelve)
    cross-cell resize                       in P(p), or D if p not named
    rebuild                                 not asked (RUN_ON_REBUILD)
    ======================================  ==============================

    Names that match no cell mapping, or several, grant nothing: a project
    whose only cells are such names gets NoValidHost, never the defaults.

    With ``[cellsched] placement_prefilter`` the same decision
    (:func:`.decision.allowed_cells`, same :mod:`.state`) is also given to
    placement before any host is offered, by
    :func:`~nova_cellsched.scheduler.request_filter.require_cell_aggregates`;
    this filter stays the check after placement.
    """

    # The project, the move and so the allowed cells are the same for every
    # instance of a multi-create request.
    run_filter_once_per_request = True

    # A rebuild stays on its host; the cell was decided when it was built.
    RUN_ON_REBUILD = False

    def __init__(self) -> None:
        super().__init__()
        # Fails here, so the scheduler does not start, on a malformed value.
        # Then the cell mappings are read, as nova's HostManager has just
        # read its cells before building its filters: the cells nova
        # schedules to are the enabled ones of this read until a SIGHUP.
        state.get().cache.reset()
        # The filter nova-scheduler builds installs its placement half;
        # idempotent, and a no-op until [cellsched] placement_prefilter.
        request_filter.register()
        # nova-scheduler's reads of every cell, bounded with
        # [cellsched] scheduler_cell_timeout (nova's own while it is 0).
        bounded_reads.register()
        # Once per process; a thread only with [cellsched]
        # aggregate_sync_interval. A bad interval stops the scheduler here.
        periodic_sync.setup()

    def _allowed_cells(self, spec_obj: Any,
                       hosts: list[Any]) -> frozenset[str] | None:
        return decision.allowed_cells(state.get().cache, spec_obj,
                                      {h.cell_uuid for h in hosts})

    def filter_all(self, filter_obj_list: Any, spec_obj: Any) -> list[Any]:
        """Return the hosts in the cells the request may use."""
        hosts = list(filter_obj_list)
        if not hosts or scheduler_utils.request_is_rebuild(spec_obj):
            return hosts
        allowed = self._allowed_cells(spec_obj, hosts)
        if allowed is None:
            return hosts
        passed = [h for h in hosts if h.cell_uuid in allowed]
        if LOG.isEnabledFor(logging.DEBUG) and len(passed) < len(hosts):
            for host in hosts:
                if host.cell_uuid not in allowed:
                    LOG.debug('%(host)s fails: its cell %(cell)s is not '
                              'one of the cells %(allowed)s allowed for '
                              'project %(project)s',
                              {'host': host, 'cell': host.cell_uuid,
                               'allowed': sorted(allowed),
                               'project': spec_obj.project_id})
        if not passed:
            LOG.info('No host passed: project %(project)s may use cells '
                     '%(allowed)s, the %(count)d candidate host(s) are in '
                     'cells %(cells)s (see [cellsched] cells_default and '
                     'cells_projects)',
                     {'project': spec_obj.project_id,
                      'allowed': sorted(allowed) or 'none',
                      'count': len(hosts),
                      'cells': sorted({str(h.cell_uuid) for h in hosts})})
        return passed

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        """Return True when *host_state*'s cell is allowed for the request.

        Nova calls :meth:`filter_all`; this is the same decision for one
        host, for callers that filter host by host.
        """
        return bool(self.filter_all([host_state], spec_obj))

