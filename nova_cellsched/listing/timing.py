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

"""Where the time of a listing goes: spans, summaries and traces.

Pure Python. A :class:`Recorder` collects :class:`Span` values from every
thread of a listing, measured with one monotonic clock
(:func:`time.perf_counter`) from one origin. :func:`summarize` turns them
into an immutable :class:`Timings` snapshot, shaped like the 2018
multi-cell listing report: total = gather + merge + view, plus one row
per cell. The snapshot renders as a table (:func:`format_table`), as a
JSON-able dict (:meth:`Timings.as_dict`) and as a Chrome trace-event
file that Perfetto and chrome://tracing load (:func:`chrome_trace`;
:func:`spans_trace` for spans recorded by anything else).

Span names used by the lister:

============  =======================  =================================
name          thread                   what
============  =======================  =================================
``setup``     caller                   cell mappings and marker lookup
``wait``      worker                   submitted until a worker ran it
``connect``   worker                   checking out a DB connection
``execute``   worker                   sending the query, first result
``fetch``     worker                   reading the rows
``gather``    caller                   first batch of every cell
``refetch``   caller                   a further round of batches
``merge``     caller                   heap merge of the fetched rows
``view``      caller                   building the output records
============  =======================  =================================
"""

import collections
import contextlib
import dataclasses
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

WORKER_PHASES = ('wait', 'connect', 'execute', 'fetch')
CALLER_PHASES = ('setup', 'gather', 'refetch', 'merge', 'view')


@dataclasses.dataclass(frozen=True)
class Span:
    """One timed phase. Times are seconds since the recorder's origin."""

    name: str
    start: float
    end: float
    thread_id: int
    thread_name: str
    cell: str | None = None
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


Tracer = Callable[[str, 'str | None', Mapping[str, Any]],
                  contextlib.AbstractContextManager[Any]]


class Recorder:
    """Collect spans from any thread; cheap enough for every listing.

    :param tracer: optional ``tracer(name, cell, args)`` context manager
        entered around every :meth:`span` (osprofiler trace points).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 tracer: Tracer | None = None) -> None:
        self._clock = clock
        self._tracer = tracer
        self.origin = clock()
        self._spans: list[Span] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the origin."""
        return self._clock() - self.origin

    def add(self, name: str, start: float, end: float,
            cell: str | None = None, **args: Any) -> None:
        """Record a span measured by the caller (times from :meth:`now`)."""
        thread = threading.current_thread()
        # The OS thread id: unlike ident, not handed to the next Python
        # thread as soon as this one ends, so tracks do not merge.
        span = Span(name, start, end, threading.get_native_id(),
                    thread.name, cell, args)
        with self._lock:
            self._spans.append(span)

    @contextlib.contextmanager
    def span(self, name: str, cell: str | None = None,
             **args: Any) -> Iterator[dict[str, Any]]:
        """Time the body; the yielded dict adds arguments to the span."""
        extra: dict[str, Any] = dict(args)
        start = self.now()
        try:
            if self._tracer is None:
                yield extra
            else:
                with self._tracer(name, cell, extra):
                    yield extra
        finally:
            self.add(name, start, self.now(), cell, **extra)

    def spans(self) -> tuple[Span, ...]:
        """The spans recorded so far, in start order."""
        with self._lock:
            return tuple(sorted(self._spans, key=lambda s: s.start))


@dataclasses.dataclass(frozen=True)
class CellTiming:
    """Time spent for one cell, summed over its batches."""

    cell_uuid: str
    cell_name: str | None
    status: str
    rows: int
    batches: int
    wait: float
    connect: float
    execute: float
    fetch: float
    error: str | None = None

    @property
    def query(self) -> float:
        """connect + execute + fetch: the time the database cost."""
        return self.connect + self.execute + self.fetch

    def as_dict(self) -> dict[str, Any]:
        return {'name': self.cell_name, 'uuid': self.cell_uuid,
                'status': self.status, 'error': self.error,
                'rows': self.rows, 'batches': self.batches,
                'seconds': {'wait': self.wait, 'connect': self.connect,
                            'execute': self.execute, 'fetch': self.fetch,
                            'query': self.query}}


