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

"""nova-api's compute API, with its start-up check bounded.

Use it where nova's entry point is named::

    [uwsgi]
    module = nova_cellsched.wsgi.osapi_compute:application

in place of ``nova.wsgi.osapi_compute:application``. It is nova's
application, built by nova's ``wsgi_app.init_application`` from the same
files (``OS_NOVA_CONFIG_DIR``, ``api-paste.ini``, ``nova.conf``), with one
difference: the check of the oldest nova-compute version that nova makes
in every cell before it serves is
:mod:`nova_cellsched.api.startup.service_versions`'s:
nova's answer (each cell within nova's 60 s), the cells asked in
parallel, and no thread left on a frozen cell after that wait.

nova's concurrency mode (eventlet or native threads) is chosen first,
as the installed release's own module chooses it
(:mod:`nova_cellsched.wsgi.concurrency`).
"""
# autopep8: off
from nova_cellsched.wsgi import concurrency; concurrency.as_nova_chooses()  # noqa
# autopep8: on

import inspect  # noqa: E402
import threading  # noqa: E402

from nova.api.openstack import wsgi_app  # noqa: E402

from nova_cellsched.api.startup import service_versions as startup  # noqa: E402

NAME = 'osapi_compute'
PROG = 'nova-api-os-compute'


def init_arguments() -> tuple[str, ...]:
    """What this release's ``nova/wsgi/osapi_compute.py`` passes.

    ``init_application(NAME, PROG)`` from nova 33; nova 31 and 32 take
    the name alone (``init_application(name)``).
    """
    parameters = inspect.signature(wsgi_app.init_application).parameters
    return (NAME, PROG) if 'prog' in parameters else (NAME,)


def init_application() -> object:
    """nova's ``init_application``, its start-up check bounded."""
    with startup.bounded():
        return wsgi_app.init_application(*init_arguments())


application = None
lock = threading.Lock()
with lock:
    if application is None:
        application = init_application()
