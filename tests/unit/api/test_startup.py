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

"""nova-api's start-up check, bounded: nova's answer, nova's exception.

Against nova's own functions as the oracle, on nova's cell databases
(nova's test fixtures: three cells besides cell0). The frozen-cell case
(a cell that does not answer within nova's ``CELL_TIMEOUT`` is left out,
and no thread stays on it) runs on real MariaDB under uwsgi:
``tests.functional.test_nova_api_uwsgi``.
"""

import threading

import fixtures
from nova.api.openstack import wsgi_app
from nova import context as nova_context
from nova.db.main import api as db_api
from nova import exception as nova_exception
from nova import objects
from nova.objects import service as service_obj
from nova import utils as nova_utils


from nova_cellsched.api.hooks import pool
from nova_cellsched.api.startup import install as patch
from nova_cellsched.api.startup import service_versions as startup
from nova_cellsched import compat
from tests import base
from tests.fixtures import silent

OLDEST = service_obj.SERVICE_VERSION_ALIASES[
    service_obj.OLDEST_SUPPORTED_SERVICE_VERSION]
NEWEST = service_obj.SERVICE_VERSION


def _same_signature_other_body(columns_to_join):
    """nova's _manual_join_columns' signature, another body."""
    return [], list(columns_to_join)


class TestBoundedStartUpCheck(base.NovaTestCase):
    """startup.raise_if_old_compute answers as nova's raise_if_old_compute.
    """

    NUMBER_OF_CELLS = 3

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.cells = objects.CellMappingList.get_all(self.context)
        self.by_name = {cm.name: cm for cm in self.cells}
        self.flags(list_cell_timeout=5.0, group='cellsched')
        nova_context.CELLS = []

    def _service(self, cell, host, version, binary='nova-compute',
                 **values):
        with nova_context.target_cell(self.context,
                                      self.by_name[cell]) as cctxt:
            service = objects.Service(cctxt, host=host, binary=binary,
                                      topic='compute')
            service.create()
            db_api.service_update(cctxt, service.id,
                                  dict(values, version=version))

    def _world(self):
        """Versions nova counts and versions it leaves out."""
        # At most this nova's SERVICE_VERSION: nova refuses to create a
        # service older than the rest of the deployment.
        self._service('cell1', 'a', NEWEST)
        self._service('cell1', 'b', OLDEST + 1)
        self._service('cell2', 'c', NEWEST)
        self._service('cell2', 'zero', 0)
        self._service('cell2', 'down', 1, forced_down=True)
        self._service('cell2', 'gone', 1, deleted=1)
        self._service('cell3', 'conductor', 1, binary='nova-conductor')

    def _nova_minimum(self):
        return service_obj.get_minimum_version_all_cells(
            self.context, ['nova-compute'])

    def test_minimum_is_novas(self):
        """Zero, forced down, deleted and other binaries do not count."""
        self._world()
        minimum, outcomes = startup.minimum_version(
            self.context, self.cells, 5.0)
        self.assertEqual(self._nova_minimum(), minimum)
        self.assertEqual(OLDEST + 1, minimum)
        self.assertEqual({cm.uuid for cm in self.cells}, set(outcomes))
        self.assertTrue(all(o.ok for o in outcomes.values()))

    def test_no_compute_anywhere_is_zero_and_passes(self):
        self._service('cell1', 'conductor', 1, binary='nova-conductor')
        self.assertEqual(
            (0, 0), (self._nova_minimum(), startup.minimum_version(
                self.context, self.cells, 5.0)[0]))
        self.assertIsNone(startup.raise_if_old_compute())
        self.assertIsNone(startup.ORIGINAL())

    def test_new_enough_computes_pass(self):
        self._world()
        self.assertIsNone(startup.raise_if_old_compute())
        self.assertIsNone(startup.ORIGINAL())

    def test_too_old_compute_raises_novas_exception(self):
        self._world()
        self._service('cell3', 'old', OLDEST - 1)
        ours = self.assertRaises(nova_exception.TooOldComputeService,
                                 startup.raise_if_old_compute)
        novas = self.assertRaises(nova_exception.TooOldComputeService,
                                  startup.ORIGINAL)
        self.assertEqual(str(novas), str(ours))
        self.assertIn('level in your system is %d' % (OLDEST - 1),
                      str(ours))

    def test_logs_what_it_found(self):
        self._world()
        logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.api.startup.service_versions'))
        startup.raise_if_old_compute()
        self.assertIn('oldest nova-compute service version %d across 4 '
                      'cells, 4 answered' % (OLDEST + 1), logs.output)

    def _slow_cell(self, name):
        """*name*'s query waits until released (at cleanup at the latest).

        Then nova's own query runs on the cell: a cell database that
        answers late.
        """
        release = silent.Silence()
        self.addCleanup(release.close)
        slow = self.by_name[name].uuid
        original = startup._cell_minimum

        def cell_minimum(context, binaries, seconds):
            if context.cell_uuid == slow:
                release.wait(30)
            return original(context, binaries, seconds)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.startup.service_versions._cell_minimum',
            cell_minimum))
        return release

    def test_a_cell_answering_after_list_cell_timeout_still_counts(self):
        """Within nova's CELL_TIMEOUT a late cell counts, as in nova.

        Its too old nova-compute fails the start, as nova's check does,
        though the cell answers after ``list_cell_timeout``.
        """
        self._world()
        self._service('cell3', 'old', OLDEST - 1)
        self.flags(list_cell_timeout=0.1, group='cellsched')
        release = self._slow_cell('cell3')
        threading.Timer(0.6, release.set).start()
        ours = self.assertRaises(nova_exception.TooOldComputeService,
                                 startup.raise_if_old_compute)
        self.assertIn('level in your system is %d' % (OLDEST - 1),
                      str(ours))

    def test_a_cell_silent_for_novas_timeout_is_left_out_as_in_nova(self):
        """Past nova's CELL_TIMEOUT a cell is left out and named."""
        self._world()
        self._service('cell3', 'old', OLDEST - 1)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.context.CELL_TIMEOUT', 0.5))
        self._slow_cell('cell3')
        logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.api.startup.service_versions'))
        self.assertIsNone(startup.raise_if_old_compute())
        self.assertIn('Cell cell3(%s) did not answer the start-up check'
                      % self.by_name['cell3'].uuid, logs.output)
        self.assertIn('across 4 cells, 3 answered', logs.output)
        self.assertIn("each cell within 0.5s, nova's CELL_TIMEOUT",
                      logs.output)

    def test_a_nova_it_was_not_written_for_gets_novas_check(self):
        """A relied-on source changed: nova's own check, one WARNING."""
        def _db_service_get_minimum_version(context, binaries):
            return {}

        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.service.Service._db_service_get_minimum_version',
            staticmethod(_db_service_get_minimum_version)))
        logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.compat.core'))
        with startup.bounded():
            self.assertIs(startup.ORIGINAL, nova_utils.raise_if_old_compute)
        warnings = [line for line in logs.output.splitlines() if line]
        self.assertEqual(1, len(warnings), warnings)
        self.assertIn("nova-cellsched's part startup", warnings[0])
        self.assertIn('Service._db_service_get_minimum_version', warnings[0])
        self.assertIn("nova-api's start-up check is nova's own", warnings[0])

    def test_without_api_database_nova_checks_its_own_cell(self):
        calls = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.startup.service_versions.ORIGINAL',
            lambda: calls.append('nova')))
        self.flags(connection=None, group='api_database')
        startup.raise_if_old_compute()
        self.assertEqual(['nova'], calls)


