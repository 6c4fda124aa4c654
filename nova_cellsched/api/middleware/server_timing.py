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

"""Where a server list's time went, told to whoever listed.

The paste filter (:class:`Middleware`) opens every request's state
(:func:`.request_state.scope`), whose :class:`RequestTimings` the
replacement lister fills (:func:`current`, :func:`phase`) when it serves
a listing. On the way out, a request that listed gets a W3C
``Server-Timing`` response header (browsers' developer tools and ``curl
-i`` show it) if the caller may see it, and one log line with the same
figures, the time each cell's queries took and the cells that were down.

Who sees what is the caller of the middleware's business (nova's policy
rules, :mod:`.policies`): the header's phase durations, and whether its
``gather`` description names cells (the slowest cell and its time, the
cells reported down). Without the latter the header names no cell and
gives no cell's time. The log line always has everything: logs are the
operator's.

Phases, in the order they run in the request's thread: ``gather``
(the cells' rounds; its description names the slowest cell), ``merge``,
``objects`` (nova's Instance objects), ``validation`` (when the fast
response validation ran) and ``other`` (the rest of nova-api's work:
BuildRequests, faults, the view, serialization). They never overlap, so
they add up to ``total``.

No nova import.
"""

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from nova_cellsched.api.middleware import request_state
from nova_cellsched.listing import profiling

#: Phases of a served list, in header order (``other`` is derived).
PHASES = request_state.PHASES
#: What one request's listing measured (:mod:`.request_state`).
RequestTimings = request_state.RequestTimings

WsgiApp = Callable[..., Any]


def current() -> RequestTimings | None:
    """This request's timings, if a :class:`Middleware` started them."""
    state = request_state.current()
    return None if state is None else state.timings


@contextlib.contextmanager
def phase(name: str) -> Iterator[dict[str, Any]]:
    """Add the body's wall time to phase *name* of this request, if any.

    Yields a dict (for :mod:`nova_cellsched.listing.rounds`' spans).
    With nova's ``[profiler]`` on, the body is also an osprofiler trace
    point ``cellsched.<name>``.
    """
    timings = current()
    start = time.monotonic()
    try:
        with profiling.trace(name, None, {}):
            yield {}
    finally:
        if timings is not None:
            timings.add(name, time.monotonic() - start)


def _quote(text: str) -> str:
    """An RFC 9110 quoted-string of *text* (printable ASCII kept)."""
    safe = ''.join(c if ' ' <= c <= '~' else '?' for c in text)
    return '"%s"' % safe.replace('\\', '\\\\').replace('"', '\\"')


def header(timings: RequestTimings, total: float, *,
           cells: bool = False) -> str:
    """The ``Server-Timing`` header value (W3C Server Timing).

    The phase durations, in :func:`RequestTimings.breakdown`'s order.
    With *cells*, ``gather``'s description names the slowest cell that
    answered and, after it, the cells reported down (``slowest cell1
    12.0 ms; down cell4``): a cell the listing gave up on is what its
    ``dur`` waited for, and it has no time of its own to be the slowest
    by; then the cells among them held down in this process, not asked
    (``held cell4``). Without *cells* (the default) the header holds no
    cell's name, uuid or time, and nothing about which or how many cells
    were down.
    """
    metrics = []
    for name, seconds in timings.breakdown(total):
        metric = '%s;dur=%.1f' % (name, seconds * 1000)
        if name == 'gather' and cells:
            words = []
            slowest = timings.slowest_cell()
            if slowest is not None:
                words.append('slowest %s %.1f ms' % (slowest[0],
                                                     slowest[1] * 1000))
            if timings.down:
                words.append('down %s' % ', '.join(sorted(timings.down)))
            if timings.held:
                words.append('held %s' % ', '.join(sorted(timings.held)))
            if words:
                metric += ';desc=%s' % _quote('; '.join(words))
        metrics.append(metric)
    return ', '.join(metrics)


def log_line(timings: RequestTimings, total: float
             ) -> tuple[str, dict[str, Any]]:
    """(format, arguments) of the served list's log line."""
    parts = timings.breakdown(total)
    return (
        'Listed %(servers)d servers in %(total).1f ms (%(phases)s); '
        'cells: %(cells)s; down: %(down)s; held: %(held)s',
        {'servers': timings.listed, 'total': parts[0][1] * 1000,
         'phases': ', '.join('%s %.1f ms' % (name, seconds * 1000)
                             for name, seconds in parts[1:]),
         'cells': ', '.join('%s %.1f ms' % (cell, seconds * 1000)
                            for cell, seconds in sorted(
                                timings.cells.items())) or '-',
         'down': ', '.join(sorted(timings.down)) or '-',
         'held': ', '.join(sorted(timings.held)) or '-'})


class Middleware:
    """The paste filter's WSGI middleware: request state, timings.

    Every request runs in a :func:`.request_state.scope` of its own,
    from its entry until the application returns its response (or
    raises); a served list's timings go into the header and log line.

    :param app: the next WSGI application.
    :param enabled: called per served list: (send the header at all,
        log at INFO).
    :param log: ``log(level_is_info, format, args)`` for the log line.
    :param audience: called with the request's WSGI environ, once per
        served list when the header is enabled: (this caller gets the
        header, its ``gather`` names cells).
    """

    def __init__(self, app: WsgiApp,
                 enabled: Callable[[], tuple[bool, bool]],
                 log: Callable[[bool, str, dict[str, Any]], None],
                 audience: Callable[[dict[str, Any]], tuple[bool, bool]]
                 ) -> None:
        self.app = app
        self._enabled = enabled
        self._log = log
        self._audience = audience

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        with request_state.scope() as state:
            return self._serve(state.timings, environ, start_response)

    def _serve(self, timings: RequestTimings, environ: dict[str, Any],
               start_response: Callable[..., Any]) -> Iterable[bytes]:
        lock = threading.Lock()

        def timed_start_response(status: str,
                                 headers: list[tuple[str, str]],
                                 exc_info: Any = None) -> Any:
            with lock:
                if timings.served:
                    total = time.monotonic() - timings.started
                    send_header, info = self._enabled()
                    cells = False
                    if send_header:
                        send_header, cells = self._audience(environ)
                    if send_header:
                        headers = list(headers) + [
                            ('Server-Timing',
                             header(timings, total, cells=cells))]
                    fmt, args = log_line(timings, total)
                    self._log(info, fmt, args)
            if exc_info is not None:
                return start_response(status, headers, exc_info)
            return start_response(status, headers)

        body: Iterable[bytes] = self.app(environ, timed_start_response)
        return body
