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

"""nova 33's adapter: what of nova-cellsched differs by nova release.

Only code that follows one nova release goes here: the copies of
nova's functions the view lookups replace (:func:`list_view`,
:func:`fill_faults`), the end of nova-api's start-up check
(:func:`raise_if_too_old`) and how the lister's self-test finds and
stops nova's worker pools (:func:`nova_pools`,
:func:`reset_nova_pools`). :mod:`.core` picks the adapter per part:
the newest tested release whose sources the part's all equal
(``sources_nova33`` for this one).

nova 33 (2026.1) differs from nova 34 only in where its worker pools
live (``nova.utils``' module globals, not ``nova.thread_pool_factory``):
:func:`nova_pools` and :func:`reset_nova_pools`. Its ``_list_view``,
``fill_faults`` and ``raise_if_old_compute`` are nova 34's, line for
line (their hashes are the same in both tables), and so are their
copies here. ``diff nova33.py nova34.py`` is what changed.
"""

from collections.abc import Callable
from typing import Any

from nova_cellsched.api import view
from nova_cellsched.compat import core
# The lister's calls on nova (part ``lister``) and the request filter's
# entry in nova's list (part ``request_filter``): nova 33 does there what
# nova 34 does (the sources those parts rely on are nova 34's, or differ
# where this release's table says why it is safe), so they are nova
# 34's adapter's functions, not copies.
from nova_cellsched.compat.nova34 import all_cells  # noqa: F401
from nova_cellsched.compat.nova34 import batch  # noqa: F401
from nova_cellsched.compat.nova34 import cells_to_list  # noqa: F401
from nova_cellsched.compat.nova34 import columns_to_join  # noqa: F401
from nova_cellsched.compat.nova34 import instance_objects  # noqa: F401
from nova_cellsched.compat.nova34 import marker_context  # noqa: F401
from nova_cellsched.compat.nova34 import marker_row  # noqa: F401
from nova_cellsched.compat.nova34 import not_responding  # noqa: F401
from nova_cellsched.compat.nova34 import require_cell_aggregates  # noqa

_VIEW_BUILDER = 'nova.api.openstack.compute.views.servers:ViewBuilder'


# The view lookups (part ``view``) ------------------------------------------

#: Whether nova 33's ``InstanceList.fill_faults`` asks every cell (so
#: :func:`fill_faults` narrows it to the listed servers' cells).
FILL_FAULTS_PER_CELL = True


def fill_faults(self: Any) -> Any:
    """nova's ``InstanceList.fill_faults``, each server's own cell asked.

    For a list this request's listing served: only the cells of the
    listed servers are asked, each for its own servers' latest faults,
    on the listing's workers within ``[cellsched] list_cell_timeout``
    (:func:`.view.in_listed_cells`; a cell the listing gave up on is not
    asked again);
    a cell that fails or does not answer is logged as nova logs it and
    its servers get no fault, as in nova. Otherwise nova's method.

    :returns: the uuids of the servers a fault was found for, as nova's.
    """
    from nova import context as nova_context

    uuids = [inst.uuid for inst in self]
    cells = (view._listed(self._context, uuids) if view._options()[2] and uuids
             else None)
    if cells is None:
        return core.original('nova.objects.instance:InstanceList',
                             'fill_faults')(self)
    view.USED.count('faults')
    mappings, by_cell = view._by_cell(cells, uuids)
    results = view.in_listed_cells(self._context, mappings.values(),
                                   view._PerCell.faults, by_cell)
    # From here on nova's fill_faults, line for line.
    faults_by_uuid = {}
    for cell_uuid, faults in results.items():
        if faults is nova_context.did_not_respond_sentinel:
            view.LOG.warning('Cell %s did not respond when getting faults',
                        cell_uuid)
        elif isinstance(faults, Exception):
            view.LOG.warning('Failed to get faults for cell %s', cell_uuid)
        else:
            for fault in faults:
                faults_by_uuid[fault.instance_uuid] = fault

    for instance in self:
        if instance.uuid in faults_by_uuid:
            instance.fault = faults_by_uuid[instance.uuid]
        else:
            # NOTE(danms): Otherwise the caller will cause a lazy-load
            # when checking it, and we know there are none
            instance.fault = None
        instance.obj_reset_changes(['fault'])

    return faults_by_uuid.keys()


