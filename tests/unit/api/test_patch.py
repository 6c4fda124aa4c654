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

"""The nova-api filter's checks: install only into the nova it fits."""

import logging

import fixtures
from nova.compute import instance_list as nova_instance_list
from nova.db.main import api as db_api
from oslo_db.sqlalchemy import utils as oslo_utils
from oslotest import base

import nova_cellsched.api as cellsched_api
from nova_cellsched.api import instance_list
from nova_cellsched.api import patch


def _changed_signature(ctx, filters, limit, marker, expected_attrs,
                       sort_keys, sort_dirs, cell_down_support=False,
                       new_argument=None):
    raise AssertionError('never called')


class TestInstall(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(cellsched_api.uninstall)
        self.originals = (nova_instance_list.get_instance_objects_sorted,
                          nova_instance_list.get_instances_sorted,
                          db_api.sqlalchemyutils)

    def test_install_swaps_both_functions_and_uninstall_restores(self):
        """install() puts ours in nova's module; uninstall() gives back."""
        self.assertTrue(cellsched_api.install())
        self.assertIs(instance_list.get_instance_objects_sorted,
                      nova_instance_list.get_instance_objects_sorted)
        self.assertIs(instance_list.get_instances_sorted,
                      nova_instance_list.get_instances_sorted)
        self.assertIsNot(oslo_utils, db_api.sqlalchemyutils)
        # Everything but paginate_query is oslo.db's.
        self.assertIs(oslo_utils.sanitize_db_url,
                      db_api.sqlalchemyutils.sanitize_db_url)
        self.assertTrue(cellsched_api.uninstall())
        self.assertEqual(self.originals,
                         (nova_instance_list.get_instance_objects_sorted,
                          nova_instance_list.get_instances_sorted,
                          db_api.sqlalchemyutils))

    def test_install_and_uninstall_are_idempotent(self):
        self.assertTrue(cellsched_api.install())
        self.assertFalse(cellsched_api.install())
        self.assertTrue(cellsched_api.is_installed())
        self.assertTrue(cellsched_api.uninstall())
        self.assertFalse(cellsched_api.uninstall())
        self.assertFalse(cellsched_api.is_installed())

    def test_changed_signature_refuses_and_changes_nothing(self):
        """A nova function with another signature: nothing is replaced."""
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.instance_list.get_instance_objects_sorted',
            _changed_signature))
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertEqual(1, len(error.problems))
        self.assertIn('get_instance_objects_sorted', error.problems[0])
        self.assertIn('new_argument=None', error.problems[0])
        self.assertIs(_changed_signature,
                      nova_instance_list.get_instance_objects_sorted)
        self.assertIs(self.originals[1],
                      nova_instance_list.get_instances_sorted)
        self.assertIs(oslo_utils, db_api.sqlalchemyutils)
        self.assertFalse(cellsched_api.is_installed())

    def test_other_nova_release_refuses(self):
        self.useFixture(fixtures.MonkeyPatch(
            'importlib.metadata.version', lambda name: '35.0.0'))
        error = self.assertRaises(patch.IncompatibleNova, patch.check)
        self.assertEqual(['expected nova 34.x, found nova 35.0.0'],
                         error.problems)

    def test_missing_function_refuses(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.main.api.instance_get_by_uuid', None))
        del db_api.instance_get_by_uuid
        error = self.assertRaises(patch.IncompatibleNova, patch.check)
        self.assertIn('nova.db.main.api.instance_get_by_uuid is missing',
                      error.problems[0])

    def test_filter_factory_on_mismatch_logs_once_and_passes_through(self):
        """nova-api still starts: one error line, nova's lister stays."""
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.useFixture(fixtures.MonkeyPatch(
            'importlib.metadata.version', lambda name: '33.1.0'))
        make_filter = cellsched_api.filter_factory({})
        app = object()
        self.assertIs(app, make_filter(app))
        self.assertFalse(cellsched_api.is_installed())
        self.assertIs(self.originals[0],
                      nova_instance_list.get_instance_objects_sorted)
        lines = [line for line in logs.output.splitlines() if line]
        self.assertEqual(1, len(lines), lines)
        self.assertIn('expected nova 34.x, found nova 33.1.0', lines[0])
        self.assertIn("nova's own lister stays in use", lines[0])

    def test_filter_factory_installs_and_passes_requests_through(self):
        make_filter = cellsched_api.filter_factory({}, unused='x')
        app = object()
        self.assertIs(app, make_filter(app))
        self.assertTrue(cellsched_api.is_installed())
