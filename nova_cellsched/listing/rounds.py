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

"""The rounds of a cross-cell listing: ask every cell, ask again, merge.

One driver for both listers (the command line's,
:mod:`nova_cellsched.records.lister`, and nova-api's,
:mod:`nova_cellsched.api.hooks.instance_list`); each gives it a function that
runs one round of batches over its own workers and database access.

The first round asks every cell for *first* rows in parallel. A cell
whose batch was full may hold more rows of the page; it is asked again,
with the other such cells in one further round, only while its last row
comes before the limit-th row fetched so far, and for about its share
of what the page still misses (:func:`nova_cellsched.gather.refetch_sizes`).
A cell that keeps filling its batches is asked for more each round (up
to twice the rows it has given), so a page that lives in one cell costs
O(log) rounds.
The runs are then merged in the global order
(:func:`nova_cellsched.listing.sorting.merge`).

Pure Python, no nova import. It lives in :mod:`nova_cellsched.listing`
beside the merge it ends with.
"""

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from nova_cellsched import gather
from nova_cellsched.listing import sorting

K = TypeVar('K')


class OutOfOrder(Exception):
    """A cell's further batch did not start after its last row."""

    def __init__(self, cell: Any) -> None:
        self.cell = cell
        super().__init__('cell %s answered rows before the ones it had '
                         'already given: its rows are not paged by their '
                         'sort values' % (cell,))


class Batch(NamedTuple):
    """What one cell gave for one batch."""

    #: The rows, in the listing's order.
    rows: list[Any]
    #: Rows the database returned (a repeated joined row counts): the
    #: batch was full when this reaches the size asked for.
    fetched: int


#: One round: cell -> (sort values to start after or None, rows to
#: fetch); returns an outcome per cell, a :class:`Batch` when ok.
FetchRound = Callable[[Mapping[K, tuple[Sequence[Any] | None, int]]],
                      Mapping[K, gather.Outcome[Batch]]]

#: A phase of the listing, for timings: ``span(name, **info)`` is a
#: context manager yielding a dict the phase may add figures to.
Span = Callable[..., contextlib.AbstractContextManager[dict[str, Any]]]


@contextlib.contextmanager
def no_span(_name: str, **_info: Any) -> Iterator[dict[str, Any]]:
    """A :data:`Span` that records nothing."""
    yield {}


class Page(NamedTuple, Generic[K]):
    """A listing's answer, before the rows become records or objects."""

    #: (sort key, cell, row) in the global order, at most *limit*.
    picked: list[tuple[Any, K, Any]]
    #: Cell -> the outcome of its first failed round. Its rows fetched
    #: before the failure stay in :attr:`picked`, as in nova's lister.
    failures: dict[K, gather.Outcome[Batch]]


def run(cells: Sequence[K], fetch_round: FetchRound[K],
        after: Sequence[Any] | None, first: int, batch_size: int,
        limit: int | None, key: Callable[[Any], Any],
        values_of: Callable[[Any], Sequence[Any]],
        span: Span = no_span, grow: bool = True) -> Page[K]:
    """List *cells* in rounds and merge them: the page and the failures.

    :param cells: the cells to ask.
    :param fetch_round: runs one round (see :data:`FetchRound`).
    :param after: sort values to start after (a marker's), or None.
    :param first: rows each cell is asked for in the first round.
    :param batch_size: the most rows a cell is asked for in a later one,
        unless *grow*.
    :param limit: rows the page holds at most; None for all.
    :param key: a row's sort key (comparable across cells).
    :param values_of: a row's sort values, to start the next batch after.
    :param span: records the phases ``gather``, ``refetch`` and ``merge``.
    :param grow: a cell that filled its batches may be asked for more
        than *batch_size* (see :func:`gather.refetch_sizes`); False keeps
        every later batch at *batch_size* at most.

    The page never depends on the batch sizes: a cell is asked again
    only while its last row is before the limit-th row fetched so far,
    each batch starts after the cell's last row, and the runs are merged
    in the global order.
    """
    failures: dict[K, gather.Outcome[Batch]] = {}
    # cell -> [(sort key, cell, row)] in order.
    runs: dict[K, list[tuple[Any, K, Any]]] = {}
    open_cells: set[K] = set()
    with span('gather', cells=len(cells)):
        outcomes = fetch_round({cell: (after, first) for cell in cells})
    for cell, outcome in outcomes.items():
        if not outcome.ok or outcome.result is None:
            failures[cell] = outcome
            continue
        batch = outcome.result
        runs[cell] = [(key(row), cell, row) for row in batch.rows]
        if batch.fetched >= first:
            open_cells.add(cell)

    while open_cells:
        wanted = gather.refetch_sizes(runs, open_cells, batch_size, limit,
                                      grow=grow)
        if not wanted:
            break
        with span('refetch', cells=len(wanted)):
            outcomes = fetch_round({
                cell: (values_of(runs[cell][-1][2]), size)
                for cell, size in wanted.items()})
        for cell, outcome in outcomes.items():
            if not outcome.ok or outcome.result is None:
                # Its rows fetched so far stay; the failure is reported.
                failures.setdefault(cell, outcome)
                open_cells.discard(cell)
                continue
            batch = outcome.result
            more = [(key(row), cell, row) for row in batch.rows]
            if more and not more[0][0] > runs[cell][-1][0]:
                # A cell must answer after the values it was given: one
                # that starts over would be asked for ever.
                failures.setdefault(cell, gather.Outcome(
                    gather.FAILED, error=OutOfOrder(cell)))
                open_cells.discard(cell)
                continue
            runs[cell].extend(more)
            if batch.fetched < wanted[cell]:
                open_cells.discard(cell)

    with span('merge') as info:
        picked = list(sorting.merge(runs.values(), _first, limit))
        info['rows'] = len(picked)
    return Page(picked, failures)


def _first(item: tuple[Any, ...]) -> Any:
    return item[0]
