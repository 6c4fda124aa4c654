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

"""Nova adapter: SQL for one cell database, on nova's own table models.

SQLAlchemy Core over ``nova.db.main.models`` tables: no ORM objects are
built, only the columns asked for are selected, and filters, order and
limit run in the database. Column names come from the tables themselves
(anything else is rejected before SQL is built) and every value is a
bound parameter.

Pagination is keyset pagination on the full sort order (which always
ends with the unique uuid), as :mod:`nova_cellsched.listing.order` builds it.
"""

import datetime
import importlib
import inspect
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nova.compute import vm_states
from nova.db.main import models
from nova.db import utils as db_utils
import sqlalchemy as sa
from sqlalchemy.engine import default
from sqlalchemy.engine import Engine
from sqlalchemy.engine import url as sa_url
from sqlalchemy.sql import ColumnElement

from nova_cellsched.listing import order
from nova_cellsched.listing import sorting
from nova_cellsched.records import codec

INSTANCES = models.Instance.__table__
EXTRA = models.InstanceExtra.__table__
INFO_CACHE = models.InstanceInfoCache.__table__
METADATA = models.InstanceMetadata.__table__


#: Name of the bound parameter holding a batch's row limit.
LIMIT_PARAM = 'cellsched_limit'


#: Filters nova matches exactly (``exact_match_filter_names`` in nova's
#: ``instance_get_all_by_filters_sort``) among those the lister accepts.
EXACT_FILTERS = ('project_id', 'user_id', 'host', 'image_ref',
                 'instance_type_id')
#: Filters on instance columns nova matches as a regular expression
#: (``_regex_instance_filter``): a server matches when the expression
#: finds a match anywhere in the column.
REGEX_FILTERS = ('node', 'key_name', 'availability_zone', 'display_name')


def regexp_ops() -> Any:
    """nova's function for a connection's regexp operator and escaping.

    ``nova.db.utils.get_regexp_ops`` from nova 33; nova 31 and 32 have
    the same function as ``nova.db.main.api._get_regexp_ops``
    (``nova/db/main/api.py`` ~1990), same argument, same result.
    """
    found = getattr(db_utils, 'get_regexp_ops', None)
    if found is None:
        from nova.db.main import api as main_api
        found = main_api._get_regexp_ops
    return found


def regex_clause(column: ColumnElement[Any], value: str,
                 dialect: str) -> ColumnElement[bool]:
    """*column* matches the regular expression *value*, as nova matches it.

    nova's own operator and escaping for the dialect
    (:func:`regexp_ops`): ``REGEXP`` on MySQL (with ``|``
    escaped) and SQLite (the ``regexp`` function :func:`create_engine`
    registers, as oslo.db does), ``~`` on PostgreSQL, ``LIKE %value%``
    elsewhere.
    """
    safe, operator = regexp_ops()(dialect + '://')
    if operator == 'LIKE':
        return column.op(operator)('%' + value + '%')
    return column.op(operator)(safe(value))


def where_clauses(filters: Mapping[str, Any],
                  dialect: str) -> list[ColumnElement[bool]]:
    """WHERE clauses for the supported filters (see listing.FILTERS).

    Each means what it means to nova's DB API on the same database.
    """
    clauses: list[ColumnElement[bool]] = []
    deleted = filters.get('deleted', False)
    if deleted is False:
        clauses.append(INSTANCES.c.deleted == 0)
        if not filters.get('soft_deleted', False):
            clauses.append(sa.or_(
                INSTANCES.c.vm_state != vm_states.SOFT_DELETED,
                INSTANCES.c.vm_state.is_(None)))
    elif deleted is True:
        if filters.get('soft_deleted', True):
            clauses.append(sa.or_(
                INSTANCES.c.deleted == INSTANCES.c.id,
                INSTANCES.c.vm_state == vm_states.SOFT_DELETED))
        else:
            clauses.append(INSTANCES.c.deleted == INSTANCES.c.id)
    # Hidden instances (the other half of a cross-cell resize) are never
    # shown, as in nova.
    clauses.append(sa.or_(INSTANCES.c.hidden == sa.false(),
                          INSTANCES.c.hidden.is_(None)))
    for name in EXACT_FILTERS:
        if filters.get(name) is not None:
            clauses.append(order.instance_column(name) == filters[name])
    for name in REGEX_FILTERS:
        if filters.get(name) is not None:
            clauses.append(regex_clause(order.instance_column(name),
                                        str(filters[name]), dialect))
    for name in ('uuid', 'vm_state', 'task_state'):
        values = filters.get(name)
        if values is None:
            continue
        # As nova's exact filter: IN, so a None in the list matches
        # nothing (SQL's NULL is not equal to NULL).
        clauses.append(order.instance_column(name).in_(list(values)))
    if filters.get('changes-since') is not None:
        clauses.append(INSTANCES.c.updated_at >= _naive_utc(
            filters['changes-since']))
    if filters.get('changes-before') is not None:
        clauses.append(INSTANCES.c.updated_at <= _naive_utc(
            filters['changes-before']))
    return clauses


