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


"""Cells nova can target without any I/O, for tests of cell calls."""

import logging

import fixtures
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures


def cell(n):
    """Cell *n*'s mapping: nova targets it; the calls never read it."""
    return objects.CellMapping(
        uuid='5d4bd1c4-0e4c-4c5c-9d1f-6d0b4ae2a5c%d' % n, name='cell%d' % n,
        database_connection='sqlite://', transport_url='none:///')


class NoIOCells(fixtures.Fixture):
    """What a test calling cells through nova needs; :attr:`ctx` admin.

    Its log captured (:attr:`logs`: nova's lock lines, the lister's
    warnings, shown on failure), nova's executors its own and shut down
    at its end as nova's tests do (nova 31 has none: a green thread per
    cell, nothing to shut down), nova's objects registered.
    """

    def __init__(self, test_id):
        super().__init__()
        self.test_id = test_id

    def _setUp(self):
        self.logs = self.useFixture(fixtures.FakeLogger(level=logging.DEBUG))
        if hasattr(nova_fixtures, 'IsolatedExecutorFixture'):
            self.useFixture(
                nova_fixtures.IsolatedExecutorFixture(self.test_id))
        objects.register_all()
        self.ctx = nova_context.get_admin_context()
