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

"""The pure cell aggregate diff: what a sync changes and what check says.
"""

import datetime

import hypothesis
from hypothesis import strategies as st

from nova_cellsched.scheduler import aggregates
from nova_cellsched.scheduler.aggregates import Action
from nova_cellsched.scheduler.aggregates import Change
from tests import base

PROPERTY = hypothesis.settings(deadline=None, derandomize=True,
                               max_examples=300)

CELLS = ('c1', 'c2', 'c3')
PROVIDERS = tuple('p%d' % i for i in range(6))
FOREIGN = ('f1', 'f2')   # aggregates that are not a cell's


@st.composite
def worlds(draw):
    """Nodes per readable cell, and every provider's aggregates now."""
    home = draw(st.dictionaries(st.sampled_from(PROVIDERS),
                                st.sampled_from(CELLS)))
    unreadable = draw(st.sets(st.sampled_from(CELLS), max_size=1))
    nodes = {cell: frozenset(p for p, c in home.items() if c == cell)
             for cell in CELLS if cell not in unreadable}
    present = {p: frozenset(draw(st.sets(st.sampled_from(CELLS + FOREIGN))))
               for p in PROVIDERS}
    return nodes, present


def members_of(present):
    members = {}
    for provider, aggs in present.items():
        for agg in aggs:
            if agg in CELLS:
                members.setdefault(agg, set()).add(provider)
    return {cell: frozenset(m) for cell, m in members.items()}


def apply(nodes, present):
    changes = aggregates.diff(nodes, members_of(present))
    after = dict(present)
    for update in aggregates.per_provider(changes):
        after[update.provider] = aggregates.updated(after[update.provider],
                                                    update)
    return changes, after


class DiffTest(base.TestCase):

    def test_adds_missing_removes_strays(self):
        changes = aggregates.diff({'c1': {'a', 'b'}, 'c2': set()},
                                  {'c1': {'b', 'x'}, 'c2': {'a'}})
        self.assertEqual([Change('c1', 'a', Action.ADD),
                          Change('c1', 'x', Action.REMOVE),
                          Change('c2', 'a', Action.REMOVE)], changes)
        self.assertEqual(['add', 'remove', 'remove'],
                         [c.action.value for c in changes])

    def test_unread_cell_is_never_changed(self):
        """A cell missing from nodes keeps its members, strays included."""
        self.assertEqual([], aggregates.diff({}, {'c1': {'x', 'y'}}))

    def test_per_provider_joins_and_leaves_in_one_update(self):
        updates = aggregates.per_provider([
            Change('c1', 'a', Action.ADD), Change('c2', 'a', Action.REMOVE),
            Change('c1', 'b', Action.ADD)])
        self.assertEqual(
            [aggregates.ProviderUpdate('a', frozenset(['c1']),
                                       frozenset(['c2'])),
             aggregates.ProviderUpdate('b', frozenset(['c1']), frozenset())],
            updates)
        self.assertEqual(frozenset(['c1', 'f1']), aggregates.updated(
            {'c2', 'f1'}, updates[0]))

    @PROPERTY
    @hypothesis.given(worlds())
    def test_sync_makes_readable_cells_exact_and_keeps_the_rest(self, world):
        """After the diff is applied: every readable cell's aggregate is
        exactly its nodes, unreadable cells' members and foreign
        aggregates are unchanged, and a second diff is empty.
        """
        nodes, present = world
        changes, after = apply(nodes, present)
        members = members_of(after)
        for cell in CELLS:
            if cell in nodes:
                self.assertEqual(nodes[cell],
                                 members.get(cell, frozenset()))
            else:
                self.assertEqual(members_of(present).get(cell),
                                 members.get(cell))
        for provider in PROVIDERS:
            self.assertEqual(present[provider] - set(CELLS),
                             after[provider] - set(CELLS))
        self.assertEqual([], aggregates.diff(nodes, members))
        self.assertEqual(len(changes), len(set(changes)))

    @PROPERTY
    @hypothesis.given(worlds())
    def test_check_is_clean_exactly_when_nothing_to_do(self, world):
        nodes, present = world
        members = members_of(present)
        labels = {c: c for c in CELLS}
        found = aggregates.problems(nodes, members, labels)
        changes = aggregates.diff(nodes, members)
        self.assertEqual(not changes, not found, (changes, found))
        _changes, after = apply(nodes, present)
        self.assertEqual([], aggregates.problems(nodes, members_of(after),
                                                 labels))


