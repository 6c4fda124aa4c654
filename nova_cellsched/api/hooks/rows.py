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

"""Nova adapter: one cell's batch as plain rows for ``_from_db_object``.

nova's ``instance_get_all_by_filters_sort`` loads every instance as an
ORM entity with its joined relationships as more entities, and reads
metadata and system metadata as entities too (about ten a server); for
a page of 1,000 servers that costs about half a second of CPU before
nova builds a single object. ``Instance._from_db_object`` reads only
keys, and nova's own unit tests feed it dicts.

:class:`Loader` keeps nova's query (its filters, project scope, the
keyset order of :mod:`.keyset`, the limit) and only changes how the
rows come back: the query's columns as a dict per instance, and each
join nova would have made as one column-only query per relationship,
over nova's own relationship definitions (``Query.join`` on the
relationship, so its join condition is nova's) or nova's own
``_instance_*_get_multi`` queries for what nova joins by hand. The
one-to-one joins (``info_cache``, ``extra``) are read in the batch's
own statement, LEFT OUTER JOINed on nova's relationships: one statement
instead of three. The dicts hold what nova's entities would give
``_from_db_object``: the tests build the objects both ways and compare
them.

What it does not know (``fault``, ``pci_devices``, a join added by a
later nova) is left to nova's loading: :func:`supports` says so.

Given *columns*, a batch reads only those instance columns, and of its
one-to-one joins only what a server list body shows (the info cache's
``network_info``, the instance_extra columns nova asks for): rows for the
renderer (``nova_cellsched.api.view.render``), never for nova's objects.
:func:`reread` reads the rest of such rows by uuid.
"""

import collections
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from nova.db.main import api as db_api
from nova.db.main import models
import sqlalchemy as sa

#: nova's ``security_groups`` join is never read: nova 34's
#: ``_from_db_object`` gives every instance an empty SecurityGroupList.
_IGNORED = frozenset({'security_groups'})

#: Joins made through nova's relationship on ``Instance``, one query each
#: (``info_cache`` is read in the batch's statement, but for
#: :meth:`Loader._load_separately`).
_RELATED = {'info_cache': models.InstanceInfoCache,
            'services': models.Service,
            'tags': models.Tag}

#: Joins nova makes by hand, with its own query functions.
_MANUAL = ('metadata', 'system_metadata')

#: ``columns_to_join`` entries this module loads.
KNOWN = frozenset(_IGNORED | set(_RELATED) | set(_MANUAL) | {'extra'})


def supports(columns_to_join: Iterable[str] | None) -> bool:
    """True if :class:`Loader` can give every join in *columns_to_join*.

    None (nova's default joins) is not supported: callers of the
    listing always name their joins.
    """
    if columns_to_join is None:
        return False
    return all(column in KNOWN or column.startswith('extra.')
               for column in columns_to_join)


@functools.cache
def _columns(model: Any) -> tuple[Any, ...]:
    """Every column attribute of *model*, deferred ones included.

    Read once per model: every batch of every cell asks again.
    """
    return tuple(getattr(model, prop.key)
                 for prop in sa.inspect(model).column_attrs)


def _kept(model: Any, keep: frozenset[str] | None) -> tuple[Any, ...]:
    """:func:`_columns` of *model* named in *keep* (None: every one)."""
    return _columns(model) if keep is None else _pruned(model, keep)


@functools.cache
def _pruned(model: Any, keep: frozenset[str]) -> tuple[Any, ...]:
    return tuple(column for column in _columns(model) if column.key in keep)


@functools.cache
def _labelled(name: str, columns: tuple[Any, ...]) -> tuple[Any, ...]:
    """*columns* of the join *name*, labelled for the batch's statement.

    Built once: every batch of every cell uses the same labels.
    """
    return tuple(column.label('cellsched_%s_%s' % (name, column.key))
                 for column in columns)


