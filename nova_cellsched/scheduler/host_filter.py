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
"""

from collections.abc import Iterable
from typing import Any

import nova.conf
from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from oslo_config import cfg
from oslo_log import log as logging

from nova_cellsched import conf
from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import cell_infos
from nova_cellsched.scheduler import policy_cache

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf.register_opts(CONF)


def _read_group() -> policy_cache.RawOptions:
    group = CONF[conf.GROUP_NAME]
    values = []
    for name in ('cells_default', 'cells_projects'):
        try:
            values.append(getattr(group, name))
        except cfg.Error as exc:
            # '$name' is oslo.config's reference to another option.
            missing = getattr(exc, 'opt_name', None)
            raise InvalidCellsMapping(
                name, '<unreadable>', '$%s' % missing if missing else name,
                'oslo.config cannot read the value (%s); a "$" refers to '
                'another option, write "$$" for a literal "$"' % exc
            ) from exc
    return tuple(values[0]), values[1]


#: The options the last :func:`_read_options` returned.
_last_read: policy_cache.RawOptions | None = None


def _read_options() -> policy_cache.RawOptions:
    """Both options, from one consistent state of the configuration.

    The usual read is two cached attribute reads. Whenever it differs
    from the last options read (a change is under way), the pair may be
    torn: oslo.config's ``mutate_config_files()`` clears its value cache,
    parses the files, installs the new values, logs each change and only
    then runs the mutate hooks. A request that cached one option's old
    value during the parse and reads the other after the install pairs
    old with new, and the pair stays cached, so reading it twice agrees.
    So on a change both options are read afresh, the value cache cleared
    before each read, until two fresh reads agree: a fresh read can only
    be torn by a swap between its two option reads, and then the next
    one differs. An unchanged configuration costs nothing more.
    """
    global _last_read
    raw = _read_group()
    if raw == _last_read:
        return raw
    _clear_value_cache(CONF)
    raw = _read_group()
    for _attempt in range(5):
        _clear_value_cache(CONF)
        again = _read_group()
        if again == raw:
            break
        raw = again
    _last_read = raw
    return raw


def _clear_value_cache(conf_obj: Any) -> None:
    """Clear oslo.config's cache of option values.

    clear_default on an option of ours that never has a default override
    is the public call that does it.
    """
    conf_obj.clear_default('cells_default', group=conf.GROUP_NAME)


def _after_reload(conf_obj: cfg.ConfigOpts, fresh: Any) -> None:
    """Drop option values cached during a SIGHUP reload.

    oslo.config clears its value cache *before* it parses the files and
    installs the new values; a scheduler thread that read an option in
    between cached the old value again, until the next SIGHUP. Now that
    the new values are in, clear the cache once more.
    """
    _clear_value_cache(conf_obj)



def pinned_cell(spec_obj: Any) -> str | None:
    """The cell uuid a move is restricted to, None for a free choice.

    The conductor sets ``requested_destination.cell`` to the instance's
    cell for same-cell moves (resize, cold and live migration, evacuate,
    unshelve). With ``allow_cross_cell_move`` the cell is only a
    preference for the weighers, so the request is placed like a new
    server; nova's HostManager draws the same line.
    """
    if 'requested_destination' not in spec_obj:
        return None
    dest = spec_obj.requested_destination
    if dest is None or 'cell' not in dest or dest.cell is None:
        return None
    if 'allow_cross_cell_move' in dest and dest.allow_cross_cell_move:
        return None
    return str(dest.cell.uuid)


def _new_cache() -> policy_cache.PolicyCache:
    return policy_cache.PolicyCache(
        _read_options, cell_infos.load_cell_infos,
        max_age=lambda: CONF[conf.GROUP_NAME].cell_cache_ttl)


#: The policy cache of the ProjectCellFilter built last (the scheduler's),
#: shared with the placement pre-filter; see :func:`shared_cache`.
_shared_cache: policy_cache.PolicyCache | None = None


def shared_cache() -> policy_cache.PolicyCache:
    """The policy cache of the running filter, made on first use if none.

    The pre-filter and the host filter of one scheduler decide with the
    same cache, so they agree on the options and cells in force.

    :raises InvalidCellsMapping: no filter was built yet and the options
        do not parse.
    """
    global _shared_cache
    if _shared_cache is None:
        _shared_cache = _new_cache()
    return _shared_cache


def allowed_cells(cache: policy_cache.PolicyCache, spec_obj: Any,
                  seen_cells: Iterable[str] = ()) -> frozenset[str] | None:
    """Cell uuids a request may be placed in; None when unrestricted.

    The one decision of the host filter and the placement pre-filter (see
    the table of :class:`ProjectCellFilter`): the pinned cell of a
    same-cell move, else the project's cells, else the default cells.
    Rebuilds are the caller's business.

    :param seen_cells: cell uuids of candidate hosts; one the cache does
        not know (a new cell) makes it reload the cell mappings first.
    """
    policy = cache.current()
    if not policy.restricted:
        return None
    cell = pinned_cell(spec_obj)
    if cell is not None:
        return frozenset([cell])
    if any(uuid not in policy.cells for uuid in seen_cells):
        # A cell created since the cache was filled; maybe one the
        # options name.
        policy = cache.refresh_cells()
    return policy.allowed_cells(spec_obj.project_id)


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
    (:func:`allowed_cells`, same policy cache) is also given to placement
    before any host is offered, by
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
        # oslo.config keeps hooks in a set: registering again is a no-op.
        CONF.register_mutate_hook(_after_reload)
        global _shared_cache
        # Fails here, so the scheduler does not start, on a malformed value.
        self._cache = _new_cache()
        # The placement pre-filter decides with this filter's policy.
        _shared_cache = self._cache

    def _allowed_cells(self, spec_obj: Any,
                       hosts: list[Any]) -> frozenset[str] | None:
        return allowed_cells(self._cache, spec_obj,
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


def _register_prefilter() -> None:
    # Nova has no entry point for request filters; the scheduler imports
    # this module when it loads ProjectCellFilter (available_filters).
    from nova_cellsched.scheduler import request_filter
    request_filter.register()


_register_prefilter()
