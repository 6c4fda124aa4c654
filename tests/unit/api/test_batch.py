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

"""First-round batch sizes of the nova-api lister."""

from nova import test

from nova_cellsched.api import instance_list
from nova_cellsched.listing import lister


class TestCellsBatchSize(test.NoDBTestCase):

    def test_distributed_is_half_again_the_share_without_floor(self):
        """Page of 1,000: 30 rows a cell at 50 cells (nova asks 100), 150
        at 10 cells (nova 110): the command line's first batch.
        """
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        cells = [object()] * 50
        self.assertEqual(30, instance_list.cells_batch_size(1000, cells))
        self.assertEqual(150, instance_list.cells_batch_size(1000,
                                                             cells[:10]))
        for limit, count in ((1000, 50), (20, 3), (None, 7)):
            self.assertEqual(
                lister.first_batch_size(limit, count),
                instance_list.cells_batch_size(limit, cells[:count]))

    def test_distributed_small_page_asks_min_batch_within_the_page(self):
        """At least MIN_BATCH rows a cell, never more than the page."""
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        self.assertEqual(lister.MIN_BATCH,
                         instance_list.cells_batch_size(40, [object()] * 8))
        self.assertEqual(5, instance_list.cells_batch_size(5,
                                                           [object()] * 4))

    def test_no_limit_uses_max_limit(self):
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        self.flags(max_limit=500, group='api')
        self.assertEqual(75, instance_list.cells_batch_size(
            None, [object()] * 10))

    def test_fixed_and_single_cell_are_novas(self):
        self.flags(instance_list_cells_batch_strategy='fixed',
                   instance_list_cells_batch_fixed_size=250, group='api')
        self.assertEqual(250, instance_list.cells_batch_size(
            1000, [object()] * 10))
        self.flags(instance_list_cells_batch_strategy='distributed',
                   group='api')
        self.assertEqual(1000, instance_list.cells_batch_size(
            1000, [object()]))