class TestBounded(base.NovaTestCase):
    """bounded(): nova's _setup_service calls ours inside, nova's after."""

    NUMBER_OF_CELLS = 2

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        nova_context.CELLS = []
        cell1 = next(cm for cm in objects.CellMappingList.get_all(
            self.context) if cm.name == 'cell1')
        with nova_context.target_cell(self.context, cell1) as cctxt:
            service = objects.Service(cctxt, host='old', topic='compute',
                                      binary='nova-compute')
            service.create()
            db_api.service_update(cctxt, service.id,
                                  {'version': OLDEST - 1})

    def test_swaps_checked_against_nova_before_and_restores(self):
        with startup.bounded():
            # Checked before the swap: the tested nova fits.
            self.assertIs(startup.raise_if_old_compute,
                          nova_utils.raise_if_old_compute)
            self.assertTrue(compat.is_on('startup'))
            # nova's own stays what the sources are checked against.
            self.assertEqual([], compat.check(['startup'])['startup'])
        self.assertIs(startup.ORIGINAL, nova_utils.raise_if_old_compute)
        self.assertFalse(compat.is_on('startup'))

    def test_without_the_lister_no_bound_or_pool_is_left(self):
        """The filter refused nova: the check's bound and pool are gone.

        The application is built with the lister not installed (here
        a relied-on source of it differs from every tested version): the
        connection bound the check put in is taken out, and no worker
        pool stays.
        """
        # compat's parts are per process: start without the guard even
        # where an earlier test of this worker left it on, and leave it
        # as found.
        if compat.is_on('guard'):
            compat.restore(['guard'])
            self.addCleanup(compat.install, ['guard'])
        self.assertFalse(compat.is_on('guard'))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api._manual_join_columns',
            _same_signature_other_body))
        with startup.bounded():
            self.assertTrue(compat.is_on('guard'))
            self.assertRaises(nova_exception.TooOldComputeService,
                              wsgi_app._setup_service, 'api1',
                              'osapi_compute')
            self.assertIsNotNone(pool._EXECUTOR)
            self.assertRaises(patch.IncompatibleNova, patch.install)
        self.assertFalse(patch.is_installed())
        self.assertFalse(compat.is_on('guard'))
        self.assertIsNone(pool._EXECUTOR)

    def test_a_bound_put_in_before_stays(self):
        """bounded() takes out only the bound it put in."""
        compat.install(['guard'])
        self.addCleanup(compat.restore, ['guard'])
        with startup.bounded():
            pass
        self.assertTrue(compat.is_on('guard'))

    def test_novas_setup_service_raises_ours_and_honours_ffu(self):
        """nova's _setup_service handles our exception as its own."""
        with startup.bounded():
            self.assertRaises(nova_exception.TooOldComputeService,
                              wsgi_app._setup_service, 'api1',
                              'osapi_compute')
            self.flags(disable_compute_service_check_for_ffu=True,
                       group='workarounds')
            logs = self.useFixture(fixtures.FakeLogger(
                name='nova.api.openstack.wsgi_app'))
            wsgi_app._setup_service('api1', 'osapi_compute')
        self.assertIn('Current Nova version does not support computes '
                      'older than', logs.output)
        service = objects.Service.get_by_host_and_binary(
            self.context, 'api1', 'nova-osapi_compute')
        self.assertEqual('nova-osapi_compute', service.binary)