def _unique(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """*rows* with each instance once, at its first row.

    What nova's ORM query does with its entities (the legacy ``Query``
    de-duplicates them by identity). :func:`.keyset.one_row_per_instance`
    already gives nova's join-producing filters (``tags``, ``tags-any``)
    one row per instance in SQL, so that a LIMIT counts instances; this
    keeps a repeat from any other join out of the objects.
    """
    seen: set[Any] = set()
    out = []
    for row in rows:
        if row['id'] not in seen:
            seen.add(row['id'])
            out.append(row)
    return out


class Loader:
    """Plain rows for one batch of one cell.

    Hand it to :func:`.keyset.paging`; :func:`.keyset.paginate_query`
    then returns :meth:`query` of nova's query, whose ``all()`` nova
    calls. nova runs the batch with no joins of its own (so its
    ``_instances_fill_metadata`` only copies each dict and sets
    ``metadata`` and ``system_metadata`` empty); :meth:`finish` puts
    what this loader read back into those copies.
    """

    def __init__(self, context: Any, columns_to_join: Sequence[str],
                 columns: Iterable[str] | None = None) -> None:
        """A loader of nova's joins for the batch.

        :param columns_to_join: nova's joins for the batch.
        :param columns: the instance columns to read (``id`` and
            ``uuid`` always); None: every column, and the one-to-one
            joins whole, as nova's objects read them.
        """
        self.context = context
        self.joins = [c for c in dict.fromkeys(columns_to_join)
                      if c not in _IGNORED]
        self.extra = [c.split('.', 1)[1] for c in self.joins
                      if c.startswith('extra.')]
        self.columns = (None if columns is None else
                        frozenset(columns) | {'id', 'uuid'})
        self._manual: dict[str, dict[str, dict[str, Any]]] = {}

    def query(self, query: Any, ordered: Callable[[Any], Any]
              ) -> '_Rows':
        """nova's *query* of one batch, to be run by :meth:`load`.

        :param query: nova's filtered query, not yet ordered or limited.
        :param ordered: gives a query its batch's order and limit.
        """
        return _Rows(self, query, ordered)

    def _one_to_one(self) -> list[tuple[str, tuple[Any, ...]]]:
        """The one-to-one joins to read, with the columns nova loads.

        With :attr:`columns`, what a list body shows of them: the
        cache's ``network_info`` and the ``extra.<column>`` columns nova
        asks for (and each row's ``id``: NULL where the server has no
        such row).
        """
        found = []
        if 'info_cache' in self.joins:
            found.append(('info_cache', _kept(
                models.InstanceInfoCache, None if self.columns is None
                else frozenset({'id', 'network_info'}))))
        if 'extra' in self.joins or self.extra:
            # nova joins instance_extra for an ``extra.<column>`` alone too.
            found.append(('extra', tuple(
                c for c in _columns(models.InstanceExtra)
                if c.key in self.extra or c.key == 'id' or (
                    self.columns is None and not c.property.deferred))))
        return found

    def _instance_columns(self) -> tuple[Any, ...]:
        return _kept(models.Instance, self.columns)

    def load(self, query: Any, ordered: Callable[[Any], Any]
             ) -> list[dict[str, Any]]:
        """The rows of nova's batch, each with its joins, as dicts.

        One statement gives the instances and their one-to-one joins.
        instance_extra has no unique key: should an instance have two
        rows, the statement's LIMIT would count it twice and the batch
        would end early, so such a batch is read again with one query
        per join.
        """
        joined = self._one_to_one()
        columns = self._instance_columns()
        statement = query.with_entities(*columns, *(
            label for name, table_columns in joined
            for label in _labelled(name, table_columns)))
        for name, _table_columns in joined:
            statement = statement.outerjoin(getattr(models.Instance, name))
        names = [column.key for column in columns]
        width = len(names)
        rows = []
        seen: set[Any] = set()
        for values in ordered(statement):
            row = dict(zip(names, values[:width]))
            if row['id'] in seen:
                return self._load_separately(ordered(query))
            seen.add(row['id'])
            start = width
            for name, table_columns in joined:
                end = start + len(table_columns)
                item = dict(zip((c.key for c in table_columns),
                                values[start:end]))
                # An instance without the row: every column NULL.
                row[name] = item if item['id'] is not None else None
                start = end
            rows.append(row)
        self._rest(query.session, rows, ('info_cache', 'extra'))
        return rows

    def _load_separately(self, query: Any) -> list[dict[str, Any]]:
        """The rows of nova's ordered *query*, one query per join."""
        rows = _unique(row._asdict() for row in
                       query.with_entities(*self._instance_columns()))
        self._rest(query.session, rows, ())
        return rows

    def _rest(self, session: Any, rows: list[dict[str, Any]],
              done: Sequence[str]) -> None:
        """Every join of *rows* not in *done*, one query each."""
        if not rows:
            return
        uuids = [row['uuid'] for row in rows]
        for name, model in _RELATED.items():
            if name in self.joins and name not in done:
                self._related(session, rows, uuids, name, model)
        if 'extra' not in done and ('extra' in self.joins or self.extra):
            self._extra(session, rows, uuids)
        for name in _MANUAL:
            if name in self.joins:
                self._manual[name] = self._by_hand(name, uuids)

    def _related(self, session: Any, rows: list[dict[str, Any]],
                 uuids: list[str], name: str, model: Any) -> None:
        """``name`` through nova's relationship, as nova's join gives it."""
        found: dict[str, list[dict[str, Any]]] = collections.defaultdict(
            list)
        owner = models.Instance.uuid.label('cellsched_owner')
        table_columns = (dict(self._one_to_one())[name]
                         if name == 'info_cache' else _columns(model))
        # No order, as nova's join has none: a server's tags and services
        # come in the order the database gives.
        query = session.query(owner, *table_columns).select_from(
            models.Instance).join(getattr(models.Instance, name)).filter(
            models.Instance.uuid.in_(uuids))
        for row in query:
            item = row._asdict()
            found[item.pop('cellsched_owner')].append(item)
        if name == 'info_cache':
            # One-to-one: the row, or None without one.
            for row in rows:
                cached = found.get(row['uuid'])
                row[name] = cached[0] if cached else None
        else:
            for row in rows:
                row[name] = found.get(row['uuid'], [])

    def _extra(self, session: Any, rows: list[dict[str, Any]],
               uuids: list[str]) -> None:
        """The instance_extra row with the columns nova undefers."""
        wanted = [models.InstanceExtra.instance_uuid] + [
            c for c in dict(self._one_to_one())['extra']
            if c.key != 'instance_uuid']
        found = {}
        query = session.query(*wanted).filter(
            models.InstanceExtra.instance_uuid.in_(uuids))
        for row in query:
            item = row._asdict()
            owner = item['instance_uuid']
            if self.columns is not None:
                del item['instance_uuid']
            found[owner] = item
        for row in rows:
            row['extra'] = found.get(row['uuid'])

    def _by_hand(self, name: str, uuids: list[str]
                 ) -> dict[str, dict[str, Any]]:
        """nova's own query for *name*, as nova's objects read it.

        ``{instance uuid: {key: value}}``: what ``nova.utils.instance_meta``
        and ``instance_sys_meta`` make of nova's rows (``metadata_to_dict``:
        rows in query order, later keys win; deleted metadata rows
        skipped, deleted system metadata rows kept). Both take such a dict
        as it is, so a server costs one dict rather than one a row.
        """
        if name == 'metadata':
            query = db_api._instance_metadata_get_multi(self.context, uuids)
            model = models.InstanceMetadata
        else:
            query = db_api._instance_system_metadata_get_multi(
                self.context, uuids)
            model = models.InstanceSystemMetadata
        keep_deleted = name == 'system_metadata'
        found: dict[str, dict[str, Any]] = collections.defaultdict(dict)
        for owner, key, value, deleted in query.with_entities(
                model.instance_uuid, model.key, model.value, model.deleted):
            if keep_deleted or not deleted:
                found[owner][key] = value
        return found

    def finish(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """nova's copies of the rows, with the hand-made joins put back."""
        for name, found in self._manual.items():
            for row in rows:
                row[name] = found.get(row['uuid'], {})
        return rows


def reread(context: Any, uuids: Sequence[str],
           columns_to_join: Sequence[str]) -> dict[str, dict[str, Any]]:
    """uuid -> the whole row of each of *uuids* in *context*'s cell.

    Every instance column (deleted servers too) and the one-to-one joins
    of *columns_to_join* as nova's objects read them: what a
    :class:`Loader` given *columns* left out of a row.
    """
    loader = Loader(context, [c for c in columns_to_join
                              if c in ('info_cache', 'extra') or
                              c.startswith('extra.')])
    if not uuids:
        return {}
    with db_api.get_context_manager(context).reader.using(context):
        query = db_api.model_query(
            context, models.Instance, read_deleted='yes').filter(
            models.Instance.uuid.in_(list(uuids)))
        return {row['uuid']: row
                for row in loader.load(query, lambda ordered: ordered)}


class _Rows:
    """nova's paged query, answering ``all()`` with :class:`Loader` rows."""

    def __init__(self, loader: Loader, query: Any,
                 ordered: Callable[[Any], Any]) -> None:
        self._loader = loader
        self._query = query
        self._ordered = ordered

    def all(self) -> list[dict[str, Any]]:
        return self._loader.load(self._query, self._ordered)
