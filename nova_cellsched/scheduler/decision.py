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

"""The one decision of the host filter and the placement pre-filter.

Pure Python, no nova import: a request spec is read the way nova reads
its ``RequestSpec`` and ``Destination`` objects (``'field' in obj`` for a
field that is set), so the decision is tested with nova's real objects
and typed without nova.

:func:`allowed_cells` is what :class:`~.host_filter.ProjectCellFilter`
lets through; :func:`placement_scope` is what
:func:`~.request_filter.require_cell_aggregates` asks of placement for
the same request.

Each answer is decided with one :class:`~.policy_cache.Snapshot` of the
policy cache, taken once per request (and replaced as a whole when the
cell mappings are read again for that request): a SIGHUP during the
request gives it the old configuration or the new one, never a part of
each.
"""

from collections.abc import Iterable
import dataclasses
from typing import Any

from nova_cellsched.scheduler import policy as policy_mod
from nova_cellsched.scheduler import policy_cache


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


@dataclasses.dataclass(frozen=True)
class NamedDestination:
    """The compute host or node a request names, and how.

    :ivar forced: True for ``force_hosts``/``force_nodes`` (an admin's
        ``availability_zone='zone:host[:node]'``), False for
        ``requested_destination``.
    :ivar field: ``'host'`` or ``'node'``.
    :ivar value: the name(s), comma separated for several forced ones.
    """

    forced: bool
    field: str
    value: str

    def __str__(self) -> str:
        return '%s %s %s' % ('forced' if self.forced else 'requested',
                             self.field, self.value)


def named_destination(spec_obj: Any) -> NamedDestination | None:
    """The compute host or node the request names; None if it names none.

    * ``force_hosts``/``force_nodes``: an admin's boot to
      ``availability_zone='zone:host[:node]'``. nova's HostManager skips
      every host filter for them.
    * ``requested_destination.host``/``.node``: a boot with ``host`` or
      ``hypervisor_hostname`` (API 2.74), a migration, live migration,
      evacuation or unshelve to a given host. The host filters run.

    Either way nova asks placement for that node only (``in_tree``), or,
    when a host has several nodes, without ``max_placement_results``
    (``nova.scheduler.utils.resources_from_request_spec``): no host can
    be cut by the limit. ``str()`` of the answer says which, for logs.
    """
    for field, what in (('force_hosts', 'host'), ('force_nodes', 'node')):
        forced = getattr(spec_obj, field) if field in spec_obj else None
        if forced:
            return NamedDestination(True, what, ','.join(forced))
    if 'requested_destination' not in spec_obj:
        return None
    dest = spec_obj.requested_destination
    if dest is None:
        return None
    for field in ('host', 'node'):
        value = getattr(dest, field) if field in dest else None
        if value:
            return NamedDestination(False, field, str(value))
    return None


def allowed_cells(cache: policy_cache.PolicyCache, spec_obj: Any,
                  seen_cells: Iterable[str] = ()) -> frozenset[str] | None:
    """Cell uuids a request may be placed in; None when unrestricted.

    The decision of the host filter (see the table of
    :class:`~.host_filter.ProjectCellFilter`): the pinned cell of a
    same-cell move, else the project's cells, else the default cells.
    Rebuilds and forced hosts are the caller's business (nova does not
    run host filters for them).

    :param seen_cells: cell uuids of candidate hosts; one the cache does
        not know (a new cell) makes it reload the cell mappings first.
    """
    snapshot = cache.snapshot()
    if not snapshot.policy.restricted or pinned_cell(spec_obj) is not None:
        return _allowed_cells(snapshot.policy, spec_obj)
    if any(uuid not in snapshot.policy.cells for uuid in seen_cells):
        # A cell created since the cache was filled; maybe one the
        # options name.
        snapshot = cache.refresh_cells()
    return _allowed_cells(snapshot.policy, spec_obj)


def _allowed_cells(policy: policy_mod.Policy,
                   spec_obj: Any) -> frozenset[str] | None:
    """:func:`allowed_cells` by *policy* alone."""
    if not policy.restricted:
        return None
    cell = pinned_cell(spec_obj)
    if cell is not None:
        return frozenset([cell])
    return policy.allowed_cells(spec_obj.project_id)


#: ``[cellsched] placement_prefilter_form`` values.
FORM_AUTO = 'auto'
FORM_MEMBER_OF = 'member_of'
FORM_FORBIDDEN = 'forbidden'
FORMS = (FORM_AUTO, FORM_MEMBER_OF, FORM_FORBIDDEN)


