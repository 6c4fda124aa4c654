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

"""32 threads list instances of 10 cells at once.

Ten cells and cell0 on two private MariaDB servers (the API database on
the first). A set of queries (orders, limits, markers, filters, cell
subsets, joined details, a non-admin context) is answered once, checked
against nova's DB API in every cell (and nova's own lister where it can
order them), and then asked by 32 threads at once sharing one engine
cache, as the threads of nova-api would. Every answer must be the same,
and every query must be answered right under load; afterwards the
threads and the database connections must go back to where they were.

By default each thread asks one query, all of them released together (32
concurrent listings, each query at least three times): no time limit,
so the assertions do not depend on the machine's speed. Set
NOVA_CELLSCHED_LOAD_SECONDS (e.g. 30) to keep the threads listing for
that long instead, for the load figures in the README.

Latency, throughput and memory are kept in the test's details (stestr
keeps them), never asserted: the machine is shared.
"""

import os
import resource
import statistics
import threading
import time

from nova.compute import vm_states
import nova.conf
from nova import context as nova_context
import nova.context
from nova.db.main import api as nova_db
from nova import objects
from nova.tests import fixtures as nova_fixtures
from oslo_config import fixture as config_fixture
import psutil
import sqlalchemy as sa
import testtools.content

from nova_cellsched import conf as conf_mod
from nova_cellsched import records
from nova_cellsched.records import query as instance_query
from tests.fixtures import mariadb_server as mdb
from tests.fixtures import worlds
from tests.functional.test_listing_vs_nova import nova_uuids

CONF = nova.conf.CONF
#: Seconds of load, from NOVA_CELLSCHED_LOAD_SECONDS; unset: one round.
LOAD_SECONDS = os.environ.get('NOVA_CELLSCHED_LOAD_SECONDS', '').strip()
THREADS = 32
CELLS = 10
LIVE = 150


def _percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return float('nan')
    index = min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _duration():
    """Seconds of sustained load asked for; None for one round."""
    if not LOAD_SECONDS:
        return None
    try:
        seconds = float(LOAD_SECONDS)
    except ValueError:
        raise ValueError('NOVA_CELLSCHED_LOAD_SECONDS must be a number of '
                         'seconds, such as 30, not %r' % LOAD_SECONDS)
    if not seconds > 0:
        raise ValueError('NOVA_CELLSCHED_LOAD_SECONDS must be positive, '
                         'not %r' % LOAD_SECONDS)
    return seconds


