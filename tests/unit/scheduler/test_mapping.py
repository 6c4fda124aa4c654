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

"""Tests of the ``[cellsched]`` option parser and of the option list."""

import os
import re
import string
import tempfile
import textwrap
import uuid

import hypothesis
from hypothesis import strategies as st
from oslo_config import cfg
import testscenarios

from nova_cellsched import conf
from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler import mapping
from tests import base

# Reproducible in CI: the same examples on every run, no example database.
PROPERTY = hypothesis.settings(deadline=None, derandomize=True,
                               database=None, max_examples=300)
# For the strategies that draw a whole mapping: fewer, richer examples.
PROPERTY_STRUCTURED = hypothesis.settings(PROPERTY, max_examples=200)

def dedicated_cells(parsed, project_id):
    """The cell references the policy gives *project_id*, None if unmapped.

    Through :func:`decision.resolve`, as the scheduler uses the mapping:
    each reference names one cell of that name (uuids made up, so a
    reference that is a uuid resolves by name too).
    """
    refs = dict.fromkeys(parsed.default +
                         tuple(cell for cell, _ in parsed.projects))
    by_uuid = {str(uuid.uuid5(uuid.NAMESPACE_OID, ref)): ref for ref in refs}
    resolved = decision.resolve(parsed, [decision.CellInfo(u, name=ref)
                                       for u, ref in by_uuid.items()])
    if not resolved.is_dedicated(project_id):
        return None
    return frozenset(by_uuid[u] for u in resolved.allowed_cells(project_id))


UUID_A = uuid.UUID('4cf0a6c4-1d5e-4e4a-9a6c-0a1ecf7d7b14')
PROJECT_UUID = uuid.UUID('0d5e63a0-e3e8-4e1e-9d4f-7e06ad7eb6b2')

# --- strategies -----------------------------------------------------------
#
# Every generated token is a pair (text as written in the option, the
# canonical form the parser must turn it into), so the expected result is
# computed without the parser's own normalisation functions.

_PAD = st.sampled_from(['', ' ', '  ', '\t'])
_NAME_CHARS = string.ascii_letters + string.digits + '_.-'


def _padded(tokens):
    """Surround the text of each (text, canonical) token with blanks."""
    return st.tuples(_PAD, tokens, _PAD).map(
        lambda t: (t[0] + t[1][0] + t[2], t[1][1]))


def _uuid_spellings(canonical):
    """Map a uuid to its accepted spellings, each with *canonical*(u)."""
    return st.tuples(st.uuids(), st.integers(0, 3)).map(
        lambda t: ((str(t[0]), str(t[0]).upper(), t[0].hex,
                    t[0].hex.upper())[t[1]], canonical(t[0])))


# Names are at most 16 characters, so never mistaken for a uuid.
_cell_names = st.text(_NAME_CHARS, min_size=1, max_size=16).map(
    lambda n: (n, n))
_cell_refs = _padded(st.one_of(_cell_names, _uuid_spellings(str)))

# Project ids: anything without whitespace or separators, unicode included,
# at most 20 characters (so never 32 or 36 long: never read as a uuid).
_project_chars = st.characters(
    exclude_categories=('Cs', 'Cc', 'Zs', 'Zl', 'Zp'),
    exclude_characters=',:;').filter(lambda c: not c.isspace())
_plain_projects = st.text(_project_chars, min_size=1, max_size=20).map(
    lambda p: (p, p))
_projects = _padded(st.one_of(_plain_projects,
                              _uuid_spellings(lambda u: u.hex)))

_groups = st.lists(
    st.tuples(_cell_refs, st.lists(_projects, min_size=1, max_size=3)),
    max_size=5)

# Text that hits the separators and whitespace often.
_separator_text = st.lists(
    st.sampled_from(list(',:;  \t\n\u00a0\u2028\x1cab-0f') +
                    [str(UUID_A), UUID_A.hex]),
    max_size=30).map(''.join)


