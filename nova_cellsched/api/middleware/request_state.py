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

"""What one nova-api request carries from its listing to the rest of it.

The paste filter's middleware (:class:`.server_timing.Middleware`) opens
a :func:`scope` for every request: a fresh :class:`RequestState`,
:func:`current` in the request's thread (or green thread) from the
request's entry until the application has returned its response, and
gone after that, also when the application raises. The replacement
lister (:mod:`.instance_list`) fills it, and the rest of the same request
reads it:

* :attr:`RequestState.listed`: which cell each listed server came from,
  so that the view (:mod:`.view`) asks each server's own cell;
* :attr:`RequestState.given_up`: the cells the listing gave up on, which
  nova-api's later ``scatter_gather_cells`` calls of the request (faults,
  block device mappings) do not wait for again;
* :meth:`RequestState.cells_deadline`: the request's one deadline for
  its waits on the listing's workers, shared by the listing and the
  view's lookups;
* :attr:`RequestState.timings`: what the ``Server-Timing`` header and the
  log line report (:mod:`.server_timing`).

Nothing else holds any of it, so nothing needs to check whose it is:
there is no request id to compare. Outside a scope (a call that did not
come through the middleware: a tool, a test driving nova's controller
itself, a pipeline without the filter) :func:`current` is None; the
lister serves as ever, and the rest of the request uses nova's own
lookups and waits.

**Concurrency.** The state is held in a :class:`contextvars.ContextVar`.
Every OS thread has a context of its own, and under eventlet so has
every green thread (greenlet gives each greenlet its own context, and
eventlet does not copy the spawner's), so requests served at the same
time never see each other's state, in either of nova-api's concurrency
modes. A request served after another on the same thread (a uwsgi
thread, the green thread of a keep-alive connection) starts with none:
the scope resets what it set. The listing's workers
(:mod:`nova_cellsched.gather` tasks in the process's pool) neither read
nor write the state: they run in contexts of their own, and the
request's thread records what they measured. Work submitted to a pool
that needs the state must be submitted with the request's context
(``contextvars.copy_context().run``); it then shares the same object.

No nova import.
"""

from collections.abc import Callable
from collections.abc import Iterator
import contextlib
import contextvars
import dataclasses
import time
from typing import Any

#: Phases of a served list, in header order (``other`` is derived).
PHASES = ('gather', 'merge', 'objects', 'view', 'validation')


@dataclasses.dataclass
class RequestTimings:
    """What one request's listing measured (seconds, monotonic clock)."""

    started: float
    served: bool = False
    listed: int = 0
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Cell name (or uuid) -> seconds its queries ran in workers.
    cells: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Cells reported down, by name (or uuid).
    down: list[str] = dataclasses.field(default_factory=list)
    #: Of those, the cells held down in this process, not asked.
    held: list[str] = dataclasses.field(default_factory=list)

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + max(0.0, seconds)

    def slowest_cell(self) -> tuple[str, float] | None:
        if not self.cells:
            return None
        name = max(self.cells, key=lambda cell: (self.cells[cell], cell))
        return name, self.cells[name]

    def breakdown(self, total: float) -> list[tuple[str, float]]:
        """(phase, seconds) in order, ``other`` last, ``total`` first."""
        parts = [(name, self.phases[name]) for name in PHASES
                 if name in self.phases]
        measured = sum(seconds for _name, seconds in parts)
        # The phases ran one after the other inside the request: their
        # sum cannot exceed the total but by clock granularity.
        total = max(total, measured)
        return [('total', total)] + parts + [('other', total - measured)]


@dataclasses.dataclass
class RequestState:
    """One request's state, from its entry to its response."""

    #: What the request's listings measured.
    timings: RequestTimings
    #: Server uuid -> nova CellMapping of the last listing this
    #: process's lister served in the request; None before one.
    listed: dict[str, Any] | None = None
    #: Cell uuids the request's listings and lookups gave up on (timed
    #: out); nova-api's later cell calls of the request skip them.
    given_up: frozenset[str] = frozenset()
    #: The request's deadline for its waits on the workers (a
    #: ``nova_cellsched.gather.Deadline``); None before its first call.
    deadline: Any = None
    #: The listing's rows for the view to render
    #: (a ``nova_cellsched.api.view.render.Stash``); None if it built objects.
    stash: Any = None
    #: While a listing for the renderer runs: the instance columns its
    #: rows need (``nova_cellsched.api.view.render.ROW_COLUMNS``); else None.
    row_columns: frozenset[str] | None = None

    def cells_deadline(self, start: Callable[[], Any]) -> Any:
        """The request's deadline (:attr:`deadline`); *start* makes it.

        Made the first time only: every call of the request shares it.
        """
        if self.deadline is None:
            self.deadline = start()
        return self.deadline


_STATE: contextvars.ContextVar[RequestState | None] = (
    contextvars.ContextVar('cellsched_request_state', default=None))


def current() -> RequestState | None:
    """This request's state; None outside a :func:`scope`."""
    return _STATE.get()


@contextlib.contextmanager
def scope() -> Iterator[RequestState]:
    """A new :class:`RequestState`, current for the body only.

    What the middleware wraps each request in. On the way out (a
    return or an exception) the thread's state is what it was before:
    none, or an enclosing scope's.
    """
    state = RequestState(RequestTimings(started=time.monotonic()))
    token = _STATE.set(state)
    try:
        yield state
    finally:
        _STATE.reset(token)


_CELL_READS: contextvars.ContextVar[Callable[..., Any] | None] = (
    contextvars.ContextVar('cellsched_cell_reads', default=None))


def cell_reads_gather() -> Callable[..., Any] | None:
    """What gathers nova's cell reads in the current :func:`cell_reads`.

    None outside one: nova's ``scatter_gather_cells`` answers.
    """
    return _CELL_READS.get()


@contextlib.contextmanager
def cell_reads(gather: Callable[..., Any]) -> Iterator[None]:
    """nova's ``scatter_gather_cells`` calls in the body go to *gather*.

    *gather* takes ``(context, cell_mappings, fn, *args)`` and answers
    as nova's function does (cell uuid -> result, exception or
    ``did_not_respond_sentinel``); nova's timeout is not passed on.
    """
    token = _CELL_READS.set(gather)
    try:
        yield
    finally:
        _CELL_READS.reset(token)
