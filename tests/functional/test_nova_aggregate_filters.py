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

"""Nova's own aggregate filter tests, run with the placement pre-filter on.

The classes below are nova's ``TenantAggregateFilterTest`` and
``TestAggregateMultiTenancyIsolationFilter`` (nova 34,
nova/tests/functional/test_aggregates.py), unchanged but for their set-up:
importing ProjectCellFilter's module registers the pre-filter, the
mapping makes nova's only cell (cell1) the default cell, the option is
on and the cell aggregates are synced after nova's computes started. So
every request of nova's tests also asks placement for cell1's
aggregate, next to the tenant aggregates nova's filters ask for; nova's
assertions must all still hold.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching.
from nova.tests.functional import integrated_helpers  # noqa: F401,I001

import os
import sys

import fixtures
from nova.scheduler.client import report
from nova.scheduler import request_filter as nova_request_filter
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import test_aggregates

from nova_cellsched import cells as cells_mod
from nova_cellsched.scheduler import aggregate_sync
from nova_cellsched.scheduler import request_filter
from tests.fixtures import scheduler_state


class _WithPrefilter:
    """Turn the pre-filter on for cell1 once nova's set-up is done."""

    def useFixture(self, fixture):
        if isinstance(fixture, nova_fixtures.OSAPIFixture):
            # nova's tests expect api-paste.ini in nova's source tree; the
            # installed one is under the venv (as in
            # test_project_cell_filter). nova's ConfFixture sets the
            # default, so this is set just before the API starts.
            self.flags(api_paste_config=os.path.join(
                sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        return super().useFixture(fixture)

    def setUp(self):
        super().setUp()
        # No ProjectCellFilter is built by these schedulers: start from a
        # fresh policy, not one left by another test's cells, and register
        # the pre-filter as building the filter would.
        self.useFixture(scheduler_state.FreshPolicy())
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            list(nova_request_filter.ALL_REQUEST_FILTERS)))
        self.assertTrue(request_filter.register())
        self.assertIn(request_filter.entry(),
                      nova_request_filter.ALL_REQUEST_FILTERS)
        # The member_of form: with cell1 the only cell, 'auto' would
        # forbid nothing and add nothing to the query.
        self.flags(cells_default=['cell1'], placement_prefilter=True,
                   placement_prefilter_form='member_of', group='cellsched')
        rows = aggregate_sync.sync(
            aggregate_sync.Placement(report.SchedulerReportClient()),
            cells_mod.load_cell_mappings())
        self.assertEqual(2, len(rows), rows)
        self.cell1_uuid = rows[0].aggregate

    def tearDown(self):
        # Every placement query of nova's test also asked for cell1.
        output = self.stdlog.logger.output
        queries = output.count('GET /placement/allocation_candidates?')
        self.assertEqual(queries, output.count(
            'member_of=in%%3A%s&' % self.cell1_uuid))
        super().tearDown()


class TenantAggregateFilterWithPrefilterTest(
        _WithPrefilter, test_aggregates.TenantAggregateFilterTest):
    """nova's TenantAggregateFilterTest with the pre-filter on."""


class TestAggregateMultiTenancyIsolationFilterWithPrefilter(
        _WithPrefilter,
        test_aggregates.TestAggregateMultiTenancyIsolationFilter):
    """nova's TestAggregateMultiTenancyIsolationFilter, pre-filter on."""
