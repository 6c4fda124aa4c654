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

"""The maintainers' report beside a tested nova's text (nova 34 here).

The running nova is this test run's (34.0.0); the tested side is a real
second interpreter, this run's own Python, reading its unchanged nova
(``--tested-python``). A difference is made in this process only: a
nova function replaced (or taken away) for the test, or nova 34 read
against another tested release's table alone (``--against 33``).
"""

import ast
import difflib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys

import fixtures
from nova.db.main import api as db_api

from cellsched_tools import maintainer
from nova_cellsched.compat import core
from nova_cellsched.compat import hashing
from nova_cellsched.compat import parts
from nova_cellsched.compat import sources
from tests import base

#: The tested releases' tables, by major version.
TABLES = {r.version.split('.')[0]: r for r in core.tested()}

NOVA = hashing.nova_version()
CHANGED = 'nova.db.main.api._manual_join_columns'


def _same_signature_other_body(columns_to_join):
    """nova's _manual_join_columns' signature; forgets the fault join."""
    manual = [c for c in columns_to_join
              if c in ('metadata', 'system_metadata', 'pci_devices')]
    return manual, [c for c in columns_to_join if c not in manual]


def run_report(*argv):
    """(exit status, stdout) of the report run in this process."""
    out = []
    status = maintainer.main(list(argv), out.append)
    return status, ''.join(out)


def section(report, name):
    """The lines of *report*'s side-by-side section of source *name*."""
    lines = report.splitlines()
    start = lines.index('## %s' % name) + 1
    end = next((i for i in range(start, len(lines))
                if lines[i].startswith('## ') or lines[i].startswith(
                    '# Save as')), len(lines))
    return [line for line in lines[start:end] if line]


def sides(diff_lines):
    """The two texts a one-hunk unified diff was made from."""
    body = [line for line in diff_lines
            if not line.startswith(('---', '+++', '@@', '#'))]
    old = [line[1:] for line in body if line[:1] in (' ', '-')]
    new = [line[1:] for line in body if line[:1] in (' ', '+')]
    return old, new


class SideBySideTest(base.TestCase):

    def setUp(self):
        super().setUp()
        if NOVA != TABLES['34'].version:
            self.skipTest('the report is compared with nova %s, not %s'
                          % (TABLES['34'].version, NOVA))

    def test_a_changed_source_is_shown_beside_the_tested_text(self):
        """One hunk: nova 34's whole function, then the running one.

        With what the part relies on it for, and the parts off.
        """
        tested_text = inspect.getsource(db_api._manual_join_columns)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api._manual_join_columns',
            _same_signature_other_body))

        status, report = run_report('--tested-python', sys.executable)

        self.assertEqual(1, status)
        self.assertIn('# parts off on nova %s: lister (1 relied-on source '
                      'differs); view (requires lister); render (requires '
                      'lister, view); min_version (requires lister)\n'
                      % NOVA, report)
        lines = section(report, CHANGED)
        self.assertEqual('#  part lister relies on it for: the joins nova '
                         'makes by hand', lines[0])
        self.assertRegex(lines[1], r'^--- nova %s \(tested\) '
                         r'nova/db/main/api\.py:\d+$' % re.escape(NOVA))
        ours, first = inspect.getsourcelines(_same_signature_other_body)
        self.assertEqual('+++ nova %s tests/unit/compat/test_maintainer.py:%d'
                         % (NOVA, first), lines[2])
        self.assertEqual('@@ -1,%d +1,%d @@' % (
            len(tested_text.splitlines()), len(ours)), lines[3])
        old, new = sides(lines[4:])
        self.assertEqual(tested_text.splitlines(), old)
        self.assertEqual(''.join(ours).splitlines(), new)

    def test_a_missing_source_is_the_tested_text_beside_why(self):
        tested_text = inspect.getsource(db_api._manual_join_columns)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api._manual_join_columns',
            fixtures.MonkeyPatch.delete))

        status, report = run_report('--tested-python', sys.executable)

        self.assertEqual(1, status)
        self.assertIn('1 of %d relied-on sources equal no tested version'
                      % len(parts.all_sources()), report)
        lines = section(report, CHANGED)
        self.assertEqual(
            "+++ nova %s: %s is missing (module 'nova.db.main.api' has no "
            "attribute '_manual_join_columns')" % (NOVA, CHANGED), lines[2])
        old, new = sides(lines[4:])
        self.assertEqual(tested_text.splitlines(), old)
        self.assertEqual([], new)

    def test_a_tested_release_has_nothing_to_show(self):
        status, report = run_report('--tested-python', sys.executable)

        self.assertEqual(0, status)
        self.assertIn('0 of %d relied-on sources equal no tested version'
                      % len(parts.all_sources()), report)
        self.assertIn('# parts off on nova %s: none\n' % NOVA, report)
        self.assertNotIn('\n## ', report)

    def test_against_one_release_its_table_is_the_only_tested_one(self):
        """nova 34 read as if nova 33 were the only tested release.

        Listed: the sources whose hash the two tables differ in, in order.
        """
        differ = [name for name, digest in TABLES['34'].hashes.items()
                  if TABLES['33'].hashes.get(name) != digest]
        self.assertNotEqual([], differ)

        status, report = run_report('--against', '33')

        self.assertEqual(1, status)
        self.assertIn('# nova %s against tested nova %s: %d of %d relied-on '
                      'sources equal no tested version\n'
                      % (NOVA, TABLES['33'].version, len(differ),
                         len(parts.all_sources())), report)
        listed = re.findall(r'^#   (\S+) \(part ', report, re.M)
        self.assertEqual(differ, listed)
        off = re.search(r'^# parts off on nova \S+: (.*)$', report,
                        re.M).group(1)
        for part in parts.PARTS:
            count = len([s for s in part.sources if s.name in differ])
            if count:
                self.assertIn('%s (%d relied-on source' % (part.name, count),
                              off)

    def test_against_another_release_the_tested_side_must_run_it(self):
        status, report, err = self.run_module(
            '--against', '33', '--tested-python', sys.executable)

        self.assertEqual(2, status)
        self.assertEqual('', report)
        self.assertEqual(
            ['python -m cellsched_tools.maintainer: error: expected '
             '--tested-python to run a tested nova (%s), got nova %s in %s'
             % (TABLES['33'].version, NOVA, sys.executable)],
            err.splitlines())

    def test_the_table_can_go_to_a_file(self):
        """A tested release's own run writes the table back unchanged."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'sources.py')

        status, report = run_report('--table', path)

        self.assertEqual(0, status)
        self.assertTrue(report.endswith(
            '# The table with nova %s: %s (save as nova_cellsched/compat/'
            'sources.py once the tests pass)\n' % (NOVA, path)))
        self.assertNotIn('# Licensed under', report)
        with open(path) as written, open(sources.__file__) as kept:
            self.assertEqual(kept.read(), written.read())

    def run_module(self, *argv):
        result = subprocess.run(
            [sys.executable, '-m', 'cellsched_tools.maintainer'] +
            list(argv), capture_output=True, text=True, timeout=300)
        return result.returncode, result.stdout, result.stderr


def _read_table(text):
    """RELEASES, LACKS and HASHES of a table's text, as Python reads it."""
    found = {}
    exec(compile(text, '<table>', 'exec'), found)
    return found['RELEASES'], found['LACKS'], found['HASHES']


