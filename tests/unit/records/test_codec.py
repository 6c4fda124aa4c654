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

"""The JSON codec gives the same values and bytes with and without orjson.

Both back ends run in every test where orjson is installed (it is in
test-requirements.txt); without it the orjson half is skipped.
"""

import datetime
import json

import hypothesis
from hypothesis import strategies as st

from nova_cellsched.records import codec
from tests import base

# What a listing record holds: text (any code point a database returns),
# integers, booleans, None, naive and aware datetimes, nested lists and
# dicts with text keys (addresses, flavor, metadata).
TEXT = st.text(st.characters(exclude_categories=('Cs',)), max_size=8)
SCALARS = (TEXT | st.integers(-2**63, 2**63 - 1) | st.booleans() |
           st.none() | st.datetimes() |
           st.datetimes(timezones=st.just(datetime.timezone.utc)))
VALUES = st.recursive(SCALARS, lambda inner: (
    st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=20)


class CodecTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        if not codec.FAST:
            self.skipTest('orjson is not installed')

    @hypothesis.settings(deadline=None, max_examples=300)
    @hypothesis.given(VALUES)
    def test_dumps_same_bytes_with_either_back_end(self, value):
        self.assertEqual(codec.dumps(value, fast=False),
                         codec.dumps(value, fast=True))

    @hypothesis.settings(deadline=None, max_examples=300)
    @hypothesis.given(VALUES)
    def test_loads_same_values_with_either_back_end(self, value):
        text = json.dumps(value, default=str)
        self.assertEqual(codec.loads(text, fast=False),
                         codec.loads(text, fast=True))

    def test_dumps_datetimes_as_isoformat(self):
        when = datetime.datetime(2026, 11, 22, 7, 29, 14, 5)
        for fast in (False, True):
            self.assertEqual(
                b'{"t":"2026-11-22T07:29:14.000005","n":null}',
                codec.dumps({'t': when, 'n': None}, fast=fast))

    def test_dumps_rejects_what_json_cannot_hold_with_type_error(self):
        for fast in (False, True):
            self.assertRaises(TypeError, codec.dumps, {'x': object()},
                              fast=fast)
