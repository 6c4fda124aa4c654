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

"""osprofiler trace points of a listing, with nova's [profiler] enabled."""

import threading

from nova import context as nova_context
from osprofiler import notifier
from osprofiler import opts as profiler_opts
from osprofiler import profiler

from nova_cellsched import records
from tests.fixtures import db
from tests.fixtures import worlds


class ListingTracePointsTest(db.FunctionalTestCase):
    """Every phase is an osprofiler trace point in the caller's trace."""

    SERVER_URL = 'sqlite://'

    def setUp(self):
        super().setUp()
        self.world = self.useFixture(worlds.CellWorld('sqlite:///x', [
            ('cell1', worlds.Population(instances=30)),
            ('cell2', worlds.Population(instances=30))]))
        profiler_opts.set_defaults(db.CONF)
        self.events = []
        self.lock = threading.Lock()
        previous = notifier.get()
        notifier.set(self._collect)
        self.addCleanup(notifier.set, previous)
        self.addCleanup(profiler.clean)

    def _collect(self, info, context=None):
        with self.lock:
            self.events.append(info)

    def _list(self):
        return records.list_instances(
            nova_context.get_admin_context(), limit=10,
            fields=records.DETAIL_FIELDS, engines=self.world.engines)

    def test_phases_are_trace_points_when_profiler_enabled(self):
        """Caller and worker phases share the caller's base id."""
        self.cfg.config(enabled=True, hmac_keys='secret', group='profiler')
        profiler.init('secret', base_id='b' * 32, parent_id='p' * 32)
        self._list()
        starts = [e for e in self.events if e['name'].endswith('-start')]
        names = {e['name'][:-len('-start')] for e in starts}
        for phase in ('gather', 'merge', 'view', 'setup',
                      'connect', 'execute', 'fetch'):
            self.assertIn('cellsched.' + phase, names)
        self.assertEqual({'b' * 32}, {e['base_id'] for e in starts})
        cells = {e['info']['cellsched'].get('cell_uuid') for e in starts
                 if e['name'] == 'cellsched.execute-start'}
        self.assertEqual({self.world.uuid_of('cell1'),
                          self.world.uuid_of('cell2')}, cells)

    def test_no_trace_points_when_profiler_disabled(self):
        """[profiler] enabled = False: nothing is sent, listing works."""
        self.cfg.config(enabled=False, group='profiler')
        profiler.init('secret')
        result = self._list()
        self.assertEqual(10, len(result.instances))
        self.assertEqual([], [e for e in self.events
                              if e['name'].startswith('cellsched.')])
