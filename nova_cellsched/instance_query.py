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
ends with the unique uuid): "rows strictly after this row's sort
values", so the same condition serves a marker from another cell and
the next batch of this cell.
"""

import datetime
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nova.compute import vm_states
from nova.db.main import models
from oslo_serialization import jsonutils
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.engine import url as sa_url
from sqlalchemy.sql import ColumnElement

from nova_cellsched import sorting

INSTANCES = models.Instance.__table__
EXTRA = models.InstanceExtra.__table__
INFO_CACHE = models.InstanceInfoCache.__table__
METADATA = models.InstanceMetadata.__table__

INSTANCE_COLUMNS = frozenset(c.name for c in INSTANCES.columns)

#: Largest IN list sent in one statement.
IN_CHUNK = 1000


def escape_like(text: str) -> str:
    """Escape ``%``, ``_`` and the escape character for LIKE."""
    return (text.replace('\\', '\\\\').replace('%', '\\%')
            .replace('_', '\\_'))


def _col(name: str) -> sa.Column[Any]:
    if name not in INSTANCE_COLUMNS:
        # Callers validate first; this guards the SQL builder itself.
        raise ValueError('not a column of instances: %r' % name)
    return INSTANCES.c[name]


def _sortable(name: str) -> ColumnElement[Any]:
    column = _col(name)
    if isinstance(column.type, sa.Boolean):
        return sa.cast(column, sa.Integer)
    return column


def _sort_value(name: str, value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    return value


def order_by(spec: sorting.SortSpec,
             dialect: str) -> list[ColumnElement[Any]]:
    """ORDER BY clauses; NULL lowest on every database."""
    clauses = []
    for key, direction in zip(spec.keys, spec.dirs):
        column = _sortable(key)
        clause = column.asc() if direction == sorting.ASC else column.desc()
        if dialect == 'postgresql':
            # PostgreSQL sorts NULL highest by default.
            clause = (clause.nulls_first() if direction == sorting.ASC
                      else clause.nulls_last())
        clauses.append(clause)
    return clauses


def after_condition(spec: sorting.SortSpec,
                    values: Sequence[Any]) -> ColumnElement[bool]:
    """Rows strictly after *values* in the order of *spec*.

    ``OR_i (k_1 = v_1 AND ... AND k_{i-1} = v_{i-1} AND k_i after v_i)``
    where NULL is lower than every value, as in :mod:`sorting`.
    """
    alternatives = []
    equal: list[ColumnElement[bool]] = []
    for key, direction, raw in zip(spec.keys, spec.dirs, values):
        column = _sortable(key)
        value = _sort_value(key, raw)
        if direction == sorting.ASC:
            after = (column.is_not(None) if value is None
                     else column > value)
        else:
            after = (sa.false() if value is None
                     else sa.or_(column < value, column.is_(None)))
        alternatives.append(sa.and_(*equal, after))
        equal.append(column.is_(None) if value is None else column == value)
    return sa.or_(*alternatives)


def where_clauses(filters: Mapping[str, Any]) -> list[ColumnElement[bool]]:
    """WHERE clauses for the supported filters (see listing.FILTERS)."""
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
    for name in ('project_id', 'user_id', 'host', 'node', 'image_ref',
                 'key_name', 'availability_zone', 'instance_type_id'):
        if filters.get(name) is not None:
            clauses.append(_col(name) == filters[name])
    for name in ('uuid', 'vm_state', 'task_state'):
        values = filters.get(name)
        if values is None:
            continue
        values = list(values)
        if None in values:
            rest = [v for v in values if v is not None]
            clauses.append(sa.or_(_col(name).is_(None),
                                  _col(name).in_(rest)))
        else:
            clauses.append(_col(name).in_(values))
    if filters.get('display_name') is not None:
        clauses.append(INSTANCES.c.display_name.like(
            '%' + escape_like(filters['display_name']) + '%',
            escape='\\'))
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


def select_instances(columns: Iterable[str], filters: Mapping[str, Any],
                     spec: sorting.SortSpec, dialect: str,
                     after: Sequence[Any] | None = None,
                     limit: int | None = None) -> sa.Select[Any]:
    """SELECT the *columns* of the instances matching *filters*."""
    query = sa.select(*[_col(c) for c in columns])
    clauses = where_clauses(filters)
    if after is not None:
        clauses.append(after_condition(spec, after))
    query = query.where(*clauses).order_by(*order_by(spec, dialect))
    if limit is not None:
        query = query.limit(limit)
    return query


def select_marker(uuid: str, spec: sorting.SortSpec) -> sa.Select[Any]:
    """The sort values of the instance *uuid*, deleted or not."""
    return sa.select(*[_col(k) for k in spec.keys]).where(
        INSTANCES.c.uuid == uuid)


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), IN_CHUNK):
        yield items[start:start + IN_CHUNK]


def fetch_flavors(conn: sa.Connection,
                  uuids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """uuid -> the current flavor's fields, from instance_extra.flavor."""
    out = {}
    for chunk in _chunks(uuids):
        rows = conn.execute(sa.select(EXTRA.c.instance_uuid, EXTRA.c.flavor)
                            .where(EXTRA.c.instance_uuid.in_(chunk),
                                   EXTRA.c.deleted == 0))
        for uuid, blob in rows:
            if not blob:
                continue
            current = (jsonutils.loads(blob).get('cur') or {})
            out[uuid] = dict(current.get('nova_object.data') or {})
    return out


def fetch_network_info(conn: sa.Connection,
                       uuids: Sequence[str]) -> dict[str, list[Any]]:
    """uuid -> the network_info list of instance_info_caches."""
    out = {}
    for chunk in _chunks(uuids):
        rows = conn.execute(
            sa.select(INFO_CACHE.c.instance_uuid,
                      INFO_CACHE.c.network_info)
            .where(INFO_CACHE.c.instance_uuid.in_(chunk),
                   INFO_CACHE.c.deleted == 0))
        for uuid, blob in rows:
            out[uuid] = jsonutils.loads(blob) if blob else []
    return out


def fetch_metadata(conn: sa.Connection,
                   uuids: Sequence[str]) -> dict[str, dict[str, str]]:
    """uuid -> user metadata (instance_metadata rows)."""
    out: dict[str, dict[str, str]] = {}
    for chunk in _chunks(uuids):
        rows = conn.execute(
            sa.select(METADATA.c.instance_uuid, METADATA.c.key,
                      METADATA.c.value)
            .where(METADATA.c.instance_uuid.in_(chunk),
                   METADATA.c.deleted == 0))
        for uuid, key, value in rows:
            out.setdefault(uuid, {})[key] = value
    return out


class EngineCache:
    """One SQLAlchemy engine (and so one connection pool) per cell URL.

    Pooled connections are checked with a ping before use, so a cell
    database that restarted is reconnected instead of failing the next
    listing. MySQL drivers get connect/read/write timeouts, PostgreSQL a
    connect and a statement timeout, so a hung server ends the worker
    thread instead of blocking it for ever.
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


def create_engine(url: str, io_timeout: float | None = None,
                  prefer_mysqldb: bool = False) -> Engine:
    """An engine for a cell database URL, tuned for listing."""
    parsed = sa_url.make_url(url)
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {'pool_pre_ping': True}
    connect_args: dict[str, Any] = {}
    if backend == 'mysql':
        if (prefer_mysqldb and parsed.get_driver_name() == 'pymysql' and
                mysqldb_available()):
            parsed = parsed.set(drivername='mysql+mysqldb')
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
    return sa.create_engine(parsed, connect_args=connect_args, **kwargs)
