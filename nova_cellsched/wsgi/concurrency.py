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

"""nova-api's concurrency mode, chosen as nova's own entry point does.

nova's ``nova/wsgi/osapi_compute.py`` chooses eventlet or native threads
before it imports anything else, differently per release:

======= ================================================================
nova    what nova's entry point does first
======= ================================================================
31      nothing: it imports ``nova.api.openstack``, which imports
        ``nova.monkey_patch`` (eventlet, patched on import, unless
        ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` says not to)
32      nothing: ``nova.api.openstack`` calls ``monkey_patch.patch()``
        (eventlet unless the variable says not to; ``patch`` takes no
        argument)
33, 34  ``monkey_patch.patch(backend='threading')`` (native threads
        unless the variable says eventlet)
======= ================================================================

:func:`as_nova_chooses` does the same, told apart by what nova has (a
``patch`` taking ``backend``), so that an operator who names
``nova_cellsched.wsgi.osapi_compute`` in place of nova's module gets the
mode nova's module gives, on every release.
"""

import inspect


def threads_by_default() -> bool:
    """Whether nova's entry point asks for native threads (nova 33 on).

    Told by what nova has: a ``monkey_patch.patch`` taking ``backend``.
    Importing ``nova.monkey_patch`` patches eventlet on nova 31 (unless
    ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` says not to), as nova's own
    module's first import does.
    """
    from nova import monkey_patch

    patch = getattr(monkey_patch, 'patch', None)
    return patch is not None and 'backend' in inspect.signature(
        patch).parameters


def as_nova_chooses() -> str:
    """Choose nova's mode as this release's ``osapi_compute`` does.

    Call it first, before anything imports eventlet or nova's API.

    :returns: what chose it: ``'threading by default'`` (nova 33 and
        newer: ``patch(backend='threading')`` was called here) or
        ``'nova.api.openstack'`` (nova 31 and 32: left to that import,
        as nova's module leaves it).
    """
    if threads_by_default():
        from nova import monkey_patch

        monkey_patch.patch(backend='threading')
        return 'threading by default'
    return 'nova.api.openstack'
