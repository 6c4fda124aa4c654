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

"""The process-wide counts of the API integration (one class for all)."""

import threading


from nova_cellsched.api.hooks import instance_list
from nova_cellsched.api.validation import validator as validation
from nova_cellsched.api.view import lookups as view
from nova_cellsched import counters
from tests import base


class CountsTest(base.TestCase):

    def test_declared_names_start_at_zero(self):
        self.assertEqual({'a': 0, 'b': 0},
                         counters.Counts(('a', 'b')).snapshot())

    def test_counts_add_up_and_a_snapshot_is_a_copy(self):
        counts = counters.Counts(('a',))
        counts.count('a')
        counts.count('a', 3)
        snapshot = counts.snapshot()
        snapshot['a'] = 100
        self.assertEqual({'a': 4}, counts.snapshot())

    def test_a_fresh_copy_of_the_same_class_starts_empty(self):
        """What the self-test swaps in while it lists (``type(c)()``)."""
        fresh = type(counters.Counts(('a',)))()
        self.assertEqual({}, fresh.snapshot())
        fresh.count('a')
        self.assertEqual({'a': 1}, fresh.snapshot())

    def test_no_count_is_lost_between_threads(self):
        counts = counters.Counts(('a',))

        def bump():
            for _ in range(1000):
                counts.count('a')

        threads = [threading.Thread(target=bump) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual({'a': 8000}, counts.snapshot())

    def test_the_api_counts_are_this_class_with_their_names(self):
        for counts, names in (
                (instance_list.SERVED, {'cellsched', 'nova'}),
                (view.USED, {'bdms', 'faults', 'request_specs',
                             'request_specs_nova'}),
                (validation.VALIDATED, {'fast', 'nova_rejected',
                                        'nova_accepted', 'none', 'off',
                                        'serialized'})):
            self.assertIsInstance(counts, counters.Counts)
            self.assertTrue(names <= set(counts.snapshot()), names)