def _naive_utc(value: datetime.datetime) -> datetime.datetime:
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value


#: Data from other tables a batch can carry after its instance columns,
#: in this order: the flavor of instance_extra and the network_info of
#: instance_info_caches, each LEFT JOINed on the instance uuid, and the
#: user metadata as a JSON object text (see :func:`metadata_column`).
#: Each is read as nova's objects read it: nova's ``Instance.extra`` and
#: ``Instance.info_cache`` relationships do not look at ``deleted``, so a
#: deleted server (whose rows ``instance_destroy`` soft-deletes with it)
#: keeps its flavor and addresses; its ``Instance.metadata`` relationship
#: and ``metadata_to_dict`` skip deleted metadata rows.
JOINABLE = ('flavor', 'network_info', 'metadata')

#: The aggregate that makes ``{key: value, ...}`` JSON text of rows, per
#: dialect. All three give NULL (MySQL, PostgreSQL) or ``{}`` (SQLite)
#: for no rows, and keep every pair.
_OBJECT_AGG: dict[str, Callable[[Any, Any], ColumnElement[Any]]] = {
    'mysql': lambda key, value: sa.func.json_objectagg(key, value),
    'postgresql': lambda key, value: sa.cast(
        sa.func.json_object_agg(key, value), sa.Text),
    'sqlite': lambda key, value: sa.func.json_group_object(key, value),
}


def metadata_column(dialect: str) -> ColumnElement[Any]:
    """The instance's user metadata as JSON object text, or NULL.

    A scalar subquery correlated on the instance uuid: the database
    evaluates it for the rows it returns (after ORDER BY and LIMIT; on
    MariaDB one index lookup in instance_metadata per row returned, also
    under a filesort), so the metadata comes in the batch's own round
    trip instead of a second statement with an IN list of the batch's
    uuids. Rows with a NULL key are left out (MySQL refuses a NULL member
    name; nova's API never writes one).

    :raises ValueError: a database without a known JSON aggregate.
    """
    try:
        aggregate = _OBJECT_AGG[dialect]
    except KeyError:
        raise ValueError('listing metadata needs MySQL, PostgreSQL or '
                         'SQLite, not %s' % dialect)
    return sa.select(aggregate(METADATA.c.key, METADATA.c.value)).where(
        METADATA.c.instance_uuid == INSTANCES.c.uuid,
        METADATA.c.deleted == 0,
        METADATA.c.key.is_not(None)).scalar_subquery().label(
        'cellsched_metadata')


def _joined_source(joined: Sequence[str]) -> Any:
    """instances LEFT JOIN the tables of *joined*, on nova's conditions.

    Whatever their ``deleted``: the join conditions of nova's
    ``Instance.extra`` and ``Instance.info_cache`` relationships are the
    uuid alone, and nova soft-deletes both rows when it deletes the
    server (:data:`JOINABLE`).
    """
    source: Any = INSTANCES
    if 'flavor' in joined:
        source = source.outerjoin(
            EXTRA, EXTRA.c.instance_uuid == INSTANCES.c.uuid)
    if 'network_info' in joined:
        source = source.outerjoin(
            INFO_CACHE, INFO_CACHE.c.instance_uuid == INSTANCES.c.uuid)
    return source


def _joined_columns(joined: Sequence[str],
                    dialect: str) -> list[ColumnElement[Any]]:
    columns: list[ColumnElement[Any]] = []
    for name in joined:
        if name == 'flavor':
            columns.append(EXTRA.c.flavor)
        elif name == 'network_info':
            columns.append(INFO_CACHE.c.network_info)
        else:
            columns.append(metadata_column(dialect))
    return columns