class TableTextTest(base.TestCase):
    """A release added to the one table (``--table``), comments kept."""

    def setUp(self):
        super().setUp()
        with open(sources.__file__) as f:
            self.text = f.read()
        self.newest = core.tested()[-1]

    def test_a_new_release_joins_the_versions_it_shares(self):
        """nova 35 with the newest release's sources but one, and a new one.

        Each shared version gains 35.0.0 without a change to its entry
        (it runs to the newest release); the changed source's old version
        ends at 34.0.0 and a version of its own comes under a comment to
        write; the new source is added at the end; every comment of the
        table stays; the text is still within the line length. The diff
        is those lines and the releases' line.
        """
        hashes = dict(self.newest.hashes)
        hashes[CHANGED] = 'a' * 64
        hashes['nova.context.new_function'] = 'b' * 64
        text = maintainer.table_text('35.0.0', hashes, self.text)

        releases, lacks, table = _read_table(text)
        self.assertEqual(sources.RELEASES + ('35.0.0',), releases)
        self.assertEqual(sources.LACKS, lacks)
        for name, entries in table.items():
            for digest, entry in entries.items():
                having = core.releases_having(entry, releases)
                self.assertEqual(hashes.get(name) == digest,
                                 '35.0.0' in having, name)
                if digest not in ('a' * 64, 'b' * 64):
                    self.assertEqual(
                        core.releases_having(sources.HASHES[name][digest],
                                             sources.RELEASES),
                        having - {'35.0.0'}, name)
        self.assertEqual(('35.0.0', core.LATER), table[CHANGED]['a' * 64])
        self.assertIn("        # nova 35: what differs, and why what its "
                      "part relies on holds.\n        '%s':" % ('a' * 64),
                      text)
        self.assertEqual(
            [line for line in self.text.splitlines() if '#' in line],
            [line for line in text.splitlines()
             if '#' in line and 'nova 35:' not in line])
        self.assertEqual([], [line for line in text.splitlines()
                              if len(line) > 79 and 'noqa' not in line])
        changed = [line for line in difflib.unified_diff(
            self.text.splitlines(), text.splitlines(), n=0, lineterm='')
            if line[:1] in '+-' and line[:3] not in ('+++', '---')]
        self.assertLessEqual(len(changed), 12, changed)

    def test_a_point_release_takes_its_series_place(self):
        """34.0.3 with 34.0.0's sources: 34.0.0 is gone, 34.0.3 in its place.

        The table is otherwise unchanged, comment for comment.
        """
        version = '%s.0.3' % self.newest.version.split('.')[0]
        text = maintainer.table_text(version, dict(self.newest.hashes),
                                     self.text)

        self.assertEqual(self.text.replace(repr(self.newest.version),
                                           repr(version)), text)

    def test_a_version_no_release_keeps_goes_with_its_comment(self):
        """A series' version its new point release no longer has is gone.

        nova 31's own version of ``scatter_gather_cells`` (commented)
        when 31.3.2 has nova 34's: the version and its comment go.
        """
        oldest = core.tested()[0]
        name = 'nova.context.scatter_gather_cells'
        self.assertEqual((oldest.version,),
                         sources.HASHES[name][oldest.hashes[name]])
        hashes = dict(oldest.hashes, **{name: self.newest.hashes[name]})
        text = maintainer.table_text('31.3.2', hashes, self.text)

        _releases, _lacks, table = _read_table(text)
        self.assertNotIn(oldest.hashes[name], table[name])
        self.assertIn('31.3.2', table[name][self.newest.hashes[name]])
        self.assertNotIn('nova 31: one eventlet green thread', text)
        self.assertIn('nova 31: one eventlet green thread', self.text)


