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

"""Tests of nova-cellsched.

On nova 34 the suite runs nova in native threading mode, the default of
nova-api and nova-scheduler since 2026.1: the lister's parallelism is
real threads, and must be tested as such, not as eventlet green threads.
On nova 31 to 33 (tools/nova-release-tests) it runs nova in eventlet
mode, as those releases' own functional suites do: their fixtures are
written for eventlet (nova 33.0.2 ``nova/tests/fixtures/
notifications.py:152-160`` walks eventlet's greenlet parents, which a
native thread has not; nova 34.0.0 skips that in threading mode,
``:163-165``), and nova 31 has no threading mode at all. This module is
imported before any test module, so the choice is made before anything
could import eventlet.

Each test is bounded (``OS_TEST_TIMEOUT``, 900 s unless set).
Output is captured per test (oslotest's ``OS_STDOUT_CAPTURE``,
``OS_STDERR_CAPTURE`` and ``OS_LOG_CAPTURE``, on unless set to 0): a
passing test prints nothing, a failing one shows its output and log.
nova's migrations, thread pools and periodic task set-up log warnings
and errors only. Figures a test measures for the README are test details
(``stestr last --all-attachments`` shows them), not output.
"""

import logging
import os
import sys

from tests.fixtures import releases

# A benchmark script run on its own (benchmarks/bench_listing.py) chooses
# nova's mode before it imports a module of this package: that choice
# stands (nova 33 refuses to switch once it has chosen threads).
_CHOSEN = 'nova.monkey_patch' in sys.modules
if _CHOSEN:
    pass
elif releases.NOVA_MAJOR >= 34:
    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
else:
    # Set, not defaulted: modules that set it to 1 when imported alone
    # (benchmarks/) must not turn a later patch() (nova 32's nova/test.py:24
    # calls it again) to threading. The command-line tests remove it from
    # the commands' environment, as before.
    os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = '0'
for _name in ('OS_STDOUT_CAPTURE', 'OS_STDERR_CAPTURE', 'OS_LOG_CAPTURE'):
    os.environ.setdefault(_name, '1')
# Each test's bound (oslotest's Timeout fixture reads it, under nova's
# test.TestCase too): a test that hangs fails with a TimeoutException and
# its worker goes on, so a run always ends. Far above the slowest test's
# time (the contributor guide's "The tests").
os.environ.setdefault('OS_TEST_TIMEOUT', '900')
# nova's migrations log every step at INFO, also while a class builds its
# shared databases, outside any test's capture (and nova.test, imported by
# the nova-based tests, logs INFO to stdout): warnings only, as nova's own
# test logging fixture sets it.
logging.getLogger('alembic').setLevel(logging.WARNING)
# nova's thread pools say INFO when a test's pools shut down, after its log
# capture has ended.
logging.getLogger('nova.thread_pool_factory').setLevel(logging.WARNING)
# Building nova's ComputeManager class (at import, before any test runs)
# logs "Skipping periodic task ..." at INFO to the stdout handler that
# nova.test's import gives the root logger: it printed into every run.
logging.getLogger('oslo_service.periodic_task').setLevel(logging.WARNING)

# nova 31 patches when this module is imported, and has no patch().
from nova import monkey_patch  # noqa: E402

if hasattr(monkey_patch, 'patch') and not _CHOSEN:
    monkey_patch.patch()
