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

"""The server-list's lookups after the listing, read for what is shown.

After the listing, nova-api reads three more things per request:

* the latest fault of every listed server (``InstanceList.fill_faults``,
  called by ``ServersController._get_servers``): nova asks *every* cell
  (cell0 included) for the faults of *all* the listed servers. With
  ``[cellsched] api_view_faults`` each listed server's own cell is asked
  for its servers' faults only, with nova's own
  ``InstanceFaultList.get_latest_by_instance_uuids``, so the objects are
  nova's;

and nova's view builder
(``nova.api.openstack.compute.views.servers.ViewBuilder``) two, building
whole objects for both:

* ``/servers/detail`` (every microversion) shows each server's attached
  volumes. nova looks up the InstanceMapping of every listed server in
  the API database, then asks *every* cell of those servers for the
  block device mappings of *all* of them (an ``IN`` list of up to
  1,000 uuids per cell, 50 times at 50 cells) and builds a
  ``BlockDeviceMapping`` object per row, of which the view reads two
  fields. With ``[cellsched] api_view_bdms`` the listing already knows
  each server's cell: each cell is asked for its own servers only, for
  the three columns the view reads, in the same query nova makes
  otherwise (its ``model_query``, its deleted filter, no order).
* At >= 2.96 (``pinned_availability_zone``) and >= 2.100
  (``scheduler_hints``) the view reads every listed server's
  RequestSpec from the API database and deserializes each whole spec
  (flavor, image, NUMA, PCI requests...) into objects, for one or two
  fields. With ``[cellsched] api_view_request_specs`` the spec's JSON
  is read and only those fields are taken, through the RequestSpec
  fields' own ``from_primitive`` and ``coerce``. A spec this cannot take
  as nova would (another object version, a server group that nova
  would look up and may drop from the hints, a missing field) is built
  by nova's ``RequestSpec._from_db_object``, as before.

All three apply only to a list this process's lister served in the same
request (:attr:`.request_state.RequestState.listed`), and only where
:mod:`.fingerprint` found nova's code the code this was built for (the
view functions, the queries and the objects named there). What they
leave out changes no response: nova's ``_from_db_object`` of a block
device mapping with no uuid writes one (an online data migration that
``nova-manage db online_data_migrations`` also does), and a RequestSpec
with a legacy NUMA topology is saved back migrated; neither is shown.
A row nova's objects would refuse (a column value its fields reject)
makes nova's request fail; here a block device mapping's other columns
are not read, so such a row does not fail the list.

The view is also timed: its wall time is the ``view`` phase of
:mod:`.server_timing`.
"""

from collections.abc import Callable, Iterable, Sequence
import threading
from typing import Any

from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_cellsched.api import request_state
from nova_cellsched.api import server_timing
from nova_cellsched import counters

LOG = logging.getLogger(__name__)


#: How many lookups each way answered, in this process.
#: ``bdms``, ``faults``: lookups read per cell here; ``request_specs``:
#: specs read from their JSON here; ``request_specs_nova``: specs built
#: by nova's ``_from_db_object`` within a lookup of ours.
USED = counters.Counts(('bdms', 'faults', 'request_specs',
                        'request_specs_nova'))


def _options() -> tuple[bool, bool, bool]:
    """The three ``api_view_*`` options, read per request.

    :returns: (``api_view_bdms``, ``api_view_request_specs``,
        ``api_view_faults``).
    """
    import nova.conf

    from nova_cellsched import conf as conf_mod
    group = nova.conf.CONF[conf_mod.GROUP_NAME]
    return (group.api_view_bdms, group.api_view_request_specs,
            group.api_view_faults)


def _listed(context: Any, uuids: Iterable[str]) -> dict[str, Any] | None:
    """Server uuid -> CellMapping, if this request's listing had them all."""
    state = request_state.current()
    cells = None if state is None else state.listed
    if cells is None or any(uuid not in cells for uuid in uuids):
        return None
    return cells


# Block device mappings ----------------------------------------------------

class _NotLean(Exception):
    """A cell's rows hold something nova's objects would change."""


def _bdm_rows(context: Any, uuids: Sequence[str]) -> list[Any]:
    """nova's block device mapping query, for the columns the view reads."""
    from nova.db.main import api as db
    from nova.db.main import models

    bdm = models.BlockDeviceMapping
    # As nova's pick_context_manager_reader does.
    with db.get_context_manager(context).reader.using(context):
        rows: list[Any] = db.model_query(
            context, bdm, (bdm.instance_uuid, bdm.volume_id,
                           bdm.delete_on_termination)).filter(
            bdm.instance_uuid.in_(uuids)).all()
    return rows


