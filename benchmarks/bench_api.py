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

"""nova-api's GET /servers/detail end to end: nova's lister vs ours.

One process, nova-api's own code path: ``ServersController.detail`` of
``nova.api.openstack.compute.servers`` (policy, ``compute.API.get_all``,
``InstanceList.fill_faults``, the view builder, response validation as
``[api] response_validation`` says) on a ``fakes.HTTPRequest`` (admin,
``all_tenants=1&limit=1000``), with :func:`nova_cellsched.api.install`
active and ``[cellsched] api_lister`` switched off (nova's lister) and
on (ours) alternately, on the same MariaDB data::

    python benchmarks/bench_api.py --out benchmarks/results/
    python benchmarks/bench_api.py --quick

**Data.** The worlds of ``benchmarks/bench_listing.py`` (seeded by
``benchmarks/seed_fast.py``: instances, instance_extra, info_cache,
system_metadata, metadata, instance_mappings shaped as nova writes them)
plus one ``request_specs`` row per instance in the API database (what
the view reads at >= 2.96), reused when present.

**Measured**, medians of ``--repeat`` runs per (world, microversion,
lister): the controller end to end; inside it, the replaced part
(``nova.compute.instance_list.get_instance_objects_sorted``: gather and
objects), ``InstanceList.fill_faults``, the view builder's ``detail``
and, inside the view, its RequestSpec lookup (>= 2.96), host statuses
(>= 2.16), security groups (neutron, stubbed: returns ``default``) and
block device mappings; response validation as the difference between
``response_validation = warn`` (nova's default) and ``ignore``, measured
alternately; the time of Python's full (generation-2) garbage
collections in the request and inside the replaced part. Every request
starts after a full collection (``gc.collect()``, not timed): otherwise
where the previous request left the collector's counters decides which
lister pays for the next 300-400 ms collection, and the same code
measured 2.56x and 0.84x for the replaced part in two runs. The
collections a request's own allocations cause are still in it. Bodies
of the two listers are compared (equal or abort).
MariaDB connections of this process (one API worker) are counted after
nova's lister alone ran and after ours ran too. ``--frozen`` runs a
private mariadbd (``tests/fixtures/mariadb_server.py``) holding one
cell and freezes it (SIGSTOP): ours answers within ``[cellsched]
list_cell_timeout``; nova's lister runs in a thread and is given
``--frozen-wait`` seconds.

**Databases.** mysqlclient (``benchmarks/requirements.txt``) is checked
before anything touches the server. A run drops the ``ncsbench_*``
databases it created when it ends (also on failure); ``--keep`` keeps
them for the next run. ``--cleanup`` drops the databases of the worlds
the other options name (what a run with the same options made) and
exits; a database another connection uses is left. ``--render
FILE.json`` writes the markdown of a stored result again.
"""

import os
import sys

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import bench_listing  # noqa: E402  (applies nova's monkey patching)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from nova.api.openstack import api_version_request  # noqa: E402
from nova.api.openstack.compute import servers as servers_api  # noqa: E402
from nova.api.openstack.compute.views import servers as views_servers  # noqa
from nova.compute import api as compute_api  # noqa: E402
from nova.compute import instance_list as nova_instance_list  # noqa: E402
import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.network import security_group_api  # noqa: E402
from nova import objects  # noqa: E402
from nova import policy  # noqa: E402
from nova.tests.unit.api.openstack import fakes  # noqa: E402
from oslo_serialization import jsonutils  # noqa: E402
import pymysql  # noqa: E402
import sqlalchemy as sa  # noqa: E402

import nova_cellsched  # noqa: E402
import nova_cellsched.api as cellsched_api  # noqa: E402
from nova_cellsched.api.hooks import instance_list as api_instance_list  # noqa
from nova_cellsched.api.hooks import pool  # noqa: E402
from nova_cellsched.api.middleware import request_state  # noqa: E402
from nova_cellsched.api.view import lookups as api_view  # noqa: E402

import reporting  # noqa: E402
import runinfo  # noqa: E402
import seed_fast  # noqa: E402
from tests.fixtures import request_specs  # noqa: E402

CONF = nova.conf.CONF
MAX_VERSION = api_version_request._MAX_API_VERSION
LISTERS = ('nova', 'ours')