class SourceTextsTest(base.TestCase):
    """``--source-texts``: what the tested side answers, one JSON line."""

    def test_each_text_is_what_its_table_hashes(self):
        names = ['nova.context.target_cell',           # a function
                 'nova.db.main.models.Tag',             # a class
                 'nova.objects.instance._INSTANCE_EXTRA_FIELDS']  # a value
        out = []
        self.assertEqual(0, maintainer.main(['--source-texts'] + names,
                                            out.append))
        self.assertEqual(1, len(''.join(out).splitlines()))
        answer = json.loads(''.join(out))
        self.assertEqual(NOVA, answer['nova'])
        table = {r.version: r for r in core.tested()}.get(NOVA)
        for name in names:
            entry = answer['sources'][name]
            if table is not None:
                self.assertEqual(table.hashes[name], entry['hash'], name)
            self.assertEqual(entry['hash'], hashing.source_hash(
                core._value(source_named(name))))
        function = answer['sources']['nova.context.target_cell']
        from nova import context
        self.assertEqual(inspect.getsource(inspect.unwrap(
            context.target_cell)), function['text'])
        self.assertRegex(function['where'], r'^nova/context\.py:\d+$')
        value = answer['sources'][names[2]]
        self.assertEqual('a value', value['where'])
        from nova.objects import instance
        self.assertEqual(instance._INSTANCE_EXTRA_FIELDS,
                         ast.literal_eval(value['text']))


def source_named(name):
    return {s.name: s for s in parts.all_sources()}[name]


class BadInputTest(base.TestCase):
    """Exit 2 and one line on stderr saying what was expected."""

    def assert_one_line(self, argv, expected):
        result = subprocess.run(
            [sys.executable, '-m', 'cellsched_tools.maintainer'] +
            argv, capture_output=True, text=True, timeout=300)
        self.assertEqual(2, result.returncode, result.stderr)
        self.assertEqual('', result.stdout)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith(
            'python -m cellsched_tools.maintainer: error: expected '
            if expected.startswith('expected') else
            'python -m cellsched_tools.maintainer: error: '), lines[0])
        self.assertIn(expected, lines[0])

    def test_an_unknown_release(self):
        self.assert_one_line(['--against', '30'],
                             'expected --against to name a tested nova major'
                             ' release (one of 31, 32, 33, 34), got 30')

    def test_a_release_that_is_no_number(self):
        self.assert_one_line(['--against', 'epoxy'],
                             "argument --against: invalid int value: 'epoxy'")

    def test_an_unknown_option(self):
        self.assert_one_line(['--bogus'], 'unrecognized arguments: --bogus')

    def test_a_tested_python_that_is_not_there(self):
        self.assert_one_line(['--tested-python', '/nonexistent/python'],
                             'got /nonexistent/python: no such program')

    def test_a_tested_python_that_fails(self):
        false = shutil.which('false')
        self.assert_one_line(['--tested-python', false],
                             'expected --tested-python %s to read its '
                             "nova's sources, it exited 1: no output" % false)

    def test_a_name_that_is_no_relied_on_source(self):
        self.assert_one_line(['--source-texts', 'nova.context.nothing'],
                             'expected relied-on sources (nova_cellsched/'
                             'compat/parts.py), got nova.context.nothing')

    def test_a_table_that_cannot_be_written(self):
        self.assert_one_line(['--table', '/nonexistent/sources.py'],
                             'expected --table to be a file to write, got '
                             '/nonexistent/sources.py (No such file '
                             'or directory)')
