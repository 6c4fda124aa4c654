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

"""Keep the current :class:`~.policy.Policy` for a scheduler.

Pure Python: the option values are given to it (pushed), the cell
mappings come from a callable, so the reload rules are tested without
nova.

The rules:

* The raw option values and the cell cache's age limit are given at
  construction and to :meth:`reset`, nowhere else: in nova-scheduler
  :mod:`.state` pushes them at start and from its SIGHUP mutate hook,
  and requests never read an option. The values are parsed again only
  when they changed.
* The first value must parse (:class:`InvalidCellsMapping` is raised: the
  filter does not load). A later value that does not parse is logged once
  at error level and the last good mapping stays in force.
* Cell mappings are loaded on first use, when they are older than
  ``max_age`` seconds, when :meth:`refresh_cells` is asked to (a host in
  a cell the cache does not know), at most once per
  ``min_refresh_interval`` seconds, and on every :meth:`reset` (what
  nova-scheduler does with its own cell caches at start and on SIGHUP),
  once also when the options changed. A failed load keeps the last good
  cells and is logged.
* :attr:`PolicyCache.scheduling_cells` are the enabled cells of the last
  :meth:`reset` only: nova's HostManager reads its enabled cells at start
  and on SIGHUP, never in between, and that is the set of cells nova
  schedules new servers to.
* Readers never see a half-built state: the state is one immutable
  object, replaced by a single assignment under a lock.
"""

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence

from oslo_log import log as logging

from nova_cellsched.exception import InvalidCellsMapping
from nova_cellsched.scheduler import mapping as mapping_mod
from nova_cellsched.scheduler import policy as policy_mod

LOG = logging.getLogger(__name__)

