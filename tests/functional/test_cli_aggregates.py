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

"""``nova-cellsched sync-aggregates``, ``check`` and ``explain`` against a
real placement API, as an operator runs them.

Placement runs in this test process as a real HTTP server (placement's
WSGI app on a free port, its own in-memory database, noauth2), and the
command runs as a subprocess with a nova.conf whose ``[placement]``
section reaches it through keystoneauth's ``admin_token`` plugin. The
cell databases are a SQLite CellWorld; compute nodes are rows written
into them, with resource providers of the same uuids in placement.
"""

import time
import urllib.parse
import uuid as uuid_lib

from nova.db.api import models as api_models
import requests
import sqlalchemy as sa

from cellsched_tools import cloud
from tests.fixtures import db
from tests.fixtures import placement_server
from tests.fixtures import worlds
from tests.functional import test_cli

FOREIGN = 'f0f0f0f0-0000-4000-8000-000000000002'


class PlacementCliTestCase(test_cli.CliTestCase):
    """A placement server, providers for the cells' compute nodes."""

    CELLS = [
        ('cell0', worlds.Population(instances=2, error_only=True)),
        ('cell1', worlds.Population(instances=3)),
        ('cell2', worlds.Population(instances=3)),
    ]

    def setUp(self):
        super().setUp()
        self.endpoint = self.useFixture(
            placement_server.PlacementServer()).endpoint
        # The seeded cells have compute nodes already: give them
        # providers, and add one more node each.
        self.nodes = {}
        for name in ('cell1', 'cell2'):
            self.nodes[name] = self._seeded_nodes(name)
            for node in self.nodes[name]:
                self._placement('POST', '/resource_providers',
                                {'uuid': node, 'name': node})
            self.nodes[name].append(self._add_node(name))
        self.conf = self._conf(self.endpoint)

    def _conf(self, endpoint, prefilter=False):
        return test_cli.write_conf(
            self.tmp, 'nova.conf', self.world.api_url,
            self.world.url_of('cell0'), cells_default='cell1',
            extra='placement_prefilter = %s\n%s'
                  % (prefilter, placement_server.nova_conf(endpoint)))

    def _placement(self, method, path, body=None):
        resp = requests.request(
            method, self.endpoint + path, json=body, timeout=30,
            headers={'x-auth-token': 'admin',
                     'openstack-api-version': 'placement 1.19'})
        self.assertLess(resp.status_code, 300, resp.text)
        return resp.json() if resp.text else None

    def _nodes_table(self, cell):
        engine = sa.create_engine(self.world.url_of(cell))
        self.addCleanup(engine.dispose)
        return engine, sa.Table('compute_nodes', sa.MetaData(),
                                autoload_with=engine)

    def _seeded_nodes(self, cell):
        engine, table = self._nodes_table(cell)
        with engine.connect() as conn:
            return [row[0] for row in conn.execute(
                sa.select(table.c.uuid).where(table.c.deleted == 0))]

    def _add_node(self, cell, provider=True):
        """A compute_nodes row in *cell*, and its resource provider."""
        node = str(uuid_lib.uuid4())
        engine, table = self._nodes_table(cell)
        with engine.begin() as conn:
            conn.execute(table.insert().values(
                **db.compute_node_row(table, node, node[:8])))
        if provider:
            self._placement('POST', '/resource_providers',
                            {'uuid': node, 'name': node})
        return node

    def _members(self, cell):
        return {rp['uuid'] for rp in self._placement(
            'GET', '/resource_providers?member_of=%s'
            % self.world.uuid_of(cell))['resource_providers']}



