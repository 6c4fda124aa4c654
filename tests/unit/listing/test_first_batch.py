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

"""First-round batch sizes: batches.first_batch_size.

The one rule both listers (nova-api's and the command line's) ask each
cell's first batch by.
"""


from nova_cellsched.listing import batches
from tests import base


class TestFirstBatchSize(base.TestCase):

    def test_distributed_is_half_again_the_share_without_floor(self):
        """Page of 1,000: 30 rows a cell at 50 cells (nova asks 100), 150
        at 10 cells (nova 110).
        """
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        self.assertEqual(30, batches.first_batch_size(1000, 50))
        self.assertEqual(150, batches.first_batch_size(1000, 10))
        self.assertEqual(10, batches.first_batch_size(20, 3))

    def test_distributed_small_page_asks_min_batch_within_the_page(self):
        """At least MIN_BATCH rows a cell, never more than the page."""
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        self.assertEqual(batches.MIN_BATCH, batches.first_batch_size(40, 8))
        self.assertEqual(5, batches.first_batch_size(5, 4))

    def test_no_limit_uses_max_limit(self):
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        self.flags(max_limit=500, group='api')
        self.assertEqual(75, batches.first_batch_size(None, 10))

    def test_fixed_and_single_cell_are_novas(self):
        self.flags(instance_list_cells_batch_strategy='fixed',
                   instance_list_cells_batch_fixed_size=250, group='api')
        self.assertEqual(250, batches.first_batch_size(1000, 10))
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        self.assertEqual(1000, batches.first_batch_size(1000, 1))
        self.assertEqual(1000, batches.first_batch_size(1000, 0))
