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
``nova.db.main.api.sqlalchemyutils``. :func:`install` puts a proxy of
that module there whose ``paginate_query`` takes over only inside
:func:`paging`, in the thread that entered it: the query is ordered with
NULL lowest on every database (as :mod:`nova_cellsched.listing.sorting`
merges) and starts strictly after the given sort values, instead of
after a marker row looked up again in every cell. Every other call,
from any other thread or place in nova, goes to oslo.db unchanged.
"""

import contextlib
import threading
import types
from collections.abc import Iterator, Sequence
from typing import Any

from nova.db.main import api as db_api
from nova.db.main import models
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import utils as oslo_utils

from nova_cellsched.listing import query as instance_query
from nova_cellsched.listing import sorting

_local = threading.local()


class _Page:
    __slots__ = ('after', 'loader')

    def __init__(self, after: Sequence[Any] | None,
                 loader: Any = None) -> None:
        self.after = after
        self.loader = loader


@contextlib.contextmanager
def paging(after: Sequence[Any] | None, loader: Any = None
           ) -> Iterator[None]:
    """Within this block, this thread's instance queries page by values.

    :param after: the sort values (one per sort key nova passes to
        ``paginate_query``) the rows must come strictly after; None to
        start at the first row.
    :param loader: a :class:`.rows.Loader` to answer the paged query's
        ``all()`` with plain rows, or None for nova's entities.
    """
    previous = getattr(_local, 'page', None)
    _local.page = _Page(after, loader)
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
    spec = sorting.SortSpec(tuple(sort_keys), tuple(sort_dirs))
    dialect = query.session.get_bind().dialect.name
    try:
        clauses = instance_query.order_by(spec, dialect)
        if page.after is not None:
            query = query.filter(
                instance_query.after_condition(spec, page.after))
    except ValueError:
        bad = [k for k in sort_keys
               if k not in instance_query.INSTANCE_COLUMNS]
        raise db_exc.InvalidSortKey(key=bad[0] if bad else sort_keys)
    query = query.order_by(*clauses)
    if limit is not None:
        query = query.limit(limit)
    if page.loader is not None:
        return page.loader.query(query)
    return query


class _SqlalchemyUtils(types.ModuleType):
    """oslo.db's ``sqlalchemy.utils`` with :func:`paginate_query` ours."""

    def __init__(self) -> None:
        super().__init__(oslo_utils.__name__, oslo_utils.__doc__)
        self.paginate_query = paginate_query

    def __getattr__(self, name: str) -> Any:
        return getattr(oslo_utils, name)


_PROXY = _SqlalchemyUtils()


def install() -> None:
    """Put the proxy into nova's DB API (idempotent; caller locks)."""
    db_api.sqlalchemyutils = _PROXY


def uninstall() -> None:
    """Give nova's DB API oslo.db's module back, if the proxy is there."""
    if db_api.sqlalchemyutils is _PROXY:
        db_api.sqlalchemyutils = oslo_utils


def installed() -> bool:
    return db_api.sqlalchemyutils is _PROXY