class SyncAggregatesCliTest(PlacementCliTestCase):
    """The command's output, effects and exit codes."""

    WORLD_URL = 'sqlite:///replaced-by-the-fixture'

    def test_sync_creates_then_nothing_to_do_json(self):
        """Exit 0 both times; the second run lists no change."""
        dry = self.cli('sync-aggregates', '--dry-run', '-f', 'json',
                       conf=self.conf)
        self.assertExit(0, dry)
        self.assertEqual({'dry run'}, {r['Result'] for r in dry.json()})
        self.assertEqual(set(), self._members('cell1'))

        first = self.cli('sync-aggregates', '--workers', '2', '-f', 'json',
                         conf=self.conf)
        self.assertExit(0, first)
        self.assertEqual(
            sorted((self.world.uuid_of(c), n, 'add', 'done')
                   for c, nodes in self.nodes.items() for n in nodes),
            sorted((r['Aggregate'], r['Provider'], r['Action'], r['Result'])
                   for r in first.json()))
        for cell, nodes in self.nodes.items():
            self.assertEqual(set(nodes), self._members(cell))

        again = self.cli('sync-aggregates', '-f', 'json', conf=self.conf)
        self.assertExit(0, again)
        self.assertEqual([], again.json())

        check = self.cli('check', conf=self.conf)
        self.assertExit(0, check)
        self.assertNotIn('problem', check.err)

    def test_nodes_as_nova_writes_them_sync_and_check(self):
        """A row with the JSON columns nova's resource tracker fills
        (supported instances, PCI pools, CPU info, NUMA topology): the
        command reads it (it once needed nova objects it had not
        registered, and failed with exit 1 on every real cell), and a
        deleted row is not a node of the cell.
        """
        engine, table = self._nodes_table('cell2')
        node = self._add_node('cell2')
        gone = self._add_node('cell2')
        with engine.begin() as conn:
            conn.execute(table.update().where(table.c.uuid == node).values(
                supported_instances='[["x86_64", "kvm", "hvm"]]',
                pci_stats='{"nova_object.name": "PciDevicePoolList", '
                          '"nova_object.namespace": "nova", '
                          '"nova_object.version": "1.1", '
                          '"nova_object.data": {"objects": []}}',
                cpu_info='{"arch": "x86_64", "model": "Cascadelake-Server"}',
                numa_topology='{"nova_object.name": "NUMATopology", '
                              '"nova_object.namespace": "nova", '
                              '"nova_object.version": "1.2", '
                              '"nova_object.data": {"cells": []}}',
                stats='{"num_instances": "0"}', host_ip='10.0.0.7'))
            conn.execute(table.update().where(table.c.uuid == gone).values(
                deleted=table.c.id))

        done = self.cli('sync-aggregates', '--cell', 'cell2', '-f', 'json',
                        conf=self.conf)

        self.assertExit(0, done)
        self.assertEqual(set(self.nodes['cell2']) | {node},
                         self._members('cell2'))
        self.assertNotIn(gone, self._members('cell2'))
        check = self.cli('check', conf=self.conf)
        self.assertNotIn('Traceback', check.err)
        self.assertNotIn('cannot read the compute nodes', check.err)

    def test_one_cell_keeps_foreign_and_check_reports_strays(self):
        """--cell touches only that cell; check names what is wrong.

        cell1 is synced first: a stray alone in an aggregate would be
        every member moving to another cell, which the removal guard
        holds.
        """
        self.assertExit(0, self.cli('sync-aggregates', '--cell', 'cell1',
                                    conf=self.conf))
        stray = self.nodes['cell2'][0]
        self._placement('PUT', '/resource_providers/%s/aggregates' % stray,
                        {'aggregates': [self.world.uuid_of('cell1'),
                                        FOREIGN],
                         'resource_provider_generation': 0})
        check = self.cli('check', conf=self.conf)
        self.assertExit(1, check)
        self.assertIn('problem: resource provider %s is in the placement '
                      'aggregate of cell cell1' % stray, check.err)
        self.assertIn('no placement aggregate', check.err)

        done = self.cli('sync-aggregates', '--cell', 'cell1', '-f', 'json',
                        conf=self.conf)
        self.assertExit(0, done)
        self.assertEqual(set(self.nodes['cell1']), self._members('cell1'))
        self.assertEqual(set(), self._members('cell2'))
        aggs = self._placement(
            'GET', '/resource_providers/%s/aggregates' % stray)['aggregates']
        self.assertEqual([FOREIGN], aggs)

    def test_node_without_provider_is_a_listed_failure(self):
        """Exit 1, the failure on stderr; the other changes are made."""
        lost = self._add_node('cell2', provider=False)
        run = self.cli('sync-aggregates', conf=self.conf)
        self.assertExit(1, run)
        self.assertIn('failed: no resource provider %s in placement' % lost,
                      run.err)
        self.assertEqual(1, run.err.count('failed:'), run)
        self.assertEqual(set(self.nodes['cell2']), self._members('cell2'))

    def test_explain_shows_required_aggregates(self):
        run = self.cli('explain', '--project', 'someone', conf=self.conf)
        self.assertExit(0, run)
        self.assertIn('placement pre-filter off ([cellsched] '
                      'placement_prefilter): new servers require '
                      'member_of=in:%s' % self.world.uuid_of('cell1'),
                      run.err)

    def test_explain_shows_forbidden_form(self):
        """An unmapped project in the forbidden form: the other cells."""
        conf = test_cli.write_conf(
            self.tmp, 'forbidden.conf', self.world.api_url,
            self.world.url_of('cell0'), cells_default='cell1',
            extra='placement_prefilter_form = forbidden\n')
        run = self.cli('explain', '--project', 'someone', conf=conf)
        self.assertExit(0, run)
        self.assertIn('new servers require member_of=!in:%s ([cellsched] '
                      'placement_prefilter_form = forbidden)'
                      % self.world.uuid_of('cell2'), run.err)

    def test_exit_codes(self):
        """2 for a bad --cell or no [placement] auth, 3 for no placement;
        check notes an unconfigured placement, or fails when the
        pre-filter is on and placement does not answer.
        """
        unreachable = self._conf('http://127.0.0.1:1')
        bad_cell, no_auth = self.cli_many(
            [['sync-aggregates', '--cell', 'nosuchcell'],
             ['sync-aggregates']],
            conf=test_cli.write_conf(self.tmp, 'plain.conf',
                                     self.world.api_url,
                                     self.world.url_of('cell0')))
        self.assertExit(2, bad_cell)
        self.assertIn("invalid --cell 'nosuchcell'", bad_cell.err)
        self.assertExit(2, no_auth)
        self.assertIn('[placement]', no_auth.err)
        no_workers = self.cli('sync-aggregates', '--workers', '0',
                              conf=self.conf)
        self.assertExit(2, no_workers)
        self.assertIn('expected a positive integer', no_workers.err)
        down = self.cli('sync-aggregates', conf=unreachable)
        self.assertExit(3, down)
        self.assertIn('cannot reach the placement API', down.err)

        noted = self.cli('check', conf=test_cli.write_conf(
            self.tmp, 'plain.conf', self.world.api_url,
            self.world.url_of('cell0'), cells_default='cell1,cell2'))
        self.assertExit(0, noted)
        self.assertIn('note: [placement] auth_type is not set', noted.err)
        strict = self.cli('check', conf=self._conf('http://127.0.0.1:1',
                                                   prefilter=True))
        self.assertExit(1, strict)
        self.assertIn('problem: [cellsched] placement_prefilter is on but '
                      'the cell aggregates were not checked', strict.err)




