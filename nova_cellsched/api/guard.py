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

"""Bounds on what a hung cell can hold: stuck queries and I/O timeouts.

A thread cannot be killed: a query sent to a cell database that stops
answering keeps its worker and its connection until the driver gives
up. Two guards keep that bounded in a long-running nova-api worker:

* :class:`StuckQueries` counts, per cell, the queries a listing gave up
  on that still run; at a cap the cell is reported down at once instead
  of being sent another query (a circuit breaker that closes by itself
  when the stuck queries end). It is read by listings only.
* :func:`io_timeout` bounds every blocking call a thread makes on a
  PyMySQL connection inside the block: the connect and its handshake, the
  pool's pre-ping at checkout, the query, the fetch, the rollback on
  return and the close. A connect that fails inside the block raises
  :class:`ConnectFailed`, which oslo.db does not retry: a thread's first
  contact with a dead or frozen cell (the engine's creation, which oslo.db
  tries ``[database] max_retries`` times, ``retry_interval`` seconds
  apart: 100 s by default) ends with the first attempt. PyMySQL reads its
  ``_read_timeout`` and ``_write_timeout`` before every packet; the
  connections made by SQLAlchemy engines once the ``guard`` part is on
  (:mod:`nova_cellsched.compat`) are of a
  subclass whose timeouts are this thread's inside the block and the
  connection's own everywhere else, so nova's other threads keep their
  settings. Other drivers keep theirs: for them, put a read timeout in the
  cell's database URL; :func:`warn_unbounded_cell` says so once per cell
  (:func:`unbounded_driver_advice` decides what to say).

The cells a listing gave up on, which the rest of that one request does
not wait for again, are the request's state
(:attr:`.request_state.RequestState.given_up`).
"""

import collections
from collections.abc import Callable, Iterator, Mapping
import contextlib
import dataclasses
import math
import threading
import time
from typing import Any
import urllib.parse

from oslo_log import log as logging
from sqlalchemy.engine import url as sa_url

LOG = logging.getLogger(__name__)

_local = threading.local()

#: The socket timeout of a call made after the thread's deadline.
_EXPIRED = 0.001

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


@dataclasses.dataclass
class Query:
    """One query sent to one cell, as :class:`StuckQueries` tracks it."""

    cell: str
    started: bool = False
    finished: bool = False
    abandoned: bool = False


class StuckQueries:
    """Per cell, the queries given up on that are still running."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stuck: collections.Counter[str] = collections.Counter()

    def count(self, cell: str) -> int:
        with self._lock:
            return self._stuck[cell]

    def snapshot(self) -> dict[str, int]:
        """Cell uuid -> stuck queries, for cells that have any."""
        with self._lock:
            return {cell: n for cell, n in self._stuck.items() if n}

    def begin(self, query: Query) -> bool:
        """Mark *query* running; False if it was given up on already."""
        with self._lock:
            if query.abandoned:
                return False
            query.started = True
            return True

    def end(self, query: Query) -> None:
        with self._lock:
            query.finished = True
            if query.abandoned and query.started:
                self._stuck[query.cell] -= 1

    def abandon(self, query: Query) -> None:
        """The listing stopped waiting for *query*.

        Counted as stuck only while it runs: one that never started will
        not start any more (see :meth:`begin`).
        """
        with self._lock:
            if query.finished or query.abandoned:
                return
            query.abandoned = True
            if query.started:
                self._stuck[query.cell] += 1


@contextlib.contextmanager
def io_timeout(seconds: float | None) -> Iterator[None]:
    """PyMySQL I/O on this thread in this block ends within *seconds*.

    Each blocking call (connect, handshake, pre-ping, query, fetch,
    rollback, close) times out after at most *seconds*, and all of them
    together by *seconds* from now (rounded up to the next whole second,
    so the socket timeout is not changed on every packet): a chain of
    calls on a frozen server (a pre-ping, then a reconnect) cannot add
    up to more.

    :param seconds: None changes nothing.
    """
    limit = None if seconds is None else (
        seconds, time.monotonic() + seconds)
    with _thread_setting('limit', limit):
        yield


def _thread_timeout() -> float | None:
    """This thread's timeout for its next blocking call, if any."""
    limit = getattr(_local, 'limit', None)
    if limit is None:
        return None
    seconds: float
    deadline: float
    seconds, deadline = limit
    left = deadline - time.monotonic()
    if left <= 0:
        return _EXPIRED
    return min(seconds, float(math.ceil(left)))


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


_TIMED: dict[type, type] = {}
_TIMED_LOCK = threading.Lock()


def timed_class(base: type) -> type:
    """*base* (a PyMySQL connection class) with thread-bound timeouts."""
    if getattr(base, 'cellsched_timed', False):
        return base
    with _TIMED_LOCK:
        timed = _TIMED.get(base)
        if timed is None:
            timed = type('Timed' + base.__name__, (base,), {
                '__module__': __name__,
                'cellsched_timed': True,
                'connect': _bounded_connect(base),
                'connect_timeout': _bounded('_cellsched_connect_timeout'),
                '_read_timeout': _bounded('_cellsched_read_timeout'),
                '_write_timeout': _bounded('_cellsched_write_timeout'),
            })
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


