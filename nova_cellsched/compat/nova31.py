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

"""nova 31's adapter: what of nova-cellsched differs by nova release.

Only code that follows one nova release goes here: the end of nova-api's
start-up check (:func:`raise_if_too_old`) and how the lister's self-test
finds and stops nova's worker pools (:func:`nova_pools`,
:func:`reset_nova_pools`). :mod:`.core` picks the adapter per part: the
newest tested release whose sources the part's all equal
(``sources_nova31`` for this one).

nova 31 (2025.1) differs from nova 34 in its thread model and in its
worker pools (what its view and ``fill_faults`` do otherwise is gated
where it differs: :mod:`nova_cellsched.api.render`). It runs on eventlet
only and has no ``concurrency_mode_threading`` (:func:`threading_mode`),
and it spawns a green thread per call rather than keeping pools
(:func:`nova_pools`, :func:`reset_nova_pools`). Its
``raise_if_old_compute`` is nova 34's: the copy here is nova 34's.
``diff nova31.py nova34.py`` is what changed.
"""

from typing import Any

# The lister's calls on nova (part ``lister``): nova 31 does there what
# nova 34 does (the sources the part relies on are nova 34's, or differ
# where this release's table says why it is safe), so they are nova 34's
# adapter's functions, not copies.
from nova_cellsched.compat.nova34 import all_cells  # noqa: F401
from nova_cellsched.compat.nova34 import batch  # noqa: F401
from nova_cellsched.compat.nova34 import cells_to_list  # noqa: F401
from nova_cellsched.compat.nova34 import columns_to_join  # noqa: F401
from nova_cellsched.compat.nova34 import instance_objects  # noqa: F401
from nova_cellsched.compat.nova34 import marker_context  # noqa: F401
from nova_cellsched.compat.nova34 import marker_row  # noqa: F401
from nova_cellsched.compat.nova34 import not_responding  # noqa: F401

# The start-up check (part ``startup``) ------------------------------------

def raise_if_too_old(current: int) -> None:
    """The end of nova 31's ``raise_if_old_compute``: its exception.

    :param current: the oldest nova-compute service version found
        (not 0: no compute anywhere is a fresh install).
    :raises nova.exception.TooOldComputeService: as nova 31's does.
    """
    from nova import exception as nova_exception
    from nova.objects import service as service_obj

    oldest_supported = service_obj.SERVICE_VERSION_ALIASES[
        service_obj.OLDEST_SUPPORTED_SERVICE_VERSION]
    if current < oldest_supported:
        raise nova_exception.TooOldComputeService(
            oldest_supported_version=(
                service_obj.OLDEST_SUPPORTED_SERVICE_VERSION),
            scope='system',
            min_service_level=current,
            oldest_supported_service=oldest_supported)


# The lister's threads and self-test (part ``lister``) ---------------------

def threading_mode() -> bool:
    """Whether nova runs on native threads, not eventlet's green ones.

    nova 31 runs on eventlet only (``nova.monkey_patch`` patches on
    import unless ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` is set) and has
    no ``concurrency_mode_threading``: native threads exactly when
    eventlet has not patched ``threading``.
    """
    import eventlet.patcher

    return not eventlet.patcher.is_monkey_patched('thread')


def nova_pools() -> list[Any]:
    """nova's worker pools started in this process (its cell workers...).

    None here: nova 31 keeps no worker pool; ``scatter_gather_cells`` and
    ``utils.spawn`` start a green thread per call.
    """
    return []


def reset_nova_pools() -> None:
    """Stop nova's worker pools; each starts again on its next use.

    Nothing to stop on nova 31 (no pools, :func:`nova_pools`).
    """
    return None