class ListingLoadTest(mdb.ServersTestCase):

    @classmethod
    def set_up_servers(cls):
        cls.first = cls.start_server('load-a')
        cls.second = cls.start_server('load-b')
        population = worlds.Population(instances=LIVE,
                                     deleted_per_instance=1, hosts=10,
                                     metadata_keys=2)
        cells = [('cell0', cls.first,
                  worlds.Population(instances=15, error_only=True))]
        for index in range(1, CELLS + 1):
            cells.append(('cell%d' % index,
                          cls.first if index <= CELLS // 2
                          else cls.second, population))
        cls.world = worlds.build_world(cls.first, cells, seed_value=3)

    def setUp(self):
        super().setUp()
        self.cfg = self.useFixture(config_fixture.Config(CONF))
        conf_mod.register_opts(CONF)
        self.use_world = self.useFixture(worlds.UseWorld(self.world))
        # nova's lister (the yardstick) starts nova's cell worker pool.
        self.useFixture(nova_fixtures.IsolatedExecutorFixture(self.id()))
        # nova picks its name-filter operator from [database] connection.
        self.cfg.config(connection=self.world.cells['cell1'].url,
                        group='database')

    def queries(self):
        """(label, context, kwargs) of the queries the threads ask."""
        admin = nova_context.get_admin_context()
        project = self.world.projects[0]
        user = nova_context.RequestContext(user_id='someone',
                                           project_id=project,
                                           is_admin=False)
        everything = sorted(set().union(*self.world.live_uuids().values()))
        marker = everything[len(everything) // 3]
        return [
            ('default order, limit 100', admin, dict(limit=100)),
            ('display_name asc, marker, limit 50', admin, dict(
                sort_keys=['display_name'], sort_dirs=['asc'], limit=50,
                marker=marker)),
            ('uuid asc, limit 1000 (refetches)', admin, dict(
                sort_keys=['uuid'], sort_dirs=['asc'], limit=1000)),
            ('one project, all of it', admin, dict(
                filters={'project_id': project},
                sort_keys=['created_at'], sort_dirs=['desc'])),
            ('active/stopped by host', admin, dict(
                filters={'vm_state': [vm_states.ACTIVE, vm_states.STOPPED]},
                sort_keys=['host', 'display_name'],
                sort_dirs=['asc', 'desc'], limit=300)),
            ('two cells', admin, dict(cells=['cell2', 'cell9'], limit=200)),
            ('detail fields', admin, dict(fields=records.DETAIL_FIELDS,
                                          limit=40)),
            ('deleted', admin, dict(filters={'deleted': True}, limit=120,
                                    sort_keys=['launched_at'],
                                    sort_dirs=['asc'])),
            ('non-admin context', user, dict(limit=500)),
        ]

    def check_against_nova_and_sql(self, label, ctx, kwargs, got):
        """The single-threaded answers are right to begin with.

        Every answer is the instances nova's DB API finds in the asked
        cells for the same filters and context, as many as the limit
        lets in (all of them without one), each once; where nova's own
        lister can order them, in nova's order.
        """
        mappings = {cm.name: cm for cm in objects.CellMappingList.get_all(
            nova_context.get_admin_context())}
        matching = self._by_nova_db(
            ctx, [mappings[n] for n in kwargs.get('cells') or mappings],
            kwargs.get('filters') or {})
        self.assertTrue(got, label)
        self.assertEqual(len(got), len(set(got)), label)
        self.assertLessEqual(set(got), matching, label)
        if 'marker' not in kwargs:
            self.assertEqual(min(len(matching),
                                 kwargs.get('limit') or len(matching)),
                             len(got), label)
        keys = kwargs.get('sort_keys') or []
        if 'host' not in keys and 'launched_at' not in keys and \
                ctx.is_admin:
            # nova's merge cannot compare NULL sort values; these keys
            # never are NULL in the seeded cells.
            cells = [mappings[n] for n in kwargs.get('cells') or mappings]
            filters = dict(kwargs.get('filters') or {})
            filters.setdefault('deleted', False)
            expected = nova_uuids(ctx, cells, filters, kwargs.get('limit'),
                                  kwargs.get('marker'), keys,
                                  kwargs.get('sort_dirs') or [])
            self.assertEqual(expected, got, label)
        if 'limit' not in kwargs:
            project = kwargs['filters']['project_id']
            self.assertEqual(
                set(self._by_sql(project_id=project)), set(got), label)
        if not ctx.is_admin:
            self.assertLessEqual(set(got),
                                 set(self._by_sql(project_id=ctx.project_id)))

    def _by_nova_db(self, ctx, cells, filters):
        """uuids of what nova's DB API lists in *cells* for *ctx*."""
        filters = dict(filters)
        filters.setdefault('deleted', False)
        found = set()
        for cm in cells:
            with nova_context.target_cell(ctx, cm) as cctxt:
                found.update(i['uuid'] for i in
                             nova_db.instance_get_all_by_filters_sort(
                                 cctxt, dict(filters), columns_to_join=[]))
        return found

    def _by_sql(self, project_id):
        table = instance_query.INSTANCES
        out = []
        for cell in self.world.cells.values():
            engine = sa.create_engine(cell.url, poolclass=sa.pool.NullPool)
            with engine.connect() as conn:
                out += [r[0] for r in conn.execute(sa.select(
                    table.c.uuid).where(table.c.deleted == 0,
                                        table.c.project_id == project_id))]
            engine.dispose()
        return out

    def connections(self):
        return (self.first.threads_connected(),
                self.second.threads_connected())

    def test_32_threads_list_right_at_once(self):
        duration = _duration()
        # A connection of the class set-up may still be closing: let the
        # servers settle (bounded) before taking the baseline.
        cold_conns = _settle(self.connections, (0, 0), seconds=5.0)
        engines = instance_query.EngineCache(io_timeout=60)
        self.addCleanup(engines.dispose)
        queries = []
        for label, ctx, kwargs in self.queries():
            result = records.list_instances(ctx, engines=engines, **kwargs)
            self.assertTrue(result.complete, (label, result.failures))
            got = [r['uuid'] for r in result.instances]
            self.assertTrue(got, label)
            self.check_against_nova_and_sql(label, ctx, kwargs, got)
            queries.append((label, ctx, kwargs, got))
        # nova's lister (the check above) keeps an engine per cell.
        for db_connection, _mq in nova.context.CELL_CACHE.values():
            db_connection.dispose_pool()

        process = psutil.Process()
        baseline_threads = threading.active_count()
        warm_conns = self.connections()
        rss_start = process.memory_info().rss
        latencies = [[] for _ in range(THREADS)]
        errors, wrong = [], []
        answered = {label: 0 for label, *_ in queries}
        go = threading.Event()
        done = threading.Event()
        samples = {'rss': [rss_start], 'threads': [baseline_threads],
                   'conns': [warm_conns]}

        def monitor():
            tick = 0
            while not done.wait(0.25):
                samples['rss'].append(process.memory_info().rss)
                samples['threads'].append(threading.active_count())
                tick += 1
                if tick % 4 == 0:
                    samples['conns'].append(self.connections())

        def more(asked, stop_at):
            if len(errors) >= 20:
                return False
            if duration is None:
                return asked < 1
            return time.monotonic() < stop_at

        def worker(index):
            count = index
            go.wait(60)
            stop_at = time.monotonic() + (duration or 0)
            while more(count - index, stop_at):
                label, ctx, kwargs, expected = queries[count % len(queries)]
                count += 1
                start = time.perf_counter()
                try:
                    result = records.list_instances(ctx, engines=engines,
                                                    **kwargs)
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append('%s: %r' % (label, exc))
                    continue
                latencies[index].append(time.perf_counter() - start)
                got = [r['uuid'] for r in result.instances]
                if not result.complete or got != expected:
                    wrong.append((label, [f.describe()
                                          for f in result.failures]))
                else:
                    answered[label] += 1

        watcher = threading.Thread(target=monitor, name='load-monitor')
        watcher.start()
        workers = [threading.Thread(target=worker, args=(i,),
                                    name='load-%d' % i)
                   for i in range(THREADS)]
        started = time.monotonic()
        for thread in workers:
            thread.start()
        go.set()
        for thread in workers:
            thread.join(timeout=max(
                1.0, started + (duration or 0) + 180 - time.monotonic()))
        stuck = [t.name for t in workers if t.is_alive()]
        wall = time.monotonic() - started
        done.set()
        watcher.join(10)
        after_load_conns = self.connections()
        rss_end = process.memory_info().rss

        # Let the pools' idle workers exit, then close the pools.
        threads_after = _settle(lambda: threading.active_count(),
                                baseline_threads + 2)
        engines.dispose()
        self.use_world.facade.dispose_pool()
        conns_after = _settle(self.connections, cold_conns)

        flat = [x for per in latencies for x in per]
        report = []
        peak_conns = tuple(max(c[i] for c in samples['conns'])
                           for i in range(2))
        report.append('load: %d threads x %s against %d cells (+cell0): %d '
              'listings in %.1fs (%.1f/s), %d errors, %d wrong answers'
              % (THREADS, 'one round' if duration is None
                 else '%.0fs' % duration, CELLS, len(flat), wall,
                 len(flat) / wall, len(errors), len(wrong)))
        report.append(
            'load: latency p50 %.3fs, p90 %.3fs, p99 %.3fs, max %.3fs, '
            'mean %.3fs' % (
                  _percentile(flat, 0.5), _percentile(flat, 0.9),
                  _percentile(flat, 0.99), max(flat or [0]),
                  statistics.fmean(flat) if flat else 0.0))
        report.append('load: threads baseline %d, peak %d, after %d'
              % (baseline_threads, max(samples['threads']), threads_after))
        report.append(
            'load: connections (server a, server b) cold %s, warm %s, '
            'peak %s, idle in pools after the load %s, after closing '
              'the pools %s' % (cold_conns, warm_conns, peak_conns,
                                after_load_conns, conns_after))
        report.append('load: RSS start %.0f MiB, peak %.0f MiB, end %.0f MiB; '
              'ru_maxrss %.0f MiB' % (
                  rss_start / 2**20, max(samples['rss']) / 2**20,
                  rss_end / 2**20,
                  resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
        _report(self, 'load-report', report)

        self.assertEqual([], stuck, 'deadlock: threads still listing')
        self.assertEqual([], errors)
        self.assertEqual([], wrong[:10])
        if duration is None:
            self.assertEqual(THREADS, len(flat))
        else:
            self.assertGreaterEqual(len(flat), THREADS)
        # Every query was answered right under load, not only some.
        self.assertEqual([], [label for label, n in answered.items()
                              if not n])
        self.assertLessEqual(threads_after, baseline_threads + 2)
        # Every pool is bounded (5 + 10 overflow per cell, nova's API
        # pool 5 + 50 on server a) and keeps at most 5 idle connections.
        cells_a = len(self.world.on(self.first))
        cells_b = len(self.world.on(self.second))
        self.assertLessEqual(peak_conns[0], cold_conns[0] + 15 * cells_a
                             + 55)
        self.assertLessEqual(peak_conns[1], cold_conns[1] + 15 * cells_b)
        self.assertLessEqual(after_load_conns[0],
                             cold_conns[0] + 5 * cells_a + 5)
        self.assertLessEqual(after_load_conns[1],
                             cold_conns[1] + 5 * cells_b)
        # Every connection the load opened is closed again.
        self.assertLessEqual(conns_after[0], cold_conns[0])
        self.assertLessEqual(conns_after[1], cold_conns[1])
        self.assertLess(max(samples['rss']) - rss_start, 1024 * 2**20)


def _report(test, name, lines):
    """Keep *lines* as a test detail (in the subunit, not printed)."""
    text = '\n'.join(lines)
    test.addDetail(name, testtools.content.text_content(text))


def _settle(measure, target, seconds=30.0):
    """Poll *measure* (bounded) until it is at most *target*."""
    deadline = time.monotonic() + seconds
    value = measure()
    while time.monotonic() < deadline:
        value = measure()
        if (value <= target if isinstance(value, int)
                else all(v <= t for v, t in zip(value, target))):
            return value
        time.sleep(0.25)
    return value
