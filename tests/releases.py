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

"""The nova release the tests run against, and which parts run on it.

Read from the installed distribution's metadata, without importing nova
(``tests/__init__.py`` chooses nova's concurrency mode from it before
nova is imported). The scheduler parts and the command line run on every
supported release (tools/releases/tests.txt lists their tests); so does
the nova-api filter, part by part, as each release's table and adapter
in nova_cellsched/compat/ say (a part a release lacks says so and its
tests skip with that reason).
"""

import importlib.metadata
import re
from typing import Any
import unittest

from packaging import utils

NOVA_VERSION = importlib.metadata.version('nova')
NOVA_MAJOR = int(NOVA_VERSION.split('.')[0])

# The nova releases the nova-api filter is built and tested for
# (nova_cellsched/compat/sources.py).
NOVA_API_MAJORS = (31, 32, 33, 34)

NOVA_API_SKIP = (
    'the nova-api filter is tested with nova %s only (nova_cellsched/'
    'compat/sources.py); nova %s is none of them'
    % (', '.join(str(m) for m in NOVA_API_MAJORS), NOVA_VERSION))


def nova_api_part_runs() -> bool:
    """Whether the installed nova is one the nova-api filter runs on."""
    return NOVA_MAJOR in NOVA_API_MAJORS


def skip_module_unless_nova_api_part() -> None:
    """Skip a whole test module of the nova-api filter on nova 31 to 33.

    Called before the module imports ``nova_cellsched.api`` modules that
    cannot be imported there (``api/middleware/policies.py`` names
    ``oslo_policy.policy.Operation``, which oslo.policy 4.x of nova 31
    and 32 has not). unittest's loader reports the module as skipped.
    """
    if not nova_api_part_runs():
        raise unittest.SkipTest(NOVA_API_SKIP)


def running_table():
    """The running nova's table of tested sources (:func:`.core.tested`).

    Its ``version``, ``adapter`` and ``lacks`` are what the nova-api
    filter's tests expect of this release. Imports the plugin (and nova):
    call it from a test, not at import.
    """
    from nova_cellsched.compat import core

    (table,) = [r for r in core.tested() if r.version == NOVA_VERSION]
    return table


def api_parts_on():
    """The nova-api filter's parts an install turns on here, in order.

    Every part of a full install but those the release lacks (the
    response validation on nova 31 and 32: ``LACKS`` of its table).
    """
    lacks = running_table().lacks
    return [name for name in ('guard', 'keyset', 'lister', 'view',
                              'render', 'validation', 'min_version')
            if name not in lacks]


def isolated_nova_pools(test_id: str) -> Any:
    """nova's fixture giving one test its own cell worker pools.

    Its cleanup shuts them down, as nova's own tests do. nova 34 names
    it ``IsolatedExecutorFixture``; nova 31 ``IsolatedGreenPoolFixture``
    (eventlet only).
    """
    from nova.tests import fixtures as nova_fixtures

    isolated = (getattr(nova_fixtures, 'IsolatedExecutorFixture', None)
                or nova_fixtures.IsolatedGreenPoolFixture)
    return isolated(test_id)


def pins_of(text: str) -> dict[str, str]:
    """Canonical name -> version of ``name==version`` lines (``===`` too).

    The lines of a pin file (``tools/releases/novaNN.txt``) or of
    openstack/requirements' upper-constraints.
    """
    pins = {}
    for line in text.splitlines():
        match = re.match(r'^([A-Za-z0-9_.-]+)===?([^;\s#]+)', line)
        if match:
            pins[utils.canonicalize_name(match.group(1))] = match.group(2)
    return pins