class RemovalGuardCliTest(PlacementCliTestCase):
    """The removal guard of ``sync-aggregates`` and ``check``, on MariaDB
    cell databases.
    """

    def _add_nodes(self, cell, count):
        """*count* compute_nodes rows in *cell* (removed at cleanup) and
        their resource providers.
        """
        engine, table = self._nodes_table(cell)
        nodes = [str(uuid_lib.uuid4()) for _ in range(count)]
        rows = []
        for node in nodes:
            row = {'uuid': node, 'host': node[:8],
                   'hypervisor_hostname': node[:8], 'deleted': 0}
            for column in table.columns:
                if (column.name not in row and not column.nullable and
                        not column.primary_key and column.default is None):
                    row[column.name] = '' if isinstance(
                        column.type, (sa.String, sa.Text)) else 0
            rows.append(row)
        with engine.begin() as conn:
            conn.execute(table.insert(), rows)

        def remove():
            with engine.begin() as conn:
                conn.execute(table.delete().where(table.c.uuid.in_(nodes)))

        self.addCleanup(remove)
        for node in nodes:
            self._placement('POST', '/resource_providers',
                            {'uuid': node, 'name': node})
        return nodes

    def _point(self, cell, database):
        """Point *cell*'s mapping at *database* (restored at cleanup)."""
        table = api_models.CellMapping.__table__
        engine = sa.create_engine(self.world.api_url)
        self.addCleanup(engine.dispose)

        def point(url):
            with engine.begin() as conn:
                conn.execute(table.update().where(
                    table.c.uuid == self.world.uuid_of(cell)).values(
                        database_connection=url))

        point(database)
        self.addCleanup(point, self.world.url_of(cell))

    def test_wrong_database_never_empties_the_aggregate(self):
        """The reproduction: cell1's aggregate has 200 members and its
        mapping is pointed at a database without compute nodes (cell0's).
        The sync holds cell1 (exit 4, the cell and the counts on stderr),
        syncs cell2; check reports it; --force makes the removals.
        """
        cell1 = self.world.uuid_of('cell1')
        self._add_nodes('cell1', 200 - len(self.nodes['cell1']))
        first = self.cli('sync-aggregates', conf=self.conf)
        self.assertExit(0, first)
        self.assertEqual(200, len(self._members('cell1')))
        new = self._add_node('cell2')
        self._point('cell1', self.world.url_of('cell0'))

        held = self.cli('sync-aggregates', '-f', 'json', conf=self.conf)

        self.assertExit(4, held)
        self.assertEqual(200, len(self._members('cell1')))
        self.assertIn(new, self._members('cell2'))
        self.assertIn('failed: held: the sync would remove 200 of the 200 '
                      'members of the placement aggregate of cell cell1 '
                      '(%s) (every one: 200 of them listed by no cell '
                      'database; its own database lists 0 compute node(s))'
                      % cell1, held.err)
        self.assertIn('"nova-cellsched sync-aggregates --force --cell %s"'
                      % cell1, held.err)
        self.assertEqual(
            [(cell1, '', 'hold cell'), (self.world.uuid_of('cell2'), new,
                                        'add')],
            [(r['Aggregate'], r['Provider'], r['Action'])
             for r in held.json()])
        dry = self.cli('sync-aggregates', '--dry-run', conf=self.conf)
        self.assertExit(4, dry)

        check = self.cli('check', conf=self.conf)
        self.assertExit(1, check)
        self.assertIn('problem: the sync would remove 200 of the 200 '
                      'members of the placement aggregate of cell cell1',
                      check.err)
        self.assertEqual(1, check.err.count('problem:'), check)

        forced = self.cli('sync-aggregates', '--force', '--cell', 'cell1',
                          conf=self.conf)
        self.assertExit(0, forced)
        self.assertEqual(set(), self._members('cell1'))

    def test_more_than_the_share_is_held_unless_allowed(self):
        """Removing more than [cellsched] aggregate_sync_max_removal
        (0.5) of cell2's members is held; half is not; a larger share
        lets the sync make it.
        """
        self._add_nodes('cell2', 4)
        self.assertExit(0, self.cli('sync-aggregates', conf=self.conf))
        members = self._members('cell2')
        engine, table = self._nodes_table('cell2')
        gone = sorted(members)[:len(members) // 2 + 1]
        with engine.begin() as conn:
            conn.execute(table.update().where(
                table.c.uuid.in_(gone)).values(deleted=table.c.id))
        self.addCleanup(self._undelete, 'cell2', gone)

        held = self.cli('sync-aggregates', conf=self.conf)
        self.assertExit(4, held)
        self.assertIn('the sync would remove %d of the %d members of the '
                      'placement aggregate of cell cell2 (%s) (more than '
                      '50%%' % (len(gone), len(members),
                                self.world.uuid_of('cell2')), held.err)
        self.assertEqual(members, self._members('cell2'))

        wider = test_cli.write_conf(
            self.tmp, 'wider.conf', self.world.api_url,
            self.world.url_of('cell0'), cells_default='cell1',
            extra='aggregate_sync_max_removal = 0.9\n%s'
                  % placement_server.nova_conf(self.endpoint))
        done = self.cli('sync-aggregates', conf=wider)
        self.assertExit(0, done)
        self.assertEqual(members - set(gone), self._members('cell2'))

    def test_swapped_cell_mappings_are_held(self):
        """cell1 and cell2 pointed at each other's databases: every
        member of each aggregate would move to the other cell. Both cells
        are held (exit 4), each message naming the other cell, nothing
        changes; check reports both; mapped back, nothing to do.
        """
        cell1, cell2 = (self.world.uuid_of(c) for c in ('cell1', 'cell2'))
        self.assertExit(0, self.cli('sync-aggregates', conf=self.conf))
        before = {c: self._members(c) for c in ('cell1', 'cell2')}
        self._point('cell1', self.world.url_of('cell2'))
        self._point('cell2', self.world.url_of('cell1'))

        held = self.cli('sync-aggregates', '-f', 'json', conf=self.conf)

        self.assertExit(4, held)
        self.assertEqual(sorted([(cell1, 'hold cell'), (cell2, 'hold cell')]),
                         sorted((r['Aggregate'], r['Action'])
                                for r in held.json()))
        for name, other, uuid in (('cell1', 'cell2', cell2),
                                  ('cell2', 'cell1', cell1)):
            count = len(before[name])
            self.assertIn(
                'the sync would remove %d of the %d members of the '
                'placement aggregate of cell %s (%s) (every one: %d of them '
                'to cell %s (%s), whose database lists them'
                % (count, count, name, self.world.uuid_of(name), count,
                   other, uuid), held.err)
        self.assertIn('check the database_connection of the cell mappings',
                      held.err)
        self.assertEqual(before, {c: self._members(c)
                                  for c in ('cell1', 'cell2')})
        check = self.cli('check', conf=self.conf)
        self.assertExit(1, check)
        self.assertEqual(2, check.err.count('problem: the sync would '
                                            'remove'), check)

    def _trait(self, provider, trait='COMPUTE_NODE'):
        generation = self._placement(
            'GET', '/resource_providers/%s' % provider)['generation']
        self._placement('PUT', '/resource_providers/%s/traits' % provider,
                        {'traits': [trait],
                         'resource_provider_generation': generation})

    def test_deleted_cell_mappings_aggregate_is_reported_and_removed(self):
        """A cell mapping synced, then deleted (as ``nova-manage cell_v2
        delete_cell --force`` does) while its compute nodes still report
        to placement: check names its aggregate; ``--remove-stale``
        empties it, and only it: an aggregate nova does not know with a
        non-compute member (a sharing provider) is kept.
        """
        doomed = db.add_cell_mapping(self.world.api_url, 'doomed',
                                     self.world.url_of('cell0'))
        removed = []

        def unmap():
            if not removed:
                db.remove_cell_mapping(self.world.api_url, doomed)
                removed.append(True)

        self.addCleanup(unmap)
        nodes = self._add_nodes('cell0', 3)
        for node in nodes:
            self._trait(node)
        self.assertExit(0, self.cli('sync-aggregates', conf=self.conf))
        self.assertEqual(set(nodes), {rp['uuid'] for rp in self._placement(
            'GET', '/resource_providers?member_of=%s' % doomed)[
                'resource_providers']})
        sharing = str(uuid_lib.uuid4())
        self._placement('POST', '/resource_providers',
                        {'uuid': sharing, 'name': sharing})
        for provider in (nodes[0], sharing):
            aggs = self._placement(
                'GET', '/resource_providers/%s/aggregates' % provider)
            self._placement(
                'PUT', '/resource_providers/%s/aggregates' % provider,
                {'aggregates': aggs['aggregates'] + [FOREIGN],
                 'resource_provider_generation':
                     aggs['resource_provider_generation']})
        self.assertExit(0, self.cli('check', conf=self.conf))
        unmap()

        check = self.cli('check', conf=self.conf)
        self.assertExit(1, check)
        self.assertIn('problem: placement aggregate %s holds 3 compute node '
                      'provider(s) of no cell nova knows (%s)' % (
                          doomed, ', '.join(sorted(nodes))), check.err)
        self.assertIn('run "nova-cellsched sync-aggregates --remove-stale"',
                      check.err)
        self.assertNotIn(FOREIGN, check.err)
        self.assertEqual(1, check.err.count('problem:'), check)

        plain = self.cli('sync-aggregates', '-f', 'json', conf=self.conf)
        self.assertExit(0, plain)
        self.assertEqual([], plain.json())
        dry = self.cli('sync-aggregates', '--remove-stale', '--dry-run',
                       '-f', 'json', conf=self.conf)
        self.assertExit(0, dry)
        self.assertEqual(
            sorted((doomed, n, 'remove stale', 'dry run') for n in nodes),
            [(r['Aggregate'], r['Provider'], r['Action'], r['Result'])
             for r in dry.json()])
        done = self.cli('sync-aggregates', '--remove-stale', '-f', 'json',
                        conf=self.conf)
        self.assertExit(0, done)
        self.assertEqual({'done'}, {r['Result'] for r in done.json()})
        self.assertEqual([], self._placement(
            'GET', '/resource_providers?member_of=%s' % doomed)[
                'resource_providers'])
        self.assertEqual({nodes[0], sharing}, {
            rp['uuid'] for rp in self._placement(
                'GET', '/resource_providers?member_of=%s' % FOREIGN)[
                'resource_providers']})
        self.assertExit(0, self.cli('check', conf=self.conf))

    def _undelete(self, cell, nodes):
        engine, table = self._nodes_table(cell)
        with engine.begin() as conn:
            conn.execute(table.update().where(
                table.c.uuid.in_(nodes)).values(deleted=0))


class FrozenCellCliTest(PlacementCliTestCase):
    """A cell database that stops answering, on MariaDB: the others are
    synced and checked, the frozen one is named and left as it is.
    """

    def _frozen(self, cell):
        """*cell*'s database frozen for the block (``cloud.frozen``)."""
        return cloud.frozen(self.world.url_of(cell))

    def test_new_node_joins_while_another_cell_is_frozen(self):
        """cell1's database frozen: a node added to cell2 joins cell2's
        aggregate within [cellsched] list_cell_timeout (2 s), cell1 is
        named (name and uuid, no URL) with exit 1, its aggregate keeps
        every member; check says so too. Unfrozen, the next sync is
        clean.
        """
        conf = test_cli.write_conf(
            self.tmp, 'short.conf', self.world.api_url,
            self.world.url_of('cell0'), cells_default='cell1',
            extra='list_cell_timeout = 2\n%s'
                  % placement_server.nova_conf(self.endpoint))
        self.assertExit(0, self.cli('sync-aggregates', conf=conf))
        cell1 = self.world.uuid_of('cell1')
        members1 = self._members('cell1')
        self.assertEqual(set(self.nodes['cell1']), members1)
        new = self._add_node('cell2')

        with self._frozen('cell1'):
            started = time.monotonic()
            run = self.cli('sync-aggregates', '-f', 'json', conf=conf)
            took = time.monotonic() - started
            check = self.cli('check', conf=conf)

        self.assertExit(1, run)
        self.assertIn(new, self._members('cell2'))
        self.assertEqual(members1, self._members('cell1'))
        self.assertEqual(
            [(cell1, '', 'skip cell'),
             (self.world.uuid_of('cell2'), new, 'add')],
            [(r['Aggregate'], r['Provider'], r['Action'])
             for r in run.json()])
        self.assertIn('failed: cannot read the cell database (', run.err)
        self.assertIn('nothing changed in its aggregate (cell cell1 (%s))'
                      % cell1, run.err)
        url = urllib.parse.urlsplit(self.world.url_of('cell1'))
        for secret in (url.path.strip('/'), url.netloc):
            self.assertNotIn(secret, run.err)
            self.assertNotIn(secret, check.err)
        # Bounded: the frozen cell's 2 s, and the command's own start.
        self.assertLess(took, 60.0, run)
        self.addDetail('sync_seconds_with_a_frozen_cell', _text(
            '%.2f (list_cell_timeout 2 s)' % took))
        self.assertExit(1, check)
        self.assertIn('problem: cannot read the compute nodes of cell cell1 '
                      '(%s) (' % cell1, check.err)

        again = self.cli('sync-aggregates', '-f', 'json', conf=conf)
        self.assertExit(0, again)
        self.assertEqual([], again.json())


def _text(value):
    from testtools import content
    return content.text_content(value)