def _expected(default, groups):
    """The CellsMapping the parser must return, computed independently."""
    default_refs = tuple(dict.fromkeys(canonical for _, canonical in default))
    merged = {}
    for (_, cell), projects in groups:
        merged.setdefault(cell, {}).update(
            dict.fromkeys(canonical for _, canonical in projects))
    return mapping.CellsMapping(
        default=default_refs,
        projects=tuple((cell, tuple(ps)) for cell, ps in merged.items()))


def _render(default, groups):
    default_text = ','.join(text for text, _ in default)
    projects_text = ','.join(
        cell + ':' + ';'.join(text for text, _ in projects)
        for (cell, _), projects in groups)
    return default_text, projects_text


class PropertyTestCase(base.TestCase):
    """Properties of the parser over generated values."""

    @PROPERTY_STRUCTURED
    @hypothesis.given(default=st.lists(_cell_refs, max_size=5),
                      groups=_groups)
    def test_valid_text_parses_to_the_expected_mapping(self, default,
                                                       groups):
        """Valid text, whitespace padded anywhere, parses as expected.

        Rendering the result and parsing it again gives it back, and the
        list form oslo.config gives ``cells_default`` parses the same.
        """
        default_text, projects_text = _render(default, groups)
        expected = _expected(default, groups)

        parsed = mapping.parse(default_text, projects_text)
        self.assertEqual(expected, parsed)

        again = mapping.parse(parsed.render_default(),
                              parsed.render_projects())
        self.assertEqual(parsed, again)
        self.assertEqual(
            expected.default,
            mapping.parse_cells_default([t for t, _ in default]))
        self.assertEqual(parsed, mapping.build(
            [t for t, _ in default], dict(parsed.projects)))

    @PROPERTY
    @hypothesis.given(default=st.one_of(st.text(), _separator_text),
                      projects=st.one_of(st.text(), _separator_text))
    def test_any_text_parses_or_raises_invalid_cells_mapping(
            self, default, projects):
        """Arbitrary text never raises anything but InvalidCellsMapping.

        A rejection names the option and quotes a token taken from the
        value; an accepted value has only clean, non empty references.
        """
        for option, value, parse in (
                ('cells_default', default, mapping.parse_cells_default),
                ('cells_projects', projects, mapping.parse_cells_projects)):
            try:
                result = parse(value)
            except InvalidCellsMapping as exc:
                self.assertEqual(option, exc.option)
                self.assertEqual(value, exc.value)
                self.assertIn(exc.token, value)
                self.assertIn(repr(exc.token), str(exc))
                self.assertTrue(exc.reason)
                continue
            if option == 'cells_default':
                refs = result
            else:
                refs = [cell for cell, _ in result]
                for _, project_ids in result:
                    self.assertTrue(project_ids)
                    for project_id in project_ids:
                        self.assertTrue(project_id)
                        self.assertFalse(any(c.isspace() or c in ',:;'
                                             for c in project_id))
            for ref in refs:
                self.assertTrue(ref)
                self.assertEqual(ref.strip(), ref)
                self.assertFalse(set(ref) & set(',:;'))

    @PROPERTY
    @hypothesis.given(items=st.lists(st.one_of(st.text(), _separator_text),
                                     max_size=5))
    def test_any_list_parses_or_raises_invalid_cells_mapping(self, items):
        """cells_default as oslo.config's list: same contract as text."""
        try:
            refs = mapping.parse_cells_default(items)
        except InvalidCellsMapping as exc:
            self.assertEqual('cells_default', exc.option)
            self.assertIn(exc.token, items)
        else:
            self.assertEqual(len(set(refs)), len(refs))
            for ref in refs:
                self.assertTrue(ref)
                self.assertFalse(set(ref) & set(',:;'))

    @PROPERTY
    @hypothesis.given(value=st.one_of(st.text(), _separator_text))
    def test_no_project_gets_a_cell_it_was_not_given(self, value):
        """Every (cell, project) parsed is written as such in the text.

        The check reads the text with plain splits and compares with the
        textual forms only: a project gets a cell when a pair written in
        the value puts that project after that cell's colon.
        """
        try:
            result = mapping.parse_cells_projects(value)
        except InvalidCellsMapping:
            return
        written = []
        for pair in value.split(','):
            cell, _, projects = pair.partition(':')
            for project in projects.split(';'):
                written.append((_spellings(cell.strip(), str),
                                _spellings(project.strip(), _hex)))
        for cell, project_ids in result:
            for project_id in project_ids:
                self.assertTrue(
                    any(cell in c and project_id in p for c, p in written),
                    '%r -> %r is not in %r' % (project_id, cell, value))

    @PROPERTY_STRUCTURED
    @hypothesis.given(groups=_groups)
    def test_each_project_gets_exactly_its_cells(self, groups):
        """The policy gives a project the cells it is listed under."""
        _, projects_text = _render([], groups)
        parsed = mapping.parse('', projects_text)
        expected = {}
        for (_, cell), projects in groups:
            for _, project in projects:
                expected.setdefault(project, set()).add(cell)
        for (_, cell), projects in groups:
            for text, project in projects:
                self.assertEqual(expected[project],
                                 dedicated_cells(parsed, text))


