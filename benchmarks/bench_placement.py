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

"""Scheduling with and without the placement pre-filter, at scale.

Not a test: a script that prints (and with ``--out DIR`` saves as
``placement.json`` and ``placement.md``) numbers::

    python benchmarks/bench_placement.py --hosts 2000 --cells 20 \\
        --requests 20 --out benchmarks/results/
    python benchmarks/bench_placement.py \\
        --render benchmarks/results/placement.json

It borrows nova's functional machinery (``nova.test.TestCase`` with
``NUMBER_OF_CELLS`` cell databases and an API database in memory, nova's
in-process placement fixture) and drives the real scheduler manager:
``SchedulerManager.select_destinations`` runs nova's request filters
(ours included), asks placement for allocation candidates with the
default ``[scheduler] max_placement_results`` (1000), builds host states
from the cell databases, runs the host filters (ProjectCellFilter
enabled) and weighers, and claims in placement.

The compute nodes are not running services: each host is a ``services``
and a ``compute_nodes`` row in its cell database, a host mapping, and a
resource provider created directly in placement (uuid = compute node
uuid, VCPU/MEMORY_MB/DISK_GB inventory, nova's ``OWNER_NOVA`` trait).
Hosts are spread round robin over the first ``--cells - 1`` cells; the
last cell is a small one (``--dedicated-hosts`` hosts) added last, as a
new cell would be, and dedicated to one project; the other cells are
``cells_default``. ``nova-cellsched``'s sync builds the cell aggregates.

For each mode (pre-filter off, on) and each project (the dedicated one,
an unmapped one) it times ``--requests`` single-instance requests and
reports the median and mean ms per request, the candidate hosts
placement returned and how many of them are in the request's allowed
cells, and how many requests ended in NoValidHost.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching.
from nova.tests.functional import integrated_helpers  # noqa: F401,I001

import argparse
import json
import os
import platform
import statistics
import sys
import time
import unittest
import uuid

import fixtures
import nova.conf
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import manager as scheduler_manager
from nova import test
from nova.tests.functional import fixtures as func_fixtures
from oslo_messaging.rpc import dispatcher as rpc_dispatcher

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import runinfo  # noqa: E402

from nova_cellsched import cells as cells_mod  # noqa: E402
from nova_cellsched.scheduler import aggregate_sync  # noqa: E402
from nova_cellsched.scheduler import host_filter  # noqa: E402

CONF = nova.conf.CONF
DEDICATED = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'
UNMAPPED = '5b1e0a9f2c8d4e8fa1b2c3d4e5f60718'
ARGS = argparse.Namespace()
RESULTS: dict = {}


class PlacementBench(test.TestCase):
    """The harness: nova's test fixtures, one run of the benchmark."""

    def setUp(self):
        type(self).NUMBER_OF_CELLS = ARGS.cells
        super().setUp()
        filter_path = '%s.%s' % (host_filter.ProjectCellFilter.__module__,
                                 'ProjectCellFilter')
        self.flags(
            available_filters=list(CONF.filter_scheduler.available_filters)
            + [filter_path],
            enabled_filters=list(CONF.filter_scheduler.enabled_filters)
            + ['ProjectCellFilter'],
            group='filter_scheduler')
        # Rows written at the start stay "up" for the whole run.
        self.flags(service_down_time=86400)
        if ARGS.max_placement_results:
            self.flags(max_placement_results=ARGS.max_placement_results,
                       group='scheduler')
        self.useFixture(func_fixtures.PlacementFixture())
        self.ctxt = nova_context.get_admin_context()
        self.client = report.SchedulerReportClient()
        self.cell_of = {}

    def _placement(self, method, url, body=None):
        fn = getattr(self.client, method)
        args = (url, body) if body is not None else (url,)
        resp = fn(*args, version='1.36', global_request_id=None)
        if resp.status_code >= 300:
            raise RuntimeError('%s %s: %s %s' % (method, url,
                                                 resp.status_code,
                                                 resp.text))
        return resp

    def _add_host(self, name, cell):
        node_uuid = str(uuid.uuid4())
        self.cell_of[node_uuid] = cell.uuid
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            service = objects.Service(
                cctxt, host=name, binary='nova-compute', topic='compute',
                report_count=1)
            service.create()
            objects.ComputeNode(
                cctxt, uuid=node_uuid, host=name, hypervisor_hostname=name,
                service_id=service.id, vcpus=64, memory_mb=262144,
                local_gb=4096, vcpus_used=0, memory_mb_used=0,
                local_gb_used=0, free_ram_mb=262144, free_disk_gb=4096,
                hypervisor_type='fake', hypervisor_version=1,
                current_workload=0, running_vms=0, cpu_info='{}',
                disk_available_least=4096, host_ip='10.0.0.1',
                supported_hv_specs=[], metrics=None, pci_device_pools=None,
                extra_resources=None, stats={}, numa_topology=None,
                cpu_allocation_ratio=16.0, ram_allocation_ratio=1.5,
                disk_allocation_ratio=1.0).create()
        objects.HostMapping(self.ctxt, host=name,
                            cell_mapping=cell).create()
        self._placement('post', '/resource_providers',
                        {'uuid': node_uuid, 'name': name})
        self._placement('put', '/resource_providers/%s/inventories'
                        % node_uuid, {
                            'resource_provider_generation': 0,
                            'inventories': {
                                'VCPU': {'total': 64,
                                         'allocation_ratio': 16.0},
                                'MEMORY_MB': {'total': 262144},
                                'DISK_GB': {'total': 4096}}})
        self._placement('put', '/resource_providers/%s/traits' % node_uuid,
                        {'resource_provider_generation': 1,
                         'traits': ['COMPUTE_NODE', 'OWNER_NOVA']})

    def _sync(self, cells, workers=None, **kwargs):
        """One sync at *workers* (the sync's default if None)."""
        if workers:
            # A main without the option measures its serial sync.
            kwargs['workers'] = workers
        return aggregate_sync.sync(aggregate_sync.Placement(self.client),
                                   cells, **kwargs)

    def _sync_only(self, cells, build_s):
        """For each ``--sync-workers`` value: empty the cell aggregates
        (not timed), then time a first sync and a sync with nothing to
        change, counting the placement requests each makes, by method.
        ``--placement-latency`` adds that many ms to each timed request,
        as a placement service across the network would.
        """
        counts: dict = {}
        latency = {'s': 0.0}
        for method in ('get', 'put'):
            real = getattr(self.client.__class__, method)

            def counting(client, url, *a, _real=real, _method=method, **kw):
                counts[_method] = counts.get(_method, 0) + 1
                if latency['s']:
                    time.sleep(latency['s'])
                return _real(client, url, *a, **kw)

            self.useFixture(fixtures.MonkeyPatch(
                'nova.scheduler.client.report.SchedulerReportClient.%s'
                % method, counting))
        syncs = {}
        for workers in ARGS.sync_workers or [None]:
            if syncs:
                self._sync(cells, 8, nodes_of=lambda cm: frozenset())
            for label in ('first', 'no_change'):
                counts.clear()
                latency['s'] = ARGS.placement_latency / 1000.0
                started = time.perf_counter()
                rows = self._sync(cells, workers)
                latency['s'] = 0.0
                syncs['%s/%s' % (workers or 'default', label)] = {
                    'seconds': time.perf_counter() - started,
                    'changes': len(rows),
                    'failed': sum(1 for row in rows if row.failed),
                    'requests': dict(counts)}
        RESULTS.update({
            'hosts': ARGS.hosts, 'cells': ARGS.cells,
            'dedicated_hosts': ARGS.dedicated_hosts,
            'placement_latency_ms': ARGS.placement_latency,
            'build_s': build_s, 'syncs': syncs,
            'python': platform.python_version()})

    def _spec(self, project):
        flavor = objects.Flavor(
            id=1, flavorid='1', name='m1.tiny', vcpus=1, memory_mb=512,
            root_gb=1, ephemeral_gb=0, swap=0, extra_specs={},
            is_public=True, rxtx_factor=1.0, disabled=False)
        spec = objects.RequestSpec(
            self.ctxt, project_id=project, user_id='bench',
            instance_uuid=str(uuid.uuid4()), flavor=flavor,
            image=objects.ImageMeta.from_dict({'properties': {}}),
            num_instances=1, is_bfv=False, availability_zone=None,
            scheduler_hints={}, numa_topology=None, instance_group=None,
            pci_requests=objects.InstancePCIRequests(requests=[]),
            requested_destination=None, retry=None, ignore_hosts=None,
            force_hosts=None, force_nodes=None, limits=None,
            requested_resources=[])
        spec.obj_set_defaults()
        return spec

    def runTest(self):
        cells = sorted((cm for cm in cells_mod.load_cell_mappings()
                        if cm.name != 'cell0'), key=lambda cm: cm.name)
        big, small = cells[:-1], cells[-1]
        started = time.perf_counter()
        others = ARGS.hosts - ARGS.dedicated_hosts
        for i in range(others):
            self._add_host('h%05d' % i, big[i % len(big)])
        for i in range(ARGS.dedicated_hosts):
            self._add_host('d%05d' % i, small)
        build_s = time.perf_counter() - started
        if ARGS.sync_only:
            self._sync_only(cells, build_s)
            return
        started = time.perf_counter()
        aggregate_sync.sync(aggregate_sync.Placement(self.client), cells)
        sync_s = time.perf_counter() - started
        self.flags(cells_default=[cm.name for cm in big],
                   cells_projects='%s:%s' % (small.name, DEDICATED),
                   group='cellsched')
        manager = scheduler_manager.SchedulerManager()
        sizes, allowed_sizes, allowed = [], [], set()
        real_get = self.client.__class__.get
        manager.placement_client  # noqa: B018 - build it now

        def counting_get(client, url, *a, **kw):
            resp = real_get(client, url, *a, **kw)
            if url.startswith('/allocation_candidates'):
                found = {rp for req in resp.json()['allocation_requests']
                         for rp in req['allocations']}
                sizes.append(len(found))
                allowed_sizes.append(sum(
                    1 for rp in found if self.cell_of[rp] in allowed))
            return resp

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.get',
            counting_get))
        runs = {}
        for prefilter in (False, True):
            self.flags(placement_prefilter=prefilter, group='cellsched')
            for label, project in (('dedicated', DEDICATED),
                                   ('unmapped', UNMAPPED)):
                times, failures, landed = [], 0, set()
                del sizes[:], allowed_sizes[:]
                allowed.clear()
                allowed.update({small.uuid} if label == 'dedicated' else
                               {cm.uuid for cm in big})
                for _ in range(ARGS.requests):
                    spec = self._spec(project)
                    t0 = time.perf_counter()
                    try:
                        sel = manager.select_destinations(
                            self.ctxt, spec_obj=spec,
                            instance_uuids=[spec.instance_uuid],
                            return_objects=True, return_alternates=False)
                        landed.add(sel[0][0].cell_uuid)
                    except rpc_dispatcher.ExpectedException as exc:
                        # select_destinations is an RPC endpoint: its
                        # NoValidHost comes wrapped (expected_exceptions).
                        if not isinstance(exc.exc_info[1],
                                          nova_exception.NoValidHost):
                            raise
                        failures += 1
                    except nova_exception.NoValidHost:
                        failures += 1
                    times.append((time.perf_counter() - t0) * 1000.0)
                runs['%s/%s' % ('prefilter' if prefilter else 'plain',
                                label)] = {
                    'median_ms': statistics.median(times),
                    'mean_ms': statistics.fmean(times),
                    'candidates_mean': statistics.fmean(sizes) if sizes
                    else 0,
                    'allowed_candidates_mean': statistics.fmean(
                        allowed_sizes) if allowed_sizes else 0,
                    'no_valid_host': failures,
                    'requests': ARGS.requests,
                    'outside_allowed_cells': len(landed - allowed)}
        RESULTS.update({
            'hosts': ARGS.hosts, 'cells': ARGS.cells,
            'dedicated_hosts': ARGS.dedicated_hosts,
            'max_placement_results': CONF.scheduler.max_placement_results,
            'build_s': build_s, 'sync_s': sync_s, 'runs': runs,
            'python': platform.python_version()})


