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

"""Hostile and broken ``[cellsched]`` values, and the isolation invariant.

* The parser, fuzzed with hypothesis and a corpus of nasty values, is
  compared with an independent reference reading of the grammar: a value
  parses to exactly the (cell, project) pairs it spells, or raises
  InvalidCellsMapping quoting a part of the value.
* The filter, with nova's FakeHostState and RequestSpec, over random
  cells (duplicate names, nameless, cell0), mappings (names, uuids in
  every spelling, unknown cells) and requests: a new server never passes
  a host outside its project's cells, nor one in a cell named nowhere.
* Values that oslo.config itself cannot read (``$`` interpolation), at
  start and on a SIGHUP.
"""

# nova.tests first, as in tests/unit/test_filter.py.
from nova.tests.unit.scheduler import fakes  # isort: skip

import logging
import re
import time
import uuid as uuid_lib

import fixtures
import hypothesis
from hypothesis import strategies as st
import nova.conf
from nova import objects
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools
import testtools.content
import testtools.content_type

from nova_cellsched import conf as conf_mod
from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler import host_filter as filters
from nova_cellsched.scheduler import mapping
from tests import base
from tests.fixtures import request_specs
from tests.fixtures import scheduler_state

CONF = nova.conf.CONF
COUNTS = {}

UUID_RE = re.compile(r'[0-9a-fA-F]{8}(-?)[0-9a-fA-F]{4}\1[0-9a-fA-F]{4}\1'
                     r'[0-9a-fA-F]{4}\1[0-9a-fA-F]{12}')


def _count(name):
    COUNTS[name] = COUNTS.get(name, 0) + 1


# An independent reading of the grammar (see mapping.py's docstring).

class Invalid(Exception):
    pass


def ref_uuid(token):
    return uuid_lib.UUID(token) if UUID_RE.fullmatch(token) else None


def ref_cell(token):
    token = token.strip()
    if not token or any(sep in token for sep in ',:;'):
        raise Invalid(token)
    as_uuid = ref_uuid(token)
    return str(as_uuid) if as_uuid else token


def ref_project(token):
    token = token.strip()
    if not token or any(ch.isspace() for ch in token) or any(
            sep in token for sep in ',:;'):
        raise Invalid(token)
    as_uuid = ref_uuid(token)
    return as_uuid.hex if as_uuid else token


def reference(default, projects):
    """(default cells in order, {cell: {projects}}) or Invalid."""
    if isinstance(default, str):
        items = default.split(',') if default.strip() else []
    else:
        items = list(default)
    cells = []
    for item in items:
        cell = ref_cell(item)
        if cell not in cells:
            cells.append(cell)
    pairs = {}
    if projects.strip():
        for pair in projects.split(','):
            parts = pair.split(':')
            if len(parts) != 2:
                raise Invalid(pair)
            cell = ref_cell(parts[0])
            for project in parts[1].split(';'):
                pairs.setdefault(cell, set()).add(ref_project(project))
    return tuple(cells), pairs