_STRICT_UUID = re.compile(
    r'[0-9a-f]{8}(-?)[0-9a-f]{4}\1[0-9a-f]{4}\1[0-9a-f]{4}\1[0-9a-f]{12}',
    re.ASCII | re.IGNORECASE)


def _hex(u):
    return u.hex


def _spellings(token, canonical):
    """The forms *token* may take in a parse result.

    As written, or the canonical form when it is written as a real uuid.
    """
    forms = {token}
    if _STRICT_UUID.fullmatch(token):
        forms.add(canonical(uuid.UUID(token)))
    return forms


class ErrorScenariosTestCase(testscenarios.WithScenarios,
                             base.TestCase):
    """Each malformed value is rejected with a message that fits it."""

    scenarios = [
        ('pair_without_colon', dict(
            option='cells_projects', value='cell1:p1,cell2',
            token='cell2',
            reason=["pair 2 of 2 has 0 ':'",
                    'a cell needs its projects after one colon'])),
        ('empty_pair', dict(
            option='cells_projects', value='cell1:p1,,cell2:p2',
            token='', reason=['empty pair 2 of 3', "remove the extra ','"])),
        ('trailing_comma', dict(
            option='cells_projects', value='cell1:p1, ',
            token=' ', reason=['empty pair 2 of 2'])),
        ('empty_project', dict(
            option='cells_projects', value='cell1:p1;;p2',
            token='cell1:p1;;p2',
            reason=["empty project id in pair 1 of 1 (cell 'cell1')",
                    "separate projects with a single ';'"])),
        ('no_project', dict(
            option='cells_projects', value='cell1: ',
            token='cell1: ', reason=['empty project id in pair 1 of 1'])),
        ('empty_cell', dict(
            option='cells_projects', value='cell1:p1, :p2',
            token=' :p2', reason=['empty cell name in pair 2 of 2'])),
        ('two_colons', dict(
            option='cells_projects', value='cell1:p1:cell2:p2',
            token='cell1:p1:cell2:p2',
            reason=["pair 1 of 1 has 3 ':'",
                    'is a comma missing between two pairs?'])),
        ('whitespace_in_project', dict(
            option='cells_projects', value='cell1:p1 p2',
            token='cell1:p1 p2',
            reason=["project id 'p1 p2' in pair 1 of 1 contains whitespace",
                    "separate projects with ';'"])),
        ('semicolon_in_cell', dict(
            option='cells_projects', value='cell1;cell2:p1',
            token='cell1;cell2:p1',
            reason=["a cell name cannot contain ';' (pair 1 of 1)"])),
        ('colon_in_default', dict(
            option='cells_default', value='cell1,cell2:p1',
            token='cell2:p1',
            reason=["a cell name cannot contain ':' (item 2 of 2)",
                    "put 'cell:project' pairs in cells_projects"])),
        ('semicolon_in_default', dict(
            option='cells_default', value='cell1;cell2',
            token='cell1;cell2',
            reason=["a cell name cannot contain ';' (item 1 of 1)"])),
        ('empty_default_item', dict(
            option='cells_default', value='cell1,,cell2',
            token='', reason=['empty cell name in item 2 of 3',
                              "remove the extra ','"])),
    ]

    def test_rejected(self):
        """The error names the option, the value and quotes the token."""
        if self.option == 'cells_default':
            args = (self.value, '')
        else:
            args = ('', self.value)
        exc = self.assertRaises(InvalidCellsMapping, mapping.parse, *args)
        self.assertEqual(self.option, exc.option)
        self.assertEqual(self.value, exc.value)
        self.assertEqual(self.token, exc.token)
        message = str(exc)
        self.assertTrue(message.startswith(
            '[cellsched] %s: %r: ' % (self.option, self.token)), message)
        self.assertIn('(whole value: %r)' % self.value, message)
        for fragment in self.reason:
            self.assertIn(fragment, exc.reason)
        self.assertEqual(2, exc.exit_code)


