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

"""The ``guard`` part: every blocking PyMySQL call of a thread, bounded.

A thread cannot be killed: a query sent to a cell database that stops
answering keeps its worker and its connection until the driver gives
up. :func:`io_timeout` bounds every blocking call a thread makes on a
PyMySQL connection inside the block: the connect and its handshake, the
pool's pre-ping at checkout, the query, the fetch, the rollback on
return and the close. A connect that fails inside the block raises
:class:`ConnectFailed`, which oslo.db does not retry: a thread's first
contact with a dead or frozen cell (the engine's creation, which oslo.db
tries ``[database] max_retries`` times, ``retry_interval`` seconds
apart: 100 s by default) ends with the first attempt.

PyMySQL reads its ``_read_timeout`` and ``_write_timeout`` before every
packet; the connections made by SQLAlchemy engines once the part is on
(:mod:`nova_cellsched.compat`) are of a subclass whose timeouts are
this thread's inside the block and the connection's own everywhere
else, so nova's other threads keep their settings; the PyMySQL cell
connections pooled before the part was on are closed when it turns on
(:func:`_close_idle_cell_connections`), not changed in place (the pool
pings a connection before its ``checkout`` event, so a change there
came one ping late). Other drivers keep theirs
(``nova_cellsched.api.hooks.driver_advice`` says what to put in their URLs).

Used by nova-api's listing workers, its start-up check and the
aggregate sync of the command line and nova-scheduler: a core module,
importing no part.
"""

from collections.abc import Callable, Iterator
import contextlib
import math
import socket
import threading
import time
from typing import Any
from typing import Protocol

from oslo_log import log as logging

__all__ = ['ConnectFailed', 'GivenUp', 'io_timeout', 'timed_class']

LOG = logging.getLogger(__name__)

_local = threading.local()

#: The socket timeout of a call made after the thread's deadline.
_EXPIRED = 0.001

#: Seconds the time left is rounded up to: the I/O of a block ends
#: within its *seconds* plus this. (PyMySQL changes the socket's
#: timeout only when the value changes: not on every packet.)
GRAIN = 0.1

class GivenUp(Protocol):
    """What :func:`io_timeout` reads of a query its caller may give up on
    (``nova_cellsched.api.hooks.stuck.Query``).
    """

    abandoned: bool


class ConnectFailed(ConnectionError):
    """A connect to a cell database failed inside :func:`io_timeout`.

    Not a driver error, so that oslo.db's engine creation does not try
    again ``[database] max_retries`` times with ``retry_interval``
    seconds of sleep between attempts (a thread held 100 s by default,
    past any timeout): the caller's next listing tries again.

    :ivar cause: the driver's error (its message names the host and the
        reason, never the password).
    """

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(
            'cannot connect to the cell database within the I/O timeout '
            '(%s); the next request tries again'
            % ' '.join(str(cause).split()))


@contextlib.contextmanager
def io_timeout(seconds: float | None, total: bool = True,
               given_up: GivenUp | None = None) -> Iterator[None]:
    """PyMySQL I/O on this thread in this block ends within *seconds*.

    Each blocking call (connect, handshake, pre-ping, query, fetch,
    rollback, close) times out after at most *seconds* without an
    answer (a socket timeout: time waiting for the GIL or a CPU is not
    counted), and with *total* all of them together within :data:`GRAIN`
    of *seconds* from now, on the wall clock: a chain of calls on a
    frozen server (a pre-ping, then a reconnect) cannot add up to more.

    :param seconds: None changes nothing.
    :param total: False for no bound on the block's wall time: a busy
        process never cuts short the I/O of a server that answers.
    :param given_up: once this query is abandoned (the caller stopped
        waiting for it), every further blocking call times out at once:
        the chain ends with the call in progress.
    """
    limit = None if seconds is None else (
        seconds, time.monotonic() + seconds if total else None, given_up)
    with _thread_setting('limit', limit):
        yield


def _thread_timeout() -> float | None:
    """This thread's timeout for its next blocking call, if any."""
    limit = getattr(_local, 'limit', None)
    if limit is None:
        return None
    seconds: float
    deadline: float | None
    given_up: GivenUp | None
    seconds, deadline, given_up = limit
    if given_up is not None and given_up.abandoned:
        return _EXPIRED
    if deadline is None:
        return seconds
    left = deadline - time.monotonic()
    if left <= 0:
        return _EXPIRED
    return min(seconds, math.ceil(left / GRAIN) * GRAIN)


@contextlib.contextmanager
def _thread_setting(name: str, value: Any) -> Iterator[None]:
    previous = getattr(_local, name, None)
    setattr(_local, name, value)
    try:
        yield
    finally:
        setattr(_local, name, previous)


