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

"""Nova adapter for the command line: read nova.conf like nova-manage.

Imported only by the commands, so that ``nova-cellsched --help`` does not
pay for importing nova.
"""

import glob
import os
from typing import Any
import urllib.parse

import nova.conf
from nova.db.api import api as api_db_api
from nova import version as nova_version
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as oslo_log
from oslo_utils import importutils
from sqlalchemy.engine import url as sa_url
from sqlalchemy import exc as sa_exc

from nova_cellsched import cells
from nova_cellsched.cmd import base
from nova_cellsched import conf as conf_mod
from nova_cellsched import exception

CONF = nova.conf.CONF

#: Errors that mean "the database did not answer", not a bug of ours.
DB_ERRORS: tuple[type[BaseException], ...] = (
    db_exc.DBError, sa_exc.SQLAlchemyError, OSError)


def load_config(args: list[str]) -> cfg.ConfigOpts:
    """Parse nova.conf (``--config-file``/``--config-dir`` *args*).

    :raises InvalidConfig: the files cannot be read or parsed, or they
        name no API database.
    """
    conf_mod.register_opts(CONF)
    cells.register_messaging_opts()
    # A command fails fast on an unreachable API database: oslo.db's
    # service defaults (10 attempts, 10 s apart) would make an operator
    # wait 100 s for exit code 3.
    CONF.set_override('max_retries', 0, group='api_database')
    CONF.set_override('retry_interval', 0, group='api_database')
    # The same for a dead cell database that nova's engines connect to
    # (check and sync-aggregates read compute nodes through
    # nova.context.target_cell): the cell is reported at once instead
    # of after 100 s.
    CONF.set_override('max_retries', 0, group='database')
    CONF.set_override('retry_interval', 0, group='database')
    # What nova.config.parse_args does for a command that reads the API
    # database only: no RPC, no main database API (importing nova.config
    # cost half a second of start-up).
    oslo_log.register_options(CONF)
    profiler_opts = importutils.try_import('osprofiler.opts')
    if profiler_opts:
        profiler_opts.set_defaults(CONF)
    try:
        CONF(args, project='nova', prog='nova-cellsched',
             version=nova_version.version_string())
    except cfg.Error as exc:
        raise exception.InvalidConfig(
            'cannot read the configuration: %s; give the nova.conf of '
            'nova-api or nova-scheduler with --config-file' % exc) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable_file(args, exc) from exc
    invalid = conf_mod.invalid_options(CONF)
    if invalid:
        raise exception.InvalidConfig('; '.join(str(e) for e in invalid))
    if not CONF.api_database.connection:
        raise exception.InvalidConfig(
            '[api_database] connection is not set in %s; give the '
            'nova.conf of nova-api or nova-scheduler with --config-file'
            % (', '.join(CONF.config_file) or 'nova\'s default config '
               'files (none found)'))
    check_sqlite_file(CONF.api_database.connection)
    check_driver(CONF.api_database.connection, '[api_database] connection')
    parameters = bounded_parameters(
        CONF.api_database.connection,
        CONF.api_database.connection_parameters, base.DATABASE_TIMEOUT)
    global _API_BOUND
    _API_BOUND = parameters is not None and 'connect_timeout=%d' % (
        base.DATABASE_TIMEOUT) in parameters.split('&')
    if parameters is not None:
        CONF.set_override('connection_parameters', parameters,
                          group='api_database')
    api_db_api.configure(CONF)
    return CONF


#: Driver -> the URL parameters that bound its connect, handshake
#: included. PyMySQL reads the server's greeting with its read timeout
#: (none by default: a server that accepts and never speaks held the
#: command forever); mysqlclient and libpq bound the handshake with
#: their connect timeout.
_BOUND_PARAMETERS = {
    'pymysql': ('connect_timeout', 'read_timeout'),
    'mysqldb': ('connect_timeout',),
    'psycopg2': ('connect_timeout',),
    'psycopg': ('connect_timeout',),
}


def bounded_parameters(url: str, parameters: str | None,
                       seconds: int) -> str | None:
    """*parameters* with the driver's timeouts of *url* at *seconds*.

    oslo.db appends ``[api_database] connection_parameters`` to the
    URL's query. A timeout the URL or *parameters* already set is the
    operator's and is kept; PyMySQL's default connect timeout is 10 s
    and its read timeout none. None when nothing is added (SQLite, a
    driver not listed, every timeout set).
    """
    try:
        parsed = sa_url.make_url(url)
    except (sa_exc.ArgumentError, ValueError):
        return None
    backend, _, driver = parsed.drivername.partition('+')
    driver = driver or {'mysql': 'mysqldb', 'mariadb': 'mysqldb',
                        'postgresql': 'psycopg2'}.get(backend, '')
    given = set(parsed.query) | set(
        urllib.parse.parse_qs(parameters or '', keep_blank_values=True))
    missing = [name for name in _BOUND_PARAMETERS.get(driver, ())
               if name not in given]
    if not missing:
        return None
    added = urllib.parse.urlencode([(name, seconds) for name in missing])
    return '%s&%s' % (parameters, added) if parameters else added


#: Whether the API database's connect is bounded by ours
#: (:data:`.base.DATABASE_TIMEOUT`), not by the operator's timeout.
_API_BOUND = False