NASTY = [
    ('', ''), (' ', '  '), (',', ''), ('', ','), ('cell1,', ''),
    (',cell1', ''), ('cell1,,cell2', ''), ('cell1', 'cell2:'),
    ('', ':p1'), ('', 'cell2:p1,'), ('', 'cell2:p1,,cell3:p2'),
    ('', 'cell2:p1;'), ('', 'cell2:;p1'), ('', 'cell2:p1;;p2'),
    ('', 'cell2::p1'), ('', 'cell2:p1:cell3:p2'), ('', 'cell2'),
    ('', 'cell2 p1'), ('', 'cell2:p 1'), ('', 'cell2:p1 p2'),
    ('cell1:p1', ''), ('cell1;cell2', ''), ('', 'c;d:p1'),
    ('cell1, cell1 ,CELL1', 'cell2:p1,cell2:p2,cell2:p1'),
    ('', 'cell2:p1,cell3:p1'),
    # unicode: names are kept, whitespace of any kind splits nothing
    ('célula1,セル2', 'célula1:プロジェクト'), ('', 'cell2:p\u00a01'),
    ('', 'cell2:p\u20031'), ('', 'cell2:\u200bp1'), ('\u3000cell1\u3000', ''),
    ('', 'cell2:p1\u2028p2'), ('cell\x00', ''), ('', 'cell2:p\x00'),
    # uuids: dashed, undashed, upper case, and near misses
    ('0D5E63A0E3E84E1E9D4F7E06AD7EB6B2',
     '0d5e63a0-e3e8-4e1e-9d4f-7e06ad7eb6b2:0D5E63A0-E3E8-4E1E-9D4F-'
     '7E06AD7EB6B2;0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'),
    ('{0d5e63a0-e3e8-4e1e-9d4f-7e06ad7eb6b2}', ''),
    ('urn:uuid:0d5e63a0-e3e8-4e1e-9d4f-7e06ad7eb6b2', ''),
    ('0d5e63a0-e3e84e1e-9d4f-7e06ad7eb6b2',
     'x:0d5e63a0e3e8-4e1e9d4f7e06ad7eb6b2'),
    ('0d5e63a0_e3e8_4e1e_9d4f_7e06ad7eb6b2', ''),
    ('', 'c:\uff10d5e63a0e3e84e1e9d4f7e06ad7eb6b2'),
    # oslo.config-ish and shell-ish characters are plain text here
    ('"cell1"', "'cell2':p1"), ('[cell1]', 'cell2:[p1]'),
    ('cell1#x', 'cell2:p1#x'), ('$cell1', 'cell2:%(p)s'),
    # very long values
    ('c' * 100000, ''), (','.join('cell%d' % i for i in range(10000)), ''),
    ('', ','.join('cell%d:%s' % (i % 50, ';'.join(
        'p%d' % j for j in range(i % 7 + 1))) for i in range(10000))),
    ('', 'cell2:' + ';' * 50000), ('', ',' * 50000), ('', ':' * 50000),
    (' ' * 100000, '\t' * 100000),
]

SEPARATORS = st.sampled_from(list(',:;') + [' ', '\t', '\n', '\u00a0',
                                           '\u3000'])
WORDS = st.sampled_from([
    'cell1', 'cell2', 'CELL1', 'p1', 'p2', 'é', 'セル', '',
    '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2', '0D5E63A0E3E84E1E9D4F7E06AD7EB6B2',
    '0d5e63a0-e3e8-4e1e-9d4f-7e06ad7eb6b2',
    '0d5e63a0-e3e84e1e9d4f7e06ad7eb6b2',
    '{x}', '$x', '%', '\\', '\x00', '\u200b'])
GRAMMARISH = st.lists(st.one_of(SEPARATORS, WORDS), max_size=40).map(
    ''.join)
ANY_TEXT = st.text(max_size=200)
PAD = st.sampled_from(['', '', ' ', '\t', '\u00a0', '\n  '])
TOKEN = st.one_of(
    st.sampled_from(['cell1', 'cell 2', 'célula', 'セル', 'C1', 'p-1',
                     'proj_x', '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2',
                     '0D5E63A0-E3E8-4E1E-9D4F-7E06AD7EB6B2']),
    st.text(st.characters(blacklist_characters=',:;',
                          blacklist_categories=['Zs', 'Cc', 'Zl', 'Zp']),
            min_size=1, max_size=12))


@st.composite
def structured(draw):
    """Mostly valid cells_projects, sometimes with one mutation."""
    pairs = []
    for _ in range(draw(st.integers(1, 5))):
        projects = [draw(PAD) + draw(TOKEN) + draw(PAD)
                    for _ in range(draw(st.integers(1, 3)))]
        pairs.append(draw(PAD) + draw(TOKEN) + draw(PAD) + ':' +
                     ';'.join(projects))
    text = ','.join(pairs)
    if draw(st.integers(0, 3)) == 0 and text:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(SEPARATORS) + text[at:]
    return text


STRUCTURED = structured()
VALUES = st.one_of(GRAMMARISH, ANY_TEXT, STRUCTURED)
PROJECT_VALUES = st.one_of(st.just(''), STRUCTURED, STRUCTURED, GRAMMARISH,
                           ANY_TEXT)
DEFAULTS = st.one_of(VALUES, st.lists(
    st.one_of(PAD.flatmap(lambda p: TOKEN.map(lambda t: p + t)), TOKEN),
    max_size=5).map(','.join))


