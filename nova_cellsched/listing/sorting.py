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

"""Sort order of a cross-cell listing, and the merge of sorted cell runs.

Pure Python. The order is nova's (``InstanceSortContext``): by default
``created_at desc, id desc``, and ``uuid asc`` appended as the final tie
breaker unless uuid is already a key, so that an order striped across
cell databases is total and pagination is repeatable.

NULL sorts as nova's cell queries sort it (oslo.db's ``paginate_query``
leaves NULL to the database): MySQL/MariaDB and SQLite put NULL before
every value (lowest: first in ascending, last in descending order),
PostgreSQL after every value (highest). A :class:`SortSpec` says which
(:attr:`SortSpec.nulls_high`, see :func:`nulls_high_for`); the query
adapter orders every cell so, whatever its database, and the merge
agrees. nova's own merge compares the raw values and raises TypeError
where a NULL meets a value of another cell.

The merge is :func:`heapq.merge` with a key function: no comparison
wrapper per record and no cmp emulation; only descending keys are wrapped
in :class:`Descending`, a two-method reversing box.
"""

import dataclasses
import datetime
import heapq
import itertools
from collections.abc import Callable, Collection, Iterable, Iterator
from collections.abc import Sequence
from typing import Any, TypeVar

from nova_cellsched.exception import InvalidListRequest

ASC = 'asc'
DESC = 'desc'
DIRECTIONS = (ASC, DESC)
DEFAULT_KEYS = ('created_at', 'id')
DEFAULT_DIRS = (DESC, DESC)
TIE_BREAKER = 'uuid'
#: The keys nova's DB API appends (``process_sort_params``).
NOVA_DB_DEFAULT_KEYS = ('created_at', 'id')
#: The sort keys of nova's API (``GET /servers?sort_key=``, microversion
#: 2.75+), spelled out so the command line need not import nova's API
#: (over a second); a unit test keeps it equal to nova's list.
API_SORT_KEYS = frozenset((
    'access_ip_v4', 'access_ip_v6', 'auto_disk_config', 'availability_zone',
    'config_drive', 'created_at', 'display_description', 'display_name',
    'host', 'hostname', 'image_ref', 'instance_type_id', 'kernel_id',
    'key_name', 'launch_index', 'launched_at', 'locked', 'locked_by', 'node',
    'power_state', 'progress', 'project_id', 'ramdisk_id',
    'root_device_name', 'task_state', 'terminated_at', 'updated_at', 'user_id',
    'uuid', 'vm_state'))

R = TypeVar('R')
#: A row: a mapping from column name to value, or a positional tuple
#: (see :meth:`SortSpec.key_function`).
Row = Any


class Descending:
    """Box that reverses the order of the value it holds."""

    __slots__ = ('value',)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: 'Descending') -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return 'Descending(%r)' % (self.value,)


_INT_TYPES = (int, float)
_DAY_US = 86400 * 1000000


def _negated(value: Any) -> Any:
    """A value whose ascending order is *value*'s descending order.

    Equal values give equal results, and values of one column (one type)
    give results of one type: a naive datetime becomes its negated count
    of microseconds since 0001-01-01, one integer.
    """
    kind = type(value)
    if kind is datetime.datetime and value.tzinfo is None:
        return -(value.toordinal() * _DAY_US +
                 (value.hour * 3600 + value.minute * 60 + value.second) *
                 1000000 + value.microsecond)
    if kind in _INT_TYPES or kind is bool:
        return -value
    return Descending(value)


#: nova's message for a sort direction other than asc or desc
#: (``nova.db.utils.process_sort_params``).
UNKNOWN_DIRECTION = "Unknown sort direction, must be 'desc' or 'asc'"
#: nova's message for more sort directions than keys.
TOO_MANY_DIRECTIONS = 'Sort direction size exceeds sort key size'