class ParseTestCase(base.TestCase):
    """Examples of accepted values."""

    def test_empty_values(self):
        for default, projects in (('', ''), ('  ', ' \t '), ([], '')):
            parsed = mapping.parse(default, projects)
            self.assertEqual(mapping.CellsMapping(), parsed)
            self.assertTrue(parsed.is_empty)

    def test_full_example(self):
        parsed = mapping.parse(
            ' cellA , cellB ',
            ' cellE : 0d5e63a0e3e84e1e9d4f7e06ad7eb6b2 ; ops , cellF:5b1e')
        self.assertEqual(('cellA', 'cellB'), parsed.default)
        self.assertEqual(
            (('cellE', ('0d5e63a0e3e84e1e9d4f7e06ad7eb6b2', 'ops')),
             ('cellF', ('5b1e',))), parsed.projects)
        self.assertFalse(parsed.is_empty)
        self.assertEqual('cellA,cellB', parsed.render_default())
        self.assertEqual('cellE:0d5e63a0e3e84e1e9d4f7e06ad7eb6b2;ops,'
                         'cellF:5b1e', parsed.render_projects())

    def test_only_one_option_is_enough_to_restrict(self):
        self.assertFalse(mapping.parse('cellA', '').is_empty)
        self.assertFalse(mapping.parse('', 'cellA:p1').is_empty)

    def test_repeated_cells_merge(self):
        """A cell named twice has its projects merged, in order."""
        parsed = mapping.parse('cellA,cellB,cellA',
                               'cellE:p1,cellF:p2,cellE:p3;p1,cellE:p4')
        self.assertEqual(('cellA', 'cellB'), parsed.default)
        self.assertEqual((('cellE', ('p1', 'p3', 'p4')),
                          ('cellF', ('p2',))), parsed.projects)
        self.assertEqual(frozenset(['cellE']),
                         dedicated_cells(parsed, 'p3'))
        self.assertEqual(frozenset(['cellE', 'cellF']),
                         dedicated_cells(
                             mapping.parse('', 'cellE:p1,cellF:p1'), 'p1'))

    def test_repeated_project_under_one_cell(self):
        parsed = mapping.parse('', 'cellE:p1;p1;p2;p1')
        self.assertEqual((('cellE', ('p1', 'p2')),), parsed.projects)

    def test_cell_uuid_spellings_are_one_cell(self):
        """Dashed, undashed and upper case cell uuids are the same cell."""
        spellings = [str(UUID_A), UUID_A.hex, str(UUID_A).upper(),
                     UUID_A.hex.upper()]
        for spelling in spellings:
            self.assertEqual(str(UUID_A),
                             mapping.normalize_cell_ref(' %s ' % spelling))
        parsed = mapping.parse(
            ','.join(spellings),
            ','.join('%s:p%d' % (s, i) for i, s in enumerate(spellings)))
        self.assertEqual((str(UUID_A),), parsed.default)
        self.assertEqual(((str(UUID_A), ('p0', 'p1', 'p2', 'p3')),),
                         parsed.projects)

    def test_project_uuid_spellings_match(self):
        """Project ids that are uuids match in any spelling."""
        spellings = [PROJECT_UUID.hex, str(PROJECT_UUID),
                     PROJECT_UUID.hex.upper(), str(PROJECT_UUID).upper()]
        for written in spellings:
            parsed = mapping.parse('', 'cellE:%s' % written)
            self.assertEqual((('cellE', (PROJECT_UUID.hex,)),),
                             parsed.projects)
            for asked in spellings:
                self.assertEqual(frozenset(['cellE']),
                                 dedicated_cells(parsed, asked))

    def test_names_are_case_sensitive_and_kept(self):
        """Only uuids are folded: names and other ids are kept as is."""
        parsed = mapping.parse('Cell1,cell1', 'cellE:Ops;ops')
        self.assertEqual(('Cell1', 'cell1'), parsed.default)
        self.assertEqual((('cellE', ('Ops', 'ops')),), parsed.projects)
        self.assertIsNone(dedicated_cells(parsed, 'OPS'))
        # 32 characters that are not all hex digits: not a uuid.
        not_uuid = 'g' * 32
        self.assertEqual(not_uuid, mapping.normalize_project_id(not_uuid))
        self.assertEqual(not_uuid, mapping.normalize_cell_ref(not_uuid))

    def test_unicode_project_ids(self):
        parsed = mapping.parse('zelle-ä', 'zelle-ä:projekt-ß;プロジェクト')
        self.assertEqual(('zelle-ä',), parsed.default)
        self.assertEqual(frozenset(['zelle-ä']),
                         dedicated_cells(parsed, 'プロジェクト'))

    def test_unmapped_project(self):
        parsed = mapping.parse('cellA', 'cellE:p1')
        self.assertIsNone(dedicated_cells(parsed, 'p2'))

    def test_mapping_is_immutable_and_hashable(self):
        parsed = mapping.parse('cellA', 'cellE:p1')
        self.assertEqual(hash(parsed), hash(mapping.parse('cellA',
                                                          'cellE:p1')))
        self.assertRaises(AttributeError, setattr, parsed, 'default', ())

    def test_build(self):
        built = mapping.build(['cellA', UUID_A.hex],
                              {'cellE': ['p1', 'p2'], 'cellF': ('p3',)})
        self.assertEqual(mapping.parse('cellA,%s' % UUID_A,
                                       'cellE:p1;p2,cellF:p3'), built)
        self.assertEqual(mapping.CellsMapping(), mapping.build())

    def test_build_checks_like_the_parser(self):
        """build() applies the same checks to Python values."""
        for default in (['cellA', 'cellB:p1'], ['cellA;cellB'], ['', 'x']):
            exc = self.assertRaises(InvalidCellsMapping, mapping.build,
                                    default)
            self.assertEqual('cells_default', exc.option)
        for projects in ({'cellE': ['p 1']}, {'cellE': ['p1:p2']},
                         {'cellE;cellF': ['p1']}, {' ': ['p1']}):
            exc = self.assertRaises(InvalidCellsMapping, mapping.build, (),
                                    projects)
            self.assertEqual('cells_projects', exc.option)

    def test_build_rejects_a_cell_without_projects(self):
        exc = self.assertRaises(InvalidCellsMapping, mapping.build, (),
                                {'cellE': []})
        self.assertEqual('cellE:', exc.token)

    def test_only_real_uuid_spellings_are_folded(self):
        """Tokens that uuid.UUID happens to read are not uuids.

        uuid.UUID() parses the hex digits with int(), which also takes a
        sign and underscores, and strips braces, 'urn:'/'uuid:' and dashes
        anywhere. Folding those would let two different project ids such
        as '+' + 31 zeros and 32 zeros share each other's cells.
        """
        zeros = '0' * 32
        for lookalike in ('+' + '0' * 31, '0000_0000000_0000000_0000000_000',
                          '{{%s}}' % zeros, '----%s' % zeros,
                          '0' * 16 + '----' + '0' * 16):
            self.assertEqual(lookalike,
                             mapping.normalize_project_id(lookalike))
            self.assertEqual(lookalike, mapping.normalize_cell_ref(lookalike))


