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

"""The project-to-cell decision for one scheduling request.

Pure Python, no nova import: nova's cell mappings come in as
:class:`CellInfo` values, a request spec is read the way nova reads its
``RequestSpec`` and ``Destination`` objects (``'field' in obj`` for a
field that is set), so every rule here is tested with nova's real
objects and typed without nova.

Read top to bottom:

1. **The policy** (:func:`resolve`, :class:`Policy`): the parsed mapping
   (:mod:`.mapping`) resolved against the cell mappings that exist.
   Resolution fails closed: a reference that matches no cell, or several
   (nova does not require unique cell names), grants nothing and is
   listed in :attr:`Policy.problems`, for the log and for
   ``nova-cellsched check``.
2. **The policy in force** (:class:`PolicyCache`): the option values are
   pushed to it (by :mod:`.state`, at start and from the SIGHUP mutate
   hook; requests never read an option), the cell mappings come from a
   callable and are read again by age, for an unknown cell and on every
   reset. Its state is one immutable :class:`Snapshot`, replaced by a
   single assignment.
3. **One request** (:func:`allowed_cells` for
   :class:`~.host_filter.ProjectCellFilter`, :func:`placement_scope` for
   :func:`~.request_filter.require_cell_aggregates`): decided with one
   snapshot, taken once per request, so a SIGHUP during the request
   gives it the old configuration or the new one, never a part of each.
"""

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import mapping as mapping_mod
from nova_cellsched.scheduler.mapping import normalize_project_id

# NOTE: the standard library's logger, not oslo.log's: the command line
# imports this module before nova chooses its concurrency mode, and
# oslo.log imports oslo.context, which must not be loaded before
# eventlet's monkey patching (nova bug 1773102). oslo.log's setup
# formats these records all the same.
LOG = logging.getLogger(__name__)


# The policy
# ----------


CELL0_UUID = '00000000-0000-0000-0000-000000000000'