class MissingForTest(base.TestCase):
    """check's "missing for": bounded by the node's creation time."""

    NOW = datetime.datetime(2025, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)

    def test_durations(self):
        self.assertEqual(
            ['0 s', '119 s', '2 min', '119 min', '2 h 00 min', '47 h 59 min',
             '2 d 0 h', '10 d 3 h'],
            [aggregates.duration(s) for s in (
                -3, 119, 120, 7199, 7200, 48 * 3600 - 1, 48 * 3600,
                243 * 3600)])

    def test_missing_node_line_says_at_most_since_created(self):
        created = datetime.datetime(2025, 3, 1, 9, 30)  # naive: UTC
        found = aggregates.problems(
            {'c1': {'p1', 'p2'}}, {'c1': {'p2'}}, {'c1': 'cell1 (c1)'},
            created_at={'p1': created}, now=self.NOW)
        self.assertEqual(
            ["compute node p1 of cell cell1 (c1) is not in the cell's "
             'placement aggregate, so the placement pre-filter never offers '
             'it (missing for at most 2 h 30 min: the cell database says the '
             'node was created at 2025-03-01 09:30:00 UTC); run '
             '"nova-cellsched sync-aggregates"'], found)

    def test_unknown_creation_says_nothing(self):
        found = aggregates.problems({'c1': {'p1', 'p2'}}, {'c1': {'p2'}},
                                    {}, now=self.NOW)
        self.assertNotIn('missing for', found[0])

    def test_cell_without_aggregate_uses_its_oldest_node(self):
        utc = datetime.timezone.utc
        found = aggregates.problems(
            {'c1': {'p1', 'p2'}}, {}, {},
            created_at={'p1': datetime.datetime(2025, 3, 1, 11, 0,
                                                tzinfo=utc),
                        'p2': datetime.datetime(2025, 2, 27, 12, 0)},
            now=self.NOW)
        self.assertIn('(missing for at most 2 d 0 h: the cell database '
                      'says its oldest node was created at 2025-02-27 '
                      '12:00:00 UTC)', found[0])