def nova_order(sort_keys: Sequence[str] | None,
               sort_dirs: Sequence[str] | None
               ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The order nova's cell queries sort in, for these arguments.

    The one normalisation both listers use (the command line's through
    :meth:`SortSpec.build`, nova-api's through
    ``nova_cellsched.api.hooks.instance_list.sort_order``): nova's
    ``InstanceSortContext`` (no keys: ``created_at desc, id desc``;
    ``uuid asc`` appended unless uuid is a key), then its DB API's
    ``process_sort_params(default_dir='desc')`` (missing directions are
    the first direction, or ``desc`` if none; ``created_at`` and ``id``
    appended in that direction), as nova's instance query receives them,
    up to ``uuid`` (unique: what follows never decides an order). nova's
    own merge compares only the keys given a direction before uuid was
    appended; where that differs (fewer directions than keys), it is
    inconsistent with its queries, and this order is the queries'.
    ``tests/unit/listing/test_sorting.py`` compares it with nova's
    functions, whose sources :mod:`nova_cellsched.compat` pins.

    :raises InvalidListRequest: a direction other than ``asc``/``desc``
        (case-sensitive, as nova's) or more directions than keys, with
        nova's message as *expected*.
    """
    keys = list(sort_keys or ())
    dirs = list(sort_dirs or ())
    if not keys:
        keys, dirs = list(DEFAULT_KEYS), list(DEFAULT_DIRS)
    if TIE_BREAKER not in keys:
        keys.append(TIE_BREAKER)
        dirs.append(ASC)
    default_dir = dirs[0] if dirs else DESC
    for direction in dirs:
        if direction not in DIRECTIONS:
            raise InvalidListRequest('sort direction', direction,
                                     UNKNOWN_DIRECTION)
    if len(dirs) > len(keys):
        raise InvalidListRequest('sort directions', ','.join(dirs),
                                 TOO_MANY_DIRECTIONS)
    dirs += [default_dir] * (len(keys) - len(dirs))
    for key in NOVA_DB_DEFAULT_KEYS:
        if key not in keys:
            keys.append(key)
            dirs.append(default_dir)
    end = keys.index(TIE_BREAKER) + 1
    return tuple(keys[:end]), tuple(dirs[:end])


#: Database backends (SQLAlchemy backend names) that sort NULL after
#: every value when asked for no NULL order, as nova's queries ask.
NULLS_HIGH_BACKENDS = frozenset({'postgresql'})


def nulls_high_for(backends: Iterable[str]) -> bool:
    """Whether NULL sorts highest in a listing of cells on *backends*.

    nova's query of a cell leaves the NULL order to the database
    (PostgreSQL: highest; MySQL/MariaDB, SQLite: lowest). When every
    cell is on PostgreSQL, NULL is highest, as nova's answers there;
    otherwise (and for no cells) lowest, as nova answers on MySQL and
    SQLite; cells of mixed backends have no common order in nova, and
    the listing orders all of them so.

    :param backends: SQLAlchemy backend names (``postgresql``, ``mysql``,
        ``sqlite``), one per cell.
    """
    found = set(backends)
    return bool(found) and found <= NULLS_HIGH_BACKENDS


@dataclasses.dataclass(frozen=True)
class SortSpec:
    """Sort keys and their directions, normalised as nova does.

    :attr:`nulls_high`: NULL sorts after every value of its column (in
    ascending order; before them in descending order), as PostgreSQL
    sorts it; else before every value, as MySQL and SQLite do.
    """

    keys: tuple[str, ...]
    dirs: tuple[str, ...]
    nulls_high: bool = False

    def with_nulls_high(self, nulls_high: bool) -> 'SortSpec':
        """This order with NULL highest (True) or lowest (False)."""
        return dataclasses.replace(self, nulls_high=nulls_high)

    def nulls_first(self, direction: str) -> bool:
        """Whether NULL comes before the values in a *direction* key."""
        return (direction == ASC) != self.nulls_high

    @classmethod
    def build(cls, sort_keys: Sequence[str] | None = None,
              sort_dirs: Sequence[str] | None = None,
              allowed: Collection[str] | None = None) -> 'SortSpec':
        """Validate a caller's sort arguments, normalise them as nova does.

        Validation (stricter than nova's, for a command line): known
        keys, each once; directions ``asc``/``desc`` in any case, at
        most one per key, none without keys. Normalisation:
        :func:`nova_order`, the one nova-api's lister uses too (no keys:
        ``created_at desc, id desc``; keys without any direction
        ascending; directions missing after some are given as nova's
        queries fill them; ``uuid`` ends the order).

        :param allowed: the sort keys accepted from a caller (nova's API
            whitelist); None accepts any key.
        :raises InvalidListRequest: unknown key or direction, more
            directions than keys, or a repeated key.
        """
        keys = list(sort_keys or ())
        for direction in sort_dirs or ():
            if not isinstance(direction, str):
                raise InvalidListRequest('sort direction', direction,
                                         "'asc' or 'desc'")
        dirs = [d.lower() for d in (sort_dirs or ())]
        for key in keys:
            if allowed is not None and key not in allowed:
                raise InvalidListRequest(
                    'sort key', key, 'one of %s' % ', '.join(
                        sorted(allowed)))
        for direction in dirs:
            if direction not in DIRECTIONS:
                raise InvalidListRequest('sort direction', direction,
                                         "'asc' or 'desc'")
        if len(dirs) > len(keys):
            raise InvalidListRequest(
                'sort directions', ','.join(dirs),
                'at most one direction per sort key (%d keys)' % len(keys))
        if len(set(keys)) != len(keys):
            raise InvalidListRequest('sort keys', ','.join(keys),
                                     'each key at most once')
        return cls(*nova_order(keys, dirs))

    def key_function(self, columns: Sequence[str] | None = None
                     ) -> Callable[[Row], tuple[Any, ...]]:
        """Return ``key(row)`` giving the row's place in this order.

        A NULL value sorts before every other value of its column in
        ascending order and after them in descending order (the other
        way round with :attr:`nulls_high`). The key is one flat tuple,
        two items per sort key: a rank that puts NULL first or last,
        then the value, where
        descending numbers and naive datetimes are negated into numbers
        the heap compares in C and other descending values are boxed in
        :class:`Descending`. Two NULLs tie on ``(rank, 0)``; a NULL and a
        value differ in rank, so a value is never compared with ``0``.

        :param columns: the column names of positional rows (tuples, as
            a database cursor returns them); None for rows that are
            mappings from column name to value.
        """
        getters: list[tuple[Any, bool, int, int]] = []
        for name, direction in zip(self.keys, self.dirs):
            where = name if columns is None else list(columns).index(name)
            null_rank, value_rank = ((0, 1) if self.nulls_first(direction)
                                     else (1, 0))
            getters.append((where, direction == DESC, null_rank,
                            value_rank))

        def key(row: Row) -> tuple[Any, ...]:
            parts: list[Any] = []
            append = parts.append
            for where, descending, null_rank, value_rank in getters:
                value = row[where]
                if value is None:
                    append(null_rank)
                    append(0)
                else:
                    append(value_rank)
                    append(_negated(value) if descending else value)
            return tuple(parts)

        return key

    def values_of(self, row: Row, columns: Sequence[str] | None = None
                  ) -> tuple[Any, ...]:
        """The row's sort key values, in key order.

        :param columns: as for :meth:`key_function`.
        """
        if columns is None:
            return tuple(row[k] for k in self.keys)
        index = list(columns).index
        return tuple(row[index(k)] for k in self.keys)


def merge(runs: Iterable[Iterable[R]], key: Callable[[R], Any],
          limit: int | None = None) -> Iterator[R]:
    """Merge runs already sorted by *key* into one sorted stream.

    The runs are consumed lazily; at most *limit* records are produced.
    Records with equal keys keep the order of their runs (stable).
    """
    merged = heapq.merge(*runs, key=key)
    return merged if limit is None else itertools.islice(merged, limit)


def parse_sort_argument(text: str) -> tuple[str, str | None]:
    """Parse ``key`` or ``key:dir`` from the command line."""
    key, sep, direction = text.partition(':')
    key = key.strip()
    if not key:
        raise InvalidListRequest('sort', text, "'key' or 'key:asc|desc'")
    if not sep:
        return key, None
    direction = direction.strip().lower()
    if direction not in DIRECTIONS:
        raise InvalidListRequest('sort direction', direction,
                                 "'asc' or 'desc' after the ':' in %r"
                                 % text)
    return key, direction