@dataclasses.dataclass(frozen=True)
class Timings:
    """Immutable summary of one listing.

    ``setup`` is reading the cell mappings (and the marker) from the API
    database; ``gather`` the caller's wait for the cell databases (first
    batches with their joined data, refetch rounds); ``merge`` the heap
    merge;
    ``view`` building the records; ``total`` the wall
    time of the whole call, so ``total >= setup + gather + merge + view``.
    """

    total: float
    setup: float
    gather: float
    merge: float
    view: float
    cells: tuple[CellTiming, ...]
    spans: tuple[Span, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form, as written by ``--stats``."""
        return {'seconds': {'total': self.total, 'setup': self.setup,
                            'gather': self.gather,
                            'merge': self.merge, 'view': self.view},
                'cells': [c.as_dict() for c in self.cells]}


def summarize(spans: Sequence[Span], total: float,
              cells: Mapping[str, str | None],
              status: Mapping[str, tuple[str, str | None]]) -> Timings:
    """Build :class:`Timings` from the spans of one listing.

    :param cells: cell uuid -> name, for every cell queried.
    :param status: cell uuid -> (status, error text or None).
    """
    caller: dict[str, float] = collections.defaultdict(float)
    per_cell: dict[str, dict[str, float]] = {
        uuid: collections.defaultdict(float) for uuid in cells}
    rows: dict[str, int] = collections.defaultdict(int)
    batches: dict[str, int] = collections.defaultdict(int)
    for span in spans:
        if span.name in CALLER_PHASES:
            caller[span.name] += span.duration
        elif span.cell in per_cell and span.name in WORKER_PHASES:
            per_cell[span.cell][span.name] += span.duration
            if span.name == 'fetch':
                rows[span.cell] += int(span.args.get('rows', 0))
                batches[span.cell] += 1
    gather = caller['gather'] + caller['refetch']
    cell_timings = tuple(
        CellTiming(uuid, name, status.get(uuid, ('ok', None))[0],
                   rows[uuid], batches[uuid],
                   per_cell[uuid]['wait'], per_cell[uuid]['connect'],
                   per_cell[uuid]['execute'], per_cell[uuid]['fetch'],
                   status.get(uuid, ('ok', None))[1])
        for uuid, name in sorted(cells.items(),
                                 key=lambda kv: (natural_key(kv[1] or ''),
                                                 kv[0])))
    return Timings(total=total, setup=caller['setup'], gather=gather,
                   merge=caller['merge'],
                   view=caller['view'],
                   cells=cell_timings, spans=tuple(spans))


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key ordering the numbers inside *text* by value.

    ``cell2`` comes before ``cell10``, as a person would order them.
    """
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r'(\d+)', text) if part)


def format_table(timings: Timings) -> str:
    """The summary as text tables: the 2018 columns, then one row a cell.

    Times in milliseconds; cells in natural order of their names
    (cell0, cell1, cell2, ..., cell10).
    """
    import prettytable

    def ms(seconds: float) -> str:
        return '%.1f' % (seconds * 1000.0)

    head = prettytable.PrettyTable(
        ['Total ms', 'Setup ms', 'Gather ms', 'Merge ms', 'View ms',
         'Cells', 'Rows fetched'])
    head.add_row([ms(timings.total), ms(timings.setup), ms(timings.gather),
                  ms(timings.merge), ms(timings.view), len(timings.cells),
                  sum(c.rows for c in timings.cells)])
    body = prettytable.PrettyTable(
        ['Cell', 'Status', 'Rows', 'Batches', 'Wait ms', 'Connect ms',
         'Execute ms', 'Fetch ms', 'Error'])
    body.align['Cell'] = 'l'
    body.align['Error'] = 'l'
    for cell in sorted(timings.cells, key=lambda c: natural_key(
            c.cell_name or c.cell_uuid)):
        body.add_row([cell.cell_name or cell.cell_uuid, cell.status,
                      cell.rows, cell.batches, ms(cell.wait),
                      ms(cell.connect), ms(cell.execute), ms(cell.fetch),
                      cell.error or ''])
    return '%s\n%s' % (head.get_string(), body.get_string())


