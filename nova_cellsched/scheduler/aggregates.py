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

"""One placement aggregate per cell: what to change, and what is wrong.

Pure Python, no nova import. The aggregate of a cell has the cell
mapping's uuid and should hold exactly the resource providers of the
cell's compute nodes (``compute_nodes.uuid``). :func:`diff` compares what
each cell's database says with the aggregate members placement has;
:func:`per_provider` groups the changes into one aggregate update per
provider, and :func:`updated` computes that update without touching any
aggregate that is not a cell's. :func:`plan` holds the changes of a cell
whose database would empty its aggregate, or take more than a share of
it out, whether the members vanish or move to another cell (a cell
mapping pointed at a wrong, empty or restored database, or two mappings
pointed at each other's databases).
"""

import dataclasses
import datetime
import enum
from collections.abc import Iterable, Mapping, Set


class Action(enum.Enum):
    """What a sync does to one provider in one cell aggregate."""

    ADD = 'add'
    REMOVE = 'remove'


@dataclasses.dataclass(frozen=True, order=True)
class Change:
    """Add *provider* to, or remove it from, the aggregate of *cell*.

    :ivar cell: cell mapping uuid, which is the aggregate uuid.
    :ivar provider: resource provider uuid (compute node uuid).
    """

    cell: str
    provider: str
    action: Action = dataclasses.field(compare=False)


def diff(nodes: Mapping[str, Set[str]],
         members: Mapping[str, Set[str]]) -> list[Change]:
    """Changes that make each cell aggregate hold exactly its cell's nodes.

    :param nodes: cell uuid -> compute node uuids, for the cells that were
        read; a cell that could not be read must be left out (it is then
        not changed at all, never emptied).
    :param members: cell uuid -> providers in the aggregate of that cell
        now; a cell missing here has no aggregate yet.
    :returns: the changes, sorted by cell and provider.
    """
    changes: list[Change] = []
    for cell, wanted in nodes.items():
        present = members.get(cell, frozenset())
        changes.extend(Change(cell, p, Action.ADD) for p in wanted - present)
        changes.extend(Change(cell, p, Action.REMOVE)
                       for p in present - wanted)
    return sorted(changes)


#: Share of a cell aggregate's members a sync removes without ``--force``
#: unless ``[cellsched] aggregate_sync_max_removal`` says otherwise.
MAX_REMOVAL = 0.5


@dataclasses.dataclass(frozen=True)
class Held:
    """A cell whose changes a sync does not make (the removal guard).

    :ivar cell: cell mapping uuid.
    :ivar removals: members the sync would take out of the cell's
        aggregate: gone from every cell database read, or moved (another
        cell's database lists them).
    :ivar members: members the cell's aggregate has now.
    :ivar nodes: compute nodes the cell database lists.
    :ivar max_removal: the share the guard allowed.
    :ivar moved: cell uuid -> how many of the removals that cell's
        database lists (the cells they would move to).
    """

    cell: str
    removals: int
    members: int
    nodes: int
    max_removal: float
    moved: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def reason(self, label: str,
               labels: Mapping[str, str] | None = None) -> str:
        """Why the cell is held and what to do, for logs and ``check``.

        :param label: the held cell's ``name (uuid)``.
        :param labels: cell uuid -> ``name (uuid)`` of the cells the
            members would move to.
        """
        labels = labels or {}
        what = ('every one' if self.removals == self.members else
                'more than %g%%' % (self.max_removal * 100))
        gone = self.removals - sum(self.moved.values())
        where = ['%d of them to cell %s, whose database lists them'
                 % (count, labels.get(cell, cell))
                 for cell, count in sorted(self.moved.items())]
        if gone:
            where.append('%d of them listed by no cell database' % gone)
        return ('the sync would remove %d of the %d members of the placement '
                'aggregate of cell %s (%s: %s; its own database lists %d '
                'compute node(s)), so nothing is changed in that aggregate: '
                'expected at most %g%% of a cell\'s members to leave it in '
                'one sync, and never every one ([cellsched] '
                'aggregate_sync_max_removal = %g). A cell mapping pointed at '
                'a wrong, empty or restored database, or two cell mappings '
                'pointed at each other\'s databases, looks like this: check '
                'the database_connection of the cell mappings ("nova-manage '
                'cell_v2 list_cells --verbose"); if these nodes really left '
                'the cell, run "nova-cellsched sync-aggregates --force --cell '
                '%s"'
                % (self.removals, self.members, label, what,
                   ', '.join(where), self.nodes, self.max_removal * 100,
                   self.max_removal, self.cell))


