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

"""Tests of the resolution of the mapping against nova's cells."""

import uuid

import hypothesis
from hypothesis import strategies as st

from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler.decision import CellInfo
from nova_cellsched.scheduler.decision import ProblemKind
from nova_cellsched.scheduler import mapping
from tests import base

CELL0 = CellInfo(decision.CELL0_UUID, 'cell0')
CELL_A = CellInfo('4cf0a6c4-1d5e-4e4a-9a6c-0a1ecf7d7b14', 'cellA')
CELL_B = CellInfo('7f9b7d0e-57c4-4a8e-8f4e-3c1f4c1d9a02', 'cellB')
CELL_E = CellInfo('b0b6d6c2-2a4f-4f53-9d1c-6f0e2f3a4b5c', 'cellE')
CELL_F = CellInfo('c1d2e3f4-0a1b-4c2d-8e3f-405162738495', 'cellF')
CELL_SPARE = CellInfo('d4c3b2a1-9f8e-4d7c-8b6a-5f4e3d2c1b0a', 'spare')
NAMELESS = CellInfo('e5f60718-293a-4b4c-9d6e-7f8091a2b3c4')
ALL_CELLS = [CELL0, CELL_A, CELL_B, CELL_E, CELL_F, CELL_SPARE, NAMELESS]

PROJECT = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'


def _resolve(default='', projects='', cells=ALL_CELLS):
    return decision.resolve(mapping.parse(default, projects), cells)


def _kinds(pol):
    return [(p.kind, p.ref) for p in pol.problems]


