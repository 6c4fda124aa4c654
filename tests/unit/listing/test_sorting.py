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

"""Tests of the listing order and of the merge of sorted cell runs.

The property tests check :meth:`SortSpec.key_function` and :func:`merge`
against a comparator written here from the documented rules (NULL before
every value, the whole order reversed for a descending key), not against
the key function itself.
"""

import datetime
import functools

import hypothesis
from hypothesis import strategies as st
from nova.compute import multi_cell_list

from nova_cellsched.exception import InvalidListRequest
from nova_cellsched.listing import sorting
from nova_cellsched.listing.sorting import SortSpec
from tests import base

PROPERTY = hypothesis.settings(deadline=None, derandomize=True,
                               max_examples=300)

COLUMNS = ('c0', 'c1', 'c2')

# Values of one column: all of one type, each possibly NULL. Small ranges
# make ties (and so the deeper keys and the uuid tie breaker) frequent.
VALUE_STRATEGIES = (
    st.integers(min_value=-3, max_value=3),
    st.text(alphabet='aAb\u00e9\U0001f600', max_size=2),
    st.datetimes(min_value=datetime.datetime(2020, 1, 1),
                 max_value=datetime.datetime(2020, 1, 1, 0, 0, 3)).map(
                     lambda d: d.replace(microsecond=0)),
    # Across midnight, with microseconds: descending datetimes are
    # negated field by field, which must keep their order exactly.
    st.builds(lambda day, second, micro: datetime.datetime(
        2019, 12, 31, 23, 59, 58) + datetime.timedelta(
            days=day, seconds=second, microseconds=micro),
        st.integers(0, 1), st.integers(0, 3),
        st.sampled_from((0, 1, 999999))),
    st.booleans(),
    st.floats(min_value=-2, max_value=2, allow_nan=False).map(
        lambda f: round(f, 1)),
)


@st.composite
def listings(draw):
    """(keys, dirs, rows): 1-3 sort columns, rows with a unique uuid."""
    ncols = draw(st.integers(min_value=1, max_value=3))
    keys = list(COLUMNS[:ncols])
    columns = {key: st.none() | draw(st.sampled_from(VALUE_STRATEGIES))
               for key in keys}
    dirs = draw(st.lists(st.sampled_from(sorting.DIRECTIONS),
                         min_size=ncols, max_size=ncols))
    values = draw(st.lists(st.fixed_dictionaries(columns), max_size=40))
    uuids = draw(st.lists(st.uuids(), min_size=len(values),
                          max_size=len(values), unique=True))
    rows = [dict(v, uuid=str(u)) for v, u in zip(values, uuids)]
    return keys, dirs, rows


@st.composite
def cell_splits(draw, rows):
    """The rows dealt at random over 1-6 cells (some possibly empty)."""
    ncells = draw(st.integers(min_value=1, max_value=6))
    owners = draw(st.lists(st.integers(min_value=0, max_value=ncells - 1),
                           min_size=len(rows), max_size=len(rows)))
    cells = [[] for _ in range(ncells)]
    for row, owner in zip(rows, owners):
        cells[owner].append(row)
    return cells


def reference_cmp(keys, dirs, nulls_high=False):
    """cmp(a, b) over *keys*, written from the rules, not from the code.

    NULL is smaller than any value (larger with *nulls_high*, as
    PostgreSQL sorts it); a descending key reverses the result of its
    column, NULL included (so NULL comes last there, or first).
    """
    null = 1 if nulls_high else -1

    def cmp_values(x, y):
        if x is None and y is None:
            return 0
        if x is None:
            return null
        if y is None:
            return -null
        return (x > y) - (x < y)

    def cmp(a, b):
        for key, direction in zip(keys, dirs):
            result = cmp_values(a[key], b[key])
            if direction == sorting.DESC:
                result = -result
            if result:
                return result
        return 0

    return cmp


def uuids_of(rows):
    return [row['uuid'] for row in rows]