# --------------------------------------------------------------------------
# timing nova's pieces

class Clocks:
    """Seconds spent in wrapped functions, per name, for one request."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._depth: dict[str, int] = {}
        self._gc_start = 0.0

    def reset(self) -> None:
        self.spent = {}

    def gc_callback(self, phase: str, info: dict[str, Any]) -> None:
        """Time full (generation 2) collections: ``gc``, ``replaced:gc``.

        ``replaced:gc`` holds those inside the replaced part: a
        collection stops every thread, so it is charged to it.
        """
        if info['generation'] != 2:
            return
        if phase == 'start':
            self._gc_start = time.perf_counter()
            return
        spent = time.perf_counter() - self._gc_start
        self.spent['gc'] = self.spent.get('gc', 0.0) + spent
        if self._depth.get('replaced', 0):
            self.spent['replaced:gc'] = self.spent.get(
                'replaced:gc', 0.0) + spent

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Time ``owner.name`` (function, method, class/staticmethod)."""
        original = getattr(owner, name)   # bound for a classmethod
        descriptor = vars(owner).get(name) if isinstance(owner, type) \
            else None

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            # Outermost call only (recursion, nested wrappers).
            depth = self._depth.get(label, 0)
            self._depth[label] = depth + 1
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._depth[label] = depth
                if depth == 0:
                    self.spent[label] = self.spent.get(label, 0.0) + (
                        time.perf_counter() - start)

        if isinstance(descriptor, (staticmethod, classmethod)):
            setattr(owner, name, staticmethod(timed))
        else:
            setattr(owner, name, timed)


CLOCKS = Clocks()


def instrument() -> None:
    """Time the parts of nova-api's request (after install())."""
    CLOCKS.wrap(nova_instance_list, 'get_instance_objects_sorted',
                'replaced')
    # Ours only: the rows (all cells' batches and the merge); the rest of
    # the replaced part is nova's _make_instance_list (objects).
    CLOCKS.wrap(api_instance_list._Listing, 'run', 'replaced:rows')
    CLOCKS.wrap(objects.InstanceList, 'fill_faults', 'faults')
    CLOCKS.wrap(views_servers.ViewBuilder, 'detail', 'view')
    CLOCKS.wrap(objects.RequestSpec, 'get_by_instance_uuids',
                'view:request_specs')
    # Ours reads the zones and hints without RequestSpec objects
    # ([cellsched] api_view_request_specs): the same clock.
    CLOCKS.wrap(api_view, 'request_spec_fields', 'view:request_specs')
    CLOCKS.wrap(compute_api.API, 'get_instances_host_statuses',
                'view:host_status')
    CLOCKS.wrap(security_group_api, 'get_instances_security_groups_bindings',
                'view:security_groups')
    CLOCKS.wrap(views_servers.ViewBuilder,
                '_get_instance_bdms_in_multiple_cells', 'view:bdms')
    CLOCKS.wrap(objects.BuildRequestList, 'get_by_filters', 'build_requests')
    gc.callbacks.append(CLOCKS.gc_callback)


# --------------------------------------------------------------------------
# data

def seed_request_specs(api_url: str, log: Any) -> int:
    """One request_specs row per mapped instance (kept when present)."""
    conn = seed_fast.mysql_connect(api_url)
    try:
        cursor = conn.cursor()
        cursor.execute(
            'SELECT m.instance_uuid, m.project_id, m.user_id FROM '
            'instance_mappings m LEFT JOIN request_specs r ON '
            'r.instance_uuid = m.instance_uuid WHERE r.id IS NULL')
        missing = cursor.fetchall()
        if not missing:
            return 0
        template_uuid = '11111111-2222-3333-4444-555555555555'
        # The tests' spec as nova-api stores it at boot, with placeholders
        # replaced per row below.
        spec = request_specs.stored_request_spec(
            template_uuid, project_id='P' * 32, user_id='U' * 32,
            availability_zone='nova')
        template = jsonutils.dumps(spec.obj_to_primitive())
        rows = [(u, template.replace(template_uuid, u)
                 .replace('P' * 32, p or '').replace('U' * 32, u2 or ''))
                for u, p, u2 in missing]
        for start in range(0, len(rows), 2000):
            cursor.executemany(
                'INSERT INTO request_specs (instance_uuid, spec, created_at) '
                'VALUES (%s, %s, NOW())', rows[start:start + 2000])
        conn.commit()
        log('seeded %d request_specs' % len(rows))
        return len(rows)
    finally:
        conn.close()