class ResolveTestCase(base.TestCase):

    def test_unrestricted_when_both_options_are_empty(self):
        """Empty options: allowed_cells is None for everyone."""
        pol = _resolve()
        self.assertFalse(pol.restricted)
        for project in (PROJECT, 'other', None):
            self.assertIsNone(pol.allowed_cells(project))
        self.assertEqual((), pol.problems)
        self.assertEqual(frozenset(), pol.usable_cells)
        # Even with no cells at all.
        self.assertIsNone(_resolve(cells=[]).allowed_cells(PROJECT))

    def test_names(self):
        pol = _resolve('cellA,cellB', 'cellE:%s;ops,cellF:ops' % PROJECT)
        self.assertTrue(pol.restricted)
        self.assertEqual(frozenset([CELL_A.uuid, CELL_B.uuid]),
                         pol.default_cells)
        self.assertEqual(frozenset([CELL_E.uuid]),
                         pol.allowed_cells(PROJECT))
        self.assertEqual(frozenset([CELL_E.uuid, CELL_F.uuid]),
                         pol.allowed_cells('ops'))
        self.assertEqual(pol.default_cells, pol.allowed_cells('other'))
        self.assertEqual(pol.default_cells, pol.allowed_cells(None))
        self.assertEqual((), pol.problems)
        self.assertEqual(
            frozenset([CELL_A.uuid, CELL_B.uuid, CELL_E.uuid, CELL_F.uuid]),
            pol.usable_cells)
        self.assertTrue(pol.is_dedicated('ops'))
        self.assertFalse(pol.is_dedicated('other'))
        self.assertEqual(tuple(sorted([PROJECT, 'ops'])),
                         pol.projects_of_cell(CELL_E.uuid))
        self.assertEqual(('ops',), pol.projects_of_cell(CELL_F.uuid))
        self.assertEqual((), pol.projects_of_cell(CELL_A.uuid))
        self.assertEqual({c.uuid: c for c in ALL_CELLS}, dict(pol.cells))

    def test_uuids_in_any_spelling(self):
        """Cells named by uuid, dashed or not, any case, resolve."""
        e = uuid.UUID(CELL_E.uuid)
        pol = _resolve('%s,%s' % (CELL_A.uuid.upper(),
                                  uuid.UUID(CELL_B.uuid).hex),
                       '%s:p1,%s:p2' % (e.hex.upper(), CELL_E.uuid))
        self.assertEqual(frozenset([CELL_A.uuid, CELL_B.uuid]),
                         pol.default_cells)
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p2'))
        self.assertEqual((), pol.problems)

    def test_nameless_cell_by_uuid(self):
        pol = _resolve(NAMELESS.uuid)
        self.assertEqual(frozenset([NAMELESS.uuid]), pol.default_cells)
        self.assertEqual(NAMELESS.uuid, NAMELESS.label)
        self.assertEqual('cellA (%s)' % CELL_A.uuid, CELL_A.label)

    def test_project_ids_in_any_spelling(self):
        dashed = str(uuid.UUID(PROJECT))
        pol = _resolve('cellA', 'cellE:%s' % dashed.upper())
        for spelling in (PROJECT, dashed, PROJECT.upper(), dashed.upper()):
            self.assertEqual(frozenset([CELL_E.uuid]),
                             pol.allowed_cells(spelling))
            self.assertTrue(pol.is_dedicated(spelling))

    def test_unknown_name_grants_nothing(self):
        pol = _resolve('cellA,nope', 'cellE:p1,nope:p1,nope2:p2')
        self.assertEqual(frozenset([CELL_A.uuid]), pol.default_cells)
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual(frozenset(), pol.allowed_cells('p2'))
        self.assertEqual([(ProblemKind.UNKNOWN, 'nope'),
                          (ProblemKind.UNKNOWN, 'nope2'),
                          (ProblemKind.NO_CELLS_FOR_PROJECT, 'p2')],
                         _kinds(pol))
        unknown = pol.problems[0]
        self.assertIn('named in cells_default', unknown.detail)
        self.assertIn('nova-manage cell_v2 list_cells', unknown.detail)
        self.assertEqual("unknown cell 'nope': %s" % unknown.detail,
                         str(unknown))

    def test_unknown_uuid_grants_nothing(self):
        missing = str(uuid.UUID(int=42))
        pol = _resolve(missing, '')
        self.assertEqual(frozenset(), pol.allowed_cells('p1'))
        self.assertEqual([(ProblemKind.UNKNOWN, missing)], _kinds(pol))

    def test_a_name_is_not_a_uuid(self):
        """A cell whose name is another cell's uuid is not confused."""
        impostor = CellInfo(str(uuid.UUID(int=7)), CELL_A.uuid)
        pol = _resolve(CELL_A.uuid, '', cells=ALL_CELLS + [impostor])
        self.assertEqual(frozenset([CELL_A.uuid]), pol.default_cells)

    def test_ambiguous_name_grants_nothing(self):
        """Two cells with one name: neither is used, both are listed."""
        twin1 = CellInfo('11111111-1111-4111-8111-111111111111', 'twin')
        twin2 = CellInfo('22222222-2222-4222-8222-222222222222', 'twin')
        cells = ALL_CELLS + [twin1, twin2]
        pol = _resolve('twin,cellA', 'twin:p1', cells=cells)
        self.assertEqual(frozenset([CELL_A.uuid]), pol.default_cells)
        self.assertEqual(frozenset(), pol.allowed_cells('p1'))
        self.assertNotIn(twin1.uuid, pol.allowed_cells('other'))
        self.assertEqual([(ProblemKind.AMBIGUOUS, 'twin'),
                          (ProblemKind.NO_CELLS_FOR_PROJECT, 'p1')],
                         _kinds(pol))
        detail = pol.problems[0].detail
        self.assertIn('2 cell mappings have this name', detail)
        self.assertIn('%s, %s' % (twin1.uuid, twin2.uuid), detail)
        self.assertIn('name the cell by uuid', detail)
        # By uuid, each twin is fine.
        pol = _resolve(twin2.uuid, 'twin:p1,%s:p1' % twin1.uuid,
                       cells=cells)
        self.assertEqual(frozenset([twin2.uuid]), pol.default_cells)
        self.assertEqual(frozenset([twin1.uuid]), pol.allowed_cells('p1'))

    def test_cell0_grants_nothing(self):
        for ref in ('cell0', decision.CELL0_UUID, '0' * 32):
            pol = _resolve(ref, 'cellE:p1,%s:p1;p2' % ref)
            self.assertEqual(frozenset(), pol.default_cells)
            self.assertEqual(frozenset([CELL_E.uuid]),
                             pol.allowed_cells('p1'))
            self.assertEqual(frozenset(), pol.allowed_cells('p2'))
            self.assertEqual(frozenset(), pol.allowed_cells('p3'))
            kinds = _kinds(pol)
            self.assertEqual(ProblemKind.CELL0, kinds[0][0])
            self.assertEqual((ProblemKind.NO_CELLS_FOR_PROJECT, 'p2'),
                             kinds[-1])
            self.assertIn('cell0 only stores servers', pol.problems[0].detail)
            self.assertNotIn(decision.CELL0_UUID, pol.usable_cells)

    def test_disabled_in_nova_is_reported_and_kept(self):
        """A cell disabled in nova stays allowed; the operator is told."""
        disabled = CellInfo(CELL_B.uuid, 'cellB', disabled=True)
        cells = [CELL_A, disabled, CELL_E]
        pol = _resolve('cellA,cellB', 'cellB:p1', cells=cells)
        self.assertEqual(frozenset([CELL_A.uuid, CELL_B.uuid]),
                         pol.default_cells)
        self.assertEqual(frozenset([CELL_B.uuid]), pol.allowed_cells('p1'))
        kinds = _kinds(pol)
        self.assertIn((ProblemKind.DISABLED_IN_NOVA, 'cellB'), kinds)
        disabled_problems = [p for p in pol.problems
                             if p.kind == ProblemKind.DISABLED_IN_NOVA]
        self.assertEqual(1, len(disabled_problems))
        self.assertIn('update_cell --enable', disabled_problems[0].detail)

    def test_dedicated_cell_also_default_is_reported(self):
        pol = _resolve('cellA,cellE', 'cellE:p1;p2,cellF:p3')
        self.assertEqual([(ProblemKind.DEDICATED_AND_DEFAULT, 'cellE')],
                         _kinds(pol))
        self.assertIn('dedicated to 2 project(s)', pol.problems[0].detail)
        # Still in force as written: unmapped projects use cellE too.
        self.assertIn(CELL_E.uuid, pol.allowed_cells('other'))
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))

    def test_dedicated_and_default_by_different_spellings(self):
        """The overlap is found between a name and a uuid of one cell."""
        pol = _resolve(CELL_E.uuid, 'cellE:p1')
        self.assertEqual([(ProblemKind.DEDICATED_AND_DEFAULT, 'cellE')],
                         _kinds(pol))

    def test_project_with_only_unknown_cells_gets_nothing(self):
        """Never the default cells: an empty frozenset."""
        pol = _resolve('cellA,cellB', 'nope:p1,cellE:p2')
        allowed = pol.allowed_cells('p1')
        self.assertEqual(frozenset(), allowed)
        self.assertIsInstance(allowed, frozenset)
        self.assertTrue(pol.is_dedicated('p1'))
        self.assertEqual([(ProblemKind.UNKNOWN, 'nope'),
                          (ProblemKind.NO_CELLS_FOR_PROJECT, 'p1')],
                         _kinds(pol))
        self.assertIn('does not fall back to cells_default',
                      pol.problems[1].detail)

    def test_mapped_project_with_one_unknown_cell(self):
        pol = _resolve('cellA', 'nope:p1,cellE:p1')
        self.assertEqual(frozenset([CELL_E.uuid]), pol.allowed_cells('p1'))
        self.assertEqual([(ProblemKind.UNKNOWN, 'nope')], _kinds(pol))

    def test_only_projects_restricts_unmapped_projects_to_nothing(self):
        pol = _resolve('', 'cellE:p1')
        self.assertTrue(pol.restricted)
        self.assertEqual(frozenset(), pol.allowed_cells('other'))
        self.assertEqual(frozenset(), pol.allowed_cells(None))

    def test_nothing_resolves_without_cells(self):
        """Before the cells are loaded, a restriction grants nothing."""
        pol = _resolve('cellA', 'cellE:p1', cells=[])
        self.assertTrue(pol.restricted)
        self.assertEqual(frozenset(), pol.allowed_cells('p1'))
        self.assertEqual(frozenset(), pol.allowed_cells('p2'))

    def test_problems_are_reported_once_per_reference(self):
        pol = _resolve('nope', 'nope:p1,nope:p2')
        self.assertEqual(1, [p.kind for p in pol.problems].count(
            ProblemKind.UNKNOWN))