class _PerCell:
    """The function each cell runs, a bound method as nova's lookups are.

    (nova's ``DownCellFixture``, which nova's own test suites use to take
    cells down, reads ``fn.__func__`` of what ``scatter_gather_cells`` is
    given.)
    """

    @classmethod
    def bdms(cls, cctxt: Any, by_cell: dict[str, list[str]]
             ) -> dict[str, list[dict[str, Any]]]:
        return _bdms_in_cell(cctxt, by_cell)

    @classmethod
    def faults(cls, cctxt: Any, by_cell: dict[str, list[str]]) -> Any:
        """nova's latest faults of this cell's listed servers."""
        from nova import objects
        return objects.InstanceFaultList.get_latest_by_instance_uuids(
            cctxt, by_cell.get(cctxt.cell_uuid, []))


def _by_cell(cells: dict[str, Any], uuids: Iterable[str]
             ) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """({cell uuid: CellMapping}, {cell uuid: [server uuid]})."""
    mappings: dict[str, Any] = {}
    by_cell: dict[str, list[str]] = {}
    for uuid in uuids:
        cell = cells[uuid]
        mappings.setdefault(cell.uuid, cell)
        by_cell.setdefault(cell.uuid, []).append(uuid)
    return mappings, by_cell


# Faults -------------------------------------------------------------------

def fill_faults(self: Any) -> Any:
    """nova's ``InstanceList.fill_faults``, each server's own cell asked.

    For a list this request's listing served: only the cells of the
    listed servers are asked, each for its own servers' latest faults,
    through ``nova.context.scatter_gather_cells`` with nova's
    ``CELL_TIMEOUT`` (a cell the listing gave up on is not asked again);
    a cell that fails or does not answer is logged as nova logs it and
    its servers get no fault, as in nova. Otherwise nova's method.

    :returns: the uuids of the servers a fault was found for, as nova's.
    """
    from nova import context as nova_context

    uuids = [inst.uuid for inst in self]
    cells = (_listed(self._context, uuids) if _options()[2] and uuids
             else None)
    if cells is None:
        return ORIGINAL_FILL_FAULTS[0](self)
    USED.count('faults')
    mappings, by_cell = _by_cell(cells, uuids)
    results = nova_context.scatter_gather_cells(
        self._context, mappings.values(), nova_context.CELL_TIMEOUT,
        _PerCell.faults, by_cell)
    # From here on nova's fill_faults, line for line.
    faults_by_uuid = {}
    for cell_uuid, faults in results.items():
        if faults is nova_context.did_not_respond_sentinel:
            LOG.warning('Cell %s did not respond when getting faults',
                        cell_uuid)
        elif isinstance(faults, Exception):
            LOG.warning('Failed to get faults for cell %s', cell_uuid)
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


#: nova's ``InstanceList.fill_faults``, while ours is installed.
ORIGINAL_FILL_FAULTS: list[Callable[..., Any]] = []


def _bdms_in_cell(cctxt: Any, by_cell: dict[str, list[str]]
                  ) -> dict[str, list[dict[str, Any]]]:
    """One cell's block device mappings of its listed servers.

    uuid -> [{'volume_id', 'delete_on_termination'}], in the order
    nova's query returns them. A NULL ``delete_on_termination`` (which
    nova's object refuses) reads the cell with nova's objects instead.
    """
    from nova import objects

    uuids = by_cell.get(cctxt.cell_uuid, [])
    if not uuids:
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        for uuid, volume_id, delete_on_termination in _bdm_rows(
                cctxt, uuids):
            if delete_on_termination is None:
                raise _NotLean()
            found.setdefault(uuid, []).append(
                {'volume_id': volume_id,
                 'delete_on_termination': delete_on_termination})
    except _NotLean:
        answer: dict[str, list[dict[str, Any]]] = (
            objects.BlockDeviceMappingList.bdms_by_instance_uuid(
                cctxt, uuids))
        return answer
    return found


