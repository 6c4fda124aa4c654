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

"""Nova adapter: nova's instance query, paged by sort values, NULL-safe.

nova's ``instance_get_all_by_filters_sort`` builds the query of one cell
(filters, joins, the non-admin project scope) and hands it to oslo.db's
``paginate_query``, reached through the module attribute
``nova.db.main.api.sqlalchemyutils``. :mod:`nova_cellsched.compat` (part
``keyset``) puts a proxy of that module there whose ``paginate_query`` takes
over only inside :func:`paging`, in the thread that entered it: the query is
ordered with NULL where the listing merges it
(:mod:`nova_cellsched.listing.sorting`: highest when every cell is on
PostgreSQL, as nova's query sorts there, else lowest, as on MySQL and SQLite)
and starts strictly after the given sort values, instead of after a marker row
looked up again in every cell, and a query that joins (nova's
``tags``/``tags-any`` filters) gives each instance once
(:func:`one_row_per_instance`). Every other call, from any other thread or
place in nova, goes to oslo.db unchanged.
"""

import contextlib
import threading
import types
from collections.abc import Iterator, Sequence
from typing import Any

from nova.db.main import models
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import utils as oslo_utils
import sqlalchemy as sa

from nova_cellsched.listing import order
from nova_cellsched.listing import sorting

_local = threading.local()


class _Page:
    __slots__ = ('after', 'loader', 'nulls_high')

    def __init__(self, after: Sequence[Any] | None,
                 loader: Any = None, nulls_high: bool = False) -> None:
        self.after = after
        self.loader = loader
        self.nulls_high = nulls_high


@contextlib.contextmanager
def paging(after: Sequence[Any] | None, loader: Any = None,
           nulls_high: bool = False) -> Iterator[None]:
    """Within this block, this thread's instance queries page by values.

    :param after: the sort values (one per sort key nova passes to
        ``paginate_query``) the rows must come strictly after; None to
        start at the first row.
    :param loader: a :class:`.rows.Loader` to answer the paged query's
        ``all()`` with plain rows, or None for nova's entities.
    :param nulls_high: order NULL after every value (as PostgreSQL
        does), else before (as MySQL and SQLite do): the order the
        listing merges the cells in (``SortSpec.nulls_high``).
    """
    previous = getattr(_local, 'page', None)
    _local.page = _Page(after, loader, nulls_high)
    try:
        yield
    finally:
        _local.page = previous


def paginate_query(query: Any, model: Any, limit: int | None,
                   sort_keys: Sequence[str], marker: Any = None,
                   sort_dir: str | None = None,
                   sort_dirs: Sequence[str] | None = None) -> Any:
    """oslo.db's ``paginate_query``, or ours inside :func:`paging`.

    Ours is used for the instances model without a marker row, with one
    direction per key (nova's ``instance_get_all_by_filters_sort`` always
    passes them so).
    """
    page = getattr(_local, 'page', None)
    if (page is None or model is not models.Instance or marker is not None
            or sort_dirs is None or len(sort_dirs) != len(sort_keys)):
        return oslo_utils.paginate_query(
            query, model, limit, sort_keys, marker=marker,
            sort_dir=sort_dir, sort_dirs=sort_dirs)
    spec = sorting.SortSpec(tuple(sort_keys), tuple(sort_dirs),
                            nulls_high=page.nulls_high)
    dialect = query.session.get_bind().dialect.name
    query = one_row_per_instance(query)
    try:
        clauses = order.order_by(spec, dialect)
        if page.after is not None:
            query = query.filter(
                order.after_condition(spec, page.after))
    except ValueError:
        bad = [k for k in sort_keys
               if k not in order.INSTANCE_COLUMNS]
        raise db_exc.InvalidSortKey(key=bad[0] if bad else sort_keys)

    def ordered(query: Any) -> Any:
        query = query.order_by(*clauses)
        return query if limit is None else query.limit(limit)

    if page.loader is not None:
        return page.loader.query(query, ordered)
    return ordered(query)


def one_row_per_instance(query: Any) -> Any:
    """nova's instance *query*, each matching instance once.

    nova filters ``tags-any`` with an inner JOIN on tags, so an
    instance with two of the tags is two rows in SQL and the LIMIT counts
    rows, not instances: a batch could hold fewer instances than asked
    for without being the cell's last. A query with such a join becomes
    ``instances WHERE id IN (nova's query, selecting id)`` with nova's
    loader options, so the LIMIT added after counts instances. A query
    without joins is returned as it is.
    """
    # NOTE: _setup_joins (the join() calls; nova's eager loads are
    # options) and _with_options are the legacy Query's, with no public
    # reader (the same in SQLAlchemy 1.4 to 2.1). The keyset part refuses
    # a SQLAlchemy whose join()/options() do not fill them
    # (compat.checks.keyset_sqlalchemy), and the self-test and
    # tests/functional/test_api_rows.py list with tags-any both ways.
    if not query._setup_joins:
        return query
    matching = query.enable_eagerloads(False).with_entities(
        models.Instance.id).order_by(None).subquery()
    return query.session.query(models.Instance).options(
        *query._with_options).filter(
        models.Instance.id.in_(sa.select(matching.c.id)))


class _SqlalchemyUtils(types.ModuleType):
    """oslo.db's ``sqlalchemy.utils`` with :func:`paginate_query` ours."""

    def __init__(self) -> None:
        super().__init__(oslo_utils.__name__, oslo_utils.__doc__)
        self.paginate_query = paginate_query

    def __getattr__(self, name: str) -> Any:
        return getattr(oslo_utils, name)


#: What :mod:`nova_cellsched.compat` (part ``keyset``) puts in
#: ``nova.db.main.api.sqlalchemyutils``.
_PROXY = _SqlalchemyUtils()


def local_state() -> threading.local:
    """The per-thread state :func:`paging` keeps (for the compat checks).

    It scopes paging to the thread (the green thread under eventlet)
    that entered :func:`paging`, so only if it was made after eventlet
    patched ``threading``.
    """
    return _local


def fits() -> list[str]:
    """Part ``keyset``'s check: what it needs of oslo.db and the threads.
    """
    from nova.db.main import api as db_api

    from nova_cellsched.compat import checks
    from nova_cellsched.compat import core

    problems: list[str] = []
    ours = checks.parameters(paginate_query)
    theirs = checks.parameters(oslo_utils.paginate_query)
    if ours != theirs:
        problems.append(checks.library_problem(
            'oslo.db', 'has oslo_db.sqlalchemy.utils.paginate_query%s, '
            'expected paginate_query%s (nova.db.main.api reaches it '
            "through nova-cellsched's stand-in)" % (theirs, ours)))
    module = getattr(db_api, 'sqlalchemyutils', None)
    if module is not oslo_utils and not core.is_on('keyset'):
        problems.append("nova.db.main.api.sqlalchemyutils is not oslo.db's "
                        'sqlalchemy.utils (found %r)' % (module,))
    return problems + checks.per_thread('nova_cellsched.api.hooks.keyset',
                                        local_state())
