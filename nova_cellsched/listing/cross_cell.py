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

"""The one cross-cell lister, with hooks for the command line and nova-api.

In the style of nova's ``CrossCellLister``
(``nova/compute/multi_cell_list.py``): :class:`CrossCellLister` holds
what every listing does the same way, and a subclass says how its cells
are reached:

* the marker: :meth:`CrossCellLister.marker_values` finds the marker's
  cell as nova does (:func:`marker_cell`, the one lookup of both), then
  the hook :meth:`~CrossCellLister.read_marker` reads its sort values
  there;
* the rounds: :meth:`CrossCellLister.page` runs
  :func:`nova_cellsched.listing.rounds.run` with the hook
  :meth:`~CrossCellLister.fetch_round` (one batch per cell, in
  parallel, over the subclass's workers and database access), its
  :meth:`~CrossCellLister.key` and :meth:`~CrossCellLister.values_of`,
  and its :meth:`~CrossCellLister.span` for timings; the failed cells
  are kept in :attr:`CrossCellLister.failures`;
* the waits: each cell's own queries run at most ``cell_timeout`` in
  all (:attr:`CrossCellLister.budgets`); the request waits for the
  process's workers at most :data:`REQUEST_FACTOR` x ``cell_timeout``
  in all (:attr:`CrossCellLister.deadline`), each call at most
  ``cell_timeout`` of that (:meth:`CrossCellLister.in_cells`), and a
  task still queued then runs at once on a thread of its own
  (:func:`gather.run_round`). So a cell is down only when its own query
  did not answer, and a request waits, beyond the time its answering
  cells take, at most ``REQUEST_FACTOR x cell_timeout`` for the process
  and ``cell_timeout`` for each cell that stops answering (once: it is
  not asked again).

The subclasses: ``nova_cellsched.records.lister`` (``nova-cellsched
list``: its own SQL, records) and ``nova_cellsched.api.hooks.instance_list``
(nova-api: nova's DB API, rows for nova's objects).
"""

import abc
import concurrent.futures
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nova import exception as nova_exception
from nova import objects

from nova_cellsched import exception
from nova_cellsched import gather
from nova_cellsched.listing import rounds
from nova_cellsched.listing import sorting

#: A call on one cell in a worker: (function, arguments).
Call = tuple[Callable[..., Any], tuple[Any, ...]]

#: A request waits for the process's workers at most this many
#: ``cell_timeout`` in all.
REQUEST_FACTOR = 2


def request_deadline(cell_timeout: float | None) -> gather.Deadline:
    """A new request's deadline for its waits on the workers (started)."""
    return gather.Deadline(None if cell_timeout is None
                           else REQUEST_FACTOR * cell_timeout)


def marker_cell(context: Any, marker: str) -> Any:
    """The CellMapping of the marker instance, as both listers find it.

    The one marker lookup of the command line's lister and nova-api's,
    nova's way: the marker's InstanceMapping in the API database names
    its cell, where its sort values are then read (deleted or not).

    :raises nova_cellsched.exception.MarkerNotFound: no InstanceMapping,
        or one without a cell (a server still being scheduled; nova's
        lister fails the same way, its ``target_cell`` cannot target
        no cell).
    """
    try:
        im = objects.InstanceMapping.get_by_instance_uuid(context, marker)
    except nova_exception.InstanceMappingNotFound:
        raise exception.MarkerNotFound(marker)
    if im.cell_mapping is None:
        raise exception.MarkerNotFound(marker, scheduling=True)
    return im.cell_mapping


def call_wait(cell_timeout: float | None,
              deadline: gather.Deadline) -> gather.Deadline | None:
    """One call's wait for the workers: ``cell_timeout`` or what is left.
    """
    if cell_timeout is None:
        return None
    left = deadline.remaining()
    return gather.Deadline(cell_timeout if left is None
                           else min(cell_timeout, left))