def get_instance_bdms_in_multiple_cells(ctxt: Any, instance_uuids: list[str]
                                        ) -> dict[str, Any]:
    """The view's ``_get_instance_bdms_in_multiple_cells``, per cell.

    For a list this request's listing served: each listed server's cell
    is asked for that server's mappings only, through
    ``nova.context.scatter_gather_cells`` with nova's ``CELL_TIMEOUT``
    (so a cell the listing gave up on is not asked again), and a cell
    that fails or does not answer is logged as nova logs it. Otherwise
    nova's function.
    """
    from nova import context as nova_context

    cells = (_listed(ctxt, instance_uuids) if _options()[0] and
             instance_uuids else None)
    if cells is None:
        nova_lookup = ORIGINAL['_get_instance_bdms_in_multiple_cells']
        answer: dict[str, Any] = nova_lookup(ctxt, instance_uuids)
        return answer
    mappings, by_cell = _by_cell(cells, instance_uuids)
    USED.count('bdms')
    bdms: dict[str, Any] = {}
    results = nova_context.scatter_gather_cells(
        ctxt, mappings.values(), nova_context.CELL_TIMEOUT, _PerCell.bdms,
        by_cell)
    for cell_uuid, result in results.items():
        if isinstance(result, Exception):
            LOG.warning('Failed to get block device mappings for cell %s',
                        cell_uuid)
        elif result is nova_context.did_not_respond_sentinel:
            LOG.warning('Timeout getting block device mappings for cell '
                        '%s', cell_uuid)
        else:
            bdms.update(result)
    return bdms


# Request specs ----------------------------------------------------------

def _spec_rows(context: Any, uuids: Sequence[str]) -> list[Any]:
    """nova's request spec query, for (id, instance_uuid, spec)."""
    from nova.db.api import api as api_db_api
    from nova.db.api import models as api_models

    model = api_models.RequestSpec
    # As nova's api_db_api.context_manager.reader decorator does.
    with api_db_api.context_manager.reader.using(context):
        rows: list[Any] = context.session.query(
            model.id, model.instance_uuid, model.spec).filter(
            model.instance_uuid.in_(uuids)).all()
    return rows


_MISSING = object()


def _field(stub: Any, name: str, data: dict[str, Any]) -> Any:
    """*name* from a primitive, as ``obj_from_primitive`` then setattr."""
    field = type(stub).fields[name]
    value = field.from_primitive(stub, name, data[name])
    return field.coerce(stub, name, value)


def _lean_fields(stub: Any, text: str, hints: bool) -> tuple[Any, Any]:
    """(availability_zone, scheduler_hints or _MISSING) from a spec's JSON.

    :raises _NotLean: nova's ``_from_db_object`` may answer otherwise.
    """
    try:
        primitive = jsonutils.loads(text)
    except ValueError:
        raise _NotLean()
    if (not isinstance(primitive, dict) or
            primitive.get('nova_object.name') != 'RequestSpec' or
            primitive.get('nova_object.namespace') != 'nova' or
            primitive.get('nova_object.version') != type(stub).VERSION):
        raise _NotLean()
    data = primitive.get('nova_object.data')
    if (not isinstance(data, dict) or 'availability_zone' not in data or
            (hints and 'scheduler_hints' not in data) or
            data.get('instance_group') is not None):
        raise _NotLean()
    try:
        zone = _field(stub, 'availability_zone', data)
        return zone, (_field(stub, 'scheduler_hints', data) if hints
                      else _MISSING)
    except (ValueError, TypeError, KeyError, AttributeError):
        raise _NotLean()