class SortSpecBuildTestCase(base.TestCase):

    def test_build_no_keys_gives_nova_default_order(self):
        spec = SortSpec.build()
        self.assertEqual(('created_at', 'id', 'uuid'), spec.keys)
        self.assertEqual(('desc', 'desc', 'asc'), spec.dirs)

    def test_build_empty_lists_give_nova_default_order(self):
        spec = SortSpec.build([], [])
        self.assertEqual(('created_at', 'id', 'uuid'), spec.keys)
        self.assertEqual(('desc', 'desc', 'asc'), spec.dirs)

    def test_build_keys_without_uuid_append_uuid_asc(self):
        spec = SortSpec.build(['display_name'], ['desc'])
        self.assertEqual(('display_name', 'uuid'), spec.keys)
        self.assertEqual(('desc', 'asc'), spec.dirs)

    def test_build_uuid_key_not_appended_twice(self):
        # uuid is unique: the keys after it never decide an order.
        spec = SortSpec.build(['uuid', 'host'], ['desc', 'asc'])
        self.assertEqual(('uuid',), spec.keys)
        self.assertEqual(('desc',), spec.dirs)

    def test_build_keys_without_dirs_are_ascending(self):
        spec = SortSpec.build(['host', 'display_name'])
        self.assertEqual(('host', 'display_name', 'uuid'), spec.keys)
        self.assertEqual(('asc', 'asc', 'asc'), spec.dirs)

    def test_build_missing_dirs_are_filled_as_novas_query_fills_them(self):
        """nova's cell query: uuid asc appended, the rest the first dir.

        (InstanceSortContext, then process_sort_params.)
        """
        spec = SortSpec.build(['host', 'display_name', 'id'], ['desc'])
        self.assertEqual(('host', 'display_name', 'id', 'uuid'), spec.keys)
        self.assertEqual(('desc', 'asc', 'desc', 'desc'), spec.dirs)

    def test_build_dirs_are_case_insensitive(self):
        spec = SortSpec.build(['host', 'id'], ['DESC', 'Asc'])
        self.assertEqual(('desc', 'asc', 'asc'), spec.dirs)

    def test_build_known_key_accepted_with_allowed(self):
        spec = SortSpec.build(['host'], allowed={'host', 'uuid'})
        self.assertEqual(('host', 'uuid'), spec.keys)

    def test_build_unknown_key_rejected_listing_allowed_keys(self):
        allowed = {'host', 'display_name', 'created_at'}
        exc = self.assertRaises(InvalidListRequest, SortSpec.build,
                                ['host', 'password'], allowed=allowed)
        self.assertEqual('sort key', exc.argument)
        self.assertEqual('password', exc.value)
        self.assertEqual('one of created_at, display_name, host',
                         exc.expected)
        self.assertIn('password', str(exc))
        self.assertIn('created_at, display_name, host', str(exc))

    def test_build_direction_that_is_not_text_rejected(self):
        """A library caller's None is our error, not AttributeError."""
        exc = self.assertRaises(InvalidListRequest, sorting.SortSpec.build,
                                ['display_name'], [None])
        self.assertEqual('sort direction', exc.argument)

    def test_build_bad_direction_rejected(self):
        exc = self.assertRaises(InvalidListRequest, SortSpec.build,
                                ['host'], ['up'])
        self.assertEqual('sort direction', exc.argument)
        self.assertEqual('up', exc.value)
        self.assertIn('asc', exc.expected)
        self.assertIn('desc', exc.expected)

    def test_build_more_dirs_than_keys_rejected(self):
        exc = self.assertRaises(InvalidListRequest, SortSpec.build,
                                ['host'], ['asc', 'desc'])
        self.assertEqual('sort directions', exc.argument)
        self.assertEqual('asc,desc', exc.value)
        self.assertIn('1 keys', exc.expected)

    def test_build_dirs_without_keys_rejected(self):
        exc = self.assertRaises(InvalidListRequest, SortSpec.build,
                                None, ['desc'])
        self.assertEqual('sort directions', exc.argument)

    def test_build_repeated_key_rejected(self):
        exc = self.assertRaises(InvalidListRequest, SortSpec.build,
                                ['host', 'id', 'host'])
        self.assertEqual('sort keys', exc.argument)
        self.assertEqual('host,id,host', exc.value)

    def test_build_spec_is_immutable(self):
        spec = SortSpec.build()
        self.assertRaises(AttributeError, setattr, spec, 'keys', ('id',))

    def test_values_of_in_key_order(self):
        spec = SortSpec.build(['host', 'id'])
        row = {'id': 7, 'host': 'h1', 'uuid': 'u', 'other': 1}
        self.assertEqual(('h1', 7, 'u'), spec.values_of(row))


