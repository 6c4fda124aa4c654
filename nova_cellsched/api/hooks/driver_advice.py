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

"""Advice on database drivers: missing ones, and unbounded ones.

:func:`missing_driver_advice` names the package to install when a
URL's driver module is not installed (a plain nova virtualenv has no
PyMySQL); :func:`missing_module_advice` does the same from the
``ModuleNotFoundError`` of a driver's import.

:func:`nova_cellsched.guard.io_timeout` bounds PyMySQL connections only.
:func:`unbounded_driver_advice` says which URL parameters bound a worker
blocked on a cell of another driver; :func:`warn_unbounded_cell` logs it
once per cell and process.
"""

from collections.abc import Mapping
import importlib.util
import math
import shlex
import sys
import threading
from typing import Any
import urllib.parse

from oslo_log import log as logging
from sqlalchemy.engine import url as sa_url

LOG = logging.getLogger(__name__)


#: The drivers a URL without ``+driver`` gets from SQLAlchemy, by backend.
_DEFAULT_DRIVERS = {'mysql': 'mysqldb', 'mariadb': 'mysqldb',
                    'postgresql': 'psycopg2'}

#: SQLAlchemy driver name -> (the module it imports, its PyPI package,
#: a note on it or None).
DRIVER_PACKAGES: dict[str, tuple[str, str, str | None]] = {
    'pymysql': ('pymysql', 'PyMySQL', None),
    'mysqldb': ('MySQLdb', 'mysqlclient',
                'it builds against the MySQL or MariaDB client library; '
                'or use mysql+pymysql:// with PyMySQL'),
    'psycopg2': ('psycopg2', 'psycopg2-binary',
                 'or psycopg2, which builds against libpq'),
    'psycopg': ('psycopg', 'psycopg[binary]', None),
    'mysqlconnector': ('mysql.connector', 'mysql-connector-python', None),
    'mariadbconnector': ('mariadb', 'mariadb', None),
    'pg8000': ('pg8000', 'pg8000', None),
}


def _driver_of(drivername: str) -> str:
    """The driver of a URL scheme, SQLAlchemy's default where none."""
    backend, _, driver = drivername.lower().partition('+')
    return driver or _DEFAULT_DRIVERS.get(backend, '')


def _installed(module: str) -> bool:
    """Whether *module* can be found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        # A missing parent package (mysql of mysql.connector), or a
        # module whose sys.modules entry says it failed before.
        return False


def missing_driver_advice(drivername: str) -> str | None:
    """What to install for a URL whose driver module is not installed.

    One clause for an error line: the module, the Python it is missing
    from and the ``pip install`` to run there, e.g. for
    ``mysql+pymysql``: ``its driver module pymysql is not installed for
    /usr/bin/python3 (the Python the command runs with): /usr/bin/python3
    -m pip install PyMySQL``. None when the module is found, or for a
    driver this does not know (SQLite's is part of Python).

    :param drivername: the URL's scheme, ``backend`` or
        ``backend+driver`` (``mysql://`` is mysqlclient's, as in
        SQLAlchemy).
    """
    known = DRIVER_PACKAGES.get(_driver_of(drivername))
    if known is None or _installed(known[0]):
        return None
    return _advice(*known)


def missing_module_advice(exc: BaseException) -> str | None:
    """:func:`missing_driver_advice` from a driver's failed import.

    *exc* is the ``ImportError`` an engine's first connect raised; None
    when the missing module is not a database driver's.
    """
    name = getattr(exc, 'name', None)
    for module, package, note in DRIVER_PACKAGES.values():
        if name is not None and (name == module or
                                 module.startswith(name + '.')):
            return _advice(module, package, note)
    return None


def _advice(module: str, package: str, note: str | None) -> str:
    return ('its driver module %s is not installed for %s (the Python '
            'the command runs with): %s -m pip install %s%s' % (
                module, sys.executable, shlex.quote(sys.executable),
                shlex.quote(package), ' (%s)' % note if note else ''))


def unbounded_driver_advice(drivername: str, query: Mapping[str, Any],
                            seconds: float | None) -> str | None:
    """What to put in a cell URL whose driver ``guard.io_timeout`` misses.

    :func:`nova_cellsched.guard.io_timeout` bounds PyMySQL only. For a
    MySQL or PostgreSQL URL of another driver with no read timeout of its
    own, this says which URL parameters bound a worker blocked on that
    cell; None when nothing is missing (PyMySQL, a URL that has the
    parameter, another database such as SQLite).

    :param drivername: the URL's scheme, ``backend`` or
        ``backend+driver`` (``mysql://`` is mysqlclient's, as in
        SQLAlchemy).
    :param query: the URL's query parameters (with ``[database]
        connection_parameters``, which oslo.db appends to every URL).
    :param seconds: the bound a PyMySQL worker gets, suggested as the
        value; None suggests 120 (twice the default
        ``list_cell_timeout``).
    """
    backend = drivername.lower().partition('+')[0]
    driver = _driver_of(drivername)
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