def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    # A connection made before the part was on: its next checkout's pre-ping
    # and everything after are bounded.
    base = type(dbapi_connection)
    if (not getattr(base, 'cellsched_timed', False) and
            base.__module__ == 'pymysql.connections'):
        values = {name: dbapi_connection.__dict__.pop(name, None)
                  for name in ('connect_timeout', '_read_timeout',
                               '_write_timeout')}
        dbapi_connection.__class__ = timed_class(base)
        for name, value in values.items():
            setattr(dbapi_connection, name, value)


#: The drivers a URL without ``+driver`` gets from SQLAlchemy, by backend.
_DEFAULT_DRIVERS = {'mysql': 'mysqldb', 'mariadb': 'mysqldb',
                    'postgresql': 'psycopg2'}


def unbounded_driver_advice(drivername: str, query: Mapping[str, Any],
                            seconds: float | None) -> str | None:
    """What to put in a cell URL whose driver :func:`io_timeout` misses.

    :func:`io_timeout` bounds PyMySQL only. For a MySQL or PostgreSQL
    URL of another driver with no read timeout of its own, this says
    which URL parameters bound a worker blocked on that cell; None when
    nothing is missing (PyMySQL, a URL that has the parameter, another
    database such as SQLite).

    :param drivername: the URL's scheme, ``backend`` or
        ``backend+driver`` (``mysql://`` is mysqlclient's, as in
        SQLAlchemy).
    :param query: the URL's query parameters (with ``[database]
        connection_parameters``, which oslo.db appends to every URL).
    :param seconds: the bound a PyMySQL worker gets, suggested as the
        value; None suggests 120 (twice the default
        ``list_cell_timeout``).
    """
    backend, _, driver = drivername.lower().partition('+')
    driver = driver or _DEFAULT_DRIVERS.get(backend, '')
    wait = max(1, math.ceil(seconds if seconds is not None else 120))
    if backend not in ('mysql', 'mariadb', 'postgresql'):
        return None
    if driver == 'pymysql':
        return None
    if driver == 'mysqldb':
        if 'read_timeout' in query:
            return None
        return ('mysqlclient waits for the server without limit: add '
                'read_timeout=%(s)d&write_timeout=%(s)d&connect_timeout='
                '%(s)d to the cell\'s database URL, or use '
                'mysql+pymysql://, which nova-cellsched bounds by itself'
                % {'s': wait})
    if driver in ('psycopg2', 'psycopg'):
        if 'tcp_user_timeout' in query:
            return None
        return ('libpq (%s) has no read timeout, so a worker waits for an '
                'unanswered query without limit: in the cell\'s database '
                'URL, connect_timeout=%d bounds the connect, '
                'tcp_user_timeout=%d (milliseconds) and keepalives=1&'
                'keepalives_idle=%d&keepalives_interval=5&'
                'keepalives_count=3 bound an unreachable server, and the '
                'server\'s statement_timeout (options=-c%%20'
                'statement_timeout%%3D%d) bounds a slow query; nothing on '
                'the client bounds a '
                'server that is frozen while its host still answers TCP'
                % (driver, wait, wait * 1000, wait, wait * 1000))
    return ('the %s driver is not bounded by nova-cellsched: set its read, '
            'write and connect timeouts (about %d s) in the cell\'s '
            'database URL%s' % (
                driver or backend, wait,
                ', or use mysql+pymysql://, which nova-cellsched bounds by '
                'itself' if backend != 'postgresql' else ''))


_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def warn_unbounded_cell(cell_mapping: Any, seconds: float | None,
                        connection_parameters: str | None = None) -> None:
    """Log once per cell and process if its driver is not bounded.

    A WARNING naming the cell (its name and uuid, never its URL) with
    :func:`unbounded_driver_advice`, the first time a listing of this
    process asks *cell_mapping*; nothing for a URL that cannot be read
    (nova's tests use names as URLs) or that needs no advice.

    :param seconds: the bound of a PyMySQL worker on this cell.
    :param connection_parameters: ``[database] connection_parameters``,
        which oslo.db appends to every cell URL.
    """
    uuid = getattr(cell_mapping, 'uuid', None)
    if uuid is None or uuid in _WARNED:
        return
    with _WARNED_LOCK:
        if uuid in _WARNED:
            return
        _WARNED.add(uuid)
    try:
        url = sa_url.make_url(cell_mapping.database_connection)
    except Exception:  # noqa: BLE001 - not a URL: nothing to advise
        return
    query: dict[str, Any] = dict(url.query)
    query.update(urllib.parse.parse_qs(connection_parameters or ''))
    advice = unbounded_driver_advice(url.drivername, query, seconds)
    if advice is not None:
        LOG.warning('Cell %(cell)s: a listing worker blocked on its '
                    'database is not bounded (only PyMySQL connections '
                    'are): %(advice)s',
                    {'cell': _cell_label(cell_mapping), 'advice': advice})


def _cell_label(cell_mapping: Any) -> str:
    name = getattr(cell_mapping, 'name', None)
    return ('%s (%s)' % (name, cell_mapping.uuid) if name
            else str(cell_mapping.uuid))
