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

"""A boot storm on a real multi-process nova, through openstacksdk.

Not a test: a script that prints (and with ``--out DIR`` saves as
``cloud_storm.json`` and ``cloud_storm.md``) numbers::

    flock -x /tmp/cellsched.lock python benchmarks/bench_cloud_storm.py \\
        --out benchmarks/results/
    python benchmarks/bench_cloud_storm.py --quick
    python benchmarks/bench_cloud_storm.py --trace   # osprofiler + redis

It starts the cloud of ``tools/cloud up`` (:mod:`cellsched_tools.cloud`:
three cells, ten fake nova-computes, every service its own process;
``--dir`` of a running cloud reuses it), then for each scheduling
configuration (nova's default filters, + ``ProjectCellFilter``, + the
placement pre-filter: nova-scheduler's nova.conf rewritten and the
process restarted, as an operator changes ``enabled_filters``) boots
``--servers`` servers from ``--concurrency`` client threads, then the
smaller storm (``--small``), each server ``POST /servers`` (networks
``none``) then ``GET /servers/{id}`` every ``--poll`` seconds until
ACTIVE or ERROR. One server in four is the dedicated project's (cell3
only), the others are spread over three unmapped projects (cell1 and
cell2 only). Every storm's servers are deleted before the next one.

Reported per storm: POST-to-ACTIVE p50/p95/p99/max, the POST's own time,
ERROR, NoValidHost and timed-out counts, servers outside their allowed
cells (nova's default filters place them anywhere: the count shows what
the plugin prevents), and the CPU seconds each service used meanwhile
(psutil, each service's whole process group).

``--rounds N`` storms every configuration N times in alternating order
(nova, filter, prefilter, then prefilter, filter, nova, ...): each storm
leaves the cloud a little busier than it found it (rows deleted but kept,
caches, logs), so a fixed order would favour the first configuration;
the report then pools every round's boots per configuration.

What only a real deployment shows, after the storms:

* ``--freeze nova,prefilter``: for each configuration, a storm during
  which cell2's database is frozen (:meth:`Cloud.frozen_cell`): the
  boots POSTed before, during and after the freeze, where they went and
  how they ended, and an admin's lists meanwhile;
* ``--sighup``: nova-scheduler SIGHUP'd with a changed
  ``cells_projects``; the dedicated project's next boots follow it;
* ``--new-compute``: a nova-compute started in the dedicated cell joins
  the cell's aggregate through the periodic sync and, with the cell's
  other computes disabled, takes the dedicated project's boot.

With ``--trace`` the cloud runs with osprofiler on (every nova service
and nova-api, the redis collector at ``--redis``) and one storm per
configuration is traced: each boot's POST carries the trace headers
(keystoneauth adds them when osprofiler is initialised in the client
thread), nova passes the trace over RPC, and the report gives where each
boot's time goes by service (the union of its spans: API, conductor,
scheduler, compute, and what no span covers: queues and the client's
polling) and the spans with the most exclusive time over the storm. The
traces are deleted from redis afterwards.
"""

import argparse
import collections
import concurrent.futures
import functools
import json
import os
import sys
import threading
import time
from typing import Any
import warnings

warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
# The checkout (its maintainers' tools: the cloud).
sys.path.insert(2, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
import reporting  # noqa: E402
import runinfo  # noqa: E402

from cellsched_tools import cloud as cloud_mod  # noqa: E402

UNMAPPED = ('5b1e0a9f2c8d4e8fa1b2c3d4e5f60718',
            '6c2f1b0a3d9e4f8a9b1c2d3e4f506172',
            '7d3a2c1b4e0f4a9b8c2d3e4f50617283')
# One server in four is the dedicated project's.
PROJECTS = (cloud_mod.DEDICATED,) + UNMAPPED
HMAC = 'cellsched-cloud'
#: The project of the servers listed during the storms (``--list``):
#: rows seeded into the cells as nova writes them, never booted.
LISTED = '8e4b3d2c5f1a4b9c8d7e6f5a4b3c2d1e'
SERVICES = ('api', 'conductor', 'scheduler', 'compute')


class Clients:
    """One openstacksdk connection per (thread, project)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.local = threading.local()
        self.all: list[Any] = []
        self.lock = threading.Lock()

    def get(self, project: str, admin: bool = False) -> Any:
        conns = self.local.__dict__.setdefault('conns', {})
        key = (project, admin)
        if key not in conns:
            import openstack  # imported first by main()

            token = ('admin:%s' % project if admin
                     else 'user:%s:member,reader' % project)
            conns[key] = openstack.connect(
                auth_type='admin_token',
                auth={'endpoint': self.url, 'auth_token': token},
                load_yaml_config=False, load_envvars=False)
            with self.lock:
                self.all.append(conns[key])
        return conns[key]

    def close(self) -> None:
        for conn in self.all:
            conn.close()


def allowed(cloud: cloud_mod.Cloud, project: str) -> set[str]:
    names = cloud.cell_names()
    return {names[-1]} if project == cloud_mod.DEDICATED else set(
        names[:-1])


def boot(cloud: cloud_mod.Cloud, clients: Clients, index: int, tag: str,
         poll: float, timeout: float, trace: bool) -> dict[str, Any]:
    """One server, POST to ACTIVE or ERROR: its timings and placement."""
    project = PROJECTS[index % len(PROJECTS)]
    conn = clients.get(project)
    base_id = None
    if trace:
        from osprofiler import profiler
        profiler.init(HMAC)
    start = time.monotonic()
    try:
        server = conn.compute.create_server(
            name='%s-%d' % (tag, index), flavor_id=cloud.state['flavor'],
            image_id=cloud.state['image'], networks='none')
    except Exception as exc:  # noqa: BLE001 - a failed POST is a result
        return {'index': index, 'project': project, 'status': 'POST-FAILED',
                'error': str(exc)[:300], 'start': start}
    finally:
        if trace:
            from osprofiler import profiler
            current = profiler.get()
            base_id = current.get_base_id() if current else None
            profiler.clean()
    posted = time.monotonic()
    status, host, fault = 'TIMEOUT', None, None
    while time.monotonic() - start < timeout:
        try:
            found = conn.compute.get_server(server.id)
        except Exception:  # noqa: BLE001,S112 - retried until timeout
            time.sleep(poll)
            continue
        if found.status in ('ACTIVE', 'ERROR'):
            status = found.status
            fault = (found.fault or {}).get('message')
            break
        time.sleep(poll)
    done = time.monotonic()
    if status == 'ACTIVE':
        # The host is shown to admins only (OS-EXT-SRV-ATTR:host): the
        # project's own user sees None, and every server would count as
        # inside its cells.
        host = clients.get(project, admin=True).compute.get_server(
            server.id).compute_host
    cell = cloud.compute_hosts().get(host or '')
    return {'index': index, 'id': server.id, 'project': project,
            'status': status, 'host': host, 'cell': cell, 'fault': fault,
            'post_s': posted - start, 'active_s': done - start,
            'outside': bool(cell and cell not in allowed(cloud, project)),
            'base_id': base_id, 'start': start}


def cpu_by_service(cloud: cloud_mod.Cloud) -> dict[str, float]:
    return {name: cloud_mod.usage(service)[2]
            for name, service in cloud.services.items()}


def group_cpu(per_service: dict[str, float]) -> dict[str, float]:
    """Service kind -> CPU seconds (computes and cell conductors summed).
    """
    grouped: dict[str, float] = collections.defaultdict(float)
    for name, seconds in per_service.items():
        if name.startswith('nova-compute-'):
            key = 'nova-compute (all)'
        elif name.startswith('nova-conductor-cell'):
            key = 'nova-conductor (cells)'
        else:
            key = name
        grouped[key] += seconds
    return {k: round(v, 1) for k, v in sorted(grouped.items())}


def seed_listed(cloud: cloud_mod.Cloud, servers: int) -> None:
    """*servers* servers of :data:`LISTED`, spread over the cells.

    Rows as nova writes them (:func:`nova_cellsched.demo.seed.seed_cell`,
    mapped in the API database), on hosts that are none of the cloud's
    computes (``cell1-compute001``...): no compute manages them.
    """
    import sqlalchemy as sa

    from nova_cellsched.demo import seed

    engine = sa.create_engine(cloud.database_url('api'))
    try:
        with engine.connect() as conn:
            ids = {str(name): int(cell_id) for cell_id, name in conn.execute(
                sa.text('SELECT id, name FROM cell_mappings')).all()}
    finally:
        engine.dispose()
    names = cloud.cell_names()
    for number, name in enumerate(names):
        count = servers // len(names) + (
            1 if number < servers % len(names) else 0)
        seed.seed_cell(cloud.database_url(name), cloud.database_url('api'),
                       ids[name], name,
                       seed.Population(instances=count, projects=[LISTED],
                                       hosts=4),
                       seed=number)


def list_once(cloud: cloud_mod.Cloud) -> dict[str, Any]:
    """``GET /servers/detail`` of :data:`LISTED` as an admin, timed.

    :returns: seconds to the body's last byte, the servers listed and
        the ``Server-Timing`` metrics (ms) the filter sends admins.
    """
    import urllib.request

    request = urllib.request.Request(
        cloud.compute_url + '/servers/detail?all_tenants=1&project_id=%s'
        '&limit=1000' % LISTED,
        headers={'X-Auth-Token': 'admin:admin',
                 'Accept': 'application/json'})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:  # noqa: S310
        body = response.read()
        header = response.headers.get('Server-Timing')
    seconds = time.perf_counter() - start
    return {'s': seconds, 'servers': len(json.loads(body)['servers']),
            'timing': server_timing(header or '')}


def server_timing(header: str) -> dict[str, float]:
    """``name -> dur`` (ms) of a ``Server-Timing`` header's metrics.

    Parsed by the tests' grammar
    (``tests/fixtures/server_timing_grammar.py``),
    loaded from its file: importing the ``tests`` package would choose
    nova's concurrency mode in this client. A metric without ``dur``
    counts 0.
    """
    if not header:
        return {}
    return {name: float(params.get('dur', 0.0))
            for name, params in _grammar().parse(header).items()}


@functools.cache
def _grammar() -> Any:
    """The tests' Server-Timing grammar, loaded once from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        'server_timing_grammar',
        os.path.join(runinfo.TOP, 'tests', 'fixtures',
                     'server_timing_grammar.py'))
    assert spec is not None and spec.loader is not None
    grammar = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grammar)
    return grammar