class RemovalGuardTest(base.TestCase):
    """A sync never empties a cell aggregate, nor removes more than the
    allowed share of it, unless forced; other cells proceed.
    """

    MEMBERS = frozenset('p%03d' % i for i in range(200))

    def test_empty_cell_database_holds_the_cell_only(self):
        """The reproduction: 200 members, the cell database lists none
        (a mapping pointed at an empty database). Nothing of that cell
        changes; the other cell is synced.
        """
        plan = aggregates.plan({'c1': frozenset(), 'c2': {'n1'}},
                               {'c1': self.MEMBERS})
        self.assertEqual([Change('c2', 'n1', Action.ADD)], plan.changes)
        self.assertEqual({'c1'}, set(plan.held))
        held = plan.held['c1']
        self.assertEqual((200, 200, 0), (held.removals, held.members,
                                         held.nodes))
        reason = held.reason('cell1 (c1)')
        self.assertIn('the sync would remove 200 of the 200 members of the '
                      'placement aggregate of cell cell1 (c1) (every one: '
                      '200 of them listed by no cell database; its own '
                      'database lists 0 compute node(s))', reason)
        self.assertIn('expected at most 50% of a cell\'s members to leave '
                      'it in one sync', reason)
        self.assertIn('"nova-cellsched sync-aggregates --force --cell c1"',
                      reason)

    def test_another_cells_database_adds_nothing_either(self):
        """A mapping pointed at another cell's database: its nodes are
        not put in this cell's aggregate.
        """
        plan = aggregates.plan({'c1': {'x1', 'x2'}}, {'c1': {'p1', 'p2'}})
        self.assertEqual([], plan.changes)
        self.assertEqual({'c1'}, set(plan.held))

    def test_share(self):
        members = {'c1': frozenset('abcd')}
        half = aggregates.plan({'c1': frozenset('ab')}, members)
        self.assertEqual({}, half.held)
        self.assertEqual(2, len(half.changes))
        more = aggregates.plan({'c1': frozenset('a')}, members)
        self.assertEqual('more than 50%', more.held['c1'].reason('c1')
                         .split('(', 1)[1].split(':')[0])
        self.assertEqual([], more.changes)
        allowed = aggregates.plan({'c1': frozenset('a')}, members,
                                  max_removal=0.75)
        self.assertEqual({}, allowed.held)
        none = aggregates.plan({'c1': frozenset('abc')}, members,
                               max_removal=0.0)
        self.assertEqual({'c1'}, set(none.held))

    def test_members_moved_to_another_cell_count_like_removals(self):
        """A member another cell's database lists moves there: within the
        share the sync moves it; past it, or every member, the cell is
        held like for members gone, the message naming where they go.
        """
        stray = aggregates.plan({'c1': {'a', 'b'}, 'c2': {'s'}},
                                {'c1': {'a', 'b', 's'}})
        self.assertEqual({}, stray.held)
        self.assertIn(Change('c1', 's', Action.REMOVE), stray.changes)
        moved = aggregates.plan({'c1': frozenset(), 'c2': {'p', 'q'}},
                                {'c1': {'p', 'q'}, 'c2': {'p', 'q'}})
        self.assertEqual({'c1'}, set(moved.held))
        self.assertEqual({'c2': 2}, dict(moved.held['c1'].moved))
        self.assertEqual([], moved.changes)
        mixed = aggregates.plan({'c1': {'a'}, 'c2': {'p'}},
                                {'c1': {'a', 'p', 'x', 'y'}})
        self.assertIn('(more than 50%: 1 of them to cell cell2 (c2), whose '
                      'database lists them, 2 of them listed by no cell '
                      'database; its own database lists 1 compute node(s))',
                      mixed.held['c1'].reason('cell1 (c1)',
                                              {'c2': 'cell2 (c2)'}))
        # Only c1's changes, c2 read: the stray is still known to be c2's.
        one = aggregates.plan({'c1': {'a', 'b'}, 'c2': {'s'}},
                              {'c1': {'a', 's', 'b'}, 'c2': set()},
                              cells={'c1'})
        self.assertEqual([Change('c1', 's', Action.REMOVE)], one.changes)

    def test_swapped_cell_mappings_hold_both_cells(self):
        """The review's case: cells A and B pointed at each other's
        databases, 200 nodes each. Nothing is held by the old rule (every
        member "moved"); both cells are held now, each message saying
        200 of 200 go to the other cell, and no change is planned.
        """
        a_nodes = frozenset('a%03d' % i for i in range(200))
        b_nodes = frozenset('b%03d' % i for i in range(200))
        nodes = {'A': b_nodes, 'B': a_nodes}     # swapped databases
        members = {'A': a_nodes, 'B': b_nodes}   # the aggregates, right
        self.assertEqual(800, len(aggregates.diff(nodes, members)))

        plan = aggregates.plan(nodes, members)

        self.assertEqual([], plan.changes)
        self.assertEqual({'A', 'B'}, set(plan.held))
        labels = {'A': 'cellA (A)', 'B': 'cellB (B)'}
        self.assertIn('the sync would remove 200 of the 200 members of the '
                      'placement aggregate of cell cellA (A) (every one: 200 '
                      'of them to cell cellB (B), whose database lists them; '
                      'its own database lists 200 compute node(s))',
                      plan.held['A'].reason(labels['A'], labels))
        found = aggregates.problems(nodes, members, labels)
        self.assertEqual(2, len(found), found)
        self.assertIn('check the database_connection of the cell mappings',
                      found[0])
        self.assertIn('"nova-cellsched sync-aggregates --force --cell B"',
                      found[1])
        # A move of more than the share between two cells, one run.
        part = {'A': a_nodes - set(sorted(a_nodes)[:101]),
                'B': b_nodes | set(sorted(a_nodes)[:101])}
        self.assertEqual({'A'}, set(aggregates.plan(part, members).held))
        self.assertEqual({'B': 101},
                         dict(aggregates.plan(part, members).held['A'].moved))

    def test_removing_every_member_is_held_whatever_the_share(self):
        plan = aggregates.plan({'c1': frozenset()}, {'c1': {'p'}},
                               max_removal=1.0)
        self.assertEqual({'c1'}, set(plan.held))

    def test_force_holds_nothing(self):
        plan = aggregates.plan({'c1': frozenset()}, {'c1': self.MEMBERS},
                               force=True)
        self.assertEqual({}, plan.held)
        self.assertEqual(200, len(plan.changes))

    def test_check_reports_a_held_cell_once(self):
        found = aggregates.problems({'c1': frozenset(), 'c2': {'n1'}},
                                    {'c1': self.MEMBERS, 'c2': {'n1'}},
                                    {'c1': 'cell1 (c1)'})
        self.assertEqual(1, len(found), found)
        self.assertTrue(found[0].startswith(
            'the sync would remove 200 of the 200 members'), found)

    @PROPERTY
    @hypothesis.given(worlds(), st.floats(0.0, 1.0))
    def test_plan_never_removes_past_the_guard(self, world, share):
        nodes, present = world
        members = members_of(present)
        plan = aggregates.plan(nodes, members, max_removal=share)
        for cell in nodes:
            had = members.get(cell, frozenset())
            gone = {c.provider for c in plan.changes
                    if c.cell == cell and c.action is Action.REMOVE}
            if cell in plan.held:
                self.assertFalse([c for c in plan.changes
                                  if c.cell == cell])
                continue
            # Gone or moved alike: never every member, nor past the share.
            self.assertTrue(not had or len(gone) < len(had))
            self.assertLessEqual(len(gone), share * len(had))
            self.assertEqual(
                sorted(c for c in aggregates.diff(nodes, members)
                       if c.cell == cell),
                sorted(c for c in plan.changes if c.cell == cell))
        forced = aggregates.plan(nodes, members, share, force=True)
        self.assertEqual(aggregates.diff(nodes, members), forced.changes)


