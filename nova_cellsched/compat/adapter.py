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

"""The adapter: nova-cellsched's calls on nova, one body per call.

Where nova releases differ, the difference is a gate at the point where
it differs (``if NOVA >= 33``), as Django REST framework's ``compat``
does, not a copy per release:

- the lister's calls on nova (part ``lister``): the cells a listing
  asks (:func:`cells_to_list`, :func:`all_cells`), the marker's row
  (:func:`marker_context`, :func:`marker_row`), one cell's batch
  (:func:`batch`), the error of a down cell (:func:`not_responding`)
  and the objects built from the rows (:func:`columns_to_join`,
  :func:`instance_objects`), as ``InstanceLister`` and
  ``get_instance_objects_sorted`` do them on every tested release;
- the end of nova-api's start-up check (:func:`raise_if_too_old`);
- how nova runs threads and where it keeps its worker pools
  (:func:`threading_mode`, :func:`nova_pools`, :func:`reset_nova_pools`):
  gated on :data:`NOVA`.

The nova sources these calls rely on are the parts' sources
(:mod:`.parts`): a nova whose sources differ from every tested release
turns the part off before any of this runs. A new nova release adds
its hashes to :mod:`.sources` and, where it does otherwise, a gate
here.
"""

from collections.abc import Sequence
import copy
from typing import Any

from nova_cellsched.compat import hashing


# The lister's calls on nova (part ``lister``) ------------------------------

def all_cells() -> Sequence[Any]:
    """Every cell, as nova's lister lists them when given none.

    nova's ``CELLS``, read from the API database once per process.
    """
    from nova import context as nova_context

    nova_context.load_cells()
    cells: Sequence[Any] = nova_context.CELLS
    return cells


def cells_to_list(ctx: Any) -> Sequence[Any]:
    """The cells nova's ``get_instance_objects_sorted`` asks.

    With ``[api] instance_list_per_project_cells``, a non-admin's own
    project's cells only (nova reads them from the API database per
    request); otherwise :func:`all_cells`.
    """
    import nova.conf
    from nova import objects

    if nova.conf.CONF.api.instance_list_per_project_cells and not (
            ctx.is_admin):
        cells: Sequence[Any] = objects.CellMappingList.get_by_project_id(
            ctx, ctx.project_id)
        return cells
    return all_cells()


def marker_context(ctx: Any) -> Any:
    """The context nova reads the marker with: deleted servers too."""
    return ctx.elevated(read_deleted='yes')


def marker_row(cctxt: Any, marker: str) -> Any:
    """The marker's row, as nova's ``get_marker_record`` reads it.

    :param cctxt: :func:`marker_context`'s, targeted at the marker's
        cell. No joins: only the sort keys are read, none joined.
    :raises nova.exception.MarkerNotFound: no such server in that cell.
    """
    from nova.db.main import api as db
    from nova import exception as nova_exception

    try:
        return db.instance_get_by_uuid(cctxt, marker, columns_to_join=[])
    except nova_exception.InstanceNotFound:
        raise nova_exception.MarkerNotFound(marker=marker)


def batch(cctxt: Any, filters: Any, limit: int | None,
          columns_to_join: Any, sort_keys: list[str],
          sort_dirs: list[str]) -> Any:
    """One cell's rows, as nova's ``InstanceLister.get_by_filters``.

    Without nova's marker: the rows after the previous batch are asked
    for by their sort values (:mod:`nova_cellsched.api.hooks.keyset` pages
    the query nova builds here).
    """
    from nova.db.main import api as db

    return db.instance_get_all_by_filters_sort(
        cctxt, filters, limit=limit, marker=None,
        columns_to_join=columns_to_join, sort_keys=sort_keys,
        sort_dirs=sort_dirs)


def not_responding(cell_uuid: str) -> Exception:
    """nova's error for a listing that must fail on a down cell."""
    from nova import exception as nova_exception
    from nova.i18n import _

    error: Exception = nova_exception.NovaException(
        _('Cell %s is not responding but configuration '
          'indicates that we should fail.') % cell_uuid)
    return error


def columns_to_join(expected_attrs: Any) -> Any:
    """The joins nova lists with for these attributes of the objects."""
    from nova.objects import instance as instance_obj

    return instance_obj._expected_cols(expected_attrs)


def instance_objects(ctx: Any, db_rows: Sequence[Any],
                     expected_attrs: Any) -> Any:
    """The InstanceList of *db_rows*, as nova's lister builds it.

    The fault was joined with the rows (:func:`columns_to_join`), so
    ``_make_instance_list`` is not asked to read it again.
    """
    from nova import objects
    from nova.objects import instance as instance_obj

    if 'fault' in expected_attrs:
        expected_attrs = copy.copy(expected_attrs)
        expected_attrs.remove('fault')
    return instance_obj._make_instance_list(
        ctx, objects.InstanceList(), db_rows, expected_attrs)


# The start-up check (part ``startup``) ------------------------------------

def raise_if_too_old(current: int) -> None:
    """The end of nova's ``raise_if_old_compute``: its exception.

    :param current: the oldest nova-compute service version found
        (not 0: no compute anywhere is a fresh install).
    :raises nova.exception.TooOldComputeService: as nova's does.
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

def _major(version: str) -> int:
    """nova's major version (``33`` of ``33.0.3``); an unknown one is new.

    A nova without package metadata (a source tree on ``sys.path``) is
    taken for the newest: its gates take the newest path, and its
    relied-on sources are checked as any nova's are.
    """
    head = version.split('.')[0]
    return int(head) if head.isdigit() else 10 ** 6


#: The installed nova's major version, what the gates below compare.
NOVA = _major(hashing.nova_version())


def threading_mode() -> bool:
    """Whether nova runs on native threads, not eventlet's green ones.

    nova's own answer (``nova.utils.concurrency_mode_threading``: not
    monkey-patched by ``nova.monkey_patch``) from nova 32; nova 31 runs
    on eventlet only (it patches on import unless
    ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` is set): native threads exactly
    when eventlet has not patched ``threading``.
    """
    if NOVA < 32:
        import eventlet.patcher

        return not eventlet.patcher.is_monkey_patched('thread')
    from nova import utils

    return bool(utils.concurrency_mode_threading())


def nova_pools() -> list[Any]:
    """nova's worker pools started in this process (its cell workers...).

    Each is started on first use. nova 34 keeps them in
    ``nova.thread_pool_factory``, one per executor type; nova 32 and 33
    in ``nova.utils``' module globals (the default, the cell worker and,
    from 33, the image cache pool); nova 31 keeps none (a green thread
    per call).
    """
    if NOVA >= 34:
        from nova import thread_pool_factory

        return list(getattr(thread_pool_factory.FACTORY, '_all_executors',
                            {}))
    if NOVA >= 32:
        from nova import utils

        names = ('DEFAULT_EXECUTOR', 'SCATTER_GATHER_EXECUTOR',
                 'CACHE_IMAGES_EXECUTOR')
        found = [getattr(utils, name, None) for name in names]
        return [pool for pool in found if pool is not None]
    return []


def reset_nova_pools() -> None:
    """Stop nova's worker pools; each starts again on its next use.

    nova's own calls before a service forks its workers
    (``nova.cmd.scheduler``); nothing to stop on nova 31.
    """
    if NOVA >= 34:
        from nova import thread_pool_factory

        thread_pool_factory.reset_all_executors()
    elif NOVA >= 32:
        from nova import utils

        utils.destroy_scatter_gather_executor()
        utils.destroy_default_executor()
