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

"""nova-api with a frozen cell database: bounded, complete, no secret.

GET /servers/detail through nova's own API code
(``ServersController.detail``, its view and response validation) with
the replacement lister installed (:func:`nova_cellsched.api.install`),
on real MariaDB. Two private servers (see
:mod:`tests.fixtures.mariadb_server`)::

    api     the nova API database, cell0, cell1, cell2   (never harmed)
    victim  cell3                                      (frozen: SIGSTOP)

The cell mappings log in as a user with a password, which no log line
may show. The only stub is neutron's security group bindings. A request
with cell3 frozen may take ``list_cell_timeout`` + 1 s more than the
same request with every cell healthy (the issue's bound on what a frozen
cell costs).

Regression: the request used to take 62 s at 2.1 (122 s at 2.69) with
list_cell_timeout = 2 s: after the listing, nova-api asks every cell for
faults (``InstanceList.fill_faults``) and, at 2.69, the listed servers'
cells for block device mappings, with nova's 60 s ``CELL_TIMEOUT``.
"""

import logging
import os
import re
import sys
import threading
import time
import traceback
import urllib.parse

import fixtures
from nova.api.openstack.compute import servers as servers_api
import nova.conf
from nova import context as nova_context
from nova.db.main import api as main_db_api
from nova.db.main import models
from nova import exception as nova_exception
from nova.network import security_group_api
from nova import quota as nova_quota
from nova.tests import fixtures as nova_fixtures
from nova.tests.unit.api.openstack import fakes
from oslo_config import fixture as config_fixture
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import test_fixtures as db_fixtures
from oslo_policy import opts as policy_opts
from oslo_utils import uuidutils
import sqlalchemy as sa
import webob.exc

import nova_cellsched.api as cellsched_api
from nova_cellsched.api.hooks import instance_list as api_instance_list
from nova_cellsched.api.hooks import pool
from nova_cellsched.api.middleware import request_state
from nova_cellsched.compat import adapter
from nova_cellsched import conf as conf_mod
from nova_cellsched import gather
from nova_cellsched.listing import cross_cell
from tests.fixtures import mariadb_server as mdb
from tests.fixtures import releases
from tests.fixtures import worlds

CONF = nova.conf.CONF
PASSWORD = 'Fr0zen/n0va@Pw%q'
SECRET_FORMS = (PASSWORD, urllib.parse.quote_plus(PASSWORD),
                urllib.parse.quote(PASSWORD, safe=''), 'Fr0zen', 'n0va@Pw')
#: ``[cellsched] list_cell_timeout`` in these tests.
CELL_TIMEOUT = 2.0
#: What any one blocking call on a cell may take.
IO_TIMEOUT = pool.io_timeout(CELL_TIMEOUT)
#: How late a frozen cell is given up on, past its budget: its silence
#: is seen, and counted from there, up to one look late each.
LOOKS = 2 * gather.SILENCE_POLL
#: The bound the issue asks for: a frozen cell costs a request at most
#: this more than the same request with every cell healthy.
BOUND = CELL_TIMEOUT + LOOKS + 1.0
#: A request's bound while the pool is starved: its waits for a worker
#: (REQUEST_FACTOR x list_cell_timeout in all), or a call's wait for a
#: worker then a frozen cell's own budget (list_cell_timeout each).
BUSY_BOUND = cross_cell.REQUEST_FACTOR * CELL_TIMEOUT + LOOKS + 1.0
#: ``[cellsched] api_stuck_queries_per_cell`` in these tests.
STUCK_CAP = 2
#: Long enough never to be reached when the code works.
SAFETY = 30.0
LIVE = 25  # live instances per cell (cell0 has 3)
DETAIL = '/v2.1/servers/detail?all_tenants=1'


def _no_security_groups(context, servers, detailed=False):
    """Neutron stand-in: every server is in the ``default`` group."""
    return {server['id']: [{'name': 'default'}] for server in servers}


def connections_to(port):
    """This process's ESTABLISHED TCP connections to 127.0.0.1:*port*.

    Read from ``/proc/net/tcp``: a frozen server cannot be asked, and
    what a nova-api worker holds is what its process holds.
    """
    inodes = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            target = os.readlink('/proc/self/fd/%s' % fd)
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(target[8:-1])
    remote = '0100007F:%04X' % port
    count = 0
    with open('/proc/net/tcp') as handle:
        for line in handle.readlines()[1:]:
            fields = line.split()
            # fields: sl local remote state ... inode (10th)
            if (fields[2] == remote and fields[3] == '01' and
                    fields[9] in inodes):
                count += 1
    return count


def unread_requests_at(port):
    """Clients waiting for the server at 127.0.0.1:*port*, from its sockets.

    A stopped server neither reads nor accepts: each of its ESTABLISHED
    sockets with bytes in its receive queue is a client waiting for an
    answer, and each connection in its listening socket's accept queue
    (that socket's receive queue in ``/proc/net/tcp``) a client waiting
    for the server's greeting.
    """
    local = '0100007F:%04X' % port
    count = 0
    with open('/proc/net/tcp') as handle:
        for line in handle.readlines()[1:]:
            # sl local remote state tx_queue:rx_queue ...
            fields = line.split()
            if fields[1] != local:
                continue
            unread = int(fields[4].split(':')[1], 16)
            if fields[3] == '0A':  # LISTEN: the accept queue's length
                count += unread
            elif fields[3] == '01' and unread:  # ESTABLISHED
                count += 1
    return count