class StaleTest(base.TestCase):
    """The aggregate a deleted cell mapping left behind."""

    def test_orphans_are_compute_providers_of_no_cell(self):
        self.assertEqual(frozenset({'o1', 'o2'}), aggregates.orphans(
            {'n1', 'n2', 'o1', 'o2'}, {'c1': {'n1'}, 'c2': {'n2', 'x'}}))
        self.assertEqual(frozenset({'o1'}), aggregates.orphans({'o1'}, {}))

    def test_only_an_unknown_aggregate_of_orphans_only(self):
        orphan_aggregates = {'o1': {'gone', 'mixed', 'c1'}, 'o2': {'gone'},
                             'o3': {'host-agg'}}
        members = {'gone': {'o1', 'o2'}, 'mixed': {'o1', 'n1'},
                   'host-agg': {'o3'}}
        self.assertEqual({'gone': frozenset({'o1', 'o2'})}, aggregates.stale(
            orphan_aggregates, members, known={'c1', 'host-agg'}))
        self.assertEqual({}, aggregates.stale({}, {}, known=set()))

    def test_problem_line(self):
        line = aggregates.stale_problem('agg', {'p%d' % i for i in range(7)})
        self.assertIn('placement aggregate agg holds 7 compute node '
                      'provider(s) of no cell nova knows (p0, p1, p2, p3, '
                      'p4, ...)', line)
        self.assertIn('sync-aggregates --remove-stale', line)

    def test_command_and_adapter_name_the_held_row_alike(self):
        from nova_cellsched.cmd import aggregates_cmd
        from nova_cellsched.scheduler import aggregate_sync

        self.assertEqual(aggregate_sync.HOLD, aggregates_cmd.HOLD)
