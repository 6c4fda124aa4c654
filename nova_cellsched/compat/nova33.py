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

"""nova 33's adapter: what of nova-cellsched differs by nova release.

Only code that follows one nova release goes here: the end of nova-api's
start-up check (:func:`raise_if_too_old`) and how the lister's self-test
finds and stops nova's worker pools (:func:`nova_pools`,
:func:`reset_nova_pools`). :mod:`.core` picks the adapter per part: the
newest tested release whose sources the part's all equal
(``sources_nova33`` for this one).

nova 33 (2026.1) differs from nova 34 only in where its worker pools
live (``nova.utils``' module globals, not ``nova.thread_pool_factory``):
:func:`nova_pools` and :func:`reset_nova_pools`. Its
``raise_if_old_compute`` is nova 34's, line for line (its hashes are the
same in both tables), and so is the copy here. ``diff nova33.py
nova34.py`` is what changed.
"""

from typing import Any

# The lister's calls on nova (part ``lister``): nova 33 does there what
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
    """The end of nova 33's ``raise_if_old_compute``: its exception.

    :param current: the oldest nova-compute service version found
        (not 0: no compute anywhere is a fresh install).
    :raises nova.exception.TooOldComputeService: as nova 33's does.
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

    nova 33's own answer (``nova.utils.concurrency_mode_threading``:
    not monkey-patched by ``nova.monkey_patch``).
    """
    from nova import utils

    return bool(utils.concurrency_mode_threading())


def nova_pools() -> list[Any]:
    """nova's worker pools started in this process (its cell workers...).

    nova 33 keeps them in ``nova.utils``' module globals, each started
    on first use: the default, the cell worker (scatter-gather) and the
    image cache pool.
    """
    from nova import utils

    return [pool for pool in (utils.DEFAULT_EXECUTOR,
                              utils.SCATTER_GATHER_EXECUTOR,
                              utils.CACHE_IMAGES_EXECUTOR)
            if pool is not None]


def reset_nova_pools() -> None:
    """Stop nova's worker pools; each starts again on its next use.

    nova 33's own calls before a service forks its workers
    (``nova.cmd.scheduler``); the image cache pool is nova-compute's.
    """
    from nova import utils

    utils.destroy_scatter_gather_executor()
    utils.destroy_default_executor()
