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

"""nova-scheduler's reads of every cell, bounded (part ``bounded_reads``).

Before each scheduling decision nova-scheduler reads the nova-compute
services and compute nodes of every enabled cell
(``HostManager._get_computes_for_cells``) and, from nova 34, the minimum
nova-compute version of every cell (its ``owner_nova_filter``, through
``nova.context.scatter_gather_all_cells``), waiting up to nova's 60 s
``CELL_TIMEOUT`` for each cell; a cell that does not answer is left
out. One frozen cell database thus holds every boot, into any cell, for
60 s at each read.

With ``[cellsched] scheduler_cell_timeout`` set, those reads are made
for each cell on this module's workers, the cells in parallel, every
blocking call of a read on a PyMySQL connection ending after that many
seconds without an answer (:func:`nova_cellsched.guard.io_timeout`:
time the database keeps silent, not time this process is busy):

=======================  ================================================
the cell                 what the read gives for it
=======================  ================================================
answers                  its answer, as nova's
silent past the timeout  ``did_not_respond_sentinel``, as nova gives for
or refuses to connect    a cell that did not respond (its hosts are left
                         out); the cell is held down
fails otherwise          the exception, as nova's
held down                ``did_not_respond_sentinel`` at once; one probe
                         at a time reads the cell in the background and
                         the first that answers ends the hold-down
=======================  ================================================

What nova does with the answers is unchanged: the hosts of the cells
that answered are filtered and weighed; the minimum version is taken
over them. The hold-down lasts ``[cellsched] cell_hold_down`` seconds
(:mod:`nova_cellsched.health`), per nova-scheduler process. With the
timeout 0 (the default) nova's own functions run.
"""

import collections
import concurrent.futures
import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_log import log as logging

from nova_cellsched import conf
from nova_cellsched import gather
from nova_cellsched import guard
from nova_cellsched import health

LOG = logging.getLogger(__name__)

CONF = nova.conf.CONF
conf.register_opts(CONF)

#: The cells this process found silent (:mod:`nova_cellsched.health`).
HEALTH = health.CellHealth()

_LOCK = threading.Lock()
_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
#: Workers of :data:`_EXECUTOR`.
_SIZE = 0
#: Fewest workers; more as the cells need them (:func:`_executor`).
MIN_WORKERS = 8


def _executor(cells: int) -> concurrent.futures.ThreadPoolExecutor:
    """The workers, at least one per cell (a new pool when cells grow).

    A read ends within the timeout (its I/O is bounded), so a frozen
    cell never holds a worker longer.
    """
    global _EXECUTOR, _SIZE
    with _LOCK:
        size = max(MIN_WORKERS, cells)
        if _EXECUTOR is None or _SIZE < size:
            old, _EXECUTOR = _EXECUTOR, concurrent.futures.ThreadPoolExecutor(
                max_workers=size, thread_name_prefix='cellsched-cells')
            _SIZE = size
            if old is not None:
                old.shutdown(wait=False)
        return _EXECUTOR


def _forget_executor() -> None:
    global _EXECUTOR
    _EXECUTOR = None


if hasattr(os, 'register_at_fork'):
    # A forked nova-scheduler worker starts threads of its own.
    os.register_at_fork(after_in_child=_forget_executor)


def _timeout() -> float:
    """``[cellsched] scheduler_cell_timeout``, read on every call."""
    return float(conf.read_option(CONF, 'scheduler_cell_timeout') or 0.0)


def _in_cell(context: Any, cell: Any, timeout: float,
             fn: Callable[..., Any], args: Sequence[Any],
             kwargs: Mapping[str, Any]) -> Any:
    """Worker: ``fn(cctxt, *args, **kwargs)`` in *cell*, I/O bounded."""
    with guard.io_timeout(timeout, total=False):
        with nova_context.target_cell(context, cell) as cctxt:
            return fn(cctxt, *args, **kwargs)


def _probe_read(cctxt: Any) -> Any:
    return objects.ServiceList.get_by_binary(cctxt, 'nova-compute')


def _probe(context: Any, cell: Any, timeout: float) -> None:
    """Read a held cell in the background; its answer ends the hold-down.
    """
    def done(future: 'concurrent.futures.Future[Any]') -> None:
        error = future.exception()
        HEALTH.probed(cell.uuid, error is None,
                      '' if error is None else gather.describe_error(error))

    _executor(1).submit(_in_cell, context, cell, timeout, _probe_read, (),
                        {}).add_done_callback(done)