class KeyFunctionTestCase(base.TestCase):

    def _order(self, keys, dirs, rows):
        key = SortSpec.build(keys, dirs).key_function()
        return uuids_of(sorted(rows, key=key))

    def test_key_function_null_first_when_ascending(self):
        rows = [{'v': 1, 'uuid': 'a'}, {'v': None, 'uuid': 'b'},
                {'v': -5, 'uuid': 'c'}]
        self.assertEqual(['b', 'c', 'a'], self._order(['v'], ['asc'], rows))

    def test_key_function_null_last_when_descending(self):
        rows = [{'v': 1, 'uuid': 'a'}, {'v': None, 'uuid': 'b'},
                {'v': -5, 'uuid': 'c'}]
        self.assertEqual(['a', 'c', 'b'], self._order(['v'], ['desc'], rows))

    def test_key_function_nulls_tie_then_uuid_breaks_tie(self):
        rows = [{'v': None, 'uuid': 'b'}, {'v': None, 'uuid': 'a'},
                {'v': 0, 'uuid': 'c'}]
        self.assertEqual(['c', 'a', 'b'], self._order(['v'], ['desc'], rows))

    def test_key_function_falsy_values_are_not_null(self):
        """0, '' and False are values, not NULL: after NULL in asc."""
        rows = [{'v': 0, 'uuid': 'a'}, {'v': None, 'uuid': 'b'}]
        self.assertEqual(['b', 'a'], self._order(['v'], ['asc'], rows))
        rows = [{'v': '', 'uuid': 'a'}, {'v': None, 'uuid': 'b'}]
        self.assertEqual(['a', 'b'], self._order(['v'], ['desc'], rows))

    def test_key_function_mixed_directions(self):
        rows = [{'a': 1, 'b': 1, 'uuid': 'w'}, {'a': 1, 'b': 2, 'uuid': 'x'},
                {'a': 2, 'b': None, 'uuid': 'y'},
                {'a': None, 'b': 3, 'uuid': 'z'}]
        self.assertEqual(['y', 'x', 'w', 'z'],
                         self._order(['a', 'b'], ['desc', 'desc'], rows))
        self.assertEqual(['z', 'w', 'x', 'y'],
                         self._order(['a', 'b'], ['asc', 'asc'], rows))
        self.assertEqual(['y', 'w', 'x', 'z'],
                         self._order(['a', 'b'], ['desc', 'asc'], rows))

    def test_descending_box_reverses_order(self):
        self.assertLess(sorting.Descending(2), sorting.Descending(1))
        self.assertFalse(sorting.Descending(1) < sorting.Descending(1))
        self.assertEqual(sorting.Descending(1), sorting.Descending(1))
        self.assertNotEqual(sorting.Descending(1), 1)

    def test_nova_compare_records_raises_on_null(self):
        """nova's merge cannot compare NULL with a value; ours orders it.

        Documents the bug this module fixes: ``RecordSortContext``
        compares the raw column values, so a NULL sort column in one cell
        (e.g. ``host`` of an unscheduled instance) breaks the listing.
        """
        null = {'host': None, 'uuid': 'a'}
        host = {'host': 'compute1', 'uuid': 'b'}
        ctx = multi_cell_list.RecordSortContext(['host', 'uuid'],
                                                ['asc', 'asc'])
        self.assertRaises(TypeError, ctx.compare_records, null, host)

        key = SortSpec.build(['host'], ['asc']).key_function()
        self.assertEqual(['a', 'b'], uuids_of(sorted([host, null], key=key)))
        self.assertEqual(['a', 'b'], uuids_of(
            sorting.merge([[host], [null]], key)))


class KeyFunctionPropertyTestCase(base.TestCase):

    @PROPERTY
    @hypothesis.given(listings())
    def test_key_function_agrees_with_reference_comparator(self, listing):
        """sorted() by the key equals sorted() by the independent cmp."""
        keys, dirs, rows = listing
        spec = SortSpec.build(keys, dirs)
        expected = sorted(rows, key=functools.cmp_to_key(
            reference_cmp(spec.keys, spec.dirs)))
        self.assertEqual(uuids_of(expected),
                         uuids_of(sorted(rows, key=spec.key_function())))

    @PROPERTY
    @hypothesis.given(listings(), st.data())
    def test_key_function_pairwise_agrees_with_reference(self, listing,
                                                         data):
        """For any two rows, key order and reference cmp agree exactly."""
        keys, dirs, rows = listing
        hypothesis.assume(rows)
        spec = SortSpec.build(keys, dirs)
        key = spec.key_function()
        cmp = reference_cmp(spec.keys, spec.dirs)
        a = data.draw(st.sampled_from(rows))
        b = data.draw(st.sampled_from(rows))
        ka, kb = key(a), key(b)
        expected = cmp(a, b)
        self.assertEqual(expected < 0, ka < kb)
        self.assertEqual(expected > 0, kb < ka)
        self.assertEqual(expected == 0, ka == kb)