def threads_in_pymysql_io():
    """The stacks of this process's threads inside PyMySQL's I/O."""
    blocked = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        stack = traceback.extract_stack(frame)
        if any(entry.filename.endswith(os.path.join('pymysql',
                                                    'connections.py')) and
               entry.name in ('_read_bytes', '_write_bytes', 'connect')
               for entry in stack):
            blocked.append(''.join(traceback.format_list(stack[-12:])))
    return blocked


class FrozenServerTestBase(mdb.ServersTestCase):
    """nova's API with the replacement lister; cells on a frozen server.

    The cells of :attr:`VICTIMS` live on the victim server, which
    :meth:`freeze` stops; the others (and the API database) on a server
    that is never harmed.
    """

    #: The cells on the victim server (cell0 to cell2 are on the other).
    VICTIMS = ('cell3',)

    @classmethod
    def set_up_servers(cls):
        cls.api = cls.start_server('napi', 'nova', PASSWORD)
        cls.victim = cls.start_server('napi-victim', 'nova', PASSWORD)
        population = worlds.Population(instances=LIVE, hosts=3,
                                     metadata_keys=1)
        cls.world = worlds.build_world(cls.api, [
            ('cell0', cls.api, worlds.Population(instances=3,
                                               error_only=True)),
            ('cell1', cls.api, population),
            ('cell2', cls.api, population)] + [
            (name, cls.victim, population) for name in cls.VICTIMS],
            user='nova', password=PASSWORD)
        cls.expected = cls.world.live_uuids()

    def setUp(self):
        super().setUp()
        # nova's worker pools are this test's; its cleanup waits for them
        # and runs after the server is thawed (cleanups run last first).
        self.useFixture(releases.isolated_nova_pools(self.id()))
        self._heal()
        self.addCleanup(self._heal)
        # No cell held down by an earlier test of this process.
        pool.HEALTH.forget()
        self.addCleanup(pool.HEALTH.forget)
        self.cfg = self.useFixture(config_fixture.Config(CONF))
        # Parsed (no files), as nova-api's is: nova's policy reads it.
        CONF([], project='nova', default_config_files=[])
        conf_mod.register_opts(CONF)
        self.cfg.config(list_cell_timeout=CELL_TIMEOUT,
                        api_stuck_queries_per_cell=STUCK_CAP,
                        list_max_workers=8, group='cellsched')
        # nova-api's own [database]: cell0, as devstack lays nova-api out
        # (nova's DB API reads its scheme; nova 31 and 32 read the
        # servers' faults there, untargeted). nova caches the engine per
        # process: this world's, not an earlier class's stopped server.
        self.cfg.config(connection=self.world.cells['cell0'].url,
                        group='database')
        main = enginefacade.transaction_context()
        main.configure(connection=self.world.cells['cell0'].url,
                       max_retries=1, retry_interval=0)
        self.useFixture(db_fixtures.ReplaceEngineFacadeFixture(
            main_db_api.context_manager, main))
        self.addCleanup(main.dispose_pool)
        # nova-api's default (a nova test run earlier in this process may
        # have left nova's test default, 'error').
        self.cfg.config(response_validation='warn', group='api')
        self.logs = self.useFixture(fixtures.FakeLogger(level=logging.DEBUG))
        self.useFixture(worlds.UseWorld(self.world))
        self.useFixture(nova_fixtures.RPCFixture('nova.test'))
        policy_opts.set_defaults(CONF)
        self.useFixture(nova_fixtures.RealPolicyFixture())
        self.useFixture(fixtures.MonkeyPatch(
            'nova.network.security_group_api.'
            'get_instances_security_groups_bindings', _no_security_groups))
        self.assertIs(_no_security_groups,
                      security_group_api.get_instances_security_groups_bindings)
        # Installed after the options: the worker pool is sized on use.
        self.assertTrue(cellsched_api.install())
        self.addCleanup(cellsched_api.uninstall)
        self.controller = servers_api.ServersController()
        self.assertIn(urllib.parse.quote_plus(PASSWORD),
                      self.world.cells[self.VICTIMS[0]].url)

    def _heal(self):
        if self.victim.frozen:
            self.victim.thaw()
        if not self.victim.running:
            self.victim.start()

    def freeze(self):
        """SIGSTOP the victim server; time the listing from now on."""
        self.time_listing_rounds()
        self.victim.freeze()
        # After the thaw (cleanups run last first): the queries given up
        # on end inside the test, so that what they log (a connection
        # their I/O timeout closed, reset as it is returned) is this
        # test's log, not stray lines in a passing run's output.
        self.addCleanup(self.wait_for_stuck_queries_to_end)
        self.addCleanup(self._heal)

    # Helpers

    def detail(self, version='2.1', path=DETAIL):
        """GET *path* through nova's controller: (body, seconds).

        In a request scope of its own, as the paste filter serves each
        request (:func:`nova_cellsched.api.middleware.request_state.scope`).
        """
        req = fakes.HTTPRequest.blank(path, version=version,
                                      use_admin_context=True)
        served = cellsched_api.served()['cellsched']
        start = time.monotonic()
        with request_state.scope():
            body = self.controller.detail(req)
        elapsed = time.monotonic() - start
        self.assertEqual(served + 1, cellsched_api.served()['cellsched'],
                         'the replacement did not serve the request')
        return body, elapsed

    def frozen_bound(self, version='2.1'):
        """Seconds a request may take once the victim is frozen.

        :data:`BOUND` plus what the same request takes with every cell
        healthy, measured now: the issue bounds what the frozen cell
        costs. The slowest of three healthy requests stands for that
        part: on a loaded 2-core machine the same request has taken
        0.15 s and 1.3 s a few seconds apart, and a bound built on the
        quickest one failed a correct lister. What the listing itself
        waited is bounded tightly by :meth:`assert_listing_waited`.
        Each healthy request lists every cell's servers.
        """
        everything = self.uuids_of(*self.expected)
        slowest = 0.0
        for _ in range(3):
            body, elapsed = self.detail(version=version)
            self.assertEqual(everything, self.ids(body))
            slowest = max(slowest, elapsed)
        return BOUND + slowest

    def time_listing_rounds(self):
        """Record the wall time of each request's listing rounds.

        Every round (one batch from each cell asked, in parallel) is
        timed; :meth:`assert_listing_waited` reads the sum per request.
        """
        self.round_seconds = []
        original = api_instance_list._Listing.round

        def timed_round(listing, calls):
            start = time.monotonic()
            try:
                return original(listing, calls)
            finally:
                self.round_seconds.append(time.monotonic() - start)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.instance_list._Listing.round',
            timed_round))

    def assert_listing_waited(self, within=BOUND):
        """The listing rounds since the last call took at most *within*.

        What the frozen cell costs the listing: its rounds wait at most
        ``list_cell_timeout`` for it, whatever the load on the machine
        does to the rest of the request.
        """
        self.assertTrue(self.round_seconds, 'no listing round was timed')
        waited = sum(self.round_seconds)
        self.round_seconds.clear()
        self.assertLessEqual(waited, within,
                             'the listing waited %.2fs for its cells'
                             % waited)

    def uuids_of(self, *names):
        return set().union(*(self.expected[n] for n in names))

    def ids(self, body, status=None):
        return {s['id'] for s in body['servers']
                if status is None or s['status'] == status}

    def wait_for_stuck_queries_to_end(self, seconds=30):
        deadline = time.monotonic() + seconds
        while pool.STUCK.snapshot():
            if time.monotonic() > deadline:
                self.fail('queries still stuck %.0fs after the thaw: %s'
                          % (seconds, pool.STUCK.snapshot()))
            time.sleep(0.05)

    def wait_for_no_cell_io(self, within):
        """No thread of this process is blocked in PyMySQL I/O.

        Polls a thread dump (``sys._current_frames``) and the stuck
        queries for up to *within* seconds; fails with the stacks still
        blocked.
        """
        deadline = time.monotonic() + within
        while True:
            blocked = threads_in_pymysql_io()
            if not blocked and not pool.STUCK.snapshot():
                return
            if time.monotonic() > deadline:
                self.fail('%.0fs later, stuck queries %s, threads '
                          'blocked on a cell:\n%s'
                          % (within, pool.STUCK.snapshot(),
                             '\n'.join(blocked)))
            time.sleep(0.1)

    def assert_no_secret(self):
        text = self.logs.output
        for form in SECRET_FORMS:
            self.assertNotIn(form, text, 'a log line shows the password')
        for cell in self.world.cells.values():
            self.assertNotIn(cell.url, text, 'a log line shows a cell URL')
        # Only masked URLs, if any.
        for url in re.findall(r'mysql\+pymysql://[^\s\'"]+', text):
            self.assertIn('***', url, 'an unmasked URL is logged')



