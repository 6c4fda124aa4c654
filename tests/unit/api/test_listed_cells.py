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

"""The view's lookups after a listing, on the listing's workers.

:func:`nova_cellsched.api.hooks.pool.scatter_gather_listed_cells`
answers as nova's ``scatter_gather_cells`` does (a result, an exception
or ``did_not_respond_sentinel`` per cell), but runs each cell's call on
the listing's workers, waits at most ``[cellsched] list_cell_timeout``,
and does not ask again, within the request, a cell given up on.
``tests.functional.test_nova_api_faults`` runs it through nova-api with
a frozen cell database and nova's own pool full.
"""

import threading

import fixtures
from nova import conf as nova_conf
from nova import context as nova_context
from nova.tests import fixtures as nova_fixtures
from oslo_config import fixture as config_fixture
from oslo_db import exception as db_exc


from nova_cellsched.api.hooks import pool
from nova_cellsched.api.hooks import stuck
from nova_cellsched.api.middleware import request_state
from nova_cellsched import conf as conf_mod
from tests import base
from tests.fixtures import nova_cells as cells
from tests.fixtures import silent

#: Seconds a blocked call may wait for its release (a hang fails).
SAFETY = 30


class ListedCellsTest(base.TestCase):
    """nova's own ``target_cell`` (nova's test base class stubs it)."""

    def setUp(self):
        super().setUp()
        nova = self.useFixture(cells.NoIOCells(self.id()))
        self.logs, self.ctx = nova.logs, nova.ctx
        conf_mod.register_opts(nova_conf.CONF)
        self.useFixture(config_fixture.Config(nova_conf.CONF)).config(
            list_cell_timeout=0.5, api_stuck_queries_per_cell=2,
            list_max_workers=8, group='cellsched')
        self.useFixture(fixtures.MonkeyPatch('nova.context.CELL_CACHE', {}))
        pool.shutdown()
        self.addCleanup(pool.shutdown)
        self.cells = [cells.cell(n) for n in (1, 2, 3)]
        #: Cell uuid -> how many times its call ran.
        self.asked = {}
        self.lock = threading.Lock()
        # A frozen cell database: calls waiting on it are silent.
        self.release = silent.Silence()
        self.addCleanup(self.release.close)

    def ask(self, fn=None):
        return pool.scatter_gather_listed_cells(
            self.ctx, self.cells, fn or self.answer, 'arg')

    def answer(self, cctxt, arg):
        """Each cell's call: its cell and argument, off the caller."""
        with self.lock:
            self.asked[cctxt.cell_uuid] = self.asked.get(cctxt.cell_uuid,
                                                         0) + 1
        return (cctxt.cell_uuid, arg, threading.get_ident())

    def test_each_cell_answers_on_a_listing_worker(self):
        answers = self.ask()
        self.assertEqual({c.uuid for c in self.cells}, set(answers))
        for cell in self.cells:
            uuid, arg, thread = answers[cell.uuid]
            self.assertEqual((cell.uuid, 'arg'), (uuid, arg))
            self.assertNotEqual(threading.get_ident(), thread)

    def test_a_failing_cell_answers_its_exception_and_is_logged(self):
        def fn(cctxt, arg):
            if cctxt.cell_uuid == self.cells[1].uuid:
                raise db_exc.DBConnectionError('cell gone away')
            return self.answer(cctxt, arg)

        answers = self.ask(fn)
        self.assertIsInstance(answers[self.cells[1].uuid],
                              db_exc.DBConnectionError)
        self.assertEqual(self.cells[0].uuid, answers[self.cells[0].uuid][0])
        self.assertIn('Error gathering result from cell %s: '
                      'DBConnectionError: cell gone away'
                      % self.cells[1].uuid, self.logs.output)

    def test_a_cell_nova_cannot_target_answers_its_exception(self):
        """nova's DownCellFixture takes cell2 down where nova targets it."""
        self.useFixture(nova_fixtures.DownCellFixture([self.cells[1]]))
        answers = self.ask()
        self.assertIsInstance(answers[self.cells[1].uuid], db_exc.DBError)
        self.assertNotIn(self.cells[1].uuid, self.asked)
        self.assertEqual({self.cells[0].uuid: 1, self.cells[2].uuid: 1},
                         self.asked)

    def test_a_silent_cell_is_given_up_for_the_rest_of_the_request(self):
        def fn(cctxt, arg):
            answer = self.answer(cctxt, arg)
            if cctxt.cell_uuid == self.cells[2].uuid:
                self.release.wait(SAFETY)
            return answer

        with request_state.scope() as state:
            first = self.ask(fn)
            # Returned with cell3's call still running.
            self.assertFalse(self.release.is_set())
            self.assertIs(nova_context.did_not_respond_sentinel,
                          first[self.cells[2].uuid])
            self.assertEqual(frozenset({self.cells[2].uuid}),
                             state.given_up)
            second = self.ask(fn)
        self.assertIs(nova_context.did_not_respond_sentinel,
                      second[self.cells[2].uuid])
        self.assertEqual({cell.uuid: 2 if n < 2 else 1
                          for n, cell in enumerate(self.cells)}, self.asked)
        self.assertIn("Cell %s did not answer this request's listing in "
                      'time and is not asked again by this request'
                      % self.cells[2].uuid, self.logs.output)

    def test_a_cell_the_listing_gave_up_on_is_not_asked(self):
        with request_state.scope() as state:
            state.given_up = frozenset({self.cells[0].uuid})
            answers = self.ask()
        self.assertIs(nova_context.did_not_respond_sentinel,
                      answers[self.cells[0].uuid])
        self.assertNotIn(self.cells[0].uuid, self.asked)

    def test_another_request_asks_a_cell_given_up_elsewhere(self):
        with request_state.scope() as state:
            state.given_up = frozenset({self.cells[0].uuid})
        with request_state.scope():
            answers = self.ask()
        self.assertEqual(self.cells[0].uuid, answers[self.cells[0].uuid][0])

    def test_a_cell_with_its_stuck_queries_at_the_cap_is_not_asked(self):
        """The breaker the listing keeps: its workers never fill up."""
        given_up = []
        for _ in range(2):
            query = stuck.Query(self.cells[0].uuid)
            self.assertTrue(pool.STUCK.begin(query))
            pool.STUCK.abandon(query)
            given_up.append(query)
        for query in given_up:
            self.addCleanup(pool.STUCK.end, query)
        answers = self.ask()
        self.assertIs(nova_context.did_not_respond_sentinel,
                      answers[self.cells[0].uuid])
        self.assertNotIn(self.cells[0].uuid, self.asked)
        self.assertEqual(self.cells[1].uuid, answers[self.cells[1].uuid][0])
