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

"""The hasher hashes what runs: a statement moved into a block counts."""

import importlib
import sys
import textwrap

import fixtures
import hypothesis
from hypothesis import strategies as st

from nova_cellsched.compat import hashing
from tests import base

# Two functions that differ only in the indent of one line: the second
# returns from inside the loop.
_AFTER_THE_LOOP = '''
def total(values):
    """Sum of values."""
    found = 0
    for value in values:
        found += value
    return found
'''
_IN_THE_LOOP = '''
def total(values):
    """Sum of values."""
    found = 0
    for value in values:
        found += value
        return found
'''


class SourceHashTest(base.TestCase):

    def _function(self, name, source):
        """*source*'s ``total``, imported from a module file."""
        directory = self.useFixture(fixtures.TempDir()).path
        with open('%s/%s.py' % (directory, name), 'w') as handle:
            handle.write(source)
        self.useFixture(fixtures.MonkeyPatch(
            'sys.path', [directory] + sys.path))
        self.addCleanup(sys.modules.pop, name, None)
        return importlib.import_module(name).total

    def test_a_line_moved_into_a_block_is_a_change(self):
        after = self._function('hashing_after', _AFTER_THE_LOOP)
        inside = self._function('hashing_inside', _IN_THE_LOOP)
        self.assertEqual((6, 1), (after([1, 2, 3]), inside([1, 2, 3])))
        self.assertNotEqual(hashing.source_hash(after),
                            hashing.source_hash(inside))

    def test_a_move_a_comment_or_a_docstring_is_no_change(self):
        moved = textwrap.indent(
            _AFTER_THE_LOOP.replace('"""Sum of values."""',
                                    '"""The sum."""\n    # Why.\n'),
            '    ')
        plain = self._function('hashing_plain', _AFTER_THE_LOOP)
        other = self._function('hashing_moved',
                               'class Holder:\n' + moved +
                               '\n\ntotal = Holder.total\n')
        self.assertEqual(hashing.source_hash(plain),
                         hashing.source_hash(other))

    @hypothesis.given(indent=st.integers(min_value=0, max_value=12),
                      comments=st.lists(st.sampled_from(
                          ['# a comment', '', '    # indented comment']),
                          max_size=5),
                      where=st.integers(min_value=1, max_value=6))
    def test_reindenting_and_comments_keep_the_text(self, indent, comments,
                                                    where):
        lines = _AFTER_THE_LOOP.strip('\n').splitlines()
        lines[where:where] = comments
        changed = textwrap.indent('\n'.join(lines), ' ' * indent)
        self.assertEqual(hashing.canonical(_AFTER_THE_LOOP),
                         hashing.canonical(changed))
        self.assertNotEqual(hashing.canonical(_IN_THE_LOOP),
                            hashing.canonical(changed))

    def test_a_fragment_that_does_not_parse_is_its_text(self):
        fragment = '    sorted(rows, key=lambda r: r.id,\n'
        self.assertEqual('text:sorted(rows, key=lambda r: r.id,',
                         hashing.canonical(fragment))