class FrozenCellThroughNovaApiTest(FrozenServerTestBase):
    """A frozen cell through nova's API, with the replacement lister."""

    def test_healthy_cells_answer_in_time_at_2_1(self):
        """Frozen cell3: every other cell's servers within the bound."""
        body, _ = self.detail()
        everything = self.uuids_of('cell0', 'cell1', 'cell2', 'cell3')
        self.assertEqual(everything, self.ids(body))
        bound = self.frozen_bound()

        self.freeze()
        body, elapsed = self.detail()
        self.assertLessEqual(elapsed, bound)
        self.assert_listing_waited()
        self.assertEqual(self.uuids_of('cell0', 'cell1', 'cell2'),
                         self.ids(body))
        self.assertIn('Cell %s is not responding'
                      % self.world.cells['cell3'].uuid, self.logs.output)
        self.assert_no_secret()

    def test_down_cell_is_unknown_at_2_69(self):
        """At 2.69 nova adds cell3's servers as minimal constructs."""
        bound = self.frozen_bound(version='2.69')
        self.freeze()
        body, elapsed = self.detail(version='2.69')
        self.assertLessEqual(elapsed, bound)
        self.assert_listing_waited()
        self.assertEqual(self.uuids_of('cell0', 'cell1', 'cell2'),
                         {s['id'] for s in body['servers']
                          if s['status'] != 'UNKNOWN'})
        self.assertEqual(self.expected['cell3'],
                         self.ids(body, status='UNKNOWN'))
        for server in body['servers']:
            if server['status'] == 'UNKNOWN':
                # nova's minimal construct: no name, no flavor.
                self.assertNotIn('name', server)
        self.assert_no_secret()

    def test_strict_configuration_fails_with_novas_error(self):
        """list_records_by_skipping_down_cells=False: nova's error.

        The NovaException naming the cell, which nova-api's
        ``expected_errors`` turns into HTTP 500 (as with nova's own
        lister when a cell does not respond); within the bound, not a
        hang.
        """
        self.cfg.config(list_records_by_skipping_down_cells=False,
                        group='api')
        bound = self.frozen_bound()
        self.freeze()
        req = fakes.HTTPRequest.blank(DETAIL, version='2.1',
                                      use_admin_context=True)
        start = time.monotonic()
        with request_state.scope():
            exc = self.assertRaises(webob.exc.HTTPInternalServerError,
                                    self.controller.detail, req)
        self.assertLessEqual(time.monotonic() - start, bound)
        self.assert_listing_waited()
        self.assertEqual(500, exc.code)
        cause = exc.__context__
        self.assertIsInstance(cause, nova_exception.NovaException)
        self.assertEqual('Cell %s is not responding but configuration '
                         'indicates that we should fail.'
                         % self.world.cells['cell3'].uuid, str(cause))
        self.assert_no_secret()

    def test_twenty_requests_during_a_freeze_stay_bounded(self):
        """Threads and connections to the frozen server stay capped.

        And go back to their baseline after the thaw, when the next
        request is complete again.
        """
        port = self.victim.port
        everything = self.uuids_of('cell0', 'cell1', 'cell2', 'cell3')
        # Also the warm-up: the worker pool and nova's engines exist.
        bound = self.frozen_bound()
        threads_before = threading.active_count()
        connections_before = connections_to(port)
        self.assertGreaterEqual(connections_before, 1)

        self.freeze()
        healthy = self.uuids_of('cell0', 'cell1', 'cell2')
        threads, connections = [], []
        for n in range(20):
            body, elapsed = self.detail()
            # What the frozen cell costs each request is its listing's
            # wait, bounded on every one. The whole request is bounded
            # on the first, as in the other tests: every request now
            # waits for cell3 (no hold-down), and on a loaded 2-core
            # machine the rest of one request in twenty can take longer
            # than the healthy warm-up did (3.48 s against 3.23 s in a
            # CI rehearsal) with its listing well inside the bound.
            if n == 0:
                self.assertLessEqual(elapsed, bound)
            self.assert_listing_waited()
            self.assertEqual(healthy, self.ids(body))
            threads.append(threading.active_count())
            connections.append(connections_to(port))
            self.assertLessEqual(
                sum(pool.STUCK.snapshot().values()), STUCK_CAP)
        self.assertLessEqual(max(threads), threads_before + STUCK_CAP + 2,
                             threads)
        self.assertLessEqual(max(connections),
                             connections_before + STUCK_CAP + 1, connections)
        # Every query given up on ends at its I/O timeout: none is left
        # blocked into the thaw.
        self.wait_for_no_cell_io(within=IO_TIMEOUT + 2)

        self.victim.thaw()
        self.wait_for_stuck_queries_to_end()
        body, _ = self.detail()
        self.assertEqual(everything, self.ids(body))
        self.assertLessEqual(threading.active_count(),
                             threads_before + STUCK_CAP)
        self.assertLessEqual(connections_to(port), connections_before + 1)
        self.assertLessEqual(self.victim.threads_connected(),
                             connections_before + 1)
        self.assert_no_secret()

    def test_no_thread_stays_blocked_on_a_frozen_cell(self):
        """Every blocking call on the frozen cell ends by itself.

        Regression: a worker checking out a pooled connection to the
        frozen cell blocked for ever in the pool's pre-ping (PyMySQL's
        ``ping``, before the read timeout was set on the connection),
        and the process could not exit until the cell thawed. The
        healthy request first leaves idle connections to cell3 in the
        pool, so the frozen request's checkout pings one.
        """
        bound = self.frozen_bound()
        self.assertGreaterEqual(connections_to(self.victim.port), 1)
        self.freeze()
        body, elapsed = self.detail()
        self.assertLessEqual(elapsed, bound)
        self.assertEqual(self.uuids_of('cell0', 'cell1', 'cell2'),
                         self.ids(body))
        self.wait_for_no_cell_io(within=IO_TIMEOUT + 2)

    def test_a_listing_that_gave_up_does_not_hide_the_cell_elsewhere(self):
        """Quota counts and a server's own page still reach the cell.

        Regression: a cell a listing timed out on was held down for
        ``list_cell_timeout`` for every caller of nova's
        ``scatter_gather_cells`` in the process: quota counting skipped
        its servers and GET /servers/{id} of its servers failed. Only
        the listing's own request may skip it now.
        """
        body, _ = self.detail()
        server = next(s for s in body['servers']
                      if s['id'] in self.expected['cell3'])
        project = server['tenant_id']
        admin = nova_context.get_admin_context()
        before = nova_quota._instances_cores_ram_count_legacy(admin, project)
        self.frozen_bound()
        self.freeze()
        body, _ = self.detail()
        self.assertNotIn(server['id'], self.ids(body))
        self.victim.thaw()
        # Other requests, each with a request id of its own, right away.
        counted = nova_quota._instances_cores_ram_count_legacy(
            nova_context.get_admin_context(), project)
        self.assertEqual(before, counted)
        req = fakes.HTTPRequest.blank('/v2.1/servers/%s' % server['id'],
                                      version='2.1', use_admin_context=True)
        shown = self.controller.show(req, server['id'])
        self.assertEqual(server['id'], shown['server']['id'])

    def test_polls_during_a_freeze_do_not_wait_for_the_held_cell(self):
        """Ten listings while cell3 is frozen: only the first waits for it.

        The first listing waits ``list_cell_timeout`` for cell3 and holds
        it down (``[cellsched] cell_hold_down``); the nine after it do
        not wait for it at all, while a probe reads it about every
        ``cell_probe_interval``. After the thaw a probe answers and
        cell3's servers are back within a few probe intervals.

        Regression: every poll waited the full ``list_cell_timeout``.
        """
        self.cfg.config(cell_hold_down=60.0, cell_probe_interval=0.5,
                        group='cellsched')
        bound = self.frozen_bound()
        self.freeze()
        healthy = self.uuids_of('cell0', 'cell1', 'cell2')
        for n in range(10):
            body, elapsed = self.detail()
            self.assertEqual(healthy, self.ids(body))
            if n == 0:
                self.assertLessEqual(elapsed, bound)
                self.assert_listing_waited()
            else:
                # Not a wait for cell3: far less than its timeout.
                self.assert_listing_waited(within=CELL_TIMEOUT / 2)
        cell3 = self.world.cells['cell3'].uuid
        self.assertIn('Cell %s did not answer' % cell3, self.logs.output)
        self.assertEqual([cell3],
                         list(pool.HEALTH.snapshot()))
        self.victim.thaw()
        everything = self.uuids_of(*self.expected)
        deadline = time.monotonic() + SAFETY
        while True:
            body, _ = self.detail()
            if self.ids(body) == everything:
                break
            self.assertLess(time.monotonic(), deadline,
                            "cell3's servers not back after the thaw")
            time.sleep(0.1)
        self.assertIn('Cell %s answers again' % cell3, self.logs.output)
        self.assert_no_secret()

    def test_a_busy_worker_pool_costs_time_not_rows(self):
        """A task still queued at its call's wait runs on its own thread.

        The lister's only worker is held by other work (a frozen cell's
        query of another request, say) for far longer than
        ``list_cell_timeout``; the listing's tasks queue behind it. The
        request still lists every cell without waiting for the worker:
        its listing and the view's lookups after it wait for a worker at
        most ``REQUEST_FACTOR x list_cell_timeout`` in all (+ 1 s).

        Regression: every cell was reported down (their tasks had not
        started by the deadline): an empty page from healthy cells.
        """
        everything = self.uuids_of(*self.expected)
        pool.shutdown()
        self.cfg.config(list_max_workers=1, group='cellsched')
        self.addCleanup(pool.shutdown)
        bound = self.frozen_bound() - BOUND + BUSY_BOUND
        release = threading.Event()
        self.addCleanup(release.set)
        busy = pool.executor().submit(release.wait, 60)
        # Released long after the bound, so that a lister that waits for
        # the worker fails the test instead of hanging it.
        timer = threading.Timer(bound + CELL_TIMEOUT * 2, release.set)
        self.addCleanup(timer.cancel)
        timer.start()
        self.time_listing_rounds()
        body, elapsed = self.detail()
        self.assertFalse(busy.done(), 'the listing waited for the worker')
        self.assertLessEqual(elapsed, bound)
        self.assert_listing_waited()
        self.assertEqual(everything, self.ids(body))
        self.assertNotIn('is not responding', self.logs.output)

    def test_a_green_thread_busy_for_seconds_costs_time_not_rows(self):
        """Under eventlet, cells that answered while nova-api computed
        are listed.

        nova-api's green threads share one OS thread: while one computes
        (here the first cell's task, for 1.5 ``list_cell_timeout``
        after its batch came back), no other runs, and the answers of
        the other cells wait in their sockets. None of them is a cell
        that did not answer: every cell's servers are listed, and none
        is reported down. On native threads the kernel tells the same
        (``SilenceTestCase`` in ``tests/unit/test_gather.py``).

        Regression (nova 31 and 32, eventlet): a task on a green thread
        was charged the wall time it ran, so the cell whose rows took
        long to read, and the cells whose answers waited behind it,
        were reported down: a healthy listing short of whole cells.
        """
        if adapter.threading_mode():
            self.skipTest('nova runs on native threads here')
        import eventlet

        hog = 1.5 * CELL_TIMEOUT
        self.assertLess(hog, IO_TIMEOUT, 'the drivers would end the reads')
        everything = self.uuids_of(*self.expected)
        original = api_instance_list._Listing._fetch
        hogged = []

        def fetch(listing, *args):
            batch = original(listing, *args)
            if not hogged:
                hogged.append(eventlet.getcurrent())
                end = time.monotonic() + hog
                while time.monotonic() < end:  # CPU, never yields
                    pass
            return batch

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.instance_list._Listing._fetch',
            fetch))
        self.time_listing_rounds()
        body, _ = self.detail()
        self.assertEqual(1, len(hogged))
        self.assertGreaterEqual(sum(self.round_seconds), hog)
        self.assertEqual(everything, self.ids(body))
        self.assertNotIn('is not responding', self.logs.output)

    def test_a_page_that_needs_another_round_lists_the_healthy_cells(self):
        """Frozen cell3 uses up the first round; cells 1 and 2 go on.

        A page of 50 from 4 cells: each cell is first asked for 18 rows,
        so cells 1 and 2 (25 servers each) are asked again once cell3 is
        given up. The page is the first 50 healthy servers in nova's
        order, as with cell3 healthy, within the bound.

        Regression: the second round came after the listing's deadline,
        which the frozen cell had used up, so cells 1 and 2 were
        reported down (their tasks never ran) and the page held cell0's
        3 servers (in the multi-process cloud: "down cell1, cell2, cell3"
        with the slowest healthy cell answering in 25 ms).
        """
        body, _ = self.detail()
        healthy = self.uuids_of('cell0', 'cell1', 'cell2')
        expected = [s['id'] for s in body['servers'] if s['id'] in healthy]
        self.assertGreater(len(expected), 50)
        bound = self.frozen_bound()
        self.freeze()
        body, elapsed = self.detail(path=DETAIL + '&limit=50')
        self.assertEqual(expected[:50], [s['id'] for s in body['servers']])
        self.assertLessEqual(elapsed, bound)
        self.assert_listing_waited()
        for name in ('cell1', 'cell2'):
            self.assertNotIn('Cell %s is not responding'
                             % self.world.cells[name].uuid,
                             self.logs.output)
        self.assertIn('Cell %s is not responding'
                      % self.world.cells['cell3'].uuid, self.logs.output)

    def test_novas_full_cell_pool_does_not_hold_the_view(self):
        """The view's lookups do not queue behind nova's frozen reads.

        Server pages of the frozen cell's servers (``GET
        /servers/{id}``: nova reads the server in its cell, waiting up to
        nova's 60 s ``CELL_TIMEOUT``) hold every thread of nova's
        ``cell_worker`` pool (nova 33 on; nova 31 and 32 start a worker
        per call). A detail list now answers within the bound, and the
        healthy cells' servers as with every cell healthy: the attached
        volumes and the ERROR server's fault are read on the listing's
        own workers.

        Regression: in the multi-process cloud (nova-api at 2 uwsgi
        workers x 8 threads), a list took 90.5 s with a cell frozen: 60 s
        of ``list_cell_timeout``, then 30 s more, its block device
        mapping and fault lookups queued for nova's pool.
        """
        pages = 2
        if 'cell_worker_thread_pool_size' in CONF:
            self.cfg.config(cell_worker_thread_pool_size=pages)
        volume = self._attach_volume('cell1')
        fault = self._add_fault('cell0')
        healthy = self.uuids_of('cell0', 'cell1', 'cell2')

        def by_id(body):
            return {s['id']: s for s in body['servers'] if s['id'] in healthy}

        before, _ = self.detail()
        self.assertIn(volume, str(before))
        self.assertIn(fault, str(before))
        bound = self.frozen_bound()
        shown = []
        self.addCleanup(self._join, shown)
        self.freeze()
        for uuid in sorted(self.expected['cell3'])[:pages]:
            shown.append(self._show_in_thread(uuid))
        self._wait_until_blocked(pages)

        body, elapsed = self.detail()
        self.assertLessEqual(elapsed, bound)
        self.assert_listing_waited()
        self.assertEqual(by_id(before), by_id(body))
        self.assertNotIn('cell_worker pool does not have free threads',
                         self.logs.output)
        # The frozen cell's pages answer once it thaws, as nova's do.
        self.victim.thaw()
        self._join(shown)
        self.assertEqual([[uuid] for uuid, _, _ in shown],
                         [[page['server']['id'] for page in answer]
                          for _, answer, _ in shown])
        self.assert_no_secret()

    def _attach_volume(self, cell):
        """A volume attached to one of *cell*'s servers: its id."""
        server = sorted(self.expected[cell])[0]
        volume = uuidutils.generate_uuid()
        self._write(cell, models.BlockDeviceMapping, dict(
            uuid=uuidutils.generate_uuid(), instance_uuid=server,
            source_type='volume', destination_type='volume',
            volume_id=volume, delete_on_termination=False, deleted=0))
        return volume

    def _add_fault(self, cell):
        """A fault of one of *cell*'s servers (all in ERROR): its text."""
        message = 'NoValidHost: no host in cell %s' % cell
        self._write(cell, models.InstanceFault, dict(
            instance_uuid=sorted(self.expected[cell])[0], code=500,
            message=message, details='', host=None, deleted=0))
        return message

    def _write(self, cell, model, row):
        """Insert *row* into *cell*'s table of *model*; gone at the end."""
        table = model.__table__
        engine = sa.create_engine(self.world.cells[cell].url,
                                  poolclass=sa.pool.NullPool)
        self.addCleanup(engine.dispose)
        with engine.begin() as conn:
            key = conn.execute(table.insert().values(**row)
                               ).inserted_primary_key[0]

        def delete():
            with engine.begin() as conn:
                conn.execute(table.delete().where(table.c.id == key))

        self.addCleanup(delete)

    def _show_in_thread(self, uuid):
        """``GET /servers/{uuid}`` through nova's controller, in a thread.

        :returns: (uuid, a list that holds the answer once it is given,
            the thread).
        """
        answer = []
        req = fakes.HTTPRequest.blank('/v2.1/servers/%s' % uuid,
                                      version='2.1', use_admin_context=True)

        def show():
            try:
                answer.append(self.controller.show(req, uuid))
            except Exception as exc:  # noqa: BLE001 - asserted below
                answer.append(exc)

        thread = threading.Thread(target=show, daemon=True)
        thread.start()
        return uuid, answer, thread

    def _join(self, shown):
        """Every thread of *shown* (:meth:`_show_in_thread`'s) ended."""
        for _uuid, _answer, thread in shown:
            thread.join(SAFETY)
            self.assertFalse(thread.is_alive(), 'a server page hangs')

    def _wait_until_blocked(self, count):
        """*count* requests wait, unread, at the frozen server.

        Read off the server's sockets, so it holds whether nova's
        workers are threads or green threads.
        """
        deadline = time.monotonic() + SAFETY
        while unread_requests_at(self.victim.port) < count:
            if time.monotonic() > deadline:
                self.fail('the server pages never reached the frozen cell')
            time.sleep(0.05)