@dataclasses.dataclass(frozen=True)
class CellInfo:
    """What the policy needs to know of one nova cell mapping.

    :ivar source: the object this was read from (nova's ``CellMapping``,
        from :func:`.state.load_cell_infos`), kept for the nova
        adapters (the pre-filter names it to nova's HostManager); None
        when made otherwise. Never read by the policy, not part of the
        value (equality, hash).
    """

    uuid: str
    name: str | None = None
    disabled: bool = False
    source: object | None = dataclasses.field(
        default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """``name (uuid)``, or the uuid alone for a nameless cell."""
        return '%s (%s)' % (self.name, self.uuid) if self.name else self.uuid


class ProblemKind(enum.Enum):
    """Kinds of configuration problems found while resolving."""

    UNKNOWN = 'unknown cell'
    AMBIGUOUS = 'ambiguous cell name'
    CELL0 = 'cell0 named'
    NO_CELLS_FOR_PROJECT = 'project has no usable cell'
    DISABLED_IN_NOVA = 'cell disabled in nova'
    DEDICATED_AND_DEFAULT = 'dedicated cell also default'


@dataclasses.dataclass(frozen=True)
class Problem:
    """One configuration problem, with what it is about."""

    kind: ProblemKind
    ref: str
    detail: str

    def __str__(self) -> str:
        return '%s %r: %s' % (self.kind.value, self.ref, self.detail)


def _resolve_ref(ref: str, by_uuid: Mapping[str, CellInfo],
                 by_name: Mapping[str, list[CellInfo]],
                 option: str) -> tuple[frozenset[str], list[Problem]]:
    if ref in by_uuid:
        cells = [by_uuid[ref]]
    else:
        cells = by_name.get(ref, [])
    if not cells:
        return frozenset(), [Problem(
            ProblemKind.UNKNOWN, ref,
            'named in %s but no cell mapping has this name or uuid; check '
            '"nova-manage cell_v2 list_cells" for the spelling' % option)]
    if len(cells) > 1:
        return frozenset(), [Problem(
            ProblemKind.AMBIGUOUS, ref,
            'named in %s and %d cell mappings have this name (%s); it is '
            'ignored: name the cell by uuid' % (
                option, len(cells),
                ', '.join(sorted(c.uuid for c in cells))))]
    cell = cells[0]
    problems = []
    if cell.uuid == CELL0_UUID:
        return frozenset(), [Problem(
            ProblemKind.CELL0, ref,
            'named in %s, but cell0 only stores servers that failed to '
            'schedule and has no hosts; remove it' % option)]
    if cell.disabled:
        problems.append(Problem(
            ProblemKind.DISABLED_IN_NOVA, ref,
            'named in %s but disabled in nova (nova-manage cell_v2 '
            'update_cell --enable), so the scheduler does not send new '
            'servers there' % option))
    return frozenset([cell.uuid]), problems


@dataclasses.dataclass(frozen=True)
class Policy:
    """A mapping resolved against the cell mappings that exist.

    :ivar restricted: False when both options are empty: every host passes.
    :ivar default_cells: cell uuids for projects without dedicated cells.
    :ivar project_cells: normalised project id -> its dedicated cell uuids
        (possibly empty: the project is mapped, but only to cells that do
        not resolve, so it gets no host).
    :ivar cells: the cell mappings resolved against, by uuid.
    :ivar problems: what an operator should fix, in option order.
    """

    restricted: bool
    default_cells: frozenset[str]
    project_cells: Mapping[str, frozenset[str]]
    cells: Mapping[str, CellInfo]
    problems: tuple[Problem, ...] = ()

    def allowed_cells(self, project_id: str | None) -> frozenset[str] | None:
        """Cell uuids that may receive a new server of *project_id*.

        :returns: None when nothing is restricted, otherwise a set (maybe
            empty) of cell uuids.
        """
        if not self.restricted:
            return None
        if project_id is None:
            return self.default_cells
        return self.project_cells.get(normalize_project_id(project_id),
                                      self.default_cells)

    def is_dedicated(self, project_id: str) -> bool:
        """True when *project_id* is named in ``cells_projects``."""
        return normalize_project_id(project_id) in self.project_cells

    def projects_of_cell(self, cell_uuid: str) -> tuple[str, ...]:
        """Projects with *cell_uuid* among their dedicated cells, sorted."""
        return tuple(sorted(p for p, cells in self.project_cells.items()
                            if cell_uuid in cells))

    @property
    def usable_cells(self) -> frozenset[str]:
        """Every cell that some project may use for a new server."""
        return self.default_cells.union(*self.project_cells.values())


def resolve(mapping: mapping_mod.CellsMapping,
            cells: Iterable[CellInfo]) -> Policy:
    """Resolve the references of *mapping* against *cells*.

    Never raises for a reference that does not resolve: it is reported in
    :attr:`Policy.problems` and grants nothing.
    """
    by_uuid: dict[str, CellInfo] = {}
    by_name: dict[str, list[CellInfo]] = {}
    for cell in cells:
        by_uuid[cell.uuid] = cell
        if cell.name:
            by_name.setdefault(cell.name, []).append(cell)

    problems: list[Problem] = []
    resolved: dict[str, frozenset[str]] = {}

    def lookup(ref: str, option: str) -> frozenset[str]:
        if ref not in resolved:
            uuids, found = _resolve_ref(ref, by_uuid, by_name, option)
            resolved[ref] = uuids
            problems.extend(found)
        return resolved[ref]

    default_cells = frozenset().union(
        *(lookup(ref, 'cells_default') for ref in mapping.default))
    project_cells: dict[str, frozenset[str]] = {}
    for ref, projects in mapping.projects:
        uuids = lookup(ref, 'cells_projects')
        for project in projects:
            project_cells[project] = project_cells.get(
                project, frozenset()) | uuids
        for cell_uuid in uuids & default_cells:
            problems.append(Problem(
                ProblemKind.DEDICATED_AND_DEFAULT, ref,
                'dedicated to %d project(s) in cells_projects and also in '
                'cells_default, so every unmapped project uses it too; '
                'remove it from one of the two options if that is not '
                'intended' % len(projects)))
    for project, uuids in project_cells.items():
        if not uuids:
            problems.append(Problem(
                ProblemKind.NO_CELLS_FOR_PROJECT, project,
                'mapped in cells_projects only to cells that do not '
                'resolve, so its new servers get no host (it does not fall '
                'back to cells_default)'))
    return Policy(restricted=not mapping.is_empty,
                  default_cells=default_cells,
                  project_cells=project_cells,
                  cells=by_uuid,
                  problems=tuple(problems))


# The policy in force
# -------------------


RawOptions = tuple[tuple[str, ...], str]
"""``(cells_default items, cells_projects string)`` as read from CONF."""


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything the cache holds at one moment, never changed.

    A request takes one (:meth:`PolicyCache.snapshot`) and decides with
    it alone, so a SIGHUP during the request cannot give it the policy of
    one configuration and the mapping or cells of the next.

    :ivar raw: the option values of :attr:`mapping`.
    :ivar mapping: the mapping in force (the last one that parsed).
    :ivar cells: the cell mappings of the last good load; None before one.
    :ivar policy: :attr:`mapping` resolved against :attr:`cells`.
    :ivar loaded_at: clock reading of the last load (good or failed).
    :ivar scheduling_cells: see :attr:`PolicyCache.scheduling_cells`.
    """

    raw: RawOptions
    mapping: mapping_mod.CellsMapping
    cells: tuple[CellInfo, ...] | None
    policy: Policy
    loaded_at: float | None
    # Enabled cells (cell0 excluded) of the last reset's load; None
    # before a reset loaded the cells.
    scheduling_cells: frozenset[str] | None = None

    def cell(self, uuid: str) -> CellInfo | None:
        """The cell *uuid* as the last good load read it; None if absent."""
        return self.policy.cells.get(uuid)


class PolicyCache:
    """The current policy, reloaded when the options or cells change.

    :param options: the raw option values in force at start.
    :param load_cells: returns every cell mapping; may raise.
    :param min_refresh_interval: seconds between two cell reloads that are
        asked for by :meth:`refresh_cells`.
    :param clock: monotonic clock, injectable for tests.
    :param max_age: seconds after which the cell mappings are reloaded on
        the next request (renamed or disabled cells are seen without a
        restart); 0 or None never. :meth:`reset` may change it.
    :raises InvalidCellsMapping: when the options do not parse at start.
    """

    def __init__(self, options: RawOptions,
                 load_cells: Callable[[], Sequence[CellInfo]],
                 min_refresh_interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 max_age: float | None = None) -> None:
        self._max_age = max_age
        self._load_cells = load_cells
        self._min_refresh_interval = min_refresh_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._rejected_raw: RawOptions | None = None
        mapping = mapping_mod.parse(*options)
        # Cells are loaded on first use, not here: the scheduler may build
        # its filters before the API database is reachable.
        self._state = Snapshot(options, mapping, None,
                               resolve(mapping, ()), None)

    @property
    def mapping(self) -> mapping_mod.CellsMapping:
        """The mapping in force (the last one that parsed)."""
        return self._state.mapping

    @property
    def scheduling_cells(self) -> frozenset[str] | None:
        """Cell uuids nova-scheduler schedules new servers to, as it sees them.

        The cells that were enabled (``nova-manage cell_v2 update_cell
        --disable`` not in force), cell0 excluded, when :meth:`reset` last
        loaded the cell mappings: nova's HostManager reads its
        ``enabled_cells`` at the same moments (at start, and on SIGHUP),
        so a cell disabled or re-enabled since is seen by neither until
        the next SIGHUP. Loads for age or unknown cells do not change it.
        None before a reset loaded the cells.
        """
        return self._state.scheduling_cells

    def current(self) -> Policy:
        """Return the policy for the option values in force now."""
        return self.snapshot().policy

    def snapshot(self) -> Snapshot:
        """The state a request decides with, cells loaded if due first.

        Take it once per request: each call may return a newer one (a
        SIGHUP, or a load for age, in between).
        """
        state = self._state
        if state.cells is None:
            # Never loaded, or every load failed so far: try again, but a
            # failing API database is not hammered on every request.
            state = self._reload_cells(state,
                                       force=state.loaded_at is None)
        elif self._too_old(state):
            state = self._reload_cells(state, force=False)
        return state

    def reset(self, options: RawOptions | None = None,
              max_age: float | None = None) -> Policy:
        """Install new values and read the cell mappings again now (SIGHUP).

        What nova-scheduler does with its own cell caches at start and on
        SIGHUP (``HostManager.refresh_cells_caches``): renamed, disabled,
        enabled and new cells are seen at once, whatever ``max_age``, and
        :attr:`scheduling_cells` is taken from this load. One load of the
        cell mappings, also when the options changed. A failed load keeps
        the last good cells and scheduling cells, and is logged.

        :param options: the raw option values now in force; None keeps
            those in force. Values that do not parse are logged once at
            error level and the last good mapping stays in force.
        :param max_age: the new age limit of the cells; None keeps it.
        """
        with self._lock:
            if max_age is not None:
                self._max_age = max_age
            state = self._state
            mapping = state.mapping
            raw = state.raw
            if options is not None and options != state.raw:
                if options != self._rejected_raw:
                    parsed = self._parse(options)
                    if parsed is not None:
                        raw, mapping = options, parsed
            elif self._rejected_raw is not None:
                # Back to the value in force: a later return of the
                # rejected value is a new mistake and is logged again.
                self._rejected_raw = None
            self._state = self._build(state, raw, mapping, reset=True)
            return self._state.policy

    def _parse(self, raw: RawOptions) -> mapping_mod.CellsMapping | None:
        """*raw* parsed, or None (logged, and remembered as rejected)."""
        try:
            mapping = mapping_mod.parse(*raw)
        except InvalidCellsMapping as exc:
            self._rejected_raw = raw
            LOG.error('Ignoring the new [cellsched] options, the last '
                      'good mapping stays in force: %s', exc)
            return None
        self._rejected_raw = None
        LOG.info('[cellsched] options changed: cells_default=%(d)r '
                 'cells_projects=%(p)r',
                 {'d': mapping.render_default(),
                  'p': mapping.render_projects()})
        return mapping

    def _too_old(self, state: Snapshot) -> bool:
        max_age = self._max_age
        if not max_age or state.loaded_at is None:
            return False
        return self._clock() - state.loaded_at >= max_age

    def refresh_cells(self) -> Snapshot:
        """Reload the cell mappings unless that was done very recently.

        :returns: the newest state, for the caller to decide with from
            then on.
        """
        self.snapshot()
        return self._reload_cells(self._state, force=False)

    def _reload_cells(self, state: Snapshot, force: bool) -> Snapshot:
        with self._lock:
            if self._state is not state:
                return self._state
            if (not force and state.loaded_at is not None and
                    self._clock() - state.loaded_at <
                    self._min_refresh_interval):
                return state
            self._state = self._build(state, state.raw, state.mapping,
                                      reset=False)
            return self._state

    def _build(self, previous: Snapshot, raw: RawOptions,
               mapping: mapping_mod.CellsMapping, reset: bool) -> Snapshot:
        """A new state: the cell mappings loaded again, *mapping* resolved.

        :param reset: the load is a reset's (:meth:`reset`): it also sets
            the scheduling cells.
        """
        cells = previous.cells
        scheduling_cells = previous.scheduling_cells
        try:
            cells = tuple(self._load_cells())
        except Exception as exc:  # noqa: BLE001 - any DB/driver error
            LOG.error('Cannot load the cell mappings from the API '
                      'database, keeping the %s: %s',
                      'last known cells' if cells is not None else
                      'mapping unresolved (restricted projects get no '
                      'host until it loads)', exc)
        else:
            if reset:
                scheduling_cells = frozenset(
                    c.uuid for c in cells
                    if not c.disabled and c.uuid != CELL0_UUID)
        policy = resolve(mapping, cells or ())
        if cells is not None:
            for problem in policy.problems:
                LOG.warning('[cellsched] %s', problem)
        return Snapshot(raw, mapping, cells, policy, self._clock(),
                        scheduling_cells)


# One request
# -----------


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


def allowed_cells(cache: PolicyCache, spec_obj: Any,
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


def _allowed_cells(policy: Policy,
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

    decided_with: Snapshot = dataclasses.field(
        compare=False, repr=False)
    required: frozenset[str] | None = None
    forbidden: frozenset[str] = frozenset()


def placement_scope(cache: PolicyCache, spec_obj: Any,
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


def _placement_scope(snapshot: Snapshot, spec_obj: Any,
                     form: str) -> PlacementScope | None:
    """:func:`placement_scope` by *snapshot* alone, no cell load."""
    policy = snapshot.policy
    if not policy.restricted:
        return None
    cell = pinned_cell(spec_obj)
    if cell is not None:
        others = frozenset(policy.cells) - {cell, CELL0_UUID}
        return PlacementScope(snapshot, forbidden=others) if others else None
    allowed = policy.allowed_cells(spec_obj.project_id)
    if allowed is None:
        return None
    project = spec_obj.project_id if 'project_id' in spec_obj else None
    if allowed and (project is None or not policy.is_dedicated(project)):
        others = frozenset(policy.cells) - allowed - {CELL0_UUID}
        if forbidden_form(form, allowed, others):
            return (PlacementScope(snapshot, forbidden=others) if others
                    else None)
    return PlacementScope(snapshot, required=allowed)