class ApiDatabaseTimedOut(exception.ApiDatabaseUnreachable):
    """The nova API database did not answer within the commands' bound."""

    template = ('cannot read the nova API database at %%s: no answer '
                'within %d seconds (%%s); check [api_database] connection '
                'in the nova.conf given with --config-file and that the '
                'database server is running and reachable from here (a '
                'connect_timeout or read_timeout in the URL or in '
                '[api_database] connection_parameters sets another bound)'
                % base.DATABASE_TIMEOUT)


def api_database_error(exc: BaseException
                       ) -> exception.ApiDatabaseUnreachable:
    """The error line for the API database's failure *exc*.

    :class:`ApiDatabaseTimedOut` when the driver says it timed out
    under the commands' bound, which names it; else
    :class:`ApiDatabaseUnreachable`.
    """
    reason = exception.driver_reason(exc)
    if _API_BOUND and ('timed out' in reason or
                       'timeout expired' in reason):
        return ApiDatabaseTimedOut(masked_api_url(), exc)
    return exception.ApiDatabaseUnreachable(masked_api_url(), exc)


def check_driver(url: str, option: str) -> None:
    """Refuse a database URL whose driver module is not installed.

    A plain nova virtualenv has no PyMySQL: without this, the first
    query failed with a bare ``No module named 'pymysql'``.

    :raises InvalidConfig: the URL's driver (``mysql+pymysql``: PyMySQL,
        ``mysql``: mysqlclient, ``postgresql``: psycopg2, ...) cannot be
        found; the message names the package to install.
    """
    from nova_cellsched.api.hooks import driver_advice

    try:
        drivername = sa_url.make_url(url).drivername
    except (sa_exc.ArgumentError, ValueError):
        return  # oslo.db reports a malformed URL in its own words
    advice = driver_advice.missing_driver_advice(drivername)
    if advice is not None:
        raise exception.InvalidConfig('%s %s: %s' % (
            option, cells.mask_url(url), advice))


def check_sqlite_file(url: str) -> None:
    """Refuse a SQLite API database whose file does not exist.

    SQLite would create an empty file on the first query, and the
    command fail on a missing table; a mistyped path then leaves a new
    empty ``.db`` behind. Other databases (and SQLite in memory or by
    URI) are not checked here.

    :raises ApiDatabaseUnreachable: the file does not exist.
    """
    try:
        parsed = sa_url.make_url(url)
    except (sa_exc.ArgumentError, ValueError):
        return  # oslo.db reports a malformed URL in its own words
    path = parsed.database
    if (parsed.get_backend_name() != 'sqlite' or not path
            or path == ':memory:' or path.startswith('file:')):
        return
    if not os.path.exists(path):
        raise exception.ApiDatabaseUnreachable(
            cells.mask_url(url), FileNotFoundError(
                'no such SQLite file %s (not created: SQLite would make '
                'an empty database there)' % os.path.abspath(path)))


def _config_files(args: list[str]) -> list[str]:
    """The files *args* make oslo.config read, in its order."""
    files, dirs = [], []
    for flag, value in zip(args[::2], args[1::2]):
        (files if flag == '--config-file' else dirs).append(value)
    for directory in dirs:
        if os.path.isdir(directory):
            files += sorted(glob.glob(os.path.join(directory, '*.conf')))
    return files


def unreadable_file(args: list[str], exc: BaseException
                    ) -> exception.InvalidConfig:
    """The one-line error for a file oslo.config could not open or decode.

    oslo.config lets the ``OSError`` of ``open`` (a directory, no
    permission) and the ``UnicodeDecodeError`` of a file not in UTF-8 go
    through without the file's name; this names it.
    """
    if isinstance(exc, UnicodeDecodeError):
        for path in _config_files(args):
            bad = _first_non_utf8(path)
            if bad is not None:
                return exception.InvalidConfig(
                    '%s is not UTF-8 text (byte 0x%02x on line %d); save it '
                    'as UTF-8' % (path, bad[1], bad[0]))
        return exception.InvalidConfig(
            'a configuration file is not UTF-8 text (%s); save it as UTF-8'
            % exc)
    filename = getattr(exc, 'filename', None)
    problem = getattr(exc, 'strerror', None) or str(exc)
    if isinstance(exc, IsADirectoryError):
        hint = ('--config-file takes a file; give a directory with '
                '--config-dir')
    else:
        hint = 'give the nova.conf of nova-api or nova-scheduler with ' \
            '--config-file'
    return exception.InvalidConfig('cannot read the configuration file %s: '
                                   '%s; %s' % (filename, problem, hint))


def _first_non_utf8(path: str) -> tuple[int, int] | None:
    """``(line, byte)`` of the first byte of *path* not UTF-8, or None."""
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except OSError:
        return None
    try:
        data.decode('utf-8')
    except UnicodeDecodeError as exc:
        return data.count(b'\n', 0, exc.start) + 1, data[exc.start]
    return None


def conf() -> cfg.ConfigOpts:
    """The nova configuration object, with ``[cellsched]`` registered."""
    conf_mod.register_opts(CONF)
    return CONF


def masked_api_url() -> str:
    """``[api_database] connection`` with its password masked."""
    return cells.mask_url(CONF.api_database.connection)


def cell_mappings() -> list[Any]:
    """Every CellMapping of the API database, cell0 included.

    :raises ApiDatabaseUnreachable: the API database did not answer.
    """
    try:
        return cells.load_cell_mappings()
    except DB_ERRORS as exc:
        raise api_database_error(exc) from exc