def log_lines(timings: Timings) -> list[tuple[str, dict[str, Any]]]:
    """``(format, args)`` pairs for lazy logging of the summary."""
    lines: list[tuple[str, dict[str, Any]]] = [(
        'Listed %(cells)d cell(s) in %(total).3fs: setup %(setup).3fs, '
        'gather %(gather).3fs, merge %(merge).3fs, view %(view).3fs',
        {'cells': len(timings.cells), 'total': timings.total,
         'setup': timings.setup,
         'gather': timings.gather, 'merge': timings.merge,
         'view': timings.view})]
    for cell in timings.cells:
        lines.append((
            'Cell %(cell)s: %(status)s, %(rows)d row(s) in %(batches)d '
            'batch(es), wait %(wait).3fs, connect %(connect).3fs, execute '
            '%(execute).3fs, fetch %(fetch).3fs%(error)s',
            {'cell': cell.cell_name or cell.cell_uuid,
             'status': cell.status, 'rows': cell.rows,
             'batches': cell.batches, 'wait': cell.wait,
             'connect': cell.connect, 'execute': cell.execute,
             'fetch': cell.fetch,
             'error': ': %s' % cell.error if cell.error else ''}))
    return lines


def chrome_trace(timings: Timings,
                 process_name: str = 'nova-cellsched list') -> dict[str, Any]:
    """Chrome trace-event JSON (Perfetto, chrome://tracing).

    One track per thread (named after the thread), complete events
    (``"ph": "X"``) named ``<phase>`` or ``<phase> <cell>``, times in
    microseconds from the start of the listing.
    """
    names = {c.cell_uuid: c.cell_name or c.cell_uuid for c in timings.cells}
    return spans_trace(
        timings.spans, process_name, cell_names=names,
        other_data={'total_seconds': timings.total,
                    'setup_seconds': timings.setup,
                    'gather_seconds': timings.gather,
                    'merge_seconds': timings.merge,
                    'view_seconds': timings.view})


def spans_trace(spans: Sequence[Span], process_name: str,
                cell_names: Mapping[str, str] | None = None,
                category: Callable[[Span], str] | None = None,
                other_data: Mapping[str, Any] | None = None
                ) -> dict[str, Any]:
    """Chrome trace-event JSON of any recorded spans (not only a listing).

    The format of :func:`chrome_trace`: one ``process_name`` metadata
    event, one complete event (``"ph": "X"``) per span with ``ts`` and
    ``dur`` in microseconds from the recorder's origin, one
    ``thread_name`` metadata event per thread that recorded a span.
    Argument values that are not JSON scalars are written as text.

    :param spans: the spans, e.g. :meth:`Recorder.spans`.
    :param process_name: the name Perfetto shows for the process.
    :param cell_names: cell uuid -> name: a span of a cell is named
        ``<name> <cell name>`` (the uuid when not in this mapping) and
        gets a ``cell_uuid`` argument.
    :param category: the event's ``cat`` for a span; default ``cell`` for
        a span of a cell, ``listing`` otherwise.
    :param other_data: JSON-able values for the file's ``otherData``.
    """
    pid = os.getpid()
    names = cell_names or {}
    events: list[dict[str, Any]] = [{
        'name': 'process_name', 'ph': 'M', 'pid': pid, 'tid': 0,
        'args': {'name': process_name}}]
    threads: dict[int, str] = {}
    for span in spans:
        threads.setdefault(span.thread_id, span.thread_name)
        args = {k: v if isinstance(v, (int, float, str, bool)) or v is None
                else str(v) for k, v in span.args.items()}
        if span.cell is not None:
            args.setdefault('cell_uuid', span.cell)
        if category is not None:
            cat = category(span)
        else:
            cat = 'cell' if span.cell else 'listing'
        events.append({
            'name': ('%s %s' % (span.name, names.get(span.cell, span.cell))
                     if span.cell else span.name),
            'cat': cat,
            'ph': 'X', 'pid': pid, 'tid': span.thread_id,
            'ts': round(span.start * 1e6, 3),
            'dur': round(span.duration * 1e6, 3),
            'args': args})
    for tid, name in threads.items():
        events.append({'name': 'thread_name', 'ph': 'M', 'pid': pid,
                       'tid': tid, 'args': {'name': name}})
    return {'traceEvents': events, 'displayTimeUnit': 'ms',
            'otherData': dict(other_data or {})}