class CrossCellLister(abc.ABC):
    """One listing across cells: the rounds here, the cells' access in hooks.

    :param context: the nova RequestContext the listing runs for.
    :param spec: the order the cells' rows are read and merged in.
    :param cell_timeout: seconds each cell's queries may run in all,
        and each call may wait for the workers (None: no bound).
    :param deadline: the request's deadline (:func:`request_deadline`),
        when the request makes other calls on the cells too; None: the
        listing's own, from now.
    """

    def __init__(self, context: Any, spec: sorting.SortSpec,
                 cell_timeout: float | None,
                 deadline: gather.Deadline | None = None) -> None:
        self.context = context
        self.spec = spec
        self.cell_timeout = cell_timeout
        self._own_deadline = deadline is None
        #: The request's waits for the workers end by then.
        self.deadline = (request_deadline(cell_timeout) if deadline is None
                         else deadline)
        #: Cell -> its allowance, charged only with its own work.
        self.budgets: dict[str, gather.Budget] = {}
        #: Cell -> the outcome of its first failed round.
        self.failures: dict[str, gather.Outcome[Any]] = {}

    # Hooks.

    @abc.abstractmethod
    def read_marker(self, cell_mapping: Any, marker: str
                    ) -> tuple[Any, ...]:
        """The marker instance's sort values, read in *cell_mapping*."""

    @abc.abstractmethod
    def fetch_round(self, calls: Mapping[str, tuple[Sequence[Any] | None,
                                                    int | None]]
                    ) -> Mapping[str, gather.Outcome[rounds.Batch]]:
        """One batch per cell, in parallel (:data:`.rounds.FetchRound`)."""

    @abc.abstractmethod
    def key(self, row: Any) -> Any:
        """*row*'s sort key, comparable across cells."""

    @abc.abstractmethod
    def values_of(self, row: Any) -> Sequence[Any]:
        """*row*'s sort values, to start a cell's next batch after."""

    @abc.abstractmethod
    def submit(self) -> Callable[..., 'concurrent.futures.Future[Any]']:
        """The workers' ``submit`` (an executor's)."""

    def span(self, name: str, **info: Any
             ) -> contextlib.AbstractContextManager[dict[str, Any]]:
        """A phase of the listing, for timings (default: not recorded)."""
        return rounds.no_span(name, **info)

    # What every listing does the same way.

    def start(self, cells: Sequence[str]) -> None:
        """The listing's clock starts: a budget per cell.

        And its own :attr:`deadline`, unless the request's was given.
        """
        if self._own_deadline:
            self.deadline = request_deadline(self.cell_timeout)
        self.budgets.update(
            (cell, gather.Budget(self.cell_timeout)) for cell in cells)

    def marker_values(self, marker: str) -> tuple[Any, ...]:
        """The marker's sort values: its cell (:func:`marker_cell`), read.

        :raises nova_cellsched.exception.MarkerNotFound: see
            :func:`marker_cell`; :meth:`read_marker` may raise it too.
        """
        return self.read_marker(marker_cell(self.context, marker), marker)

    def in_cells(self, calls: Mapping[str, Call],
                 budgets: Mapping[str, gather.Budget]
                 ) -> dict[str, gather.Outcome[Any]]:
        """``function(*args)`` per cell in the workers, within *budgets*.

        A task waits for a worker at most ``cell_timeout`` or what is left
        of :attr:`deadline`, whichever is less; then it runs at once on
        a thread of its own (:func:`gather.run_round`).
        """
        return gather.run_round(self.submit(), calls, budgets,
                                call_wait(self.cell_timeout, self.deadline))

    def page(self, cells: Sequence[str], after: Sequence[Any] | None,
             first: int, batch_size: int, limit: int | None,
             grow: bool) -> rounds.Page[str]:
        """The rounds and the merge (:func:`.rounds.run`): the page.

        The cells that failed are added to :attr:`failures`.
        """
        page = rounds.run(cells, self.fetch_round, after, first,
                          batch_size, limit, self.key, self.values_of,
                          span=self.span, grow=grow)
        for cell, outcome in page.failures.items():
            self.failures.setdefault(cell, outcome)
        return page
