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

Not a test: a script that prints (and with ``--json`` saves) numbers::

    python benchmarks/bench_placement.py --hosts 2000 --cells 20 \\
        --requests 20 --json results.json

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

from nova_cellsched import cells as cells_mod
from nova_cellsched.scheduler import aggregate_sync
from nova_cellsched.scheduler import host_filter

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
    parser.add_argument('--json', metavar='PATH')
    parser.parse_args(argv, namespace=ARGS)
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(
        PlacementBench())
    if not result.wasSuccessful():
        return 1
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
    if ARGS.json:
        with open(ARGS.json, 'w') as handle:
            json.dump(RESULTS, handle, indent=2, sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