def request_spec_fields(context: Any, instance_uuids: list[str],
                        hints: bool
                        ) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``_list_view`` keeps of ``RequestSpec.get_by_instance_uuids``.

    ({uuid: availability_zone}, {uuid: scheduler_hints}), each without
    the None values, as nova's ``_list_view`` builds them; the hints
    only when *hints* (>= 2.100).
    """
    from nova import objects

    zones: dict[str, Any] = {}
    sched_hints: dict[str, Any] = {}
    if not instance_uuids:
        return zones, sched_hints
    stub = objects.RequestSpec()
    for spec_id, uuid, text in _spec_rows(context, instance_uuids):
        try:
            zone, hint = _lean_fields(stub, text, hints)
            USED.count('request_specs')
        except _NotLean:
            USED.count('request_specs_nova')
            spec = objects.RequestSpec._from_db_object(
                context, objects.RequestSpec(),
                {'id': spec_id, 'instance_uuid': uuid, 'spec': text})
            zone = spec.availability_zone
            hint = spec.scheduler_hints if hints else _MISSING
        if zone is not None:
            zones[uuid] = zone
        if hint is not _MISSING and hint is not None:
            sched_hints[uuid] = hint
    return zones, sched_hints


def list_view(self: Any, func: Callable[..., Any], request: Any,
              servers: Any, coll_name: str, show_extra_specs: Any,
              show_extended_attr: Any = None, show_host_status: Any = None,
              show_sec_grp: Any = False, bdms: Any = None,
              cell_down_support: bool = False) -> dict[str, Any]:
    """nova 34's ``ViewBuilder._list_view``, the request specs read lean.

    Line for line nova's (its source is pinned by :mod:`.fingerprint`)
    but for where the availability zones and scheduler hints come from
    (:func:`request_spec_fields`); nova's own function where that does
    not apply (below 2.96, the option off, a list this request's
    listing did not serve).
    """
    from nova.api.openstack import api_version_request
    from nova.api.openstack.compute.views import servers as views
    from nova.objects import virtual_interface

    context = request.environ['nova.context']
    instance_uuids = [s.uuid for s in servers]
    if (not api_version_request.is_supported(request, '2.96') or
            not _options()[1] or _listed(context, instance_uuids) is None):
        answer: dict[str, Any] = ORIGINAL['_list_view'](
            self, func, request, servers, coll_name, show_extra_specs,
            show_extended_attr=show_extended_attr,
            show_host_status=show_host_status, show_sec_grp=show_sec_grp,
            bdms=bdms, cell_down_support=cell_down_support)
        return answer
    req_specs_dict, sched_hints_dict = request_spec_fields(
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


# The view's phase ---------------------------------------------------------

def _timed(name: str) -> Callable[..., Any]:
    def view(self: Any, request: Any, instances: Any,
             cell_down_support: bool = False) -> Any:
        with server_timing.phase('view'):
            return ORIGINAL[name](self, request, instances,
                                  cell_down_support=cell_down_support)
    view.__name__ = name
    view.__doc__ = ("nova's ``ViewBuilder.%s``, its wall time the request's "
                    '``view`` phase.' % name)
    return view


#: ViewBuilder attribute -> ours, installed by :func:`install`.
REPLACEMENTS: dict[str, Any] = {
    '_get_instance_bdms_in_multiple_cells': staticmethod(
        get_instance_bdms_in_multiple_cells),
    '_list_view': list_view,
    'index': _timed('index'),
    'detail': _timed('detail'),
}

#: ViewBuilder attribute -> nova's (plain functions), while installed.
ORIGINAL: dict[str, Callable[..., Any]] = {}
_LOCK = threading.Lock()


def install() -> bool:
    """Put :data:`REPLACEMENTS` into nova's ViewBuilder; True if this did.

    Called by :func:`.patch.install` after its checks, which cover the
    view functions replaced here.
    """
    from nova.api.openstack.compute.views import servers as views
    from nova.objects import instance as instance_obj

    with _LOCK:
        if ORIGINAL:
            return False
        builder = views.ViewBuilder
        for name, replacement in REPLACEMENTS.items():
            original = builder.__dict__[name]
            ORIGINAL[name] = (original.__func__
                              if isinstance(original, staticmethod)
                              else original)
            setattr(builder, name, replacement)
        ORIGINAL_FILL_FAULTS[:] = [instance_obj.InstanceList.fill_faults]
        instance_obj.InstanceList.fill_faults = fill_faults
        return True


def uninstall() -> bool:
    """Give nova's ViewBuilder its own functions back; True if this did."""
    from nova.api.openstack.compute.views import servers as views
    from nova.objects import instance as instance_obj

    with _LOCK:
        if not ORIGINAL:
            return False
        builder = views.ViewBuilder
        if instance_obj.InstanceList.__dict__.get('fill_faults') is (
                fill_faults):
            instance_obj.InstanceList.fill_faults = ORIGINAL_FILL_FAULTS[0]
        ORIGINAL_FILL_FAULTS.clear()
        for name, original in ORIGINAL.items():
            if builder.__dict__.get(name) is REPLACEMENTS[name]:
                setattr(builder, name,
                        staticmethod(original)
                        if name == '_get_instance_bdms_in_multiple_cells'
                        else original)
        ORIGINAL.clear()
        return True