ROWS = (('plain/dedicated', 'dedicated, without'),
        ('prefilter/dedicated', 'dedicated, pre-filter'),
        ('plain/unmapped', 'unmapped, without'),
        ('prefilter/unmapped', 'unmapped, pre-filter'))


def write_markdown(path, report):
    """The results as a table, every column explained."""
    runs = report['runs']
    lines = [
        '# Scheduling with and without the placement pre-filter', '',
        '`%s` on %s (commit %s), nova %s, Python %s, %s CPU(s).' % (
            report.get('command', 'python benchmarks/bench_placement.py'),
            report.get('date', '?')[:16], report.get('commit'),
            report.get('nova'), report['python'], report.get('cpus', '?')),
        '',
        '%(hosts)d compute node resource providers in %(cells)d cells of '
        'nova\'s in-memory test databases and placement; the last cell '
        '(%(dedicated_hosts)d hosts, added last) is dedicated to one '
        'project in `cells_projects`, the others are `cells_default`. '
        '`[scheduler] max_placement_results` %(max_placement_results)d. '
        'Hosts built in %(build_s).0f s; `sync-aggregates` took '
        '%(sync_s).0f s.' % report, '',
        '| request | median ms | mean ms | candidates | in allowed cells '
        '| NoValidHost | outside allowed cells |',
        '|---|---|---|---|---|---|---|']
    for key, label in ROWS:
        run = runs[key]
        lines.append('| %s | %.0f | %.0f | %.0f | %.0f | %d of %d | %d |' % (
            label, run['median_ms'], run['mean_ms'], run['candidates_mean'],
            run['allowed_candidates_mean'], run['no_valid_host'],
            run['requests'], run['outside_allowed_cells']))
    lines += [
        '', 'Columns:', '',
        '* request: *dedicated* is a request of the project the small cell '
        'is dedicated to, *unmapped* one of a project named nowhere (it '
        'may use the default cells); *without* has `[cellsched] '
        'placement_prefilter = false`, *pre-filter* true.',
        '* median ms, mean ms: `SchedulerManager.select_destinations` '
        'for one single-instance request (request filters, placement, '
        'host states, filters, weighers, claim), over the requests of the '
        'line.',
        '* candidates: resource providers in placement\'s allocation '
        'candidates, mean per request (at most max_placement_results).',
        '* in allowed cells: of those, the providers in a cell the '
        'request may use, mean per request.',
        '* NoValidHost: requests that found no host.',
        '* outside allowed cells: cells a request landed in that it may '
        'not use (must be 0).']
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=2000)
    parser.add_argument('--cells', type=int, default=20)
    parser.add_argument('--dedicated-hosts', type=int, default=50)
    parser.add_argument('--requests', type=int, default=20)
    parser.add_argument('--max-placement-results', type=int,
                        help='Default: nova\'s (1000). A smaller value '
                        'stands for a bigger cloud: 100 of 1,000 hosts is '
                        'the share 1,000 of 10,000 hosts is.')
    parser.add_argument('--sync-only', action='store_true',
                        help='only time sync-aggregates: a first sync and '
                        'a sync with nothing to change (no scheduling)')
    parser.add_argument('--sync-workers', metavar='N[,N...]',
                        type=lambda v: [int(n) for n in v.split(',')],
                        help='with --sync-only: placement requests the sync '
                        'keeps in flight, one measurement per value '
                        '(default: the sync\'s default)')
    parser.add_argument('--placement-latency', metavar='MS', type=float,
                        default=0.0,
                        help='with --sync-only: ms added to each placement '
                        'request of the timed syncs (network and a remote '
                        'placement service)')
    parser.add_argument('--json', metavar='PATH')
    parser.add_argument('--out', metavar='DIR',
                        help='write DIR/placement.json and placement.md')
    parser.add_argument('--render', metavar='JSON',
                        help='only write the markdown next to a results '
                        'JSON file (no run)')
    parser.parse_args(argv, namespace=ARGS)
    if ARGS.render:
        with open(ARGS.render) as handle:
            report = json.load(handle)
        path = os.path.splitext(ARGS.render)[0] + '.md'
        write_markdown(path, report)
        print('wrote %s' % path)
        return 0
    RESULTS.update(runinfo.run_info('bench_placement.py', argv))
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(
        PlacementBench())
    if not result.wasSuccessful():
        return 1
    if ARGS.sync_only:
        print('%(hosts)d hosts in %(cells)d cells, built in %(build_s).1f s'
              % RESULTS)
        for label, run in RESULTS['syncs'].items():
            print('sync workers/%-18s %7.1f s  %5d changes  %d failed  '
                  'requests %s' % (label, run['seconds'], run['changes'],
                                   run['failed'], run['requests']))
        if ARGS.json:
            with open(ARGS.json, 'w') as handle:
                json.dump(RESULTS, handle, indent=2, sort_keys=True)
                handle.write('\n')
        return 0
    runs = RESULTS['runs']
    print('%(hosts)d hosts in %(cells)d cells (dedicated cell: '
          '%(dedicated_hosts)d hosts, added last), max_placement_results '
          '%(max_placement_results)d; built in %(build_s).1f s, '
          'sync-aggregates %(sync_s).1f s' % RESULTS)
    print('%-22s %10s %10s %11s %8s %12s %8s' % (
        'mode/project', 'median ms', 'mean ms', 'candidates', 'allowed',
        'NoValidHost', 'outside'))
    for key, run in runs.items():
        print('%-22s %10.1f %10.1f %11.0f %8.0f %9d/%-3d %8d' % (
            key, run['median_ms'], run['mean_ms'], run['candidates_mean'],
            run['allowed_candidates_mean'], run['no_valid_host'],
            run['requests'], run['outside_allowed_cells']))
    for label in ('dedicated', 'unmapped'):
        plain = runs['plain/%s' % label]['median_ms']
        pre = runs['prefilter/%s' % label]['median_ms']
        print('%s: median time with / without pre-filter = %.2f'
              % (label, pre / plain))
    paths = [ARGS.json] if ARGS.json else []
    if ARGS.out:
        os.makedirs(ARGS.out, exist_ok=True)
        paths.append(os.path.join(ARGS.out, 'placement.json'))
    for path in paths:
        with open(path, 'w') as handle:
            json.dump(RESULTS, handle, indent=2, sort_keys=True)
            handle.write('\n')
    if ARGS.out:
        write_markdown(os.path.join(ARGS.out, 'placement.md'), RESULTS)
        print('wrote %s' % ', '.join(paths + [
            os.path.join(ARGS.out, 'placement.md')]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