class FrozenCellsSharingAHostTest(FrozenServerTestBase):
    """Two cells on one frozen server, clients listing all the while.

    Cell databases often share a host: cell3 and cell4 live on the
    victim server, frozen with SIGSTOP. Concurrent listings send each
    frozen cell a query, and each such query holds a worker until its
    I/O timeout (twice ``list_cell_timeout``): with a pool too small for
    that, the healthy cells' tasks queue behind them.
    """

    VICTIMS = ('cell3', 'cell4')
    #: Clients listing at once.
    CLIENTS = 4

    def time_listings(self):
        """Record each listing's wall time (marker, rounds), any thread."""
        self.listing_seconds = []
        lock = threading.Lock()
        original = api_instance_list._Listing.run

        def timed_run(listing, *args, **kwargs):
            start = time.monotonic()
            try:
                return original(listing, *args, **kwargs)
            finally:
                with lock:
                    self.listing_seconds.append(time.monotonic() - start)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.hooks.instance_list._Listing.run', timed_run))

    def burst_bound(self, base, clients=None, path=DETAIL):
        """*base* plus twice the slowest listing of the same burst, healthy.

        The same clients at once, every cell healthy, each listing every
        cell's servers: what they cost this machine (CPU, the GIL) is
        measured now, and the bound is on what the frozen cells and the
        starved pool add to it. Twice: on a loaded 2-core machine the
        slowest listing of the same burst varies by about itself, and a
        bound with it once failed a correct lister by 0.04 s. The wait
        these tests guard against was 8 x ``list_cell_timeout``.
        Starts :meth:`time_listings`.
        """
        self.time_listings()
        # A page (limit) holds only some of them.
        everything = self.uuids_of(*self.expected) if path == DETAIL else None
        for ids, _seconds, error in self.concurrent_details(clients, path):
            self.assertIsNone(error)
            if everything is not None:
                self.assertEqual(everything, ids)
        slowest = max(self.listing_seconds)
        self.listing_seconds.clear()
        return base + 2 * slowest

    def concurrent_details(self, clients=None, path=DETAIL):
        """GET *path* by *clients* (:attr:`CLIENTS`) clients at once.

        :returns: each client's (server ids, seconds, error or None).
        """
        clients = clients or self.CLIENTS
        barrier = threading.Barrier(clients)
        results = [None] * clients

        def client(n):
            req = fakes.HTTPRequest.blank(path, version='2.1',
                                          use_admin_context=True)
            barrier.wait(SAFETY)
            start = time.monotonic()
            try:
                with request_state.scope():
                    body = self.controller.detail(req)
            except Exception as exc:  # noqa: BLE001 - reported below
                results[n] = (set(), time.monotonic() - start, exc)
            else:
                results[n] = (self.ids(body), time.monotonic() - start,
                              None)

        threads = [threading.Thread(target=client, args=(n,))
                   for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SAFETY * 6)
            self.assertFalse(thread.is_alive(), 'a request hangs')
        return results

    def assert_listings_within(self, bound):
        """Every listing timed by :meth:`time_listings` ended by *bound*."""
        for seconds in self.listing_seconds:
            self.assertLessEqual(
                seconds, bound, 'a listing waited %.2fs (bound %.2fs; all: '
                '%s)' % (seconds, bound, ', '.join(
                    '%.2f' % s for s in sorted(self.listing_seconds))))

    def assert_each_cell_whole_or_down(self, ids):
        """Every cell's servers are all listed or none (down), never part.
        """
        for name, uuids in self.expected.items():
            listed = uuids & ids
            self.assertIn(listed, (set(), uuids),
                          '%s is partly listed' % name)

    def test_frozen_cells_and_a_busy_pool_cost_time_not_rows(self):
        """A pool filled by the frozen cells' queries drops no healthy row.

        ``list_max_workers = 4`` for :attr:`CLIENTS` clients and 5 cells:
        the frozen cells' queries fill the pool and the healthy cells'
        tasks of the later requests queue behind them. Every listing
        still lists every healthy cell whole, without the frozen cells'
        servers, within ``REQUEST_FACTOR x list_cell_timeout`` for the
        queue plus ``list_cell_timeout`` for the frozen cells (+ 1 s)
        beyond what the same clients take with every cell healthy
        (:meth:`burst_bound`).

        Regression: a healthy cell whose task had not started by the
        listing's deadline was reported down (a page without its rows).
        """
        self.wait_for_stuck_queries_to_end()
        pool.shutdown()
        self.cfg.config(list_max_workers=4, group='cellsched')
        self.addCleanup(pool.shutdown)
        bound = self.burst_bound(BUSY_BOUND)
        self.freeze()
        healthy = self.uuids_of('cell0', 'cell1', 'cell2')
        for ids, _seconds, error in self.concurrent_details():
            self.assertIsNone(error)
            self.assertEqual(healthy, ids)
        self.assertEqual(self.CLIENTS, len(self.listing_seconds))
        self.assert_listings_within(bound)
        for name in self.VICTIMS:
            self.assertIn('Cell %s is not responding'
                          % self.world.cells[name].uuid, self.logs.output)
        for name in ('cell0', 'cell1', 'cell2'):
            self.assertNotIn('Cell %s is not responding'
                             % self.world.cells[name].uuid,
                             self.logs.output)
        self.assert_no_secret()

    def test_a_burst_of_pages_under_a_frozen_cell_is_complete(self):
        """16 pages of 10 at once, a starved pool: every page is whole.

        The review's burst (48 listings of ``limit=10`` in one process,
        one cell frozen): 12 of 48 pages held fewer than 10 servers,
        healthy cells reported down because their tasks were still
        queued. Every page is now the first 10 healthy servers, and no
        page waits near the 8 x ``list_cell_timeout`` of the fault: 16
        listings of one process on a loaded 2-core machine are given one
        ``list_cell_timeout`` more than :data:`BUSY_BOUND` for the
        machine's own stalls.
        """
        self.wait_for_stuck_queries_to_end()
        body, _ = self.detail()
        healthy = self.uuids_of('cell0', 'cell1', 'cell2')
        first = [s['id'] for s in body['servers'] if s['id'] in healthy][:10]
        pool.shutdown()
        self.cfg.config(list_max_workers=4, group='cellsched')
        self.addCleanup(pool.shutdown)
        bound = self.burst_bound(BUSY_BOUND + CELL_TIMEOUT, clients=16,
                                 path=DETAIL + '&limit=10')
        self.freeze()
        pages = self.concurrent_details(clients=16,
                                         path=DETAIL + '&limit=10')
        for ids, _seconds, error in pages:
            self.assertIsNone(error)
            self.assertEqual(set(first), ids)
        self.assert_listings_within(bound)

    def test_a_pool_sized_for_the_load_lists_every_healthy_cell(self):
        """Workers for cells x (clients + stuck queries): nothing queues.

        The same freeze and clients with ``list_max_workers`` as
        :func:`~nova_cellsched.api.hooks.pool.pool_size` sizes it for
        4 request threads: every request lists every healthy cell,
        within the bound, the frozen cells reported down.
        """
        self.wait_for_stuck_queries_to_end()
        pool.shutdown()
        self.cfg.config(list_max_workers=pool.pool_size(
            len(self.expected), self.CLIENTS, STUCK_CAP, 1000),
            group='cellsched')
        self.addCleanup(pool.shutdown)
        bound = self.burst_bound(BOUND)
        self.freeze()
        healthy = self.uuids_of('cell0', 'cell1', 'cell2')
        for ids, _seconds, error in self.concurrent_details():
            self.assertIsNone(error)
            self.assertEqual(healthy, ids)
        self.assert_listings_within(bound)
