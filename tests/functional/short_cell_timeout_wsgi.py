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

"""nova-cellsched's nova-api entry point, nova's ``CELL_TIMEOUT`` shorter.

For the tests that start nova-api workers while a cell is frozen: the
start-up check (:mod:`nova_cellsched.api.startup.service_versions`) waits
nova's
``nova.context.CELL_TIMEOUT`` (60 s) for every cell, read when it runs.
Here it is the seconds of ``NOVA_CELLSCHED_TEST_CELL_TIMEOUT`` in
uwsgi's environment, so such a test waits that long instead of a
minute; everything else is :mod:`nova_cellsched.wsgi.osapi_compute`.
uwsgi loads it as ``tests.functional.short_cell_timeout_wsgi:application``
(the checkout is on uwsgi's ``PYTHONPATH``).
"""

# As nova's entry point: the concurrency mode first.
from nova import monkey_patch; monkey_patch.patch(backend='threading')  # noqa

import os  # noqa: E402

from nova import context  # noqa: E402

context.CELL_TIMEOUT = float(os.environ['NOVA_CELLSCHED_TEST_CELL_TIMEOUT'])

from nova_cellsched.wsgi.osapi_compute import application  # noqa: E402,F401