def gather_cells(context: Any, cells: Sequence[Any], timeout: float,
                 fn: Callable[..., Any], *args: Any, **kwargs: Any
                 ) -> dict[str, Any]:
    """nova's ``scatter_gather_cells`` answer, each cell's read bounded.

    :returns: cell uuid -> ``fn(cctxt, *args, **kwargs)``'s result, the
        exception it raised, or ``did_not_respond_sentinel`` (module
        docstring).
    """
    group = CONF[conf.GROUP_NAME]
    HEALTH.configure(group.cell_hold_down, group.cell_probe_interval)
    results: dict[str, Any] = {}
    futures: dict[str, concurrent.futures.Future[Any]] = {}
    for cell in cells:
        if HEALTH.held(cell.uuid):
            LOG.warning('Cell %s is held down (it did not answer a recent '
                        'read) and is not asked', cell.uuid)
            results[cell.uuid] = nova_context.did_not_respond_sentinel
            if HEALTH.claim_probe(cell.uuid):
                _probe(context, cell, timeout)
            continue
        futures[cell.uuid] = _executor(len(cells)).submit(
            _in_cell, context, cell, timeout, fn, args, kwargs)
    # Each read ends within the timeout (its I/O is bounded); nova's own
    # bound stays the backstop, for a driver the guard does not bound.
    concurrent.futures.wait(futures.values(),
                            timeout=nova_context.CELL_TIMEOUT)
    for cell_uuid, future in futures.items():
        done = future.done()
        error = future.exception() if done else None
        if not done or health.not_answering(error):
            HEALTH.failed(cell_uuid, 'no answer within %s s' % timeout
                          if error is None else
                          gather.describe_error(error))
            results[cell_uuid] = nova_context.did_not_respond_sentinel
        elif error is not None:
            LOG.warning('Error gathering result from cell %(cell)s: '
                        '%(why)s', {'cell': cell_uuid,
                                    'why': gather.describe_error(error)})
            results[cell_uuid] = error
        else:
            HEALTH.answered(cell_uuid)
            results[cell_uuid] = future.result()
    return {cell.uuid: results[cell.uuid] for cell in cells}


def _computes_of_cell(cctxt: Any, compute_uuids: Sequence[str] | None
                      ) -> tuple[Any, Any]:
    """One cell's nova-compute services and compute nodes, as nova reads.
    """
    services = objects.ServiceList.get_by_binary(
        cctxt, 'nova-compute', include_disabled=True)
    if compute_uuids is None:
        return services, objects.ComputeNodeList.get_all(cctxt)
    return services, objects.ComputeNodeList.get_all_by_uuids(
        cctxt, compute_uuids)


def computes_for_cells(context: Any, cells: Sequence[Any],
                       compute_uuids: Sequence[str] | None, timeout: float
                       ) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """nova's ``(compute_nodes, services)`` of *cells*, bounded.

    :returns: as ``HostManager._get_computes_for_cells``: cell uuid ->
        its compute nodes, and host name -> its nova-compute service, of
        the cells that answered; the others logged as nova logs them.
    """
    results = gather_cells(context, cells, timeout, _computes_of_cell,
                           compute_uuids)
    compute_nodes: dict[str, list[Any]] = collections.defaultdict(list)
    services: dict[str, Any] = {}
    for cell_uuid, result in results.items():
        if isinstance(result, Exception):
            LOG.warning('Failed to get computes for cell %s', cell_uuid)
        elif result is nova_context.did_not_respond_sentinel:
            LOG.warning('Timeout getting computes for cell %s', cell_uuid)
        else:
            cell_services, cell_nodes = result
            compute_nodes[cell_uuid].extend(cell_nodes)
            services.update({service.host: service
                             for service in cell_services})
    return compute_nodes, services


def wrap_computes(attribute: str, original: Callable[..., Any]
                  ) -> Callable[..., Any]:
    """nova's ``HostManager._get_computes_for_cells`` (*original*), bounded.

    Put in by :mod:`nova_cellsched.compat` (``Swap(wraps=True)``).
    """

    @functools.wraps(original)
    def _get_computes_for_cells(self: Any, context: Any, cells: Any,
                                compute_uuids: Any) -> Any:
        timeout = _timeout()
        if not timeout:
            return original(self, context, cells, compute_uuids)
        return computes_for_cells(context, list(cells), compute_uuids,
                                  timeout)

    return _get_computes_for_cells


def wrap_all_cells(attribute: str, original: Callable[..., Any]
                   ) -> Callable[..., Any]:
    """nova's ``nova.context.scatter_gather_all_cells``, bounded.

    Put in by :mod:`nova_cellsched.compat` (``Swap(wraps=True)``), in
    nova-scheduler only.
    """

    @functools.wraps(original)
    def scatter_gather_all_cells(context: Any, fn: Callable[..., Any],
                                 *args: Any, **kwargs: Any) -> Any:
        timeout = _timeout()
        if not timeout:
            return original(context, fn, *args, **kwargs)
        nova_context.load_cells()
        return gather_cells(context, list(nova_context.CELLS or ()),
                            timeout, fn, *args, **kwargs)

    return scatter_gather_all_cells


def register() -> bool:
    """Turn the part on in this process (idempotent).

    :returns: True when it is on (one WARNING says why not).
    """
    from nova_cellsched import compat

    return not compat.install(['bounded_reads'])['bounded_reads']