# --- isolation property ---------------------------------------------------

_NAMES = ['a', 'b', 'c', 'cell0']
_PROJECTS = ['p1', 'p2', 'p3', PROJECT]
_UNKNOWN_UUID = '99999999-9999-4999-8999-999999999999'


@st.composite
def _cells(draw):
    """A few cells, names drawn from a small pool (so names repeat)."""
    count = draw(st.integers(0, 5))
    uuids = draw(st.lists(st.uuids(), min_size=count, max_size=count,
                          unique=True))
    cells = [CellInfo(str(u), draw(st.sampled_from(_NAMES[:3] + [None])),
                      draw(st.booleans())) for u in uuids]
    if draw(st.booleans()):
        cells.append(CELL0)
    return cells


def _spell(draw, cells):
    """A reference: a name, a uuid in some spelling, or an unknown one."""
    choices = list(_NAMES) + ['unknown', _UNKNOWN_UUID]
    for cell in cells:
        u = uuid.UUID(cell.uuid)
        choices.extend([cell.uuid, u.hex, cell.uuid.upper()])
    return draw(st.sampled_from(choices))


@st.composite
def _world(draw):
    cells = draw(_cells())
    default = [_spell(draw, cells) for _ in range(draw(st.integers(0, 4)))]
    projects = {}
    for _ in range(draw(st.integers(0, 4))):
        ref = _spell(draw, cells)
        projects.setdefault(ref, []).extend(draw(st.lists(
            st.sampled_from(_PROJECTS + [str(uuid.UUID(PROJECT))]),
            min_size=1, max_size=3)))
    return cells, default, projects


