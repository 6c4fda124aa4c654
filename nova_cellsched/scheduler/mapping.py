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

"""Strict parser for ``[cellsched] cells_default`` and ``cells_projects``.

Pure Python, no nova import. The grammar of ``cells_projects`` is CERN's::

    value    := "" | pair ("," pair)*
    pair     := cell ":" project (";" project)*
    cell     := name or uuid of a cell mapping (no "," ":" ";")
    project  := project id (no whitespace, "," ":" ";")

Whitespace around every token is ignored. oslo.config's ``DictOpt`` is not
used for it because it glues a pair without ``:`` onto the next pair in
silence; here every malformed part is an :class:`InvalidCellsMapping` that
quotes it. Repeating a cell merges its projects, repeating a project under
one cell is harmless: neither changes who may use which cell.

References are normalised so that equal things compare equal: a cell
reference that is a uuid (32 hex digits, dashed or not, any case)
becomes the canonical dashed lower case uuid that nova stores, and a
project id that is a uuid becomes keystone's 32 hex digit form.
"""

import dataclasses
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence

from nova_cellsched.exception import InvalidCellsMapping

PAIR_SEP = ','
CELL_SEP = ':'
PROJECT_SEP = ';'

_EXPECTED_PAIR = ("expected 'cell:project' or 'cell:project;project', "
                  "pairs separated by ','")


# Only the two spellings nova and keystone write: 32 hex digits, or the
# dashed 8-4-4-4-12 form. uuid.UUID() alone also takes '+', '_', braces
# and stray dashes, which would fold different ids into one.
_UUID_RE = re.compile(
    r'[0-9a-f]{8}(-?)[0-9a-f]{4}\1[0-9a-f]{4}\1[0-9a-f]{4}\1[0-9a-f]{12}',
    re.ASCII | re.IGNORECASE)


def _as_uuid(token: str) -> uuid.UUID | None:
    if not _UUID_RE.fullmatch(token):
        return None
    return uuid.UUID(token)


def normalize_cell_ref(ref: str) -> str:
    """Return the canonical form of a cell reference (name or uuid)."""
    ref = ref.strip()
    as_uuid = _as_uuid(ref)
    return str(as_uuid) if as_uuid is not None else ref


def normalize_project_id(project_id: str) -> str:
    """Return the canonical form of a project id.

    Keystone ids are 32 hex digits; a dashed or upper case spelling of the
    same uuid is folded to that form. Anything else is kept as it is.
    """
    project_id = project_id.strip()
    as_uuid = _as_uuid(project_id)
    return as_uuid.hex if as_uuid is not None else project_id


