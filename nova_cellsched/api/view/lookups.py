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

After the listing nova-api reads three more things per request; with
each option on, this module reads them for the listed servers only,
each from its own cell, and no more than the body shows:

* ``[cellsched] api_view_faults``: the latest fault of every listed
  server (nova's ``InstanceList.fill_faults`` asks every cell, cell0
  included, for all of them). Each server's cell is asked for its own
  servers, with nova's ``InstanceFaultList.get_latest_by_instance_uuids``:
  the objects are nova's.
* ``[cellsched] api_view_bdms``: the attached volumes of
  ``/servers/detail`` (nova's view looks up every server's
  InstanceMapping, asks every cell of those servers for the block device
  mappings of all of them and builds an object per row). Each cell is
  asked for its own servers, for the three columns the view reads, in
  nova's own query (its ``model_query``, deleted filter, no order).
* ``[cellsched] api_view_request_specs``: at >= 2.96
  (``pinned_availability_zone``) and >= 2.100 (``scheduler_hints``),
  those fields of each server's RequestSpec, taken from the spec's JSON
  through the RequestSpec fields' own ``from_primitive`` and ``coerce``.
  A spec this cannot take as nova would (another object version, a
  server group that nova would look up, a missing field) is built by
  nova's ``RequestSpec._from_db_object``.

They apply only to a list this process's lister served in the same
request (``RequestState.listed`` of
:mod:`nova_cellsched.api.middleware.request_state`), and only while the
compat layer finds nova's view, queries and objects as this module
expects (the ``view`` part). What they leave out changes no response:
nova's ``_from_db_object`` of a block device mapping without a uuid
writes one, and a RequestSpec with a legacy NUMA topology is saved back
migrated; neither is shown. A block device mapping's other columns are
not read, so a row nova's objects would refuse does not fail the list.

The view's wall time is the ``view`` phase of ``Server-Timing``.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from oslo_log import log as logging
from oslo_serialization import jsonutils


from nova_cellsched.api.hooks import pool
from nova_cellsched.api.middleware import request_state
from nova_cellsched.api.middleware import server_timing
from nova_cellsched import counters

LOG = logging.getLogger(__name__)


#: How many lookups each way answered, in this process.
#: ``bdms``, ``faults``: lookups read per cell here; ``request_specs``:
#: specs read from their JSON here; ``request_specs_nova``: specs built
#: by nova's ``_from_db_object`` within a lookup of ours; ``rows``:
#: lists whose rows were read whole again for nova's view.
USED = counters.Counts(('bdms', 'faults', 'request_specs',
                        'request_specs_nova', 'rows'))


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
    def rows(cls, cctxt: Any, by_cell: dict[str, list[str]],
             columns_to_join: Sequence[str]) -> dict[str, dict[str, Any]]:
        """This cell's listed servers' whole rows (:func:`whole_rows`)."""
        from nova_cellsched.api.hooks import rows as rows_mod
        return rows_mod.reread(cctxt, by_cell.get(cctxt.cell_uuid, []),
                               columns_to_join)

    @classmethod
    def faults(cls, cctxt: Any, by_cell: dict[str, list[str]]) -> Any:
        """nova's latest faults of this cell's listed servers."""
        from nova import objects
        return objects.InstanceFaultList.get_latest_by_instance_uuids(
            cctxt, by_cell.get(cctxt.cell_uuid, []))


def in_listed_cells(ctxt: Any, cell_mappings: Iterable[Any],
                    fn: Callable[..., Any], by_cell: dict[str, list[str]],
                    *args: Any) -> dict[str, Any]:
    """``fn(cctxt, by_cell, *args)`` in each cell, on the listing's workers.

    :func:`nova_cellsched.api.hooks.pool.scatter_gather_listed_cells`:
    nova's ``scatter_gather_cells`` answer, within ``[cellsched]
    list_cell_timeout`` and off nova's ``cell_worker`` pool.
    """
    return pool.scatter_gather_listed_cells(
        ctxt, cell_mappings, fn, by_cell, *args)


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


# Whole rows ---------------------------------------------------------------

def whole_rows(ctxt: Any, uuids: Sequence[str],
               columns_to_join: Sequence[str]
               ) -> dict[str, dict[str, Any]]:
    """uuid -> each listed server's whole row, read again from its cell.

    Every instance column, and the info cache and instance_extra as
    nova's objects read them for the listing's *columns_to_join*
    (:func:`nova_cellsched.api.hooks.rows.reread`), each cell asked on the
    listing's workers (:func:`in_listed_cells`).

    :raises nova_cellsched.exception.RowsNotReread: a cell failed or
        did not answer, or no longer has a server.
    """
    from nova import context as nova_context

    from nova_cellsched import exception

    USED.count('rows')
    cells = _listed(ctxt, uuids)
    if cells is None:
        raise exception.RowsNotReread(
            'unknown', "servers this request's listing did not list")
    mappings, by_cell = _by_cell(cells, uuids)
    results = in_listed_cells(ctxt, mappings.values(), _PerCell.rows,
                              by_cell, columns_to_join)
    found: dict[str, dict[str, Any]] = {}
    for cell_uuid in mappings:
        answer = results.get(cell_uuid, nova_context.did_not_respond_sentinel)
        if answer is nova_context.did_not_respond_sentinel:
            raise exception.RowsNotReread(cell_uuid, 'no answer in time')
        if isinstance(answer, Exception):
            raise exception.RowsNotReread(
                cell_uuid, exception.driver_reason(answer))
        missing = set(by_cell[cell_uuid]) - set(answer)
        if missing:
            raise exception.RowsNotReread(
                cell_uuid, 'no row for %d of them' % len(missing))
        found.update(answer)
    return found