def _bounded(own: str) -> property:
    """A PyMySQL timeout: this thread's inside io_timeout, else *own*."""

    def get(connection: Any) -> Any:
        seconds = _thread_timeout()
        if seconds is not None:
            return seconds
        return connection.__dict__.get(own)

    def set_(connection: Any, value: Any) -> None:
        connection.__dict__[own] = value

    return property(get, set_)


def _bounded_connect(base: type) -> Callable[..., Any]:
    """*base*'s ``connect``, raising :class:`ConnectFailed` inside
    :func:`io_timeout` where the driver raises its own error.
    """
    connect: Callable[..., Any] = getattr(base, 'connect')

    def bounded(connection: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return connect(connection, *args, **kwargs)
        except Exception as exc:
            if (getattr(_local, 'limit', None) is None or
                    type(exc).__module__ != 'pymysql.err'):
                raise
            raise ConnectFailed(exc) from exc

    bounded.__name__ = 'connect'
    bounded.__doc__ = connect.__doc__
    return bounded


def _closing_both_ways(base: type) -> Callable[..., Any] | None:
    """*base*'s ``_force_close``, ending the TCP connection itself.

    PyMySQL closes a connection it lost (a read or write that timed out)
    by closing its socket: the connection ends only when no other file
    descriptor holds that socket. A process forked after the connection
    was made (nova-scheduler's workers, forked by a master that read the
    cells first) holds a copy that oslo.db's fork guard drops without
    closing, and the server would keep the given-up session, its query
    run at the thaw and its transaction open, for the life of those
    processes, holding the table's metadata lock: every later
    ``LOCK TABLES`` or schema change of that table waits for it. A
    shutdown first sends the server the end of the connection whoever
    else holds it, so the session ends (and rolls back) after its query.
    """
    force_close = getattr(base, '_force_close', None)
    if force_close is None:
        return None

    def closing(connection: Any) -> None:
        sock = getattr(connection, '_sock', None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        force_close(connection)

    closing.__name__ = '_force_close'
    closing.__doc__ = force_close.__doc__
    return closing


_TIMED: dict[type, type] = {}
_TIMED_LOCK = threading.Lock()


def timed_class(base: type) -> type:
    """*base* (a PyMySQL connection class) with thread-bound timeouts."""
    if getattr(base, 'cellsched_timed', False):
        return base
    with _TIMED_LOCK:
        timed = _TIMED.get(base)
        if timed is None:
            members = {
                '__module__': __name__,
                'cellsched_timed': True,
                'connect': _bounded_connect(base),
                'connect_timeout': _bounded('_cellsched_connect_timeout'),
                '_read_timeout': _bounded('_cellsched_read_timeout'),
                '_write_timeout': _bounded('_cellsched_write_timeout'),
            }
            closing = _closing_both_ways(base)
            if closing is not None:
                members['_force_close'] = closing
            timed = type('Timed' + base.__name__, (base,), members)
            _TIMED[base] = timed
        return timed


def _is_pymysql(dialect: Any) -> bool:
    return getattr(dialect, 'driver', None) == 'pymysql'


def _on_do_connect(dialect: Any, _record: Any, cargs: Any,
                   cparams: Any) -> Any:
    if not _is_pymysql(dialect):
        return None
    connection_class = dialect.loaded_dbapi.connections.Connection
    return timed_class(connection_class)(*cargs, **cparams)


def _close_idle_cell_connections() -> None:
    """Close the PyMySQL connections waiting in the cell pools nova made.

    Called when the ``guard`` part turns on, before any request. A
    connection made before is PyMySQL's own class, without the
    thread-bound timeouts, and the pool pings it before any ``checkout``
    event could change it; each cell's next use connects anew through
    :func:`_on_do_connect`. Only started engines speaking PyMySQL are
    touched: starting an engine would connect, and another driver's pool
    keeps its connections. Checked-out connections are left alone.
    """
    # NOTE: nova's own WSGI entry point connects to every cell in its
    # start-up check, before the paste filter turns the part on. Pools of
    # other drivers are kept because there the connection can be the
    # database: an in-memory SQLite cell (sqlite://, one connection in a
    # StaticPool, as in nova 31-33's test fixtures) would come back empty.
    from nova import context as nova_context

    for manager, _mq in list(nova_context.CELL_CACHE.values()):
        if not getattr(manager, 'is_started', False):
            continue
        engines = {manager.writer.get_engine(), manager.reader.get_engine()}
        for engine in engines:
            if _is_pymysql(engine.dialect):
                engine.pool.dispose()