def world_connections(server: str, prefix: str) -> int:
    """Connections open on the server to this world's databases."""
    url = sa.engine.make_url(server)
    conn = pymysql.connect(host=url.host, port=url.port or 3306,
                           user=url.username, password=url.password or '')
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                'SELECT COUNT(*) FROM information_schema.PROCESSLIST '
                'WHERE DB LIKE %s', (prefix + '%',))
            return int(cursor.fetchone()[0])
    finally:
        conn.close()


# --------------------------------------------------------------------------
# one request

def request(controller: Any, version: str, limit: int) -> Any:
    return fakes.HTTPRequest.blank(
        '/v2.1/servers/detail?all_tenants=1&limit=%d' % limit,
        version=version, use_admin_context=True)


def run_once(controller: Any, lister: str, version: str, limit: int,
             validation: str = 'warn') -> dict[str, Any]:
    CONF.set_override('api_lister', lister == 'ours', 'cellsched')
    CONF.set_override('response_validation', validation, 'api')
    req = request(controller, version, limit)
    # Every request starts from the same collector state; see the notes.
    gc.collect()
    CLOCKS.reset()
    start = time.perf_counter()
    # The request's state, as the paste filter's middleware opens it:
    # without it the view lookups of the listed cells stand aside.
    with request_state.scope():
        body = controller.detail(req)
    total = time.perf_counter() - start
    sample = {'total': total}
    sample.update(CLOCKS.spent)
    sample['body'] = jsonutils.dump_as_bytes(body)
    sample['servers'] = len(body['servers'])
    return sample


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float('nan')


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def measure(controller: Any, version: str, limit: int, repeat: int,
            log: Any) -> dict[str, Any]:
    """Both listers alternately; medians; bodies compared."""
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in LISTERS}
    unchecked: dict[str, list[float]] = {k: [] for k in LISTERS}
    # Warm: both paths once (engines, caches, imports).
    bodies = {k: run_once(controller, k, version, limit)['body']
              for k in LISTERS}
    if bodies['nova'] != bodies['ours']:
        raise SystemExit('ABORT: bodies differ at %s' % version)
    for index in range(repeat):
        order = LISTERS if index % 2 == 0 else LISTERS[::-1]
        for lister in order:
            sample = run_once(controller, lister, version, limit)
            if sample.pop('body') != bodies[lister]:
                raise SystemExit('ABORT: %s body changed at %s'
                                 % (lister, version))
            # What the timed parts leave of this very request: never
            # negative (the parts are disjoint calls inside it).
            sample['other'] = sample['total'] - sample.get(
                'replaced', 0.0) - sample.get('faults', 0.0) - sample.get(
                'view', 0.0)
            samples[lister].append(sample)
        for lister in order:
            unchecked[lister].append(run_once(
                controller, lister, version, limit, 'ignore')['total'])
    out: dict[str, Any] = {'version': version, 'limit': limit,
                           'servers': samples['ours'][0]['servers'],
                           'body_bytes': len(bodies['ours'])}
    for lister in LISTERS:
        keys = sorted({k for s in samples[lister] for k in s
                       if k != 'servers'})
        med = {k: median([s.get(k, 0.0) for s in samples[lister]])
               for k in keys}
        med['total:validation_ignored'] = median(unchecked[lister])
        med['validation'] = med['total'] - med['total:validation_ignored']
        if 'replaced:rows' in med:
            med['replaced:objects'] = med['replaced'] - med['replaced:rows']
        # No "rest" = total - parts - validation: each term would be a
        # median of other samples (validation even of other requests),
        # and their difference went negative (bench results of
        # 2026-11-23). "other" is the median of each request's own rest.
        out[lister] = {k: ms(v) for k, v in med.items()}
        out[lister + '_samples_total'] = [ms(s['total'])
                                          for s in samples[lister]]
    out['ratio_total'] = round(out['nova']['total'] /
                               out['ours']['total'], 2)
    out['ratio_replaced'] = round(out['nova']['replaced'] /
                                  out['ours']['replaced'], 2)
    out['ratio_total_validation_ignored'] = round(
        out['nova']['total:validation_ignored'] /
        out['ours']['total:validation_ignored'], 2)
    log('  %-5s nova %8.1f ms (replaced %7.1f)  ours %8.1f ms (replaced '
        '%6.1f)  end to end x%.2f, replaced x%.2f'
        % (version, out['nova']['total'], out['nova']['replaced'],
           out['ours']['total'], out['ours']['replaced'],
           out['ratio_total'], out['ratio_replaced']))
    return out


