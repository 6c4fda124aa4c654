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

"""Nova adapter: a listing's sort order in SQL, on nova's instances table.

:func:`order_by` orders a cell's rows as :mod:`.sorting` merges them,
NULLs included, on every database; :func:`after_condition` selects the
rows strictly after a row's sort values (keyset pagination: the same
condition serves a marker from another cell and the next batch of this
cell). Both listers build on it: the command line's own statement
(:mod:`nova_cellsched.records.query`) and nova's query in nova-api
(:mod:`nova_cellsched.api.hooks.keyset`). Column names come from nova's
table itself; anything else is rejected before SQL is built.
"""

from collections.abc import Sequence
from typing import Any

from nova.db.main import models
import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url
from sqlalchemy.sql import ColumnElement

from nova_cellsched.listing import sorting

INSTANCES = models.Instance.__table__

INSTANCE_COLUMNS = frozenset(c.name for c in INSTANCES.columns)

#: Columns unique within one cell database (primary key, unique key).
UNIQUE_IN_CELL = frozenset({'id', 'uuid'})


def instance_column(name: str) -> sa.Column[Any]:
    """nova's instances column *name*.

    :raises ValueError: no such column (callers validate first; this
        guards the SQL builder itself).
    """
    if name not in INSTANCE_COLUMNS:
        raise ValueError('not a column of instances: %r' % name)
    column: sa.Column[Any] = INSTANCES.c[name]
    return column


def _sortable(name: str) -> ColumnElement[Any]:
    column = instance_column(name)
    if isinstance(column.type, sa.Boolean):
        return sa.cast(column, sa.Integer)
    return column


def sort_value(name: str, value: Any) -> Any:
    """*value* as the database compares it (a boolean as an integer)."""
    if isinstance(value, bool):
        return int(value)
    return value


def order_by(spec: sorting.SortSpec,
             dialect: str) -> list[ColumnElement[Any]]:
    """ORDER BY clauses: NULL where *spec* puts it, on every database.

    Where the database sorts NULL so by itself (PostgreSQL NULL highest,
    MySQL and SQLite lowest) the clause is nova's, ``column ASC|DESC``,
    which reads an index as nova's query does. Otherwise PostgreSQL is
    asked for ``NULLS FIRST``/``NULLS LAST`` and the others (MySQL has
    no such clause) order by ``column IS NULL`` first, as oslo.db's
    ``paginate_query`` does for its ``-nullsfirst``/``-nullslast``.
    """
    native_high = dialect in sorting.NULLS_HIGH_BACKENDS
    clauses: list[ColumnElement[Any]] = []
    for key, direction in zip(spec.keys, spec.dirs):
        column = _sortable(key)
        ascending = direction == sorting.ASC
        clause = column.asc() if ascending else column.desc()
        nulls_first = spec.nulls_first(direction)
        if instance_column(key).nullable and spec.nulls_high != native_high:
            if dialect == 'postgresql':
                clause = (clause.nulls_first() if nulls_first
                          else clause.nulls_last())
            else:
                is_null = instance_column(key).is_(None)
                clauses.append(is_null.desc() if nulls_first
                               else is_null.asc())
        clauses.append(clause)
        if key in UNIQUE_IN_CELL:
            # The order is total within the cell here: later keys (the
            # uuid tie breaker) change nothing in this cell, and leaving
            # them out lets the database read an index in order (nova's
            # instances_deleted_created_at_idx is (deleted, created_at)
            # plus the primary key id) instead of sorting every row.
            break
    return clauses


def after_condition(spec: sorting.SortSpec, values: Sequence[Any],
                    bind: bool = False) -> ColumnElement[bool]:
    """Rows strictly after *values* in the order of *spec*.

    ``OR_i (k_1 = v_1 AND ... AND k_{i-1} = v_{i-1} AND k_i after v_i)``
    where NULL is lower (or, with ``spec.nulls_high``, higher) than
    every value, as in :mod:`sorting`.

    :param bind: compare with the bound parameters named by
        :func:`after_param` instead of the *values* themselves (whose
        NULLs still shape the condition): the statement can then be run
        again after another row with NULLs in the same places.
    """
    alternatives = []
    equal: list[ColumnElement[bool]] = []
    for index, (key, direction, raw) in enumerate(
            zip(spec.keys, spec.dirs, values)):
        column = _sortable(key)
        value: Any = (sa.bindparam(after_param(index), type_=column.type)
                      if bind else sort_value(key, raw))
        nulls_first = spec.nulls_first(direction)
        after: ColumnElement[bool]
        if raw is None:
            # After a NULL: the values if NULL comes first, else nothing.
            after = column.is_not(None) if nulls_first else sa.false()
        else:
            beyond = (column > value if direction == sorting.ASC
                      else column < value)
            after = (beyond if nulls_first
                     else sa.or_(beyond, column.is_(None)))
        alternatives.append(sa.and_(*equal, after))
        equal.append(column.is_(None) if raw is None else column == value)
    return sa.or_(*alternatives)


def backend_of(url: Any) -> str:
    """The SQLAlchemy backend name of database *url* (``postgresql``,
    ``mysql``, ``sqlite``); ``''`` for what is not a database URL.

    No connection is made.
    """
    try:
        return str(sa_url.make_url(url).get_backend_name())
    except Exception:
        return ''


def after_param(index: int) -> str:
    """Name of the bound parameter of the *index*-th sort value."""
    return 'cellsched_after_%d' % index