def held(nodes: Mapping[str, Set[str]], members: Mapping[str, Set[str]],
         max_removal: float = MAX_REMOVAL,
         cells: Set[str] | None = None) -> dict[str, Held]:
    """The cells whose sync would take too much out of their aggregate.

    Counted are the members the sync would take out of a cell's
    aggregate: those no cell read lists as a compute node (gone) and
    those the database of another cell lists (moved there) alike. Two
    cell mappings pointed at each other's databases move every member
    of both aggregates to the other cell; a mapping pointed at a wrong or
    empty database makes them vanish. A cell is held when they are every
    member of its (non-empty) aggregate, or more than *max_removal* (a
    share, 0 to 1) of them; every member is held whatever *max_removal*.

    :param nodes: cell uuid -> compute node uuids, for the cells read.
    :param members: cell uuid -> providers in that cell's aggregate now.
    :param cells: the cells to decide for (default: every cell in
        *nodes*); the others' nodes still tell where a member moves.
    :returns: cell uuid -> why it is held, for the held cells only.
    """
    found: dict[str, Held] = {}
    home: dict[str, str] = {}
    for cell, listed in nodes.items():
        for node in listed:
            home.setdefault(node, cell)
    for cell, wanted in nodes.items():
        if cells is not None and cell not in cells:
            continue
        present = members.get(cell, frozenset())
        leaving = present - wanted
        removals = len(leaving)
        if removals and (removals == len(present) or
                         removals > max_removal * len(present)):
            moved: dict[str, int] = {}
            for provider in leaving:
                other = home.get(provider)
                if other is not None:
                    moved[other] = moved.get(other, 0) + 1
            found[cell] = Held(cell, removals, len(present), len(wanted),
                               max_removal, moved)
    return found


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a sync changes, and the cells it holds.

    :ivar changes: the changes to make, sorted (none of a held cell).
    :ivar held: cell uuid -> why the sync does not change its aggregate.
    """

    changes: list[Change]
    held: Mapping[str, Held]


def plan(nodes: Mapping[str, Set[str]], members: Mapping[str, Set[str]],
         max_removal: float = MAX_REMOVAL, force: bool = False,
         cells: Set[str] | None = None) -> Plan:
    """:func:`diff`, without the changes of the cells :func:`held` holds.

    A held cell gets no change at all, additions included: a cell mapping
    pointed at another cell's database would otherwise put that cell's
    nodes in this cell's aggregate. Other cells proceed.

    :param force: hold nothing (the command's ``--force``; the periodic
        sync never forces).
    :param cells: only these cells' changes (default: every cell read).
    """
    stopped = {} if force else held(nodes, members, max_removal, cells)
    changes = [c for c in diff(nodes, members) if c.cell not in stopped and
               (cells is None or c.cell in cells)]
    return Plan(changes, stopped)


@dataclasses.dataclass(frozen=True)
class ProviderUpdate:
    """The cell aggregates one provider joins and leaves."""

    provider: str
    add: frozenset[str]
    remove: frozenset[str]


def per_provider(changes: Iterable[Change]) -> list[ProviderUpdate]:
    """Group *changes* into one update per provider, sorted by provider."""
    adds: dict[str, set[str]] = {}
    removes: dict[str, set[str]] = {}
    for change in changes:
        target = adds if change.action is Action.ADD else removes
        target.setdefault(change.provider, set()).add(change.cell)
        adds.setdefault(change.provider, set())
        removes.setdefault(change.provider, set())
    return [ProviderUpdate(p, frozenset(adds[p]), frozenset(removes[p]))
            for p in sorted(adds)]


def updated(present: Set[str], update: ProviderUpdate) -> frozenset[str]:
    """The provider's aggregates after *update*; others are kept as they are.
    """
    return (frozenset(present) - update.remove) | update.add


def duration(seconds: float) -> str:
    """*seconds* for people: ``45 s``, ``12 min``, ``3 h 05 min``, ``2 d 4 h``.
    """
    seconds = max(0, int(seconds))
    if seconds < 120:
        return '%d s' % seconds
    minutes = seconds // 60
    if minutes < 120:
        return '%d min' % minutes
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return '%d h %02d min' % (hours, minutes)
    days, hours = divmod(hours, 24)
    return '%d d %d h' % (days, hours)


def missing_for(created: datetime.datetime | None,
                now: datetime.datetime, what: str = 'the node') -> str:
    """``check``'s words on how long a node has been missing, from its
    creation time in the cell database; empty when it is unknown.
    """
    if created is None:
        return ''
    if created.tzinfo is None:
        created = created.replace(tzinfo=datetime.timezone.utc)
    return (' (missing for at most %s: the cell database says %s was '
            'created at %s)' % (
                duration((now - created).total_seconds()), what,
                created.strftime('%Y-%m-%d %H:%M:%S UTC')))


def problems(nodes: Mapping[str, Set[str]],
             members: Mapping[str, Set[str]],
             labels: Mapping[str, str],
             created_at: Mapping[str, datetime.datetime] | None = None,
             now: datetime.datetime | None = None,
             max_removal: float = MAX_REMOVAL) -> list[str]:
    """What ``nova-cellsched check`` reports about the cell aggregates.

    :param nodes: cell uuid -> compute node uuids, for the cells read.
    :param members: cell uuid -> providers in that cell's aggregate; only
        the aggregates of the cells in *nodes* are checked.
    :param labels: cell uuid -> ``name (uuid)`` for the messages.
    :param created_at: node uuid -> its creation time (UTC) in the cell
        database; a node missing from its aggregate can have been missing
        that long at most, which the line then says.
    :param now: the time to measure from (default: now, UTC).
    :param max_removal: ``[cellsched] aggregate_sync_max_removal``.
    :returns: one line per problem: a cell the sync holds (see
        :func:`held`: one line for the cell, none for its providers), a
        cell with nodes but no aggregate, a node missing from its cell's
        aggregate, a provider in the aggregate of a cell it is not a
        compute node of.
    """
    stopped = held(nodes, members, max_removal)
    found_held = [stopped[cell].reason(labels.get(cell, cell), labels)
                  for cell in sorted(stopped)]
    return found_held + _problems(nodes, members, labels, created_at, now,
                                  skip=frozenset(stopped))


def _problems(nodes: Mapping[str, Set[str]],
              members: Mapping[str, Set[str]],
              labels: Mapping[str, str],
              created_at: Mapping[str, datetime.datetime] | None,
              now: datetime.datetime | None,
              skip: Set[str] = frozenset()) -> list[str]:
    created_at = created_at or {}
    now = now or datetime.datetime.now(datetime.timezone.utc)
    cell_of = {node: cell for cell, found in nodes.items() for node in found}
    found: list[str] = []
    fix = '; run "nova-cellsched sync-aggregates"'
    for cell in sorted(set(nodes) - skip):
        label = labels.get(cell, cell)
        present = members.get(cell, frozenset())
        if nodes[cell] and not present:
            oldest = min((created_at[n] for n in nodes[cell]
                          if n in created_at), default=None,
                         key=_aware)
            found.append('cell %s has %d compute node(s) but no placement '
                         'aggregate %s, so the placement pre-filter finds '
                         'no host there%s%s' % (
                             label, len(nodes[cell]), cell,
                             missing_for(oldest, now, 'its oldest node'),
                             fix))
            continue
        for node in sorted(nodes[cell] - present):
            found.append('compute node %s of cell %s is not in the cell\'s '
                         'placement aggregate, so the placement pre-filter '
                         'never offers it%s%s' % (
                             node, label,
                             missing_for(created_at.get(node), now), fix))
    for cell in sorted((set(members) & set(nodes)) - skip):
        # The aggregate of a cell that was not read is not checked.
        for provider in sorted(members[cell] - nodes[cell]):
            home = cell_of.get(provider)
            if home is not None:
                found.append('resource provider %s is in the placement '
                             'aggregate of cell %s but is a compute node of '
                             'cell %s%s' % (provider, labels.get(cell, cell),
                                            labels.get(home, home), fix))
            else:
                found.append('resource provider %s is in the placement '
                             'aggregate of cell %s but is no compute node '
                             'of it (deleted or moved)%s'
                             % (provider, labels.get(cell, cell), fix))
    return found


def _aware(when: datetime.datetime) -> datetime.datetime:
    return when if when.tzinfo is not None else when.replace(
        tzinfo=datetime.timezone.utc)


def orphans(compute_providers: Set[str],
            nodes: Mapping[str, Set[str]]) -> frozenset[str]:
    """Compute node providers that are a compute node of no cell read.

    :param compute_providers: the providers placement lists with nova's
        ``COMPUTE_NODE`` trait.
    :param nodes: cell uuid -> compute node uuids, for every cell; call
        it only when every cell could be read (a node of an unread cell
        would look orphaned).
    """
    live = frozenset().union(*nodes.values()) if nodes else frozenset()
    return frozenset(compute_providers) - live


def stale(orphan_aggregates: Mapping[str, Set[str]],
          members: Mapping[str, Set[str]],
          known: Set[str]) -> dict[str, frozenset[str]]:
    """The aggregates a deleted cell mapping left behind.

    An aggregate is one when it is no aggregate nova knows (*known*:
    every cell mapping's uuid and nova's host aggregates) and every one
    of its members is an orphan compute node (a key of
    *orphan_aggregates*): a cell aggregate whose cell mapping was
    deleted. An aggregate with any other member (a compute node of a
    cell, a sharing or network segment provider) is left alone.

    :param orphan_aggregates: orphan provider -> its aggregates.
    :param members: aggregate -> its members, for (at least) the
        aggregates of the orphans that are not in *known*.
    :returns: stale aggregate -> its members.
    """
    found: dict[str, frozenset[str]] = {}
    candidates = frozenset().union(*orphan_aggregates.values()) - known \
        if orphan_aggregates else frozenset()
    for aggregate in sorted(candidates):
        present = frozenset(members.get(aggregate, frozenset()))
        if present and present <= set(orphan_aggregates):
            found[aggregate] = present
    return found


def stale_problem(aggregate: str, providers: Set[str]) -> str:
    """``check``'s line about the aggregate of a deleted cell mapping."""
    shown = ', '.join(sorted(providers)[:5]) + (
        ', ...' if len(providers) > 5 else '')
    return ('placement aggregate %s holds %d compute node provider(s) of no '
            'cell nova knows (%s) and is no cell mapping\'s or host '
            'aggregate\'s: the aggregate of a deleted cell mapping; run '
            '"nova-cellsched sync-aggregates --remove-stale" to empty it'
            % (aggregate, len(providers), shown))
