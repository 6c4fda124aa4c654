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

"""Placement pre-filter: ask placement only for the allowed cells' hosts.

Nova asks placement for at most ``[scheduler] max_placement_results``
allocation candidates before any host filter runs, so
:class:`~.host_filter.ProjectCellFilter` cannot bring back a host of a
project's cell that placement cut. Like nova's ``require_tenant_aggregate``,
:func:`require_cell_aggregates` adds ``member_of=in:<cell uuids>`` to the
placement query, one aggregate per cell whose uuid is the cell mapping's
uuid (kept by ``nova-cellsched sync-aggregates``).

Nova reads request filters from
``nova.scheduler.request_filter.ALL_REQUEST_FILTERS`` and has no entry
point for them: :func:`register` appends ours, once (the ``request_filter``
part of :mod:`nova_cellsched.compat`, which also names the nova code it
relies on). The entry is :data:`nova_entry`: the shape of an entry nova
calls, traced by nova's ``trace_request_filter``, calling
:func:`require_cell_aggregates`.
``ProjectCellFilter.__init__`` calls :func:`register` when
nova-scheduler builds the filter. Importing this module changes nothing
in nova.
"""

from collections.abc import Callable
from typing import Any

import nova.conf
from nova import exception as nova_exception
from nova import objects
from nova.scheduler import request_filter as nova_request_filter
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_cellsched import conf
from nova_cellsched import exception
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler import state

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf.register_opts(CONF)


def require_cell_aggregates(ctxt: Any, request_spec: Any) -> bool:
    """Restrict placement to the cell aggregates the request may use.

    What nova calls, in ``ALL_REQUEST_FILTERS``, is the release
    adapter's entry (:func:`entry`), which calls this.

    The table of :func:`.decision.placement_scope`: the allowed cells'
    aggregates for a new server or a cross-cell resize (same decision as
    ProjectCellFilter), or for a project not in ``cells_projects``,
    depending on ``[cellsched] placement_prefilter_form``, every other
    cell's aggregate forbidden; for a same-cell move, every aggregate but
    the pinned cell's is forbidden, so a node not synced yet is not lost;
    nothing for a request that names its host or node (forced or
    requested: nova asks placement for that node only, and nova's
    HostManager skips the host filters for forced hosts). Adds nothing
    when ``[cellsched] placement_prefilter`` is off, for rebuilds, and
    when both mapping options are empty. When placement is asked for the
    aggregate of one cell only, that cell also goes into
    ``requested_destination.cell`` of a request that names no cell, so
    nova's HostManager reads that cell's hosts only
    (:func:`_host_states_of_one_cell`), unless nova-scheduler does not
    schedule new servers to that cell (disabled in nova): the request
    then gets NoValidHost as in nova.

    :returns: True when the filter added something, as nova's request
        filters.
    :raises nova.exception.RequestFilterFailed: the project may use no
        cell (the scheduler turns it into NoValidHost).
    """
    if not CONF[conf.GROUP_NAME].placement_prefilter:
        return False
    if scheduler_utils.request_is_rebuild(request_spec):
        return False
    target = decision.named_destination(request_spec)
    if target is not None:
        LOG.debug('require_cell_aggregates request filter skipped: the '
                  'request names its destination (%s)', target)
        return False
    scope = decision.placement_scope(
        state.get().cache, request_spec,
        CONF[conf.GROUP_NAME].placement_prefilter_form)
    if scope is None:
        return False
    # Every other read of this request from the state it was decided with.
    snapshot = scope.decided_with
    if scope.required is not None and not scope.required:
        LOG.warning('Project %(project)s may use no cell (see [cellsched] '
                    'cells_default=%(default)r and cells_projects='
                    '%(projects)r, and "nova-cellsched explain --project '
                    '%(project)s"): NoValidHost before asking placement',
                    {'project': request_spec.project_id,
                     'default': snapshot.mapping.render_default(),
                     'projects': snapshot.mapping.render_projects()})
        raise nova_exception.RequestFilterFailed(
            reason='project %s may use no cell' % request_spec.project_id)
    if ('requested_destination' not in request_spec or
            request_spec.requested_destination is None):
        request_spec.requested_destination = objects.Destination()
    dest = request_spec.requested_destination
    if scope.required:
        uuids = sorted(scope.required)
        dest.require_aggregates(uuids)
        LOG.debug('require_cell_aggregates request filter added aggregates '
                  '%s for project %r', ','.join(uuids),
                  request_spec.project_id)
        if len(uuids) == 1:
            _host_states_of_one_cell(dest, uuids[0], snapshot)
    if scope.forbidden:
        dest.append_forbidden_aggregates(set(scope.forbidden))
        uuids = sorted(scope.forbidden)
        pinned = decision.pinned_cell(request_spec)
        LOG.debug('require_cell_aggregates request filter forbade the '
                  'aggregates of the other cells %s for %s', ','.join(uuids),
                  'a move within cell %s' % pinned if pinned else
                  'project %r (default cells)' % request_spec.project_id)
    return True