def profile_ours(limit: int, path: str) -> str:
    """cProfile of ours' replaced part in every thread, top entries.

    The caller (merge, nova's objects) and the cell workers (nova's DB
    API): the worker pool is restarted inside the profiler so that its
    threads are profiled too.
    """
    CONF.set_override('api_lister', True, 'cellsched')
    ctx = nova_context.get_admin_context()
    # compute.API.get_all's expected_attrs for detail at 2.1.
    attrs = ['metadata', 'info_cache', 'security_groups'] + (
        views_servers.ViewBuilder().get_show_expected_attrs())
    pool.shutdown()
    with bench_listing.ThreadProfiler() as profiler:
        for _ in range(3):
            nova_instance_list.get_instance_objects_sorted(
                ctx, {'deleted': False}, limit, None, list(attrs), None,
                None)
    # A profiler stays on in the threads it started in: measurements
    # after this one get a new pool.
    pool.shutdown()
    stream = io.StringIO()
    stats = profiler.stats()
    stats.stream = stream  # type: ignore[attr-defined]
    stats.sort_stats('cumulative').print_stats(45)
    stats.sort_stats('tottime').print_stats(30)
    with open(path, 'w') as handle:
        handle.write(runinfo.scrub(stream.getvalue()))
    return path


# --------------------------------------------------------------------------
# a frozen cell

def frozen_run(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    """Freeze one cell's private mariadbd; time both listers."""
    from nova_cellsched.demo import seed
    from tests.fixtures import mariadb_server as mdb

    api = mdb.MariaDBServer('bench-api')
    victim = mdb.MariaDBServer('bench-victim')
    result: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        # Each server is stopped (the victim thawed first) however the
        # run ends, also when the other one fails to start.
        for server in (api, victim):
            stack.callback(server.cleanUp)
            server.setUp()
        stack.callback(victim.thaw)
        population = seed.Population(instances=100)
        world = mdb.build_world(api, [
            ('cell0', api, seed.Population(instances=2, error_only=True)),
            ('cell1', api, population), ('cell2', api, population),
            ('cell3', victim, population)])
        fixture = mdb.UseWorld(world)
        fixture.setUp()
        nova_context.CELLS = []
        CONF.set_override('connection', world.cells['cell1'].url,
                          'database')
        CONF.set_override('list_cell_timeout', args.frozen_timeout,
                          'cellsched')
        try:
            controller = servers_api.ServersController()
            for lister in LISTERS:   # warm: engines to every cell
                run_once(controller, lister, '2.1', 1000)
            victim.freeze()
            ours = run_once(controller, 'ours', '2.1', 1000)
            result['ours_seconds'] = round(ours['total'], 2)
            result['ours_servers'] = ours['servers']
            result['healthy_servers'] = sum(
                len(v) for k, v in world.live_uuids(
                    ['cell0', 'cell1', 'cell2']).items())
            done: dict[str, Any] = {}

            def nova_lister() -> None:
                try:
                    done['sample'] = run_once(controller, 'nova', '2.1',
                                              1000)
                except Exception as exc:  # noqa: BLE001 - reported
                    done['error'] = repr(exc)

            # Set the override in this thread: CONF is process-wide.
            CONF.set_override('api_lister', False, 'cellsched')
            thread = threading.Thread(target=nova_lister, daemon=True)
            start = time.monotonic()
            thread.start()
            thread.join(args.frozen_wait)
            result['nova_answered_within_wait'] = not thread.is_alive()
            result['nova_waited_seconds'] = round(time.monotonic() - start,
                                                  1)
            victim.thaw()
            thread.join(300)
            result['nova_seconds_until_thaw_or_answer'] = round(
                time.monotonic() - start, 1)
            if 'sample' in done:
                result['nova_servers_after_thaw'] = done['sample']['servers']
            result['nova_error'] = done.get('error')
            result['list_cell_timeout'] = args.frozen_timeout
            result['wait'] = args.frozen_wait
        finally:
            CONF.clear_override('list_cell_timeout', 'cellsched')
            fixture.cleanUp()
            nova_context.CELLS = []
    log('frozen cell: ours answered in %.2f s with %d of %d healthy servers; '
        'nova answered within %d s: %s'
        % (result['ours_seconds'], result['ours_servers'],
           result['healthy_servers'], args.frozen_wait,
           result['nova_answered_within_wait']))
    return result


# --------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--server', default=os.environ.get(
        'NOVA_CELLSCHED_TEST_MYSQL_URL',
        'mysql+pymysql://root@127.0.0.1:3306/'))
    parser.add_argument('--worlds', default='10x1000,50x200',
                        help='cells x instances per cell, comma separated')
    parser.add_argument('--limit', type=int, default=1000)
    parser.add_argument('--versions', default='2.1,%s' % MAX_VERSION)
    parser.add_argument('--repeat', type=int, default=7)
    parser.add_argument('--frozen', action=argparse.BooleanOptionalAction,
                        default=True)
    parser.add_argument('--frozen-timeout', type=float, default=2.0,
                        help='[cellsched] list_cell_timeout of the frozen '
                        'run')
    parser.add_argument('--frozen-wait', type=float, default=20.0,
                        help="seconds nova's lister is given")
    parser.add_argument('--profile', action=argparse.BooleanOptionalAction,
                        default=True)
    parser.add_argument('--measure', action=argparse.BooleanOptionalAction,
                        default=True, help='--no-measure: connections and '
                        'profiles only')
    parser.add_argument('--quick', action='store_true',
                        help='smoke run: 2 x 100, 2 repeats, short frozen '
                        'run')
    reporting.add_output_arguments(parser, name='api')
    seed_fast.add_database_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.worlds, args.repeat, args.frozen_wait = '2x100', 2, 6.0
        args.profile = False
    args.worlds = [tuple(int(x) for x in w.split('x'))
                   for w in args.worlds.split(',') if w]
    args.versions = [v for v in args.versions.split(',') if v]
    return args