@dataclasses.dataclass(frozen=True)
class CellsMapping:
    """The parsed options: which cell references serve which projects.

    References are normalised but not resolved: whether a name matches a
    real cell mapping is decided by :mod:`nova_cellsched.scheduler.decision`.

    :ivar default: cell references for projects not in ``projects``, in
        option order, without repeats.
    :ivar projects: ``(cell reference, project ids)`` pairs in option
        order, each cell once, each project once per cell.
    """

    default: tuple[str, ...] = ()
    projects: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when neither option names a cell: nothing is restricted."""
        return not self.default and not self.projects

    def render_projects(self) -> str:
        """Render ``projects`` back into ``cells_projects`` syntax."""
        return PAIR_SEP.join(
            cell + CELL_SEP + PROJECT_SEP.join(projects)
            for cell, projects in self.projects)

    def render_default(self) -> str:
        """Render ``default`` back into ``cells_default`` syntax."""
        return PAIR_SEP.join(self.default)


def _check_cell_ref(option: str, value: str, text: str, token: str,
                    where: str) -> str:
    """Check the cell reference *text*, quoting *token* on error."""
    ref = text.strip()
    if not ref:
        raise InvalidCellsMapping(
            option, value, token,
            'empty cell name in %s; %s' % (where, (
                _EXPECTED_PAIR if option == 'cells_projects' else
                "expected cell names or uuids separated by ','; remove the "
                "extra ','")))
    for sep in (PAIR_SEP, CELL_SEP, PROJECT_SEP):
        if sep in ref:
            raise InvalidCellsMapping(
                option, value, token,
                'a cell name cannot contain %r (%s); %s' % (
                    sep, where,
                    "cells_default is a plain list of cells: put "
                    "'cell:project' pairs in cells_projects"
                    if option == 'cells_default' else _EXPECTED_PAIR))
    return normalize_cell_ref(ref)


def parse_cells_default(value: str | Sequence[str]) -> tuple[str, ...]:
    """Parse ``cells_default`` (a string or oslo.config's list of items).

    :returns: normalised cell references in order, repeats dropped.
    :raises InvalidCellsMapping: on an empty item or an item with ``:`` or
        ``;`` (a ``cells_projects`` value put in the wrong option).
    """
    if isinstance(value, str):
        raw = value
        items: Sequence[str] = value.split(PAIR_SEP) if value.strip() else []
    else:
        items = list(value)
        raw = PAIR_SEP.join(items)
    refs: dict[str, None] = {}
    for pos, item in enumerate(items, 1):
        ref = _check_cell_ref('cells_default', raw, item, item,
                              'item %d of %d' % (pos, len(items)))
        refs.setdefault(ref, None)
    return tuple(refs)


def parse_cells_projects(value: str) -> tuple[
        tuple[str, tuple[str, ...]], ...]:
    """Parse ``cells_projects``.

    :returns: ``(cell reference, project ids)`` pairs in option order; a
        cell named twice has its projects merged into its first pair.
    :raises InvalidCellsMapping: quoting the first malformed pair.
    """
    option = 'cells_projects'
    if not value.strip():
        return ()
    pairs = value.split(PAIR_SEP)
    merged: dict[str, dict[str, None]] = {}
    for pos, pair in enumerate(pairs, 1):
        where = 'pair %d of %d' % (pos, len(pairs))
        if not pair.strip():
            raise InvalidCellsMapping(
                option, value, pair,
                'empty %s; %s: remove the extra %r' % (
                    where, _EXPECTED_PAIR, PAIR_SEP))
        parts = pair.split(CELL_SEP)
        if len(parts) != 2:
            raise InvalidCellsMapping(
                option, value, pair,
                '%s has %d %r, %s; %s' % (
                    where, len(parts) - 1, CELL_SEP,
                    'a cell needs its projects after one colon'
                    if len(parts) == 1 else
                    'is a comma missing between two pairs?',
                    _EXPECTED_PAIR))
        cell = _check_cell_ref(option, value, parts[0], pair, where)
        projects = merged.setdefault(cell, {})
        raw_projects = parts[1].split(PROJECT_SEP)
        for project in raw_projects:
            project_id = project.strip()
            if not project_id:
                raise InvalidCellsMapping(
                    option, value, pair,
                    'empty project id in %s (cell %r); %s' % (
                        where, cell,
                        "list at least one project after ':' and "
                        "separate projects with a single ';'"))
            if any(ch.isspace() for ch in project_id):
                raise InvalidCellsMapping(
                    option, value, pair,
                    'project id %r in %s contains whitespace; separate '
                    "projects with ';'" % (project_id, where))
            projects.setdefault(normalize_project_id(project_id), None)
    return tuple((cell, tuple(projects)) for cell, projects in merged.items())


def parse(cells_default: str | Sequence[str],
          cells_projects: str) -> CellsMapping:
    """Parse both options into one :class:`CellsMapping`."""
    return CellsMapping(default=parse_cells_default(cells_default),
                        projects=parse_cells_projects(cells_projects))


def build(default: Iterable[str] = (),
          projects: Mapping[str, Iterable[str]] | None = None
          ) -> CellsMapping:
    """Build a mapping from Python values, checked like parsed text.

    Equivalent to rendering the values into option syntax and parsing
    them, so the same errors apply.
    """
    default_text = PAIR_SEP.join(default)
    projects_text = PAIR_SEP.join(
        cell + CELL_SEP + PROJECT_SEP.join(ps)
        for cell, ps in (projects or {}).items())
    return parse(default_text, projects_text)