def listing_summary(lists: list[dict[str, Any]]) -> dict[str, Any]:
    """Percentiles of the lists' times, their servers, median phases."""
    phases: dict[str, list[float]] = collections.defaultdict(list)
    for one in lists:
        for name, ms in one['timing'].items():
            phases[name].append(ms)
    return {
        'lists': len(lists),
        'servers': sorted({one['servers'] for one in lists}),
        's': reporting.percentiles([one['s'] for one in lists],
                                   {'p50': 50, 'p95': 95, 'max': 100},
                                   digits=2),
        'server_timing_p50_ms': {
            name: reporting.percentiles(values, {'p50': 50},
                                        digits=1)['p50']
            for name, values in sorted(phases.items())},
    }


def delete_all(cloud: cloud_mod.Cloud, clients: Clients,
               results: list[dict[str, Any]], concurrency: int,
               timeout: float = 600.0) -> list[str]:
    """Delete the storm's servers and wait until nova lists none.

    A server whose delete failed (nova sets it to ERROR, with a fault)
    is deleted once more, as an operator would.

    :returns: the faults of the deletes that failed, one per server.
    """
    admin = clients.get('admin', admin=True)
    ids = [r['id'] for r in results if r.get('id')]

    def delete(server_id: str) -> None:
        try:
            clients.get('admin', admin=True).compute.delete_server(
                server_id, ignore_missing=True)
        except Exception:  # noqa: BLE001,S110 - waited for below
            pass

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(delete, ids))
    deadline = time.monotonic() + timeout
    mine = set(ids)
    failed: dict[str, str] = {}
    while time.monotonic() < deadline:
        # The storm's own (the listed project's seeded servers stay).
        left = [server for server in admin.compute.servers(
            details=True, all_projects=True) if server.id in mine]
        if not left:
            return sorted(failed.values())
        for server in left:
            if (server.status == 'ERROR' and not server.task_state and
                    server.id not in failed):
                failed[server.id] = ((server.fault or {}).get('message') or
                                     'no fault')[:160]
                delete(server.id)
        time.sleep(2)
    raise cloud_mod.CloudError('%d servers not deleted in %.0f s'
                               % (len(left), timeout))


def storm(cloud: cloud_mod.Cloud, clients: Clients, servers: int,
          concurrency: int, tag: str, args: argparse.Namespace,
          trace: bool = False) -> dict[str, Any]:
    quiet, lists = [], []
    stop = threading.Event()
    if args.list:
        quiet = [list_once(cloud) for _ in range(args.list_repeat)]

        def keep_listing() -> None:
            while not stop.is_set():
                lists.append(list_once(cloud))
                stop.wait(1.0)

        lister = threading.Thread(target=keep_listing, name='lister')
    cpu_before = cpu_by_service(cloud)
    start = time.monotonic()
    if args.list:
        lister.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(
                lambda i: boot(cloud, clients, i, tag, args.poll,
                               args.boot_timeout, trace), range(servers)))
    finally:
        stop.set()
        if args.list:
            lister.join()
    wall = time.monotonic() - start
    cpu_after = cpu_by_service(cloud)
    cpu = {n: cpu_after[n] - cpu_before.get(n, 0.0) for n in cpu_after}
    active = [r['active_s'] for r in results if r['status'] == 'ACTIVE']
    posts = [r['post_s'] for r in results if 'post_s' in r]
    summary = {
        'servers': servers, 'concurrency': concurrency,
        'wall_s': round(wall, 1),
        'boots_per_s': round(servers / wall, 2),
        'active': len(active),
        'error': sum(1 for r in results if r['status'] == 'ERROR'),
        'no_valid_host': sum(1 for r in results if 'No valid host' in (
            r.get('fault') or '')),
        'timeout': sum(1 for r in results if r['status'] == 'TIMEOUT'),
        'post_failed': sum(1 for r in results
                           if r['status'] == 'POST-FAILED'),
        'outside_allowed_cells': sum(1 for r in results if r.get('outside')),
        # ACTIVE with a host that is none of the cloud's computes: its
        # cell, so whether it is outside, is unknown (must be 0).
        'cell_unknown': sum(1 for r in results
                            if r['status'] == 'ACTIVE' and not r.get('cell')),
        'by_cell': dict(collections.Counter(
            r.get('cell') or '-' for r in results)),
        'active_s': reporting.percentiles(
            active, {'p50': 50, 'p95': 95, 'p99': 99, 'max': 100},
            digits=2),
        'active_each_s': [round(t, 2) for t in active],
        'post_s': reporting.percentiles(
            posts, {'p50': 50, 'p95': 95, 'max': 100}, digits=2),
        'cpu_s': group_cpu(cpu),
        'cpu_total_s': round(sum(cpu.values()), 1),
        # Boot faults and failed POSTs alike (a 403 over quota, ...).
        'faults': faults(results),
    }
    if args.list:
        summary['listing'] = {'quiet': listing_summary(quiet),
                              'storm': listing_summary(lists)}
    if trace:
        summary['trace'] = analyse_traces(args.redis, results)
    delete_all(cloud, clients, results, concurrency)
    return summary


def sighup_check(cloud: cloud_mod.Cloud, clients: Clients,
                 args: argparse.Namespace) -> dict[str, Any]:
    """SIGHUP with the dedicated project moved to cell2: boots follow.

    nova-scheduler's ``[cellsched] cells_projects`` is rewritten
    (dedicated project -> cell2 instead of cell3) and the process sent
    SIGHUP, as an operator does; four of the project's servers are then
    booted and their cells reported. The mapping is restored after.
    """
    names = cloud.cell_names()
    moved = {'cells_projects': '%s:%s' % (names[1], cloud_mod.DEDICATED)}
    start = time.monotonic()
    cloud.sighup_scheduler(moved)
    reload_s = time.monotonic() - start
    results = [boot(cloud, clients, i, 'sighup', args.poll,
                    args.boot_timeout, False) for i in (0, 4, 8, 12)]
    cloud.sighup_scheduler({})
    delete_all(cloud, clients, results, 4)
    return {'reload_s': round(reload_s, 1), 'expected_cell': names[1],
            'cells': [r.get('cell') for r in results],
            'statuses': [r['status'] for r in results]}