def other(side: dict[str, float]) -> float:
    """ms of a request outside replaced, faults and view (see notes)."""
    if 'other' in side:
        return side['other']
    return side['total'] - side.get('replaced', 0.0) - side.get(
        'faults', 0.0) - side.get('view', 0.0)


def write_markdown(path: str, report: dict[str, Any]) -> None:
    lines = ['# nova-api GET /servers/detail: nova\'s lister vs ours', '',
             '`%s` on %s, nova %s, Python %s, %d CPUs, medians of %d.' % (
                 report['command'], report['date'][:16], report['nova'],
                 report['python'], report['cpus'], report['repeat']), '',
             '| world | version | servers | nova ms | ours ms | x | '
             'replaced nova | replaced ours | x | faults n/o | view n/o | '
             'other n/o | validation (est.) n/o | full GC n/o |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    from_medians = False
    for p in report['points']:
        n, o = p['nova'], p['ours']
        from_medians = from_medians or 'other' not in n
        lines.append(
            '| %s | %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | '
            '%.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | '
            '%.0f / %.0f |' % (
                p['world'], p['version'], p['servers'], n['total'],
                o['total'], p['ratio_total'], n['replaced'], o['replaced'],
                p['ratio_replaced'], n.get('faults', 0), o.get('faults', 0),
                n.get('view', 0), o.get('view', 0), other(n), other(o),
                n['validation'], o['validation'], n.get('gc', 0),
                o.get('gc', 0)))
    lines += ['', 'Columns (ms are medians over the requests; n/o: nova\'s '
              'lister / ours):', '',
              '* world: cells x instances per cell; version: the request\'s '
              'microversion; servers: servers in the response.',
              '* nova ms, ours ms: the whole `ServersController.detail` '
              'call with `[api] response_validation = warn` (nova\'s '
              'default); x: nova / ours.',
              '* replaced: `get_instance_objects_sorted`, the part the '
              'filter replaces (gathering the rows, building the '
              'Instance objects); x: nova / ours.',
              '* faults: `InstanceList.fill_faults`; view: the view '
              'builder\'s `detail`.',
              '* other: per request, the total minus replaced, faults and '
              'view (response validation, policy, `compute.API.get_all`, '
              'BuildRequests, ...); never negative.' + (
                  ' For this run, recorded before per-request values were '
                  'kept, it is computed from the medians above (nova ms - '
                  'replaced - faults - view).' if from_medians else ''),
              '* validation (est.): the response validation part of '
              '"other", estimated as the median total with `warn` minus '
              'the median total with `ignore` (the second table): a '
              'difference of medians of different requests, so it may '
              'exceed "other" by the noise of either. The "rest" column '
              'of earlier results (total - replaced - faults - view - '
              'this estimate) was that noise when it went negative: not '
              'a measured time.',
              '* full GC: time in Python\'s generation-2 collections during '
              'the request; part of the other columns, not added to them.']
    lines += ['', 'With `[api] response_validation = ignore` (an '
              'operator\'s setting; the same requests, alternating, '
              'medians):', '',
              '| world | version | nova ms | ours ms | x |',
              '|---|---|---|---|---|']
    for p in report['points']:
        n, o = p['nova'], p['ours']
        lines.append('| %s | %s | %.0f | %.0f | %.2f |' % (
            p['world'], p['version'], n['total:validation_ignored'],
            o['total:validation_ignored'],
            p['ratio_total_validation_ignored']))
    lines += ['', 'What any replacement of the two functions could give '
              '(from the medians above): end to end if the replaced part '
              'took no time at all, nova total / (nova total - nova '
              'replaced); the replaced part while nova\'s '
              '`_make_instance_list` builds the objects and gathering took '
              'no time, nova replaced / our objects.', '',
              '| world | version | end to end x at best | replaced x at '
              'best with nova\'s objects |', '|---|---|---|---|']
    for p in report['points']:
        n, o = p['nova'], p['ours']
        rest = n['total'] - n['replaced']
        objects = o.get('replaced:objects', 0)
        lines.append('| %s | %s | %s | %s |' % (
            p['world'], p['version'],
            '%.2f' % (n['total'] / rest) if rest > 0 else '-',
            '%.2f' % (n['replaced'] / objects) if objects > 0 else '-'))
    lines += ['', 'Inside the replaced part (ours) and the view (ours, ms):',
              '', '| world | version | rows (gather + merge) | objects | '
              'full GC in replaced n/o | request_specs | host_status | '
              'security_groups | bdms |',
              '|---|---|---|---|---|---|---|---|---|']
    for p in report['points']:
        n, o = p['nova'], p['ours']
        lines.append('| %s | %s | %.0f | %.0f | %.0f / %.0f | %.0f | %.0f | '
                     '%.0f | %.0f |'
                     % (p['world'], p['version'], o.get('replaced:rows', 0),
                        o.get('replaced:objects', 0),
                        n.get('replaced:gc', 0), o.get('replaced:gc', 0),
                        o.get('view:request_specs', 0),
                        o.get('view:host_status', 0),
                        o.get('view:security_groups', 0),
                        o.get('view:bdms', 0)))
    lines += ['', 'rows: ours\' batches of all cells and the merge '
              '(`_Listing.run`); objects: replaced minus rows (nova\'s '
              '`_make_instance_list`); full GC in replaced: generation-2 '
              'collections inside the replaced part; request_specs, '
              'host_status, security_groups, bdms: the view\'s calls of '
              '`RequestSpec.get_by_instance_uuids` (2.96+), '
              '`get_instances_host_statuses` (2.16+), the security group '
              'bindings (neutron, stubbed) and '
              '`_get_instance_bdms_in_multiple_cells` (2.69+).']
    lines += ['', 'Connections to the world\'s databases held by this '
              'process (one API worker):', '']
    for world, counts in report['connections'].items():
        lines.append('* %s: nova\'s lister alone %d, after ours too %d' % (
            world, counts['nova'], counts['both']))
    if report.get('frozen'):
        f = report['frozen']
        lines += ['', 'Frozen cell (SIGSTOP of its mariadbd), '
                  'list_cell_timeout = %.0f s: ours answered in %.2f s with '
                  '%d of the %d healthy servers; nova\'s lister answered '
                  'within %.0f s: %s (it returned %.1f s after the start, '
                  'once the cell was thawed).' % (
                      f['list_cell_timeout'], f['ours_seconds'],
                      f['ours_servers'], f['healthy_servers'], f['wait'],
                      f['nova_answered_within_wait'],
                      f['nova_seconds_until_thaw_or_answer'])]
    lines += [''] + ['* ' + n for n in report['notes']]
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, write_markdown)
    reporting.require('bench_api.py', {} if args.cleanup else {
        'MySQLdb': 'mysqlclient: the seeder (LOAD DATA)'})
    worlds = [(cells, per_cell, 0) for cells, per_cell in args.worlds]
    if args.cleanup:
        seed_fast.cleanup(args.server, worlds)
        return 0
    with reporting.cleanly() as stack:
        stack.enter_context(seed_fast.databases_of_this_run(
            args.server, args.keep, worlds))
        return _main(args, argv)


