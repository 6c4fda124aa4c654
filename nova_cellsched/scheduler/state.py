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

"""The policy in force in one nova-scheduler, shared by filter and pre-filter.

:class:`~.host_filter.ProjectCellFilter` and
:func:`~.request_filter.require_cell_aggregates` decide with the one
:class:`SharedPolicy` of the process (:func:`get`), so they agree on the
options and cells in force.

``cells_default`` and ``cells_projects`` are read together, in one place,
at two moments only: when the shared policy is built (nova-scheduler
builds ProjectCellFilter at start) and in :func:`reload_hook`, the mutate
hook oslo.config runs on SIGHUP after it has installed every new value.
The pair is then swapped in as one tuple and the policy rebuilt before
the hook returns. Scheduling requests never read the two options: they
see the old pair or the new one, never one of each, without retries.
Nothing else in nova-scheduler reads them either, so oslo.config (which
clears its value cache *before* it parses the files, not after) has no
stale value of them cached when the hook reads them.

``cell_cache_ttl`` is read at the same two moments and given to the
cache with the pair: the cache never reads an option itself.
``placement_prefilter`` and ``placement_prefilter_form`` are single
values, read on every request like nova's own mutable options.

The cell mappings are read again by every SIGHUP too
(:func:`reload_hook` calls :meth:`.decision.PolicyCache.reset`),
whether or not an option changed, and when ProjectCellFilter is built:
the moments nova's HostManager reads the cells it schedules to
(``refresh_cells_caches``, at start and in the scheduler manager's
SIGHUP ``reset``). The enabled cells of that read
(:attr:`.decision.PolicyCache.scheduling_cells`) are the only cells the
placement pre-filter names to nova's HostManager.
"""

from collections.abc import Callable
from collections.abc import Sequence
import threading
import time
from typing import Any

import nova.conf
from oslo_config import cfg
from oslo_log import log as logging

from nova_cellsched import cells
from nova_cellsched import conf
from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import decision

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
conf.register_opts(CONF)


def read_options(conf_obj: Any) -> decision.RawOptions:
    """``(cells_default, cells_projects)`` as *conf_obj* has them now.

    :raises InvalidCellsMapping: oslo.config cannot read a value (an
        unescaped ``$``), naming the option and the value's problem.
    """
    group = conf_obj[conf.GROUP_NAME]
    values = []
    for name in ('cells_default', 'cells_projects'):
        try:
            values.append(getattr(group, name))
        except cfg.Error as exc:
            # '$name' is oslo.config's reference to another option.
            missing = getattr(exc, 'opt_name', None)
            raise InvalidCellsMapping(
                name, '<unreadable>', '$%s' % missing if missing else name,
                'oslo.config cannot read the value (%s); a "$" refers to '
                'another option, write "$$" for a literal "$"' % exc
            ) from exc
    return tuple(values[0]), values[1]


def _cell_cache_ttl(conf_obj: Any) -> float:
    """``[cellsched] cell_cache_ttl`` as *conf_obj* has it now."""
    return float(conf_obj[conf.GROUP_NAME].cell_cache_ttl)


def to_cell_info(cell_mapping: Any) -> decision.CellInfo:
    """Convert a nova ``CellMapping`` to a :class:`.decision.CellInfo`.

    The mapping itself is kept as ``CellInfo.source``, so that the
    pre-filter can name the cell to nova's HostManager without reading
    it back from the API database.
    """
    return decision.CellInfo(uuid=cell_mapping.uuid,
                               name=cell_mapping.name or None,
                               disabled=bool(cell_mapping.disabled),
                               source=cell_mapping)


def load_cell_infos(context: Any = None) -> list[decision.CellInfo]:
    """Every cell mapping as :class:`.decision.CellInfo`, cell0 included."""
    return [to_cell_info(cm) for cm in cells.load_cell_mappings(context)]


class SharedPolicy:
    """The pair of mapping options in force and the policy cache on it.

    :param conf_obj: the configuration to read (nova's ``CONF``).
    :param load_cells: returns every cell mapping (default: nova's API
        database through :func:`load_cell_infos`).
    :param clock: monotonic clock of the cache, injectable for tests.
    :raises InvalidCellsMapping: the options do not parse (the filter
        does not load, so nova-scheduler does not start).
    """

    def __init__(self, conf_obj: Any,
                 load_cells: Callable[[], Sequence[decision.CellInfo]]
                 | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = decision.PolicyCache(
            read_options(conf_obj),
            load_cells or load_cell_infos, clock=clock,
            max_age=_cell_cache_ttl(conf_obj))

    def reload(self, conf_obj: Any) -> None:
        """Install the options *conf_obj* has now, and rebuild the policy.

        Pushes the pair and ``[cellsched] cell_cache_ttl`` to the cache
        (:meth:`.decision.PolicyCache.reset`), which never reads an
        option itself, and so reads the cell mappings again, whether or
        not the options changed: on SIGHUP nova-scheduler refreshes its
        own cell caches (``HostManager.refresh_cells_caches``) right
        after the mutate hooks, so renamed, disabled, enabled and new
        cells are seen by both at once, not after ``[cellsched]
        cell_cache_ttl``.

        A value oslo.config cannot read, or one that does not parse, is
        logged as an error and the last good mapping stays in force (the
        cells are read again all the same). Never raises for the options
        (oslo.config's other hooks run too).
        """
        raw: decision.RawOptions | None
        try:
            raw = read_options(conf_obj)
        except InvalidCellsMapping as exc:
            LOG.error('Ignoring the new [cellsched] options, the last '
                      'good mapping stays in force: %s', exc)
            raw = None
        # Parse and resolve now, in the hook, not in the next request;
        # and read the cell mappings again whatever the options, as
        # nova-scheduler's SIGHUP handler does for its own cell caches.
        # One state swap: requests see the old policy or the new one.
        self.cache.reset(raw, max_age=_cell_cache_ttl(conf_obj))


_lock = threading.Lock()
_shared: SharedPolicy | None = None


def get() -> SharedPolicy:
    """The shared policy of this process, built from ``CONF`` on first use.

    The first call also registers :func:`reload_hook` on ``CONF``.

    :raises InvalidCellsMapping: it is built now and the options do not
        parse; nothing is kept, the next call tries again.
    """
    global _shared
    shared = _shared
    if shared is not None:
        return shared
    with _lock:
        if _shared is None:
            _shared = SharedPolicy(CONF)
            # oslo.config keeps hooks in a set: once per function.
            CONF.register_mutate_hook(reload_hook)
        return _shared


def reload_hook(conf_obj: cfg.ConfigOpts, fresh: Any) -> None:
    """oslo.config mutate hook: rebuild the shared policy from *conf_obj*.

    oslo.config runs it on SIGHUP once the new values are in force;
    nothing to do before the policy is built.
    """
    shared = _shared
    if shared is not None:
        shared.reload(conf_obj)
