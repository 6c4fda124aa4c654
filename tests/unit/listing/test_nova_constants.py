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


"""nova's API constants that the listing spells out stay equal to nova's.

The command line does not import ``nova.api`` (over a second of
start-up), so the sort keys and the status map are copied; these tests
are where nova remains the source of truth: a nova upgrade that changes
either fails here.
"""

import os
import subprocess
import sys

from nova.api.openstack import common as api_common
from nova.api.openstack.compute.schemas import servers as servers_schema

from nova_cellsched.listing import sorting
from nova_cellsched.records import fields as record_fields
from tests import base


class NovaConstantsTestCase(base.TestCase):

    def test_sort_keys_are_nova_api_sort_keys(self):
        """API_SORT_KEYS is nova's list of sort keys (2.75+), exactly."""
        self.assertEqual(
            frozenset(servers_schema.VALID_SORT_KEYS_V275['enum']),
            sorting.API_SORT_KEYS)

    def test_state_map_is_nova_state_map(self):
        """STATE_MAP is nova's vm_state/task_state -> status map."""
        self.assertEqual(api_common._STATE_MAP, record_fields.STATE_MAP)

    def test_status_from_state_agrees_with_nova(self):
        """Every known pair, a default and an unknown state agree."""
        pairs = [(vm, task) for vm, tasks in api_common._STATE_MAP.items()
                 for task in list(tasks) + ['no_such_task', None]]
        pairs += [('no_such_state', None), (None, None)]
        for vm_state, task_state in pairs:
            self.assertEqual(
                api_common.status_from_state(vm_state, task_state),
                record_fields.status_from_state(vm_state, task_state),
                (vm_state, task_state))

    def test_listing_does_not_import_nova_api(self):
        """Importing the lister (and the CLI) leaves nova's API unloaded."""
        code = ('import sys; import nova_cellsched.records.lister; '
                'import nova_cellsched.cmd.nova_setup; '
                'print(sorted(m for m in sys.modules '
                'if m.startswith(("nova.api", "nova.config"))))')
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        out = subprocess.run([sys.executable, '-c', code], env=env,
                             check=True, capture_output=True, text=True)
        self.assertEqual('[]', out.stdout.strip())