def novas_order(sort_keys, sort_dirs):
    """nova's own normalisation: what its instance query is given."""
    from nova.compute import instance_list as nova_instance_list
    from nova.db import utils as db_utils
    sort_ctx = nova_instance_list.InstanceSortContext(
        list(sort_keys), list(sort_dirs))
    keys, dirs = db_utils.process_sort_params(
        sort_ctx.sort_keys, sort_ctx.sort_dirs, default_dir='desc')
    end = keys.index('uuid') + 1
    return tuple(keys[:end]), tuple(dirs[:end])


class NovaOrderTestCase(base.TestCase):
    """One normalisation for both listers, nova's for every input."""

    @PROPERTY
    @hypothesis.given(
        st.lists(st.sampled_from(sorted(sorting.API_SORT_KEYS) + ['id']),
                 max_size=4, unique=True),
        st.lists(st.sampled_from(['asc', 'desc', 'ASC', 'up']),
                 max_size=5))
    def test_nova_order_is_novas(self, keys, dirs):
        from nova import exception as nova_exception
        try:
            expected = novas_order(keys, dirs)
        except nova_exception.InvalidInput as exc:
            error = self.assertRaises(InvalidListRequest,
                                      sorting.nova_order, keys, dirs)
            self.assertIn(error.expected, str(exc))
            return
        self.assertEqual(expected, sorting.nova_order(keys, dirs))

    @PROPERTY
    @hypothesis.given(
        st.lists(st.sampled_from(sorted(sorting.API_SORT_KEYS)),
                 min_size=1, max_size=4, unique=True),
        st.data())
    def test_command_line_and_api_orders_are_the_same(self, keys, data):
        """SortSpec.build (the CLI) and the API's sort_order agree."""
        from nova_cellsched.api.hooks import instance_list
        dirs = data.draw(st.lists(st.sampled_from(['asc', 'desc']),
                                  max_size=len(keys)))
        self.assertEqual(instance_list.sort_order(keys, dirs),
                         SortSpec.build(keys, dirs,
                                        allowed=sorting.API_SORT_KEYS))

    def test_api_sort_order_raises_novas_invalid_input(self):
        from nova import exception as nova_exception

        from nova_cellsched.api.hooks import instance_list
        error = self.assertRaises(nova_exception.InvalidInput,
                                  instance_list.sort_order, ['host'],
                                  ['sideways'])
        self.assertIn("Unknown sort direction, must be 'desc' or 'asc'",
                      str(error))


class NullsHighTestCase(base.TestCase):
    """PostgreSQL's NULL order: after every value ascending."""

    def test_null_last_when_ascending(self):
        rows = [{'v': None, 'uuid': 'b'}, {'v': 1, 'uuid': 'a'}]
        key = SortSpec.build(['v'], ['asc']).with_nulls_high(
            True).key_function()
        self.assertEqual(['a', 'b'], uuids_of(sorted(rows, key=key)))

    def test_null_first_when_descending(self):
        rows = [{'v': 1, 'uuid': 'a'}, {'v': None, 'uuid': 'b'}]
        key = SortSpec.build(['v'], ['desc']).with_nulls_high(
            True).key_function()
        self.assertEqual(['b', 'a'], uuids_of(sorted(rows, key=key)))

    def test_nulls_high_only_when_every_cell_is_on_postgresql(self):
        self.assertTrue(sorting.nulls_high_for(['postgresql']))
        self.assertTrue(sorting.nulls_high_for(['postgresql'] * 3))
        self.assertFalse(sorting.nulls_high_for(['postgresql', 'mysql']))
        self.assertFalse(sorting.nulls_high_for(['sqlite']))
        self.assertFalse(sorting.nulls_high_for(['mysql']))
        self.assertFalse(sorting.nulls_high_for([]))

    @PROPERTY
    @hypothesis.given(listings(), st.booleans())
    def test_key_function_agrees_with_reference_either_null_order(
            self, listing, nulls_high):
        keys, dirs, rows = listing
        spec = SortSpec.build(keys, dirs).with_nulls_high(nulls_high)
        expected = sorted(rows, key=functools.cmp_to_key(
            reference_cmp(spec.keys, spec.dirs, nulls_high)))
        self.assertEqual(uuids_of(expected),
                         uuids_of(sorted(rows, key=spec.key_function())))


class PositionalRowsTestCase(base.TestCase):
    """Rows as tuples (what a cursor returns) sort as the same mappings."""

    @PROPERTY
    @hypothesis.given(listings(), st.permutations(COLUMNS + ('uuid',)))
    def test_key_function_on_tuples_equals_on_mappings(self, listing,
                                                       columns):
        keys, dirs, rows = listing
        spec = SortSpec.build(keys, dirs)
        tuples = [tuple(row.get(c) for c in columns) for row in rows]
        by_name, by_position = spec.key_function(), spec.key_function(
            columns)
        for row, values in zip(rows, tuples):
            self.assertEqual(by_name(row), by_position(values))
            self.assertEqual(spec.values_of(row),
                             spec.values_of(values, columns))