def _counts_detail(test):
    """The counts so far as a detail of *test*, read when it ends.

    A figure for the README, not output: ``stestr last --all-attachments``
    shows it; a passing run prints nothing.
    """
    test.addDetail('hostile-mapping-counts', testtools.content.Content(
        testtools.content_type.UTF8_TEXT,
        lambda: [('hostile mapping: %s' % ', '.join(
            '%s %d' % kv for kv in sorted(COUNTS.items()))).encode()]))


class ParserFuzzTest(base.TestCase):
    """mapping.parse against the reference, on hostile text."""

    def setUp(self):
        super().setUp()
        _counts_detail(self)

    def check(self, default, projects):
        _count('parser inputs')
        start = time.monotonic()
        try:
            expected = reference(default, projects)
        except Invalid:
            expected = None
        try:
            got = mapping.parse(default, projects)
        except InvalidCellsMapping as exc:
            elapsed = time.monotonic() - start
            self.assertIsNone(
                expected, 'rejected a valid value %r %r: %s'
                % (default[:200], projects[:200], exc))
            whole = default if isinstance(default, str) else ','.join(default)
            value = whole if exc.option == 'cells_default' else projects
            self.assertIn(exc.option, ('cells_default', 'cells_projects'))
            self.assertIn(exc.token, value)
            self.assertIn(repr(exc.token), str(exc))
            self.assertEqual(value, exc.value)
            self.assertEqual(2, exc.exit_code)
            _count('rejected')
        else:
            elapsed = time.monotonic() - start
            self.assertIsNotNone(expected, 'accepted %r %r as %r' % (
                default[:200], projects[:200], got))
            default_cells, pairs = expected
            self.assertEqual(default_cells, got.default)
            self.assertEqual(pairs, {c: set(ps) for c, ps in got.projects})
            # Nobody gets a cell the text did not give them: resolved as
            # the scheduler resolves it, each reference naming one cell.
            refs = dict.fromkeys(got.default + tuple(c for c, _ in
                                                     got.projects))
            # Numbered uuids, not ones derived from the text: a reference
            # may hold any code point, lone surrogates included, which
            # uuid5 cannot encode.
            by_uuid = {str(uuid_lib.UUID(int=(0xC311 << 64) + i,
                                         version=4)): r
                       for i, r in enumerate(refs)}
            resolved = decision.resolve(got, [
                decision.CellInfo(u, name=r) for u, r in by_uuid.items()])
            for project, cells in resolved.project_cells.items():
                self.assertEqual(
                    {c for c, ps in pairs.items() if project in ps},
                    {by_uuid[u] for u in cells})
            # What the text gives, a rendering gives again.
            again = mapping.parse(got.render_default(),
                                  got.render_projects())
            self.assertEqual(got, again)
            _count('parsed')
        self.assertLess(elapsed, 10.0, 'too slow: %r' % (projects[:100],))

    def test_corpus(self):
        for default, projects in NASTY:
            with self.subTest(default=default[:40], projects=projects[:40]):
                self.check(default, projects)
                self.check(default.split(','), projects)

    @hypothesis.settings(max_examples=1500, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(default=DEFAULTS, projects=PROJECT_VALUES)
    def test_fuzzed_strings(self, default, projects):
        self.check(default, projects)

    @hypothesis.settings(max_examples=500, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(default=st.lists(st.one_of(TOKEN, VALUES), max_size=6),
                      projects=PROJECT_VALUES)
    def test_fuzzed_lists(self, default, projects):
        """cells_default as oslo.config's ListOpt hands it over."""
        self.check(default, projects)


# The isolation invariant, through the real filter.

NAMES = ['alpha', 'beta', 'gamma', 'delta']
PROJECT_IDS = [uuid_lib.UUID(int=0x1000 + i, version=4).hex for i in range(4)]
PROJECTS = PROJECT_IDS + ['ops', 'Ops']


@st.composite
def universes(draw):
    """Cells (some names repeated, some nameless, maybe cell0)."""
    count = draw(st.integers(1, 7))
    cells = []
    for index in range(count):
        cells.append(decision.CellInfo(
            uuid=str(uuid_lib.UUID(int=draw(st.integers(1, 2**64)),
                                   version=4)),
            name=draw(st.one_of(st.none(), st.sampled_from(NAMES))),
            disabled=draw(st.booleans())))
    if draw(st.booleans()):
        cells.append(decision.CellInfo(uuid=decision.CELL0_UUID,
                                         name='cell0'))
    uuids = [c.uuid for c in cells]
    hypothesis.assume(len(set(uuids)) == len(uuids))
    return cells


def spell_cell(draw, cells):
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return draw(st.sampled_from(NAMES + ['cell0', 'nowhere']))
    cell = draw(st.sampled_from(cells))
    if choice == 1 and cell.name:
        return cell.name
    if choice == 2:
        return cell.uuid.upper()
    if choice == 3:
        return cell.uuid.replace('-', '')
    if choice == 4:
        return str(uuid_lib.uuid4())  # unknown
    return cell.uuid


def spell_project(draw, project):
    if project in PROJECT_IDS and draw(st.booleans()):
        return str(uuid_lib.UUID(project)).upper()
    return project


@st.composite
def scenarios(draw):
    cells = draw(universes())
    default = [spell_cell(draw, cells)
               for _ in range(draw(st.integers(0, 3)))]
    pairs = []
    for _ in range(draw(st.integers(0, 4))):
        projects = draw(st.lists(st.sampled_from(PROJECTS), min_size=1,
                                 max_size=3))
        pairs.append((spell_cell(draw, cells),
                      [spell_project(draw, p) for p in projects]))
    request = draw(st.sampled_from(PROJECTS + ['stranger']))
    request = spell_project(draw, request)
    move = draw(st.sampled_from(['new', 'new', 'cross', 'pinned']))
    pinned = draw(st.sampled_from(cells)) if move != 'new' else None
    return cells, default, pairs, request, move, pinned


def oracle_resolve(ref, cells):
    """The cell uuids a reference names: one cell, or none."""
    as_uuid = ref_uuid(ref)
    key = str(as_uuid) if as_uuid else ref
    found = [c for c in cells if c.uuid == key] or [
        c for c in cells if c.name == key]
    if len(found) != 1 or found[0].uuid == decision.CELL0_UUID:
        return set()
    return {found[0].uuid}


def oracle_project(project):
    as_uuid = ref_uuid(project)
    return as_uuid.hex if as_uuid else project


class IsolationPropertyTest(base.TestCase):
    """Random mappings, cells and requests through ProjectCellFilter."""

    def setUp(self):
        super().setUp()
        _counts_detail(self)
        objects.register_all()
        self.cfg = self.useFixture(config_fixture.Config(CONF))
        conf_mod.register_opts(CONF)
        self.useFixture(fixtures.FakeLogger(name='nova_cellsched',
                                            level=logging.INFO))
        self.universe = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state.load_cell_infos',
            lambda: list(self.universe)))
        self.policy_state = self.useFixture(scheduler_state.FreshPolicy())

    @hypothesis.settings(max_examples=400, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(scenario=scenarios())
    def test_new_servers_stay_in_their_cells(self, scenario):
        cells, default, pairs, request, move, pinned = scenario
        _count('isolation scenarios')
        self.universe[:] = cells
        self.cfg.config(cells_default=default,
                        cells_projects=','.join(
                            '%s:%s' % (c, ';'.join(ps)) for c, ps in pairs),
                        group='cellsched')
        # Each example is a scheduler starting with its own cells.
        self.policy_state.install(None)
        filt = filters.ProjectCellFilter()
        outsider = str(uuid_lib.uuid4())
        hosts = [fakes.FakeHostState('h%d-%d' % (i, k), 'n',
                                     {'cell_uuid': cell.uuid})
                 for i, cell in enumerate(cells) for k in range(2)]
        hosts.append(fakes.FakeHostState('x', 'n', {'cell_uuid': outsider}))
        spec = request_specs.request_spec(
            request, move=None if move == 'new' else move,
            cell=pinned.uuid if pinned else None)

        passed = {h.cell_uuid for h in filt.filter_all(list(hosts), spec)}

        restricted = bool(default or pairs)
        d_cells = set().union(*(oracle_resolve(r, cells) for r in default))
        p_cells = {}
        for ref, projects in pairs:
            for project in projects:
                p_cells.setdefault(oracle_project(project), set()).update(
                    oracle_resolve(ref, cells))
        named = d_cells.union(*p_cells.values())
        if not restricted:
            expected = {h.cell_uuid for h in hosts}
        elif move == 'pinned':
            expected = {pinned.uuid}
        else:
            expected = p_cells.get(oracle_project(request), d_cells)
            # The invariants, stated on their own:
            self.assertLessEqual(passed, named,
                                 'a new server passed a disabled cell')
            self.assertNotIn(outsider, passed)
            self.assertNotIn(decision.CELL0_UUID, passed)
            if oracle_project(request) in p_cells:
                self.assertLessEqual(passed, p_cells[oracle_project(
                    request)])
        self.assertEqual(expected, passed)


# Values that oslo.config cannot read.

class UnreadableOptionTest(base.TestCase):
    """A value with ``$`` is an interpolation for oslo.config."""

    def setUp(self):
        super().setUp()
        objects.register_all()
        self.path = self.useFixture(fixtures.TempDir()).join('nova.conf')
        self.write('cell1', 'cell2:%s' % PROJECT_IDS[0])
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        self.conf(['--config-file', self.path], default_config_files=[])
        self.addCleanup(self.conf.reset)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state.CONF', self.conf))
        self.useFixture(scheduler_state.FreshPolicy())
        self.cells = [decision.CellInfo(str(uuid_lib.uuid4()), name)
                      for name in ('cell1', 'cell2')]
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state.load_cell_infos',
            lambda: self.cells))
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched', level=logging.INFO))
        self.hosts = [fakes.FakeHostState(c.name, 'n', {'cell_uuid': c.uuid})
                      for c in self.cells]

    def write(self, default, projects):
        with open(self.path, 'w') as handle:
            handle.write('[cellsched]\ncells_default = %s\n'
                         'cells_projects = %s\n' % (default, projects))

    def passed(self, filt, project):
        spec = objects.RequestSpec(project_id=project)
        return [h.host for h in filt.filter_all(self.hosts, spec)]

    def test_sighup_to_an_unreadable_value_keeps_the_last_mapping(self):
        """Was a bug: after such a SIGHUP every request raises.

        cells_projects = cell2:$ops is read by oslo.config as an
        interpolation of an option "ops"; reading it raises
        cfg.NoSuchOptError. The option reader did not catch it and
        PolicyCache.current() called it on every request, so every
        scheduling request fails with NoSuchOptError until the value is
        fixed -- instead of "logged as an error and the last good mapping
        stays in force" (README, conf.py help).
        """
        filt = filters.ProjectCellFilter()
        self.assertEqual(['cell2'], self.passed(filt, PROJECT_IDS[0]))
        self.write('cell1', 'cell2:$ops')
        self.conf.mutate_config_files()
        for _ in range(3):
            self.assertEqual(['cell2'], self.passed(filt, PROJECT_IDS[0]))
            self.assertEqual(['cell1'], self.passed(filt, 'other'))
        self.assertEqual(1, self.logs.output.count(
            'Ignoring the new [cellsched] options'))
        self.assertIn("'$ops'", self.logs.output)

    def test_unreadable_value_at_start_is_our_documented_error(self):
        """Was a bug: at start it raises cfg.NoSuchOptError, not ours.

        The scheduler does not start (good), but the error names an
        option "ops" in [DEFAULT] instead of quoting the bad part of
        [cellsched] cells_projects, as InvalidCellsMapping does.
        """
        self.write('cell1', 'cell2:$ops')
        self.conf.mutate_config_files()
        exc = self.assertRaises(InvalidCellsMapping,
                                filters.ProjectCellFilter)
        self.assertEqual('cells_projects', exc.option)
        self.assertIn('$ops', str(exc))

    def test_escaped_dollar_is_a_plain_character(self):
        """``$$`` is oslo.config's escape: project "$ops" works."""
        self.write('cell1', 'cell2:$$ops')
        self.conf.mutate_config_files()
        filt = filters.ProjectCellFilter()
        self.assertEqual(['cell2'], self.passed(filt, '$ops'))
        self.assertEqual(['cell1'], self.passed(filt, 'ops'))