def _main(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The run itself; :func:`main` checks and cleans up."""
    if args.out:
        os.makedirs(args.out, exist_ok=True)

    def log(text: str) -> None:
        print(text, flush=True)

    bench_listing.configure_nova(args.server)
    policy.init()
    security_group_api.get_instances_security_groups_bindings = (
        bench_listing._fake_sg_bindings)
    cellsched_api.install()
    instrument()
    log('nova_cellsched from %s' % os.path.dirname(nova_cellsched.__file__))
    points = []
    connections = {}
    for cells, per_cell in args.worlds:
        world = seed_fast.ensure_world(args.server, cells, per_cell, 0,
                                       progress=log)
        seed_request_specs(world['api_url'], log)
        setup = bench_listing.NovaPath(world, 'pymysql')
        try:
            controller = servers_api.ServersController()
            label = '%dx%d' % (cells, per_cell)
            log('%s (%s):' % (label, world['prefix']))
            for _ in range(2):
                run_once(controller, 'nova', MAX_VERSION, args.limit)
            nova_only = world_connections(args.server, world['prefix'])
            for _ in range(2):
                run_once(controller, 'ours', MAX_VERSION, args.limit)
            both = world_connections(args.server, world['prefix'])
            connections[label] = {'nova': nova_only, 'both': both,
                                  'cells': cells + 1}
            log('  connections: nova alone %d, with ours %d'
                % (nova_only, both))
            for version in args.versions if args.measure else ():
                point = measure(controller, version, args.limit,
                                args.repeat, log)
                point['world'] = label
                points.append(point)
            if args.profile and args.out:
                log('  profile: %s' % profile_ours(
                    args.limit, os.path.join(
                        args.out, '%s_profile_ours_%s.txt'
                        % (args.name, label))))
        finally:
            setup.close()
    frozen = frozen_run(args, log) if args.frozen else None
    report = dict(runinfo.run_info('bench_api.py', argv), **{
        'repeat': args.repeat, 'points': points,
        'connections': connections, 'frozen': frozen,
        'notes': [
            'one process, native threads (nova-api\'s default in nova 34); '
            'the controller is called directly (no WSGI/paste stack, no '
            'keystone); policy is nova\'s default.',
            'the only stub is neutron: security group bindings return '
            '`default` for every server.',
            '"replaced" is nova.compute.instance_list.'
            'get_instance_objects_sorted (gather + objects); "other" is, '
            'per request, the total minus replaced, faults and view '
            '(response validation, policy, compute.API.get_all, '
            'BuildRequests, ...), median over the requests; "validation" '
            'is an estimate of its response validation part: the median '
            'with [api] response_validation = warn minus the median with '
            'ignore (other requests, so it can exceed "other" by noise).',
            '"full GC" is the median time of Python\'s generation-2 '
            'garbage collections during the request (they stop every '
            'thread; part of the other columns, not added to them); '
            '"full GC in replaced" those inside the replaced part. Every '
            'request starts after gc.collect() (not timed), so the '
            'collections in it are those its own allocations cause.',
        ]})
    reporting.write_results(report, name=args.name, out=args.out,
                            json_path=args.json,
                            write_markdown=write_markdown, indent=1,
                            sort_keys=False, default=str, say=log)
    return 0


if __name__ == '__main__':
    sys.exit(main())