class MergeTestCase(base.TestCase):

    @PROPERTY
    @hypothesis.given(st.data())
    def test_merge_of_sorted_cells_equals_global_sort(self, data):
        """Cells sorted by the DB, merged: the order of all rows at once."""
        keys, dirs, rows = data.draw(listings())
        cells = data.draw(cell_splits(rows))
        spec = SortSpec.build(keys, dirs)
        key = spec.key_function()
        runs = [sorted(cell, key=key) for cell in cells]
        expected = uuids_of(sorted(rows, key=functools.cmp_to_key(
            reference_cmp(spec.keys, spec.dirs))))

        self.assertEqual(expected, uuids_of(sorting.merge(runs, key)))
        self.assertEqual(uuids_of(sorted(rows, key=key)),
                         uuids_of(sorting.merge(runs, key)))

        limit = data.draw(st.integers(min_value=0, max_value=len(rows) + 2))
        self.assertEqual(expected[:limit],
                         uuids_of(sorting.merge(runs, key, limit)))

    @PROPERTY
    @hypothesis.given(st.data())
    def test_merge_consumes_runs_lazily_up_to_limit(self, data):
        """With a limit, no run is read further than the merge needs."""
        keys, dirs, rows = data.draw(listings())
        cells = data.draw(cell_splits(rows))
        key = SortSpec.build(keys, dirs).key_function()
        runs = [sorted(cell, key=key) for cell in cells]
        limit = data.draw(st.integers(min_value=0, max_value=len(rows)))
        pulled = []

        def run(rows):
            for row in rows:
                pulled.append(row['uuid'])
                yield row

        merged = list(sorting.merge([run(r) for r in runs], key, limit))
        self.assertEqual(limit, len(merged))
        # heapq.merge looks one row ahead in each run, never more.
        self.assertLessEqual(len(pulled), limit + len(runs))

    def test_merge_with_limit_returns_prefix(self):
        key = SortSpec.build(['v'], ['asc']).key_function()
        runs = [[{'v': 1, 'uuid': 'a'}, {'v': 4, 'uuid': 'd'}],
                [{'v': None, 'uuid': 'n'}, {'v': 2, 'uuid': 'b'}],
                [{'v': 3, 'uuid': 'c'}]]
        self.assertEqual(['n', 'a', 'b', 'c', 'd'],
                         uuids_of(sorting.merge(runs, key)))
        self.assertEqual(['n', 'a'], uuids_of(sorting.merge(runs, key, 2)))
        self.assertEqual([], uuids_of(sorting.merge(runs, key, 0)))

    def test_merge_no_runs_is_empty(self):
        self.assertEqual([], list(sorting.merge([], lambda r: r)))
        self.assertEqual([], list(sorting.merge([[], []], lambda r: r, 5)))

    def test_merge_equal_keys_keep_run_order(self):
        runs = [[(1, 'first'), (2, 'first')], [(1, 'second')],
                [(1, 'third')]]
        merged = list(sorting.merge(runs, key=lambda r: r[0]))
        self.assertEqual([(1, 'first'), (1, 'second'), (1, 'third'),
                          (2, 'first')], merged)


class ParseSortArgumentTestCase(base.TestCase):

    def test_parse_key_only_has_no_direction(self):
        self.assertEqual(('host', None),
                         sorting.parse_sort_argument('host'))

    def test_parse_key_and_direction(self):
        self.assertEqual(('host', 'desc'),
                         sorting.parse_sort_argument('host:desc'))
        self.assertEqual(('id', 'asc'),
                         sorting.parse_sort_argument('id:asc'))

    def test_parse_direction_case_and_spaces_normalised(self):
        self.assertEqual(('host', 'desc'),
                         sorting.parse_sort_argument(' host : DESC '))

    def test_parse_empty_key_rejected(self):
        for text in ('', '  ', ':asc', ' :desc'):
            exc = self.assertRaises(InvalidListRequest,
                                    sorting.parse_sort_argument, text)
            self.assertEqual('sort', exc.argument)
            self.assertEqual(text, exc.value)

    def test_parse_bad_direction_rejected(self):
        for text, direction in (('host:up', 'up'), ('host:', ''),
                                ('host:asc:desc', 'asc:desc')):
            exc = self.assertRaises(InvalidListRequest,
                                    sorting.parse_sort_argument, text)
            self.assertEqual('sort direction', exc.argument)
            self.assertEqual(direction, exc.value)
            self.assertIn(repr(text), exc.expected)