def forbidden_form(form: str, allowed: frozenset[str],
                   others: frozenset[str]) -> bool:
    """True when the default cells are asked as "none of *others*".

    :param form: ``[cellsched] placement_prefilter_form``: ``forbidden``
        and ``member_of`` decide; ``auto`` picks the form that names
        fewer aggregates, forbidden only when *others* are fewer than
        *allowed* (the default cells are most of the cells).
    :param allowed: the default cells (not empty).
    :param others: every other cell but cell0.
    :raises ValueError: *form* is none of :data:`FORMS`.
    """
    if form not in FORMS:
        raise ValueError('placement_prefilter_form: expected one of %s, got '
                         '%r' % (', '.join(FORMS), form))
    if form == FORM_AUTO:
        return len(others) < len(allowed)
    return form == FORM_FORBIDDEN


@dataclasses.dataclass(frozen=True)
class PlacementScope:
    """What the pre-filter adds to one placement query.

    :ivar required: ``member_of=in:<uuids>``: the request may only use
        nodes in one of these cell aggregates; empty means no cell at all
        (the request fails before placement is asked).
    :ivar forbidden: ``member_of=!in:<uuids>``: nodes in these cell
        aggregates are left out; a node in no cell aggregate stays in.
    :ivar decided_with: the policy cache's state this scope was decided
        with, for the caller's other reads of the same request (the
        mapping, the scheduling cells); not part of the scope's value.
    """

    decided_with: policy_cache.Snapshot = dataclasses.field(
        compare=False, repr=False)
    required: frozenset[str] | None = None
    forbidden: frozenset[str] = frozenset()


def placement_scope(cache: policy_cache.PolicyCache, spec_obj: Any,
                    form: str = FORM_MEMBER_OF) -> PlacementScope | None:
    """The aggregates the pre-filter asks placement for; None for nothing.

    ==================================  ================================
    request                             placement is asked for
    ==================================  ================================
    both mapping options empty          anything (nothing added)
    host or node named (forced, or      anything: nova already asks for
    ``requested_destination``)          that node only; the host filter
                                        still checks a requested host,
                                        forced hosts skip it as in nova
    same-cell move (cell pinned)        nodes in no *other* cell's
                                        aggregate: a node of the cell
                                        not synced yet stays a candidate
                                        (nova keeps the move in the cell)
    new server, cross-cell resize of a  nodes in the aggregate of one of
    project in ``cells_projects``       :func:`allowed_cells`
    new server, cross-cell resize of    the same, or, when
    any other project (default cells)   :func:`forbidden_form` says so,
                                        nodes in no aggregate of a cell
                                        that is not a default cell (none
                                        when every cell is a default
                                        cell: nothing added)
    ==================================  ================================

    Rebuilds are the caller's business. With no allowed cell the cell
    mappings are read again once (rate limited by the cache) before the
    answer is an empty ``required``, whatever the form.

    :param form: ``[cellsched] placement_prefilter_form``, see
        :func:`forbidden_form`.
    """
    if named_destination(spec_obj) is not None:
        return None
    scope = _placement_scope(cache.snapshot(), spec_obj, form)
    if scope is not None and scope.required == frozenset():
        # Maybe a cell created since the cells were read: look once more
        # before failing the request, and decide with what was read.
        scope = _placement_scope(cache.refresh_cells(), spec_obj, form)
    return scope


def _placement_scope(snapshot: policy_cache.Snapshot, spec_obj: Any,
                     form: str) -> PlacementScope | None:
    """:func:`placement_scope` by *snapshot* alone, no cell load."""
    policy = snapshot.policy
    if not policy.restricted:
        return None
    cell = pinned_cell(spec_obj)
    if cell is not None:
        others = frozenset(policy.cells) - {cell, policy_mod.CELL0_UUID}
        return PlacementScope(snapshot, forbidden=others) if others else None
    allowed = policy.allowed_cells(spec_obj.project_id)
    if allowed is None:
        return None
    project = spec_obj.project_id if 'project_id' in spec_obj else None
    if allowed and (project is None or not policy.is_dedicated(project)):
        others = frozenset(policy.cells) - allowed - {policy_mod.CELL0_UUID}
        if forbidden_form(form, allowed, others):
            return (PlacementScope(snapshot, forbidden=others) if others
                    else None)
    return PlacementScope(snapshot, required=allowed)