def _oracle(ref, cells):
    """Cell uuids a reference may stand for: same uuid or same name."""
    ref = ref.strip()
    try:
        ref_uuid = str(uuid.UUID(ref))
    except ValueError:
        ref_uuid = None
    return {c.uuid for c in cells
            if c.uuid == ref_uuid or (c.name is not None and c.name == ref)}


class IsolationPropertyTestCase(base.TestCase):

    @hypothesis.settings(deadline=None, derandomize=True, database=None,
                         max_examples=300)
    @hypothesis.given(world=_world(),
                      asked=st.sampled_from(
                          _PROJECTS + ['unmapped', None,
                                       str(uuid.UUID(PROJECT)).upper()]))
    def test_no_project_gets_a_cell_not_named_for_it(self, world, asked):
        """allowed_cells(p) only holds cells the options name for p.

        For a project named in cells_projects: a subset of the cells its
        references may stand for; for any other project: a subset of what
        the cells_default references may stand for. Never cell0, never a
        cell named in neither option, and None only when both options are
        empty.
        """
        cells, default, projects = world
        pol = decision.resolve(mapping.build(default, projects), cells)
        allowed = pol.allowed_cells(asked)

        if not default and not projects:
            self.assertIsNone(allowed)
            return
        self.assertIsInstance(allowed, frozenset)

        canonical = (None if asked is None else
                     mapping.normalize_project_id(asked))
        own_refs = [ref for ref, ps in projects.items()
                    if canonical in {mapping.normalize_project_id(p)
                                     for p in ps}]
        refs = own_refs if own_refs else default
        named_for_it = set().union(*(_oracle(r, cells) for r in refs))
        named_anywhere = set().union(
            *(_oracle(r, cells) for r in list(default) + list(projects)))

        self.assertLessEqual(allowed, named_for_it)
        self.assertLessEqual(allowed, named_anywhere)
        self.assertNotIn(decision.CELL0_UUID, allowed)
        if own_refs:
            # A dedicated project never falls back to the defaults.
            self.assertLessEqual(
                allowed, set().union(*(_oracle(r, cells)
                                       for r in own_refs)))
        # Exactly the cells whose reference is unambiguous.
        expected = set()
        for ref in refs:
            matches = _oracle(ref, cells)
            if len(matches) == 1 and decision.CELL0_UUID not in matches:
                expected |= matches
        self.assertEqual(expected, allowed)
