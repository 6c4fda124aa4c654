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

"""The project-to-cell policy: a parsed mapping resolved to real cells.

Pure Python, no nova import: nova's cell mappings come in as
:class:`CellInfo` values. The policy answers one question, cheaply and
without I/O: which cell uuids may receive a new server of a project.

Resolution fails closed. A reference that matches no cell (unknown) or
several cells (ambiguous: nova does not require unique cell names) grants
nothing, and is listed in :attr:`Policy.problems` so it can be logged once
and shown by ``nova-cellsched check``.
"""

import dataclasses
import enum
from collections.abc import Iterable, Mapping

from nova_cellsched.scheduler.mapping import CellsMapping
from nova_cellsched.scheduler.mapping import normalize_project_id

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


def resolve(mapping: CellsMapping, cells: Iterable[CellInfo]) -> Policy:
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