def list_view(self: Any, func: Callable[..., Any], request: Any,
              servers: Any, coll_name: str, show_extra_specs: Any,
              show_extended_attr: Any = None, show_host_status: Any = None,
              show_sec_grp: Any = False, bdms: Any = None,
              cell_down_support: bool = False) -> dict[str, Any]:
    """nova 33's ``ViewBuilder._list_view``, the request specs read lean.

    Line for line nova's (its source is pinned in ``sources_nova33``)
    but for where the availability zones and scheduler hints come from
    (:func:`view.request_spec_fields`); nova's own function where that does
    not apply (below 2.96, the option off, a list this request's
    listing did not serve).
    """
    from nova.api.openstack import api_version_request
    from nova.api.openstack.compute.views import servers as views
    from nova.objects import virtual_interface

    context = request.environ['nova.context']
    instance_uuids = [s.uuid for s in servers]
    if (not api_version_request.is_supported(request, '2.96') or
            not view._options()[1] or
            view._listed(context, instance_uuids) is None):
        answer: dict[str, Any] = core.original(_VIEW_BUILDER,
                                               '_list_view')(
            self, func, request, servers, coll_name, show_extra_specs,
            show_extended_attr=show_extended_attr,
            show_host_status=show_host_status, show_sec_grp=show_sec_grp,
            bdms=bdms, cell_down_support=cell_down_support)
        return answer
    req_specs_dict, sched_hints_dict = view.request_spec_fields(
        context, instance_uuids,
        api_version_request.is_supported(request, '2.100'))

    server_list = [
        func(request, server,
             show_extra_specs=show_extra_specs,
             show_extended_attr=show_extended_attr,
             show_host_status=show_host_status,
             show_sec_grp=show_sec_grp, bdms=bdms,
             cell_down_support=cell_down_support,
             provided_az=req_specs_dict.get(
                 server.uuid, views.AZ_NOT_IN_REQUEST_SPEC),
             provided_sched_hints=sched_hints_dict.get(
                 server.uuid, views.SCHED_HINTS_NOT_IN_REQUEST_SPEC)
             )["server"]
        for server in servers
        # Filter out the fake marker instance created by the
        # fill_virtual_interface_list online data migration.
        if server.uuid != virtual_interface.FAKE_UUID]
    servers_links = self._get_collection_links(request,
                                               servers,
                                               coll_name)
    servers_dict = dict(servers=server_list)

    if servers_links:
        servers_dict["servers_links"] = servers_links

    return servers_dict


# The start-up check (part ``startup``) ------------------------------------

def raise_if_too_old(current: int) -> None:
    """The end of nova 33's ``raise_if_old_compute``: its exception.

    :param current: the oldest nova-compute service version found
        (not 0: no compute anywhere is a fresh install).
    :raises nova.exception.TooOldComputeService: as nova 33's does.
    """
    from nova import exception as nova_exception
    from nova.objects import service as service_obj

    oldest_supported = service_obj.SERVICE_VERSION_ALIASES[
        service_obj.OLDEST_SUPPORTED_SERVICE_VERSION]
    if current < oldest_supported:
        raise nova_exception.TooOldComputeService(
            oldest_supported_version=(
                service_obj.OLDEST_SUPPORTED_SERVICE_VERSION),
            scope='system',
            min_service_level=current,
            oldest_supported_service=oldest_supported)


# The lister's threads and self-test (part ``lister``) ---------------------

def threading_mode() -> bool:
    """Whether nova runs on native threads, not eventlet's green ones.

    nova 33's own answer (``nova.utils.concurrency_mode_threading``:
    not monkey-patched by ``nova.monkey_patch``).
    """
    from nova import utils

    return bool(utils.concurrency_mode_threading())


def nova_pools() -> list[Any]:
    """nova's worker pools started in this process (its cell workers...).

    nova 33 keeps them in ``nova.utils``' module globals, each started
    on first use: the default, the cell worker (scatter-gather) and the
    image cache pool.
    """
    from nova import utils

    return [pool for pool in (utils.DEFAULT_EXECUTOR,
                              utils.SCATTER_GATHER_EXECUTOR,
                              utils.CACHE_IMAGES_EXECUTOR)
            if pool is not None]


def reset_nova_pools() -> None:
    """Stop nova's worker pools; each starts again on its next use.

    nova 33's own calls before a service forks its workers
    (``nova.cmd.scheduler``); the image cache pool is nova-compute's.
    """
    from nova import utils

    utils.destroy_scatter_gather_executor()
    utils.destroy_default_executor()