class OptionsTestCase(base.TestCase):
    """The option definitions, as oslo.config sees them."""

    def _load(self, text):
        fd, path = tempfile.mkstemp(suffix='.conf')
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, 'w') as f:
            f.write(textwrap.dedent(text))
        opts = cfg.ConfigOpts()
        conf.register_opts(opts)
        opts(args=[], default_config_files=[path])
        self.addCleanup(opts.reset)
        return opts

    def test_defaults(self):
        opts = self._load('')
        self.assertEqual([], opts.cellsched.cells_default)
        self.assertEqual('', opts.cellsched.cells_projects)
        self.assertTrue(mapping.parse(
            opts.cellsched.cells_default,
            opts.cellsched.cells_projects).is_empty)

    def test_cellsched_group(self):
        opts = self._load("""
            [cellsched]
            cells_default = cellA, cellB
            cells_projects = cellE:p1;p2,cellF:p3
            """)
        self.assertEqual(['cellA', 'cellB'], opts.cellsched.cells_default)
        self.assertEqual('cellE:p1;p2,cellF:p3',
                         opts.cellsched.cells_projects)

    def test_deprecated_cells_group(self):
        """A nova.conf written for CERN's [cells] filter keeps working."""
        opts = self._load("""
            [cells]
            cells_default = cellA,cellB
            cells_projects = cellE:p1;p2
            """)
        self.assertEqual(['cellA', 'cellB'], opts.cellsched.cells_default)
        self.assertEqual('cellE:p1;p2', opts.cellsched.cells_projects)
        parsed = mapping.parse(opts.cellsched.cells_default,
                               opts.cellsched.cells_projects)
        self.assertEqual(frozenset(['cellE']),
                         dedicated_cells(parsed, 'p2'))

    def test_new_group_wins_over_deprecated_group(self):
        opts = self._load("""
            [cells]
            cells_default = old
            [cellsched]
            cells_default = new
            """)
        self.assertEqual(['new'], opts.cellsched.cells_default)

    def test_register_twice_is_harmless(self):
        opts = cfg.ConfigOpts()
        conf.register_opts(opts)
        conf.register_opts(opts)
        opts(args=[], default_config_files=[])
        self.assertEqual('', opts.cellsched.cells_projects)

    def test_scheduling_options_are_mutable(self):
        for opt in conf.scheduling_opts:
            self.assertTrue(opt.mutable, opt.name)

    def test_list_opts_returns_deep_copies(self):
        """The generator gets copies: changing them changes nothing."""
        (group, opts), = conf.list_opts()
        self.assertIs(conf.cellsched_group, group)
        self.assertEqual([o.name for o in conf.ALL_OPTS],
                         [o.name for o in opts])
        for copied, original in zip(opts, conf.ALL_OPTS):
            self.assertIsNot(original, copied)
            self.assertEqual(original, copied)
            self.assertIsNot(original.deprecated_opts, copied.deprecated_opts)
        # cells_default: it has a deprecated alias to clear.
        i = [o.name for o in opts].index('cells_default')
        original_help = conf.ALL_OPTS[i].help
        opts[i].help = 'changed'
        opts[i].deprecated_opts.clear()
        self.assertEqual(original_help, conf.ALL_OPTS[i].help)
        self.assertTrue(conf.ALL_OPTS[i].deprecated_opts)
        self.assertIsNot(opts, conf.list_opts()[0][1])

    def test_help_references_name_real_options(self):
        """Every '[cellsched] name' in the help texts is an option."""
        names = {o.name for o in conf.ALL_OPTS}
        texts = [conf.cellsched_group.help] + [o.help for o in conf.ALL_OPTS]
        referenced = set()
        for text in texts:
            referenced.update(re.findall(r'\[cellsched\]\s+(\w+)', text))
        self.assertTrue(referenced)
        self.assertEqual(set(), referenced - names)

    def test_help_examples_parse(self):
        """The example values in the help texts are valid."""
        opts = {o.name: o for o in conf.ALL_OPTS}
        projects_help = opts['cells_projects'].help
        example = re.search(r'``(cellE:[^`]+)``', projects_help).group(1)
        parsed = mapping.parse('', example)
        self.assertEqual(frozenset(['cellE']),
                         dedicated_cells(parsed, 
                             '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'))
        default_help = opts['cells_default'].help
        for example in re.findall(r'``(cell1,[^`]+)``', default_help):
            mapping.parse(example, '')