def _boots(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Statuses, cells, POST and POST-to-end percentiles of some boots."""
    ends = [r['active_s'] for r in results if 'active_s' in r]
    posts = [r['post_s'] for r in results if 'post_s' in r]
    return {
        'post_s': reporting.percentiles(posts, {'p50': 50, 'max': 100},
                                        digits=1) if posts else {},
        'boots': len(results),
        'statuses': dict(collections.Counter(r['status'] for r in results)),
        'by_cell': dict(collections.Counter(r.get('cell') or '-'
                                            for r in results)),
        'end_s': reporting.percentiles(ends, {'p50': 50, 'max': 100},
                                       digits=1) if ends else {},
    }


def frozen_check(cloud: cloud_mod.Cloud, clients: Clients,
                 args: argparse.Namespace) -> dict[str, Any]:
    """A storm during which one cell's database is frozen.

    cell2 (a default cell: the unmapped projects may boot there, the
    dedicated project may not) is frozen ``--freeze-after`` seconds into
    a storm of ``--freeze-storm`` servers, for ``--freeze-for`` seconds
    (:meth:`Cloud.frozen_cell`), while an admin lists the listed
    project every two seconds. Reported: the boots POSTed before,
    during and after the freeze (statuses, cells, POST to ACTIVE or
    ERROR), every list's time and servers, and whether every server
    ended ACTIVE or ERROR (nothing lost) and was deleted.
    """
    frozen = cloud.cell_names()[1]
    servers, concurrency = (int(n) for n in args.freeze_storm.split('/'))
    window: dict[str, float] = {}
    lists: list[dict[str, Any]] = []
    done = threading.Event()
    zero = time.monotonic()

    def freezer() -> None:
        time.sleep(args.freeze_after)
        with cloud.frozen_cell(frozen):
            window['start'] = time.monotonic() - zero
            time.sleep(args.freeze_for)
        window['end'] = time.monotonic() - zero

    def lister() -> None:
        while not done.is_set():
            at = time.monotonic() - zero
            try:
                one = list_once(cloud)
            except Exception as exc:  # noqa: BLE001 - a failed list is a result
                one = {'error': str(exc)[:200]}
            one['at'] = at
            lists.append(one)
            done.wait(2.0)

    threads = [threading.Thread(target=freezer, name='freezer'),
               threading.Thread(target=lister, name='lister')]
    for thread in threads:
        thread.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(
                lambda i: boot(cloud, clients, i, 'frozen', args.poll,
                               args.boot_timeout, False), range(servers)))
    finally:
        threads[0].join()
        done.set()
        threads[1].join()
    for r in results:
        r['at'] = r['start'] - zero
    start, end = window['start'], window['end']
    phases = {
        'before': [r for r in results if r['at'] < start],
        'during': [r for r in results if start <= r['at'] < end],
        'after': [r for r in results if r['at'] >= end],
    }

    def lists_in(low: float, high: float) -> dict[str, Any]:
        some = [one for one in lists if low <= one['at'] < high]
        ok = [one for one in some if 'error' not in one]
        return {
            'lists': len(some), 'failed': len(some) - len(ok),
            'servers': sorted({one['servers'] for one in ok}),
            's': reporting.percentiles([one['s'] for one in ok],
                                       {'p50': 50, 'max': 100},
                                       digits=1) if ok else {},
            # The filter's own time (Server-Timing "total"): the rest of
            # a list's time is nova-api's, queueing for a worker first.
            'filter_total_max_s': round(max(
                (one['timing'].get('total', 0.0) for one in ok),
                default=0.0) / 1000.0, 1),
        }

    lost = [r for r in results
            if r['status'] not in ('ACTIVE', 'ERROR')]
    delete_faults = delete_all(cloud, clients, results, concurrency)
    return {
        'scheduling': cloud.scheduling, 'frozen_cell': frozen,
        'servers': servers, 'concurrency': concurrency,
        'frozen_from_s': round(start, 1), 'frozen_to_s': round(end, 1),
        'boots': {name: _boots(rs) for name, rs in phases.items()},
        'lists': {'before': lists_in(0, start),
                  'during': lists_in(start, end),
                  'after': lists_in(end, float('inf'))},
        'not_active_or_error': len(lost),
        'faults': faults(results),
        'deletes_failed': delete_faults,
    }


def new_compute_check(cloud: cloud_mod.Cloud, clients: Clients,
                      args: argparse.Namespace) -> dict[str, Any]:
    """A nova-compute started in the dedicated cell joins its aggregate
    through the periodic sync, then takes the dedicated project's boot.

    Started and mapped as an operator does (:meth:`Cloud.add_compute`),
    then placement is polled until the node is in its cell's aggregate
    (nothing but nova-scheduler's periodic sync puts it there). The
    cell's other computes are then disabled (``PUT /os-services``), so
    that the dedicated project's boot can only land on the new one, and
    enabled again after.
    """
    cell = cloud.cell_names()[-1]
    start = time.monotonic()
    host = cloud.add_compute(cell)
    mapped_s = time.monotonic() - start
    cloud.wait_in_cell_aggregate(host)
    joined_s = time.monotonic() - start
    others = [h for h, c in cloud.compute_hosts().items()
              if c == cell and h != host]
    cloud.set_compute_status(others, 'disabled')
    try:
        # Index 0: the dedicated project's.
        run = boot(cloud, clients, 0, 'new-compute', args.poll,
                   args.boot_timeout, False)
    finally:
        cloud.set_compute_status(others, 'enabled')
    delete_all(cloud, clients, [run], 1)
    return {'cell': cell, 'host': host, 'mapped_s': round(mapped_s, 1),
            'joined_aggregate_s': round(joined_s, 1),
            'sync_interval_s': cloud.sync_interval,
            'others_disabled': len(others), 'boot_status': run['status'],
            'boot_host': run.get('host'), 'boot_fault': run.get('fault')}


# Traces

def _flatten(node: dict[str, Any], out: list[dict[str, Any]],
             parent: str | None = None) -> None:
    info = node.get('info', {})
    if 'started' in info and info.get('service') is not None:
        raw = info.get('meta.raw_payload.%s-start' % info['name']) or {}
        detail = raw.get('info', {})
        label = info['name']
        if 'function' in detail:
            label += ' ' + detail['function'].get('name', '').rsplit(
                '.', 1)[-1]
        elif 'db' in detail:
            label += ' ' + ' '.join(detail['db'].get('statement', '')
                                    .split()[:4])
        elif 'request' in detail:
            label += ' %s %s' % (detail['request'].get('method'),
                                 detail['request'].get('path', '')[:40])
        out.append({'id': node.get('trace_id'), 'parent': parent,
                    'service': str(info['service']), 'label': label,
                    'start': info['started'], 'end': info['finished']})
    for child in node.get('children', []):
        _flatten(child, out, node.get('trace_id'))


def _kind(service: str) -> str:
    """api, conductor, scheduler or compute from osprofiler's service.

    nova-api's traces are ``osapi_compute``'s, the others the binary's.
    """
    if service.startswith('osapi'):
        return 'api'
    for kind in ('conductor', 'scheduler', 'compute'):
        if kind in service:
            return kind
    return 'api'


def _union(intervals: list[tuple[float, float]]) -> float:
    total, last_end = 0.0, float('-inf')
    for start, end in sorted(intervals):
        if end <= last_end:
            continue
        total += end - max(start, last_end)
        last_end = end
    return total


def analyse_traces(redis_url: str, results: list[dict[str, Any]]
                   ) -> dict[str, Any]:
    """Per-boot time by service and the top spans, from osprofiler.

    Spans' times are each process's clock (one machine: one clock).
    """
    from osprofiler.drivers import base as drivers
    import redis

    per_boot: dict[str, list[float]] = collections.defaultdict(list)
    exclusive: dict[tuple[str, str], float] = collections.defaultdict(float)
    traced = 0
    for result in results:
        base_id = result.get('base_id')
        if not base_id or result['status'] != 'ACTIVE':
            continue
        # A driver accumulates what it read: one per report.
        report = drivers.get_driver(redis_url, conf={}).get_report(base_id)
        spans: list[dict[str, Any]] = []
        _flatten(report, spans)
        if not spans:
            continue
        traced += 1
        by_kind: dict[str, list[tuple[float, float]]] = (
            collections.defaultdict(list))
        for span in spans:
            by_kind[_kind(span['service'])].append((span['start'],
                                                    span['end']))
        for kind in SERVICES:
            per_boot[kind].append(_union(by_kind.get(kind, [])) / 1000)
        covered = _union([(s['start'], s['end']) for s in spans]) / 1000
        per_boot['not in a span'].append(max(0.0,
                                             result['active_s'] - covered))
        children: dict[str, float] = collections.defaultdict(float)
        for span in spans:
            if span['parent']:
                children[span['parent']] += span['end'] - span['start']
        for span in spans:
            own = span['end'] - span['start'] - children.get(span['id'], 0)
            exclusive[(_kind(span['service']), span['label'])] += max(
                0.0, own) / 1000
    client = redis.Redis.from_url(redis_url)
    for result in results:
        if result.get('base_id'):
            for key in client.scan_iter(match='osprofiler*%s*'
                                        % result['base_id']):
                client.delete(key)
    top = sorted(exclusive.items(), key=lambda kv: -kv[1])[:12]
    return {
        'traced_boots': traced,
        'per_boot_s': {k: dict(reporting.percentiles(
            v, {'p50': 50, 'p95': 95}, digits=3),
            mean=round(sum(v) / len(v), 3))
            for k, v in per_boot.items() if v},
        'top_exclusive_s': [{'service': k[0], 'span': k[1],
                             'total_s': round(v, 2)} for k, v in top],
    }


# Output

def render(results: dict[str, Any]) -> str:
    lines = ['# Boot storm on a multi-process cloud (tools/cloud)', '',
             '%s' % results.get('cloud', {}), '',
             '| scheduling | round | servers/conc. | p50 s | p95 s | p99 s '
             '| max s '
             '| POST p50 s | boots/s | ACTIVE | POST failed | ERROR '
             '| NoValidHost | timeout '
             '| outside cells | cell unknown | by cell | CPU s total |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|'
             '---|---|---|']
    for run in results['storms']:
        a = run['active_s']
        lines.append('| %s | %s | %d/%d | %s | %s | %s | %s | %s | %s | %d '
                     '| %d | %d | %d | %d | %d | %d | %s | %s |' % (
                         run['scheduling'], run.get('round', 1),
                         run['servers'],
                         run['concurrency'], a['p50'], a['p95'], a['p99'],
                         a['max'], run['post_s']['p50'], run['boots_per_s'],
                         run['active'], run['post_failed'], run['error'],
                         run['no_valid_host'], run['timeout'],
                         run['outside_allowed_cells'],
                         run.get('cell_unknown', 0),
                         ', '.join('%s %d' % kv for kv in
                                   sorted(run['by_cell'].items())),
                         run['cpu_total_s']))
    if results.get('pooled'):
        lines += ['', '## Every round together', '',
                  '| scheduling | servers/conc. | rounds | p50 s | p95 s '
                  '| p99 s | max s | p50 of each round s | not ACTIVE '
                  '| outside cells | CPU s each round |',
                  '|---|---|---|---|---|---|---|---|---|---|---|']
        for row in results['pooled']:
            a = row['active_s']
            lines.append('| %s | %d/%d | %s | %s | %s | %s | %s | %s | %d '
                         '| %d | %s |' % (
                             row['scheduling'], row['servers'],
                             row['concurrency'],
                             ', '.join(str(n) for n in row['rounds']),
                             a['p50'], a['p95'], a['p99'], a['max'],
                             ', '.join(str(p) for p in
                                       row['p50_each_round_s']),
                             row['not_active'],
                             row['outside_allowed_cells'],
                             ', '.join(str(c) for c in
                                       row['cpu_total_s'])))
    for frozen in results.get('frozen', []):
        lines += ['', '## %s: %d servers at %d, %s frozen from %s s to %s s'
                  % (frozen['scheduling'], frozen['servers'],
                     frozen['concurrency'], frozen['frozen_cell'],
                     frozen['frozen_from_s'], frozen['frozen_to_s']), '',
                  '| POSTed | boots | statuses | cells | POST p50 s '
                  '| POST max s | POST to end p50 s | max s |',
                  '|---|---|---|---|---|---|---|---|']
        for when, b in frozen['boots'].items():
            post = b.get('post_s') or {}
            lines.append('| %s the freeze | %d | %s | %s | %s | %s | %s '
                         '| %s |' % (
                when, b['boots'],
                ', '.join('%s %d' % kv for kv in sorted(
                    b['statuses'].items())),
                ', '.join('%s %d' % kv for kv in sorted(
                    b['by_cell'].items())),
                post.get('p50', '-'), post.get('max', '-'),
                b['end_s'].get('p50', '-'), b['end_s'].get('max', '-')))
        lines += ['', '| lists started | lists | failed | servers '
                  '| p50 s | max s | the filter\'s own, max s |',
                  '|---|---|---|---|---|---|---|']
        for when, one in frozen['lists'].items():
            lines.append('| %s the freeze | %d | %d | %s | %s | %s | %s |'
                         % (when, one['lists'], one['failed'],
                            ', '.join(str(n) for n in one['servers']),
                            one['s'].get('p50', '-'),
                            one['s'].get('max', '-'),
                            one.get('filter_total_max_s', '-')))
        lines += ['', 'Servers neither ACTIVE nor ERROR at the end: %d.'
                  % frozen['not_active_or_error']]
        lines += ['Fault: %s' % fault for fault in frozen['faults']]
        failed = frozen.get('deletes_failed', [])
        lines += ['Deletes that failed (deleted again): %d.' % len(failed)]
        lines += ['Delete fault: %s' % fault for fault in sorted(set(failed))]
    if 'new_compute' in results:
        n = results['new_compute']
        lines += ['', '## A nova-compute added to %s' % n['cell'], '',
                  '%s: service up and host mapped after %s s; in its '
                  'cell\'s aggregate after %s s (periodic sync every %s s);'
                  ' with the cell\'s %s other computes disabled, the '
                  'dedicated project\'s boot: %s on %s%s.' % (
                      n['host'], n['mapped_s'], n['joined_aggregate_s'],
                      n['sync_interval_s'], n.get('others_disabled', '-'),
                      n.get('boot_status', '-'), n.get('boot_host', '-'),
                      ' (%s)' % n['boot_fault'] if n.get('boot_fault')
                      else '')]
    listed = [r for r in results['storms'] if 'listing' in r]
    if listed:
        lines += ['', '## GET /servers/detail (admin, one project\'s '
                  'servers, limit 1000) before and during each storm', '',
                  '| scheduling | servers/conc. | when | lists | servers '
                  '| p50 s | p95 s | max s | Server-Timing p50 ms |',
                  '|---|---|---|---|---|---|---|---|---|']
        for run in listed:
            for when in ('quiet', 'storm'):
                one = run['listing'][when]
                lines.append('| %s | %d/%d | %s | %d | %s | %s | %s | %s '
                             '| %s |' % (
                                 run['scheduling'], run['servers'],
                                 run['concurrency'], when, one['lists'],
                                 ', '.join(str(n) for n in one['servers']),
                                 one['s']['p50'], one['s']['p95'],
                                 one['s']['max'], ', '.join(
                                     '%s %s' % kv for kv in
                                     one['server_timing_p50_ms'].items())))
    failed = [(run, f) for run in results['storms'] for f in run['faults']]
    if failed:
        lines += ['', '## Faults and failed POSTs (at most five per storm)',
                  '']
        lines += ['* %s %d/%d: %s' % (run['scheduling'], run['servers'],
                                      run['concurrency'], fault)
                  for run, fault in failed]
    lines += ['', '## CPU seconds per service during each storm', '']
    for run in results['storms']:
        lines.append('* %s %d/%d: %s' % (
            run['scheduling'], run['servers'], run['concurrency'],
            ', '.join('%s %.1f' % kv for kv in run['cpu_s'].items())))
    if 'sighup' in results:
        h = results['sighup']
        lines += ['', '## SIGHUP to nova-scheduler with a changed '
                  'cells_projects', '',
                  'Reloaded in %s s (the new mapping logged, every worker '
                  'serving it); '
                  'the dedicated project\'s next boots, expected in %s: %s'
                  ' (%s).' % (h['reload_s'], h['expected_cell'],
                              ', '.join(str(c) for c in h['cells']),
                              ', '.join(h['statuses']))]
    traced = [r for r in results['storms'] if 'trace' in r]
    if traced:
        lines += ['', '## Where a boot waits (osprofiler, redis)', '']
        for run in traced:
            t = run['trace']
            lines.append('### %s %d/%d (%d traced boots)' % (
                run['scheduling'], run['servers'], run['concurrency'],
                t['traced_boots']))
            lines.append('')
            lines += ['| part | p50 s | p95 s | mean s |',
                      '|---|---|---|---|']
            for kind, v in t['per_boot_s'].items():
                lines.append('| %s | %s | %s | %s |' % (
                    kind, v['p50'], v['p95'], v['mean']))
            lines += ['', '| service | span (exclusive time) | total s |',
                      '|---|---|---|']
            for row in t['top_exclusive_s']:
                lines.append('| %s | %s | %s |' % (
                    row['service'], row['span'].replace('|', '/'),
                    row['total_s']))
            lines.append('')
    return '\n'.join(lines) + '\n'


def faults(results: list[dict[str, Any]]) -> list[str]:
    """At most five distinct boot faults and failed POSTs, cut to 160."""
    return sorted({(r.get('fault') or r.get('error'))[:160]
                   for r in results
                   if r.get('fault') or r.get('error')})[:5]


def use_scheduling(cloud: cloud_mod.Cloud, config: str, say: Any) -> None:
    """nova-scheduler restarted with *config*, unless it runs it."""
    if cloud.scheduling != config:
        say('nova-scheduler: %s (restart)' % config)
        cloud.set_scheduling(config)


def _say_storm(say: Any, run: dict[str, Any]) -> None:
    say(json.dumps({k: run[k] for k in (
        'active_s', 'active', 'error', 'no_valid_host', 'timeout',
        'post_failed', 'outside_allowed_cells', 'cell_unknown', 'by_cell',
        'cpu_total_s', 'faults')}))


def round_order(configs: list[str], number: int) -> list[str]:
    """The configurations of round *number* (0 first): every other round
    in reverse, so that none is always first or always last.
    """
    return list(configs) if number % 2 == 0 else list(configs)[::-1]


def pooled(storms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration and storm size, every round's boots together."""
    groups: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for run in storms:
        groups.setdefault((run['scheduling'], run['servers'],
                           run['concurrency']), []).append(run)
    rows = []
    for (config, servers, conc), runs in groups.items():
        each = [t for run in runs for t in run['active_each_s']]
        rows.append({
            'scheduling': config, 'servers': servers, 'concurrency': conc,
            'rounds': [run['round'] for run in runs],
            'active_s': reporting.percentiles(
                each, {'p50': 50, 'p95': 95, 'p99': 99, 'max': 100},
                digits=2),
            'p50_each_round_s': [run['active_s']['p50'] for run in runs],
            'outside_allowed_cells': sum(run['outside_allowed_cells']
                                         for run in runs),
            'not_active': sum(run['servers'] - run['active']
                              for run in runs),
            'cpu_total_s': [run['cpu_total_s'] for run in runs],
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dir', default=None,
                        help='A running cloud to use (else one is started '
                             'in a temp dir and stopped at the end).')
    parser.add_argument('--servers', type=int, default=200)
    parser.add_argument('--concurrency', type=int, default=20)
    parser.add_argument('--small', default='50/5',
                        help='The comparison storm, SERVERS/CONCURRENCY '
                             '(default 50/5; "" for none).')
    parser.add_argument('--configs', default=','.join(cloud_mod.SCHEDULING))
    parser.add_argument('--computes', type=int, default=10)
    parser.add_argument('--poll', type=float, default=0.5)
    parser.add_argument('--boot-timeout', type=float, default=600.0)
    parser.add_argument('--trace', action='store_true',
                        help='osprofiler on; one traced storm per config.')
    parser.add_argument('--redis', default='redis://127.0.0.1:6379')
    parser.add_argument('--quick', action='store_true',
                        help='20 servers at 5, 10 at 2, three computes.')
    parser.add_argument('--list', type=int, default=0, metavar='N',
                        help='Seed N servers of a listing project (rows as '
                             'nova writes them) and list them as an admin '
                             '(GET /servers/detail, limit 1000) before and '
                             'during each storm: time and Server-Timing.')
    parser.add_argument('--list-repeat', type=int, default=5,
                        help='Lists before each storm (the quiet figure).')
    parser.add_argument('--sighup', action='store_true',
                        help='After the storms: SIGHUP nova-scheduler with '
                             'a changed cells_projects, boot, report cells.')
    parser.add_argument('--rounds', type=int, default=1,
                        help='Storm every configuration this many times, '
                             'in alternating order (nova, filter, '
                             'prefilter, then the reverse, ...): a '
                             'configuration is not favoured by its place.')
    parser.add_argument('--freeze', default='', metavar='CONFIGS',
                        help='After the storms, for each of these '
                             'configurations (e.g. nova,prefilter): a storm '
                             'during which cell2\'s database is frozen.')
    parser.add_argument('--freeze-storm', default='60/10',
                        metavar='SERVERS/CONC')
    parser.add_argument('--freeze-after', type=float, default=10.0)
    parser.add_argument('--freeze-for', type=float, default=90.0,
                        help='Seconds frozen (default 90: past nova\'s '
                             '60 s cell and RPC timeouts).')
    parser.add_argument('--new-compute', action='store_true',
                        help='At the end, with the pre-filter: a '
                             'nova-compute started in the dedicated cell '
                             'joins its aggregate and takes a boot.')
    reporting.add_output_arguments(parser, name=None)
    args = parser.parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, reporting.text_writer(render))
    if args.quick:
        args.servers, args.concurrency, args.small = 20, 5, '10/2'
        args.computes = 3
    storms = [(args.servers, args.concurrency)]
    if args.small:
        servers, conc = args.small.split('/')
        storms.append((int(servers), int(conc)))
    configs = [c for c in args.configs.split(',') if c]

    def say(line: str) -> None:
        print('bench_cloud_storm: %s' % line, flush=True)

    needs = {'openstack': 'openstacksdk: the clients',
             'psutil': 'psutil: CPU seconds per service'}
    if args.trace:
        needs.update(osprofiler='osprofiler: the traces (--trace)',
                     redis='redis: the trace collector (--trace)')
    reporting.require('bench_cloud_storm.py', needs)
    # Imported here, before any thread starts: on nova 31 to 33's pins
    # openstacksdk's import reaches oslo.concurrency, which imports
    # eventlet, and eventlet first imported in a worker thread leaves
    # that thread pool unjoinable (the storm ended, its boots done, and
    # the client waited forever in the pool's shutdown).
    import openstack  # noqa: F401

    import tempfile
    own = args.dir is None
    directory = args.dir or tempfile.mkdtemp(prefix='cellsched-cloud-')
    cloud = cloud_mod.Cloud(directory, computes=args.computes,
                            profiler=args.redis if args.trace else None,
                            say=say)
    results: dict[str, Any] = {
        'run': runinfo.run_info(os.path.basename(__file__), argv),
        'storms': []}
    with reporting.cleanly() as stack:
        if own:
            os.rmdir(directory)
            stack.callback(cloud.down)
            cloud.up()
        elif not cloud.load():
            say('no cloud in %s' % directory)
            return 2
        results['cloud'] = {
            'cells': cloud.cells, 'computes': cloud.computes,
            'api_workers': cloud.api_workers,
            'api_threads': cloud.api_threads,
            'quota_from_placement': cloud.quota_from_placement,
            'api_cellsched': cloud.api_cellsched,
            'scheduler_cellsched': cloud.scheduler_cellsched,
            'up_seconds': cloud.state.get('up_seconds'),
            'memory_pss_mib': round(sum(r['pss_mib']
                                        for r in cloud.status())),
        }
        if args.list:
            say('seeding %d servers of the listed project' % args.list)
            seed_listed(cloud, args.list)
        clients = Clients(cloud.compute_url)
        traced: set[str] = set()
        try:
            for number in range(args.rounds):
                for config in round_order(configs, number):
                    use_scheduling(cloud, config, say)
                    for servers, conc in storms:
                        say('round %d, %s: %d servers at concurrency %d'
                            % (number + 1, config, servers, conc))
                        trace = (args.trace and config not in traced and
                                 (servers, conc) == storms[0])
                        if trace:
                            traced.add(config)
                        run = storm(cloud, clients, servers, conc,
                                    '%s-%d' % (config, conc), args,
                                    trace=trace)
                        run['scheduling'] = config
                        run['round'] = number + 1
                        results['storms'].append(run)
                        _say_storm(say, run)
            if args.rounds > 1:
                results['pooled'] = pooled(results['storms'])
            for config in [c for c in args.freeze.split(',') if c]:
                use_scheduling(cloud, config, say)
                say('%s: a storm of %s with %s frozen' % (
                    config, args.freeze_storm, cloud.cell_names()[1]))
                frozen = frozen_check(cloud, clients, args)
                results.setdefault('frozen', []).append(frozen)
                say('frozen: %s' % json.dumps(frozen))
            if args.sighup and cloud.scheduling != 'nova':
                results['sighup'] = sighup_check(cloud, clients, args)
                say('sighup: %s' % results['sighup'])
            if args.new_compute:
                use_scheduling(cloud, 'prefilter', say)
                results['new_compute'] = new_compute_check(cloud, clients,
                                                           args)
                say('new compute: %s' % results['new_compute'])
        finally:
            clients.close()
    print(render(results))
    reporting.write_results(
        results, name=args.name or ('cloud_storm_trace' if args.trace
                                    else 'cloud_storm'),
        out=args.out, json_path=args.json, render=render, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
