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

"""nova-api's start-up check: nova's answer, in parallel, its I/O bounded.

Before a nova-api worker loads its paste pipeline,
``nova.api.openstack.wsgi_app._setup_service`` calls
``nova.utils.raise_if_old_compute``: it asks every cell database for its
oldest nova-compute service version (``get_minimum_version_all_cells``)
and waits nova's ``CELL_TIMEOUT`` (60 s) for them. A cell that does not
answer within that is left out of the minimum. The thread nova left on
a frozen cell then stays in oslo.db's connection retries for about
100 s more; a SIGTERM meanwhile waits for it.

:func:`raise_if_old_compute` is the same check and the same answer: the
same query (nova's ``Service._db_service_get_minimum_version``) on every
cell in parallel, the same minimum (zero and missing versions left out,
a cell that does not answer within nova's ``CELL_TIMEOUT`` left out and
logged), the same ``TooOldComputeService``, which nova's
``_setup_service`` handles as it always does (``[workarounds]
disable_compute_service_check_for_ffu``). Each cell gets nova's
``CELL_TIMEOUT``, not the shorter ``[cellsched] list_cell_timeout`` a
listing gives it: a cell that answers later than that but within
nova's wait counts, as in nova, so a too old nova-compute there is not
missed (a worker started while a cell is frozen waits nova's 60 s, as
nova's does). Its thread's I/O ends with that wait
(:func:`nova_cellsched.guard.io_timeout`), so no thread is left on a
frozen cell, and its first contact with a dead cell is one connection
attempt, not oslo.db's retries. :func:`bounded` puts it in nova's place
while nova builds the application; :mod:`nova_cellsched.wsgi.osapi_compute`
(nova-api's WSGI entry point with this check) uses it.

It only applies where nova's code is the code it was written against
(the sources of the ``startup`` part, :mod:`nova_cellsched.compat.parts`):
otherwise nova's own check runs, after one warning saying why; and for a
service with no API database (nova's single-cell path) nova's own check
runs. The end of the check, nova's exception, is the adapter's
(``nova_cellsched.compat.adapter.raise_if_too_old``).
"""

from collections.abc import Iterable, Iterator
import contextlib
import time
from typing import Any

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova import utils as nova_utils
from oslo_config import cfg
from oslo_log import log as logging

from nova_cellsched.api.hooks import driver_advice
from nova_cellsched.api.hooks import pool
from nova_cellsched import compat
from nova_cellsched.compat import adapter
from nova_cellsched import conf as conf_mod
from nova_cellsched import gather
from nova_cellsched import guard

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: nova's check, which :func:`bounded` replaces and restores.
ORIGINAL = nova_utils.raise_if_old_compute

#: The binary nova-api's check is about.
BINARIES = ('nova-compute',)


def _cell_minimum(context: Any, binaries: list[str],
                  seconds: float | None) -> dict[str, int | None]:
    """nova's query for one cell: {binary: its oldest version}."""
    with guard.io_timeout(seconds):
        found: dict[str, int | None] = (
            objects.Service._db_service_get_minimum_version(
                context, binaries))
        return found


def minimum_version(context: Any, cell_mappings: Iterable[Any],
                    timeout: float,
                    binaries: Iterable[str] = BINARIES
                    ) -> tuple[int, dict[str, gather.Outcome[Any]]]:
    """The oldest version of *binaries* across the cells, as nova finds it.

    Every cell is asked at once and given *timeout* seconds; its I/O
    ends within *timeout* too. A
    version of 0 or None does not count (a cell without such a
    service); a cell that did not answer or failed does not count
    either, as in ``get_minimum_version_all_cells(require_all=False)``.

    :returns: (the minimum, or 0 if no cell reported one; each cell's
        outcome by cell uuid).
    """
    names = list(binaries)
    calls = {}
    for cell_mapping in cell_mappings:
        # Said at start, once per cell and process, not at a listing.
        driver_advice.warn_unbounded_cell(
            cell_mapping, pool.io_timeout(timeout),
            CONF.database.connection_parameters)
        with nova_context.target_cell(context, cell_mapping) as cctxt:
            calls[cell_mapping.uuid] = (
                _cell_minimum,
                (cctxt, names, timeout))
    budgets = {uuid: gather.Budget(timeout) for uuid in calls}
    outcomes = gather.run_round(
        pool.executor(len(calls)).submit, calls, budgets,
        gather.Deadline(timeout))
    minimum = 0
    for outcome in outcomes.values():
        if not outcome.ok or not outcome.result:
            continue
        versions = [v for v in outcome.result.values() if v]
        if versions:
            oldest = min(versions)
            minimum = min(minimum, oldest) if minimum else oldest
    return minimum, outcomes