def _host_states_of_one_cell(dest: Any, cell_uuid: str,
                             snapshot: decision.Snapshot) -> bool:
    """Let nova's HostManager read only the hosts of the one allowed cell.

    nova's ``HostManager`` reads the services of every enabled cell (and
    asks each for the candidates' compute nodes) unless
    ``requested_destination.cell`` names one. When placement may only
    return hosts of one cell, naming it gives the same host states from
    one cell database. Only the scheduler's copy of the request spec
    changes (nova-scheduler does not save it).

    Nothing is named when the request already names a cell (a move), nor
    when the cell is not one nova schedules new servers to: it must be
    among the snapshot's ``scheduling_cells`` (the enabled cells as
    nova's HostManager read them, at start or on the last SIGHUP) and
    not disabled in its mapping as the policy cache last read it. Then
    nova's HostManager reads its enabled cells as without the pre-filter.

    :param snapshot: the policy cache's state the request was decided
        with; no cell is named before a reset read the cells.
    :returns: True when the cell was named.
    """
    # NOTE: a named cell is read even if disabled (nova honours a move's
    # pinned cell that way), hence the checks. The mapping named is the
    # one the cache read, not read back per request: a cell disabled
    # since may still be named until the next read, which changes
    # nothing, since nova's HostManager schedules to it until its SIGHUP
    # (tests/functional/test_disabled_cell.py).
    if ('cell' in dest and dest.cell is not None) or (
            'allow_cross_cell_move' in dest and dest.allow_cross_cell_move):
        return False
    scheduling_cells = snapshot.scheduling_cells
    if scheduling_cells is None or cell_uuid not in scheduling_cells:
        LOG.debug('require_cell_aggregates: nova-scheduler did not see '
                  'cell %s enabled at start or on its last SIGHUP, host '
                  'states are read from its enabled cells', cell_uuid)
        return False
    cell = snapshot.cell(cell_uuid)
    if cell is None or cell.source is None:
        # Gone from the last read of the cells (deleted since the
        # reset), or cells not read from nova's API database (a test's
        # own list): nothing to name.
        LOG.debug('require_cell_aggregates: no cell mapping of cell %s in '
                  'the last read of the cells, host states are read from '
                  'the enabled cells of nova-scheduler', cell_uuid)
        return False
    if cell.disabled:
        # Disabled since the last SIGHUP: nova-scheduler still schedules
        # to it until the next one, from its enabled cells.
        LOG.debug('require_cell_aggregates: cell %s is disabled, host '
                  'states are read from the enabled cells of '
                  'nova-scheduler', cell_uuid)
        return False
    dest.cell = cell.source
    dest.allow_cross_cell_move = False
    LOG.debug('require_cell_aggregates: host states read from cell %s '
              'only', cell_uuid)
    return True


def _entry(ctxt: Any, request_spec: Any) -> bool:
    # NOTE: the module's function looked up at each call, so that a
    # reload or a test's stand-in is what runs.
    return require_cell_aggregates(ctxt, request_spec)


# NOTE: nova's trace_request_filter logs the function's __name__.
_entry.__name__ = _entry.__qualname__ = 'require_cell_aggregates'

#: The pre-filter as an entry of nova's ``ALL_REQUEST_FILTERS``: nova
#: calls each entry with (context, RequestSpec) before it asks placement,
#: and its ``trace_request_filter`` (a source the ``request_filter`` part
#: relies on) times and logs ours as it does its own.
nova_entry: Callable[[Any, Any], bool] = (
    nova_request_filter.trace_request_filter(_entry))


def entry() -> Callable[[Any, Any], bool]:
    """What :func:`register` puts into nova's ``ALL_REQUEST_FILTERS``.

    :data:`nova_entry`, the same on every release.
    """
    return nova_entry


def register() -> bool:
    """Add the pre-filter (:func:`entry`) to nova's request filters, once.

    Through :mod:`nova_cellsched.compat` (part ``request_filter``): only
    where nova's scheduler is one it was tested with; otherwise one
    WARNING says why and nova schedules as without the pre-filter.
    Idempotent: an entry left by an earlier import of this module (a
    reload) is replaced in place, not added again; a list nova was
    given since (a test's) gets it too. Adding it logs one INFO line
    saying whether the pre-filter is on and in which form
    (:func:`_log_registered`).

    :returns: True when the pre-filter is in nova's list afterwards.
    """
    from nova_cellsched import compat

    ours = entry()
    filters = getattr(nova_request_filter, 'ALL_REQUEST_FILTERS', None)
    in_list = isinstance(filters, list) and any(
        f is ours for f in filters)
    if compat.is_on('request_filter') and not in_list:
        compat.restore(['request_filter'])
    replacing = isinstance(filters, list) and any(
        compat.same_function(f, ours) for f in filters)
    if compat.install(['request_filter'])['request_filter']:
        return False
    if not replacing:
        _log_registered()
    return True


def _log_registered() -> None:
    """Say, once per process, that the pre-filter is in nova's list.

    The two options are read on every request, so the line gives their
    values at start; oslo.config logs a later change (``Option
    cellsched.placement_prefilter changed from [False] to [True]``).
    """
    try:
        on = bool(conf.read_option(CONF, 'placement_prefilter'))
        form = conf.read_option(CONF, 'placement_prefilter_form')
    except exception.InvalidConfig as exc:
        # Each request reads them again, and fails the same way.
        LOG.error('nova-cellsched placement pre-filter registered, but its '
                  '[cellsched] options cannot be read: %s', exc)
        return
    LOG.info('nova-cellsched placement pre-filter registered: %(state)s '
             '([cellsched] placement_prefilter = %(on)s, '
             'placement_prefilter_form = %(form)s; both read on every '
             'request)',
             {'state': 'on' if on else 'off, placement is asked as '
              'without the plugin', 'on': on, 'form': form})