class BatchQuery:
    """The SELECTs of one listing's batches: built once, run many times.

    Building a SELECT of some thirty columns and having SQLAlchemy derive
    its cache key costs about as much CPU as running it. Here each shape
    of statement is built once (the first batch, and a batch after a row,
    per pattern of NULLs in that row's sort values) with the limit and
    the sort values as bound parameters, so every cell and every batch of
    a listing reuses it, and the engine's compiled cache serves later
    listings of the same shape.

    With *joined* data (see :data:`JOINABLE`), each row carries it after
    the instance columns, in :attr:`joined` order, as text: it comes with
    the batch in the same round trip, and is parsed later only for the
    rows that survive the merge.

    Safe to call from several worker threads.
    """

    def __init__(self, columns: Sequence[str], filters: Mapping[str, Any],
                 spec: sorting.SortSpec,
                 joined: Iterable[str] = ()) -> None:
        self.columns = tuple(columns)
        wanted = set(joined)
        self.joined = tuple(j for j in JOINABLE if j in wanted)
        self._filters = filters
        self._spec = spec
        self._built: dict[tuple[Any, ...], sa.Select[Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, dialect: str, after: Sequence[Any] | None,
                 limit: int | None) -> tuple[sa.Select[Any], dict[str, Any]]:
        """The statement and its parameters for one batch."""
        nulls = None if after is None else tuple(v is None for v in after)
        shape = (dialect, nulls, limit is None)
        with self._lock:
            query = self._built.get(shape)
            if query is None:
                query = self._built[shape] = self._build(dialect, after,
                                                         limit)
        params: dict[str, Any] = {}
        if limit is not None:
            params[LIMIT_PARAM] = limit
        for index, (key, value) in enumerate(zip(self._spec.keys,
                                                 after or ())):
            if value is not None:
                params[order.after_param(index)] = order.sort_value(
                    key, value)
        return query, params

    def _build(self, dialect: str, after: Sequence[Any] | None,
               limit: int | None) -> sa.Select[Any]:
        query = sa.select(*[order.instance_column(c) for c in self.columns],
                          *_joined_columns(self.joined, dialect))
        if self.joined:
            query = query.select_from(_joined_source(self.joined))
        clauses = where_clauses(self._filters, dialect)
        if after is not None:
            clauses.append(order.after_condition(self._spec, after,
                                                 bind=True))
        query = query.where(*clauses).order_by(
            *order.order_by(self._spec, dialect))
        if limit is not None:
            query = query.limit(sa.bindparam(LIMIT_PARAM, type_=sa.Integer))
        return query


def select_marker(uuid: str, spec: sorting.SortSpec) -> sa.Select[Any]:
    """The sort values of the instance *uuid*, deleted or not."""
    return sa.select(*[order.instance_column(k) for k in spec.keys]).where(
        INSTANCES.c.uuid == uuid)


def flavor_of(blob: str | None) -> dict[str, Any] | None:
    """The current flavor's fields from an instance_extra.flavor blob.

    The blob is nova's ``{"cur": <Flavor object primitive>, "old": ...,
    "new": ...}``; None for no blob.
    """
    if not blob:
        return None
    current = (codec.loads(blob).get('cur') or {})
    return dict(current.get('nova_object.data') or {})


class EngineCache:
    """One SQLAlchemy engine (and so one connection pool) per cell URL.

    Pooled connections are checked with a ping before use, so a cell
    database that restarted is reconnected instead of failing the next
    listing. MySQL drivers get connect, read
    and write timeouts, PostgreSQL a connect and a statement timeout, so a
    hung server ends the worker thread instead of blocking it for ever.
    """

    def __init__(self, io_timeout: float | None = None,
                 prefer_mysqldb: bool = False) -> None:
        self._io_timeout = io_timeout
        self._prefer_mysqldb = prefer_mysqldb
        self._engines: dict[str, Engine] = {}
        self._lock = threading.Lock()

    def get(self, url: str) -> Engine:
        engine = self._engines.get(url)
        if engine is not None:
            return engine
        with self._lock:
            engine = self._engines.get(url)
            if engine is None:
                engine = create_engine(url, self._io_timeout,
                                       self._prefer_mysqldb)
                self._engines[url] = engine
            return engine

    def dispose(self) -> None:
        with self._lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()


def mysqldb_available() -> bool:
    try:
        import MySQLdb  # noqa: F401
    except ImportError:
        return False
    return True


def datetime_conversions(driver: str) -> dict[Any, Any] | None:
    """The *driver*'s decoders, with DATETIME and TIMESTAMP parsed in C.

    PyMySQL and mysqlclient both convert every DATETIME value in Python
    (about 2 us each, four per detailed instance row);
    ``datetime.fromisoformat`` reads MySQL's ``YYYY-MM-DD
    HH:MM:SS[.ffffff]`` in about 0.1 us and gives the same value. Anything
    it does not take (MySQL's zero date) goes to the driver's own
    converter, so the results are the driver's. None for other drivers.
    """
    from_isoformat = datetime.datetime.fromisoformat
    if driver not in ('pymysql', 'mysqldb'):
        return None
    package = 'pymysql' if driver == 'pymysql' else 'MySQLdb'
    field_type = importlib.import_module(package + '.constants').FIELD_TYPE
    converters = importlib.import_module(package + '.converters')
    stock = converters.conversions[field_type.DATETIME]
    conversions = dict(converters.conversions)

    def convert_datetime(text: Any) -> Any:
        try:
            return from_isoformat(text)
        except (TypeError, ValueError):
            return stock(text)

    conversions[field_type.DATETIME] = convert_datetime
    conversions[field_type.TIMESTAMP] = convert_datetime
    return conversions


# SQLAlchemy 2.0.43 and later take create_engine(skip_autocommit_rollback=)
# (nova 33's and 34's upper-constraints: 2.0.46, 2.0.52); the 2.0.38 and
# 2.0.42 of nova 31 and 32 refuse it (TypeError: Invalid argument(s)), and
# there the Connection's ROLLBACK round trip stays.
_SKIP_AUTOCOMMIT_ROLLBACK = 'skip_autocommit_rollback' in inspect.signature(
    default.DefaultDialect.__init__).parameters


def create_engine(url: str, io_timeout: float | None = None,
                  prefer_mysqldb: bool = False) -> Engine:
    """An engine for a cell database URL, tuned for listing."""
    parsed = sa_url.make_url(url)
    backend = parsed.get_backend_name()
    # Listing only reads: every statement autocommits, so a pooled
    # connection never holds a transaction (nor a stale snapshot) and
    # needs no ROLLBACK round trip, neither when a Connection closes
    # (SQLAlchemy sends one even in autocommit mode unless told not to)
    # nor when it goes back to the pool. The ping before each use stays:
    # it is what turns a restarted or frozen server into a reconnect or a
    # timeout instead of a failed query.
    kwargs: dict[str, Any] = {'isolation_level': 'AUTOCOMMIT',
                              'pool_reset_on_return': None,
                              'pool_pre_ping': True}
    if _SKIP_AUTOCOMMIT_ROLLBACK:
        kwargs['skip_autocommit_rollback'] = True
    connect_args: dict[str, Any] = {}
    if backend == 'mysql':
        if (prefer_mysqldb and parsed.get_driver_name() == 'pymysql' and
                mysqldb_available()):
            parsed = parsed.set(drivername='mysql+mysqldb')
        conversions = datetime_conversions(parsed.get_driver_name())
        if conversions is not None:
            connect_args['conv'] = conversions
        kwargs.update(pool_recycle=3600, pool_size=5, max_overflow=10)
        if io_timeout:
            seconds = max(1, int(io_timeout + 0.999))
            connect_args.update(connect_timeout=seconds,
                                read_timeout=seconds, write_timeout=seconds)
    elif backend == 'postgresql':
        if io_timeout:
            connect_args['connect_timeout'] = max(1, int(io_timeout + 0.999))
            # The server ends a statement that runs (or waits for a lock)
            # longer than that, which ends the worker blocked on it.
            connect_args['options'] = '-c statement_timeout=%d' % int(
                io_timeout * 1000)
    elif backend == 'sqlite':
        connect_args['check_same_thread'] = False
        if io_timeout:
            connect_args['timeout'] = io_timeout
    engine = sa.create_engine(parsed, connect_args=connect_args, **kwargs)
    if backend == 'sqlite':
        sa.event.listen(engine, 'connect', _sqlite_regexp)
    return engine


def _regexp(expression: str, item: Any) -> bool:
    # oslo.db's SQLite REGEXP, which nova's regex filters rely on.
    return re.search(expression, str(item)) is not None


def _sqlite_regexp(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.create_function('regexp', 2, _regexp)