def checked_message(minimum: int, cells: int, answered: int,
                    seconds: float, timeout: float) -> str:
    """The INFO line of a bounded start-up check."""
    return ('Start-up check: oldest nova-compute service version %d '
            'across %d cells, %d answered, in %.3fs (each cell within '
            "%.1fs, nova's CELL_TIMEOUT)."
            % (minimum, cells, answered, seconds, timeout))


def _label(cell_mapping: Any) -> str:
    return '%s(%s)' % (cell_mapping.name or '', cell_mapping.uuid)


def raise_if_old_compute() -> None:
    """nova's ``raise_if_old_compute``, in parallel, I/O bounded.

    Each cell within nova's ``CELL_TIMEOUT``, read when called. Put in
    nova's place by :func:`bounded` only where nova's code is the code
    this was written against (:mod:`nova_cellsched.compat`, part
    ``startup``).

    :raises nova.exception.TooOldComputeService: as nova's does (the
        adapter raises it).
    """
    if CONF.api_database.connection is None:
        # A cell's own service: nova asks its own cell only.
        ORIGINAL()
        return
    context = nova_context.get_admin_context()
    try:
        nova_context.load_cells()
    except nova_exception.DBNotAllowed:
        # nova's own check says what this means and falls back.
        ORIGINAL()
        return
    # nova's wait, not list_cell_timeout: a cell that answers within it
    # counts in nova's minimum, and must here.
    timeout = float(nova_context.CELL_TIMEOUT)
    started = time.monotonic()
    current, outcomes = minimum_version(context, nova_context.CELLS,
                                        timeout)
    labels = {cm.uuid: _label(cm) for cm in nova_context.CELLS}
    for uuid, outcome in outcomes.items():
        if not outcome.ok:
            LOG.warning(
                'Cell %s did not answer the start-up check of nova-compute '
                'service versions (%s); left out of the minimum, as nova '
                'leaves out a cell that does not respond.',
                labels.get(uuid, uuid), outcome.describe())
    LOG.info('%s', checked_message(
        current, len(outcomes), sum(1 for o in outcomes.values() if o.ok),
        time.monotonic() - started, timeout))
    if current == 0:
        # No compute anywhere yet: a fresh install.
        return
    adapter.raise_if_too_old(current)


@contextlib.contextmanager
def bounded() -> Iterator[None]:
    """Inside the block, nova's start-up check is :func:`raise_if_old_compute`.

    For the application's build (``wsgi_app.init_application``), which
    runs before any request in the process; nova's function is back
    afterwards. Whether nova is the one this was written against is
    checked on entry, before nova's function is replaced; the answer is
    logged by the check (logging is set up by then).

    The check's connection bound (the ``guard`` part, which ``startup``
    requires) and worker pool stay only for the lister: if the application was
    built without it installed (the ``cellsched`` filter refused nova, or is
    not in the pipeline), the bound is taken out again, if this block put it
    in, and the pool is shut down.
    """
    conf_mod.register_opts(CONF)
    # Checked before nova's function is replaced; off, with one WARNING
    # saying why, on a nova this was not written against.
    compat.install(['startup'])
    try:
        yield
    finally:
        # The bound stays only for the lister (a part it requires).
        compat.restore(['startup'])
        if not compat.is_on('lister'):
            pool.shutdown()
