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
point for them: :func:`register` appends ours once, and the host filter's
module calls it when nova-scheduler loads ``ProjectCellFilter``.
"""

from typing import Any

import nova.conf
from nova import exception as nova_exception
from nova import objects
from nova.scheduler import request_filter as nova_request_filter
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_cellsched import conf

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf.register_opts(CONF)


@nova_request_filter.trace_request_filter
def require_cell_aggregates(ctxt: Any, request_spec: Any) -> bool:
    """Require placement aggregates of the cells the request may use.

    Same decision as ProjectCellFilter (:func:`.host_filter.allowed_cells`):
    the pinned cell of a same-cell move (even a disabled one), the
    project's cells (new servers, cross-cell resize), else the default
    cells. Adds nothing when ``[cellsched] placement_prefilter`` is off,
    for rebuilds, and when both mapping options are empty.

    :returns: True when the filter applied, as nova's request filters.
    :raises nova.exception.RequestFilterFailed: the project may use no
        cell (the scheduler turns it into NoValidHost).
    """
    if not CONF[conf.GROUP_NAME].placement_prefilter:
        return False
    if scheduler_utils.request_is_rebuild(request_spec):
        return False
    from nova_cellsched.scheduler import host_filter

    cache = host_filter.shared_cache()
    allowed = host_filter.allowed_cells(cache, request_spec)
    if allowed is None:
        return False
    if not allowed:
        # Maybe a cell created since the cells were read: look once more
        # (rate limited by the cache) before failing the request.
        cache.refresh_cells()
        allowed = host_filter.allowed_cells(cache, request_spec)
        if allowed is None:
            return False
    if not allowed:
        LOG.warning('Project %(project)s may use no cell (see [cellsched] '
                    'cells_default=%(default)r and cells_projects='
                    '%(projects)r, and "nova-cellsched explain --project '
                    '%(project)s"): NoValidHost before asking placement',
                    {'project': request_spec.project_id,
                     'default': cache.mapping.render_default(),
                     'projects': cache.mapping.render_projects()})
        raise nova_exception.RequestFilterFailed(
            reason='project %s may use no cell' % request_spec.project_id)
    if ('requested_destination' not in request_spec or
            request_spec.requested_destination is None):
        request_spec.requested_destination = objects.Destination()
    uuids = sorted(allowed)
    request_spec.requested_destination.require_aggregates(uuids)
    LOG.debug('require_cell_aggregates request filter added aggregates %s '
              'for project %r', ','.join(uuids), request_spec.project_id)
    return True


def _same_filter(candidate: Any) -> bool:
    return (getattr(candidate, '__module__', None) == __name__ and
            getattr(candidate, '__name__', None) ==
            require_cell_aggregates.__name__)


def register() -> bool:
    """Add :func:`require_cell_aggregates` to nova's request filters, once.

    Idempotent: an entry left by an earlier import of this module (a
    reload) is replaced in place, not added again.

    :returns: True when the pre-filter is in nova's list afterwards.
    """
    filters = getattr(nova_request_filter, 'ALL_REQUEST_FILTERS', None)
    if not isinstance(filters, list):
        LOG.warning('nova.scheduler.request_filter.ALL_REQUEST_FILTERS is '
                    '%s, expected a list: the [cellsched] placement '
                    'pre-filter is not registered, placement_prefilter has '
                    'no effect with this nova', type(filters).__name__)
        return False
    for index, existing in enumerate(filters):
        if _same_filter(existing):
            filters[index] = require_cell_aggregates
            return True
    filters.append(require_cell_aggregates)
    return True