# Faults -------------------------------------------------------------------

def faults_in_cells(ctxt: Any, cells: dict[str, Any], uuids: list[str]
                    ) -> dict[str, Any]:
    """uuid -> nova's latest InstanceFault of each of *uuids* that has one.

    Each listed server's own cell (*cells*: uuid -> CellMapping) is asked
    for its servers' faults only, on the listing's workers
    (:func:`in_listed_cells`); a cell that fails or does not answer is
    logged as nova's ``fill_faults`` logs it and its servers get none.
    """
    from nova import context as nova_context

    USED.count('faults')
    mappings, by_cell = _by_cell(cells, uuids)
    results = in_listed_cells(ctxt, mappings.values(), _PerCell.faults,
                              by_cell)
    faults_by_uuid: dict[str, Any] = {}
    for cell_uuid, faults in results.items():
        if faults is nova_context.did_not_respond_sentinel:
            LOG.warning('Cell %s did not respond when getting faults',
                        cell_uuid)
        elif isinstance(faults, Exception):
            LOG.warning('Failed to get faults for cell %s', cell_uuid)
        else:
            for fault in faults:
                faults_by_uuid[fault.instance_uuid] = fault
    return faults_by_uuid


def nova_fill_faults(instance_list: Any) -> Any:
    """nova's own ``InstanceList.fill_faults`` of *instance_list*."""
    from nova_cellsched import compat

    return compat.original('nova.objects.instance:InstanceList',
                           'fill_faults')(instance_list)


def fill_faults(self: Any) -> Any:
    """``InstanceList.fill_faults`` of a list this request's listing served.

    From nova 33 nova asks every cell, cell0 included, for the faults of
    all the listed servers. Here (``[cellsched] api_view_faults``):

    * a list the renderer will render (:mod:`.render`) reads no fault
      now: the renderer asks each server's own cell, for the servers
      whose status shows a fault only (:func:`faults_in_cells`);
    * another list this request's listing served: each listed server's
      own cell is asked for its servers' faults (:func:`faults_in_cells`),
      and every server gets its fault or None, as nova's.

    Otherwise, and on nova 31 and 32 (which read the faults through the
    list's own context, one query: nothing to narrow), nova's own.

    :returns: the uuids of the servers a fault was found for, as nova's
        (none yet for a list the renderer will render).
    """
    # Imported here: render imports this module.
    from nova_cellsched.api.view import render

    uuids = [inst.uuid for inst in self]
    if not (uuids and _options()[2] and render.gates().faults_per_cell):
        return nova_fill_faults(self)
    found = render.defer_faults(self)
    if found:
        return []
    cells = _listed(self._context, uuids)
    if cells is None:
        return nova_fill_faults(self)
    faults_by_uuid = faults_in_cells(self._context, cells, uuids)
    for instance in self:
        instance.fault = faults_by_uuid.get(instance.uuid)
        # NOTE: as nova's: set, so that reading it lazy-loads nothing.
        instance.obj_reset_changes(['fault'])
    return faults_by_uuid.keys()


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
    is asked for that server's mappings only, on the listing's workers
    within ``[cellsched] list_cell_timeout`` (:func:`in_listed_cells`;
    a cell the listing gave up on is not asked again), and a cell that
    fails or does not answer is logged as nova logs it. Otherwise
    nova's function.
    """
    from nova import context as nova_context

    cells = (_listed(ctxt, instance_uuids) if _options()[0] and
             instance_uuids else None)
    if cells is None:
        from nova_cellsched import compat
        nova_lookup = compat.original(
            'nova.api.openstack.compute.views.servers:ViewBuilder',
            '_get_instance_bdms_in_multiple_cells')
        answer: dict[str, Any] = nova_lookup(ctxt, instance_uuids)
        return answer
    mappings, by_cell = _by_cell(cells, instance_uuids)
    USED.count('bdms')
    bdms: dict[str, Any] = {}
    results = in_listed_cells(ctxt, mappings.values(), _PerCell.bdms,
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
    only when *hints* (>= 2.100). Each blocking call on the API database
    ends within the listing's I/O bound (``2 x [cellsched]
    list_cell_timeout`` without an answer).

    :raises nova_cellsched.guard.ConnectFailed, oslo_db.exception.
        DBError: the API database did not answer within that bound.
    """
    import nova.conf
    from nova import objects

    from nova_cellsched import conf as conf_mod
    from nova_cellsched import guard

    zones: dict[str, Any] = {}
    sched_hints: dict[str, Any] = {}
    if not instance_uuids:
        return zones, sched_hints
    stub = objects.RequestSpec()
    timeout = nova.conf.CONF[conf_mod.GROUP_NAME].list_cell_timeout
    with guard.io_timeout(pool.io_timeout(timeout), total=False):
        spec_rows = _spec_rows(context, instance_uuids)
    for spec_id, uuid, text in spec_rows:
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


# The view's phase ---------------------------------------------------------

def timed(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """nova's ``ViewBuilder.<name>`` (*original*), timed.

    A list whose rows the listing stashed is rendered from them
    (:func:`.render.index`, :func:`.render.detail`); any other by
    *original*. Its wall time is the request's ``view`` phase; put in by
    :mod:`nova_cellsched.compat`.
    """
    from nova_cellsched.api.view import render

    rendered = render.index if name == 'index' else render.detail

    def view(self: Any, request: Any, instances: Any,
             cell_down_support: bool = False) -> Any:
        with server_timing.phase('view'):
            return rendered(self, request, instances, cell_down_support,
                            original)
    view.__name__ = name
    view.__doc__ = ("nova's ``ViewBuilder.%s``, its wall time the request's "
                    '``view`` phase.' % name)
    return view