RawOptions = tuple[tuple[str, ...], str]
"""``(cells_default items, cells_projects string)`` as read from CONF."""


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything the cache holds at one moment, never changed.

    A request takes one (:meth:`PolicyCache.snapshot`) and decides with
    it alone, so a SIGHUP during the request cannot give it the policy of
    one configuration and the mapping or cells of the next.

    :ivar raw: the option values of :attr:`mapping`.
    :ivar mapping: the mapping in force (the last one that parsed).
    :ivar cells: the cell mappings of the last good load; None before one.
    :ivar policy: :attr:`mapping` resolved against :attr:`cells`.
    :ivar loaded_at: clock reading of the last load (good or failed).
    :ivar scheduling_cells: see :attr:`PolicyCache.scheduling_cells`.
    """

    raw: RawOptions
    mapping: mapping_mod.CellsMapping
    cells: tuple[policy_mod.CellInfo, ...] | None
    policy: policy_mod.Policy
    loaded_at: float | None
    # Enabled cells (cell0 excluded) of the last reset's load; None
    # before a reset loaded the cells.
    scheduling_cells: frozenset[str] | None = None

    def cell(self, uuid: str) -> policy_mod.CellInfo | None:
        """The cell *uuid* as the last good load read it; None if absent."""
        return self.policy.cells.get(uuid)


class PolicyCache:
    """The current policy, reloaded when the options or cells change.

    :param options: the raw option values in force at start.
    :param load_cells: returns every cell mapping; may raise.
    :param min_refresh_interval: seconds between two cell reloads that are
        asked for by :meth:`refresh_cells`.
    :param clock: monotonic clock, injectable for tests.
    :param max_age: seconds after which the cell mappings are reloaded on
        the next request (renamed or disabled cells are seen without a
        restart); 0 or None never. :meth:`reset` may change it.
    :raises InvalidCellsMapping: when the options do not parse at start.
    """

    def __init__(self, options: RawOptions,
                 load_cells: Callable[[], Sequence[policy_mod.CellInfo]],
                 min_refresh_interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 max_age: float | None = None) -> None:
        self._max_age = max_age
        self._load_cells = load_cells
        self._min_refresh_interval = min_refresh_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._rejected_raw: RawOptions | None = None
        mapping = mapping_mod.parse(*options)
        # Cells are loaded on first use, not here: the scheduler may build
        # its filters before the API database is reachable.
        self._state = Snapshot(options, mapping, None,
                             policy_mod.resolve(mapping, ()), None)

    @property
    def mapping(self) -> mapping_mod.CellsMapping:
        """The mapping in force (the last one that parsed)."""
        return self._state.mapping

    @property
    def scheduling_cells(self) -> frozenset[str] | None:
        """Cell uuids nova-scheduler schedules new servers to, as it sees them.

        The cells that were enabled (``nova-manage cell_v2 update_cell
        --disable`` not in force), cell0 excluded, when :meth:`reset` last
        loaded the cell mappings: nova's HostManager reads its
        ``enabled_cells`` at the same moments (at start, and on SIGHUP),
        so a cell disabled or re-enabled since is seen by neither until
        the next SIGHUP. Loads for age or unknown cells do not change it.
        None before a reset loaded the cells.
        """
        return self._state.scheduling_cells

    def current(self) -> policy_mod.Policy:
        """Return the policy for the option values in force now."""
        return self.snapshot().policy

    def snapshot(self) -> Snapshot:
        """The state a request decides with, cells loaded if due first.

        Take it once per request: each call may return a newer one (a
        SIGHUP, or a load for age, in between).
        """
        state = self._state
        if state.cells is None:
            # Never loaded, or every load failed so far: try again, but a
            # failing API database is not hammered on every request.
            state = self._reload_cells(state,
                                       force=state.loaded_at is None)
        elif self._too_old(state):
            state = self._reload_cells(state, force=False)
        return state

    def reset(self, options: RawOptions | None = None,
              max_age: float | None = None) -> policy_mod.Policy:
        """Install new values and read the cell mappings again now (SIGHUP).

        What nova-scheduler does with its own cell caches at start and on
        SIGHUP (``HostManager.refresh_cells_caches``): renamed, disabled,
        enabled and new cells are seen at once, whatever ``max_age``, and
        :attr:`scheduling_cells` is taken from this load. One load of the
        cell mappings, also when the options changed. A failed load keeps
        the last good cells and scheduling cells, and is logged.

        :param options: the raw option values now in force; None keeps
            those in force. Values that do not parse are logged once at
            error level and the last good mapping stays in force.
        :param max_age: the new age limit of the cells; None keeps it.
        """
        with self._lock:
            if max_age is not None:
                self._max_age = max_age
            state = self._state
            mapping = state.mapping
            raw = state.raw
            if options is not None and options != state.raw:
                if options != self._rejected_raw:
                    parsed = self._parse(options)
                    if parsed is not None:
                        raw, mapping = options, parsed
            elif self._rejected_raw is not None:
                # Back to the value in force: a later return of the
                # rejected value is a new mistake and is logged again.
                self._rejected_raw = None
            self._state = self._build(state, raw, mapping, reset=True)
            return self._state.policy

    def _parse(self, raw: RawOptions) -> mapping_mod.CellsMapping | None:
        """*raw* parsed, or None (logged, and remembered as rejected)."""
        try:
            mapping = mapping_mod.parse(*raw)
        except InvalidCellsMapping as exc:
            self._rejected_raw = raw
            LOG.error('Ignoring the new [cellsched] options, the last '
                      'good mapping stays in force: %s', exc)
            return None
        self._rejected_raw = None
        LOG.info('[cellsched] options changed: cells_default=%(d)r '
                 'cells_projects=%(p)r',
                 {'d': mapping.render_default(),
                  'p': mapping.render_projects()})
        return mapping

    def _too_old(self, state: Snapshot) -> bool:
        max_age = self._max_age
        if not max_age or state.loaded_at is None:
            return False
        return self._clock() - state.loaded_at >= max_age

    def refresh_cells(self) -> Snapshot:
        """Reload the cell mappings unless that was done very recently.

        :returns: the newest state, for the caller to decide with from
            then on.
        """
        self.snapshot()
        return self._reload_cells(self._state, force=False)

    def _reload_cells(self, state: Snapshot, force: bool) -> Snapshot:
        with self._lock:
            if self._state is not state:
                return self._state
            if (not force and state.loaded_at is not None and
                    self._clock() - state.loaded_at <
                    self._min_refresh_interval):
                return state
            self._state = self._build(state, state.raw, state.mapping,
                                      reset=False)
            return self._state

    def _build(self, previous: Snapshot, raw: RawOptions,
               mapping: mapping_mod.CellsMapping, reset: bool) -> Snapshot:
        """A new state: the cell mappings loaded again, *mapping* resolved.

        :param reset: the load is a reset's (:meth:`reset`): it also sets
            the scheduling cells.
        """
        cells = previous.cells
        scheduling_cells = previous.scheduling_cells
        try:
            cells = tuple(self._load_cells())
        except Exception as exc:  # noqa: BLE001 - any DB/driver error
            LOG.error('Cannot load the cell mappings from the API '
                      'database, keeping the %s: %s',
                      'last known cells' if cells is not None else
                      'mapping unresolved (restricted projects get no '
                      'host until it loads)', exc)
        else:
            if reset:
                scheduling_cells = frozenset(
                    c.uuid for c in cells
                    if not c.disabled and c.uuid != policy_mod.CELL0_UUID)
        policy = policy_mod.resolve(mapping, cells or ())
        if cells is not None:
            for problem in policy.problems:
                LOG.warning('[cellsched] %s', problem)
        return Snapshot(raw, mapping, cells, policy, self._clock(),
                      scheduling_cells)
