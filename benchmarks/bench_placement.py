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

    python benchmarks/bench_placement.py --out benchmarks/results/
    python benchmarks/bench_placement.py --quick
    python benchmarks/bench_placement.py \\
        --render benchmarks/results/placement.json

It borrows nova's functional machinery (``nova.test.TestCase`` with
``NUMBER_OF_CELLS`` cell databases and an API database in memory, nova's
in-process placement fixture, eventlet as nova's tests run it) and
drives the real scheduler manager: ``SchedulerManager.select_destinations``
runs nova's request filters (ours included), asks placement for
allocation candidates with ``[scheduler] max_placement_results`` (nova's
default, 1000, unless ``--max-placement-results``), builds host states
from the cell databases, runs the host filters (ProjectCellFilter
enabled) and weighers, and claims in placement.

The world (default: 10,000 hosts in 50 cells, 200 a cell): cells
``cell1``..``cellN`` are built in that order, so placement's provider
ids (its order of candidates) follow the cells. Every fifth cell
(``cell5``, ``cell10``, ...; ``--dedicated-cells``) is dedicated to one
project of its own in ``cells_projects``; cells ``cell3``, ``cell8``,
... (``--disabled-cells``) are in neither option (nothing new goes
there); the others are ``cells_default``. The measured dedicated
project owns the last dedicated cell (the newest). Each host is a
``services`` and a ``compute_nodes`` row in its cell database, a host
mapping in the API database and a resource provider with VCPU,
MEMORY_MB and DISK_GB inventory and the COMPUTE_NODE and OWNER_NOVA
traits in placement's database: one host is made through nova's objects
and placement's API, the others are copies of its rows (new ids, uuids
and names) written in bulk through nova's and placement's table models.
nova-cellsched's own sync (``aggregate_sync.sync``) then builds the
cell aggregates.

Per request kind (the dedicated project, an unmapped project) and mode
(pre-filter off, ``member_of``, ``forbidden``; for the dedicated project
also ``member_of_every_cell``, the pre-filter without naming the one
allowed cell to nova's HostManager) it times single-instance
requests one at a time and ``--concurrency`` at once (green threads in
one process, as nova-scheduler's RPC server runs them under eventlet),
the modes alternating round by round.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching.
from nova.tests.functional import integrated_helpers  # noqa: F401,I001

import argparse
import concurrent.futures
import cProfile
import io
import os
import platform
import pstats
import statistics
import sys
import time
import unittest
import uuid

import fixtures
import nova.conf
from nova import context as nova_context
from nova.db.api import api as api_db_api
from nova.db.api import models as api_models
from nova.db.main import models as main_models
from nova import exception as nova_exception
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import manager as scheduler_manager
from nova import test
from nova.tests.functional import fixtures as func_fixtures
from nova import utils as nova_utils
from oslo_messaging.rpc import dispatcher as rpc_dispatcher
from placement.db.sqlalchemy import models as placement_models
from placement import db_api as placement_db_api
import sqlalchemy as sa

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import reporting  # noqa: E402
import runinfo  # noqa: E402

from nova_cellsched import cells as cells_mod  # noqa: E402
from nova_cellsched.scheduler import aggregate_sync  # noqa: E402
from nova_cellsched.scheduler import host_filter  # noqa: E402
from nova_cellsched.scheduler import request_filter  # noqa: E402

CONF = nova.conf.CONF
UNMAPPED = '5b1e0a9f2c8d4e8fa1b2c3d4e5f60718'
ARGS = argparse.Namespace()
RESULTS: dict = {}

#: Request kinds, and the pre-filter settings of each mode:
#: (placement_prefilter, placement_prefilter_form, one cell named to
#: nova's HostManager when placement is asked for one cell).
KINDS = ('dedicated', 'unmapped')
MODES = {'off': (False, 'auto', True),
         'member_of': (True, 'member_of', True),
         'forbidden': (True, 'forbidden', True),
         'member_of_every_cell': (True, 'member_of', False)}
#: The modes of each kind. member_of_every_cell is the pre-filter as it
#: was before it named the one allowed cell (HostManager reads every
#: cell); it differs from member_of only for a one-cell project.
MODES_OF = {'dedicated': ('off', 'member_of', 'forbidden',
                          'member_of_every_cell'),
            'unmapped': ('off', 'member_of', 'forbidden')}
QUICK = {'hosts': 100, 'cells': 10, 'dedicated_cells': 2,
         'disabled_cells': 1, 'requests': 2, 'concurrent_requests': 4,
         'concurrency': 4, 'rounds': 1, 'max_placement_results': 30}


def project_of(index: int) -> str:
    """The project a dedicated cell (0-based among them) belongs to."""
    return '%032x' % (0xded1ca7ed00000000000000000000000 + index)


def layout(cells: int, dedicated: int, disabled: int) -> dict[int, str]:
    """Role of each cell number (1-based): dedicated, disabled, default.

    Dedicated cells are every ``cells // dedicated``-th cell from the
    end backwards (cell50, cell45, ... for 10 of 50), disabled ones
    start at cell3 with the same stride, skipping dedicated ones, so
    both are spread over placement's provider order.

    :raises ValueError: the roles do not fit in *cells*, or leave no
        default cell.
    """
    if dedicated < 1 or disabled < 0 or dedicated + disabled >= cells:
        raise ValueError(
            'expected at least one dedicated cell and one default cell in '
            '%d cells, got %d dedicated and %d disabled: lower '
            '--dedicated-cells/--disabled-cells or raise --cells'
            % (cells, dedicated, disabled))
    roles = {n: 'default' for n in range(1, cells + 1)}
    stride = max(1, cells // dedicated)
    for i in range(dedicated):
        roles[cells - i * stride] = 'dedicated'
    n, left = 3, disabled
    while left:
        if roles.get(n) == 'default':
            roles[n] = 'disabled'
            left -= 1
        n = n + stride if n + stride <= cells else (n % stride) + 1
    return roles


def progress(message: str) -> None:
    """One line on stderr with the time since the run started."""
    print('[%7.1f s] %s' % (time.perf_counter() - STARTED, message),
          file=sys.stderr, flush=True)


STARTED = time.perf_counter()


class PlacementBench(test.TestCase):
    """The harness: nova's test fixtures, one run of the benchmark."""

    def setUp(self):
        type(self).NUMBER_OF_CELLS = ARGS.cells
        progress('setting up %d cell databases' % ARGS.cells)
        super().setUp()
        if not ARGS.fixture_target_cell:
            # nova's CellDatabases fixture replaces target_cell with one
            # that also points a process-global "current cell" at the
            # target (for code that does not target), under a
            # reader-writer lock, and gives up after three tries when
            # another green thread moved it meanwhile. Our reads and
            # nova's HostManager target every cell at once (8 sync
            # workers; one green thread per cell per request), so with
            # tens of cells that happens. nova's own target_cell is
            # enough: every access here is targeted, and the fixture's
            # get_context_manager follows context.db_connection.
            fixture = nova_context.target_cell.__self__
            self.useFixture(fixtures.MonkeyPatch(
                'nova.context.target_cell', fixture._real_target_cell))
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
        self.latency = {'s': 0.0}
        for method in ('get', 'put', 'post', 'delete'):
            self._wrap_client(method)
        self.counts: dict = {}
        self.sizes: list = []
        self.allowed_sizes: list = []
        self.allowed: set = set()
        self.name_cell = {'on': True}
        real_name_cell = request_filter._host_states_of_one_cell

        def name_cell(*args):
            return self.name_cell['on'] and real_name_cell(*args)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.request_filter.'
            '_host_states_of_one_cell', name_cell))

    def _wrap_client(self, method):
        """Count placement requests; add ``--placement-latency``; record
        the allocation candidates' providers (and those in allowed cells).
        """
        real = getattr(report.SchedulerReportClient, method)

        def wrapped(client, url, *a, **kw):
            self.counts[method] = self.counts.get(method, 0) + 1
            if self.latency['s']:
                time.sleep(self.latency['s'])
            resp = real(client, url, *a, **kw)
            if method == 'get' and url.startswith('/allocation_candidates'):
                found = {rp for req in resp.json()['allocation_requests']
                         for rp in req['allocations']}
                self.sizes.append(len(found))
                self.allowed_sizes.append(sum(
                    1 for rp in found if self.cell_of.get(rp) in self.allowed))
            return resp

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.%s' % method,
            wrapped))

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
        """One host the way nova and placement write it; its node uuid."""
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
        return node_uuid

    @staticmethod
    def _rows(conn, table, column, value):
        return [dict(row._mapping) for row in conn.execute(
            sa.select(table).where(table.c[column] == value))]

    def _build(self, hosts_of):
        """Write the world's hosts; *hosts_of* is [(cell, [name, ...])].

        The first host is made through nova's objects and placement's
        API; every other host is a copy of its rows with its own ids,
        uuids and names, inserted in bulk per table and database.
        """
        first_cell, first_names = hosts_of[0]
        node = self._add_host(first_names[0], first_cell)
        services = main_models.Service.__table__
        nodes = main_models.ComputeNode.__table__
        mappings = api_models.HostMapping.__table__
        rps = placement_models.ResourceProvider.__table__
        invs = placement_models.Inventory.__table__
        rp_traits = placement_models.ResourceProviderTrait.__table__
        with nova_context.target_cell(self.ctxt, first_cell) as cctxt:
            with cctxt.db_connection.writer.get_engine().connect() as conn:
                service_t = self._rows(conn, services, 'host',
                                       first_names[0])[0]
                node_t = self._rows(conn, nodes, 'uuid', node)[0]
        api_engine = api_db_api.context_manager.writer.get_engine()
        with api_engine.connect() as conn:
            mapping_t = self._rows(conn, mappings, 'host',
                                   first_names[0])[0]
        pl_engine = placement_db_api.placement_context_manager.writer.\
            get_engine()
        with pl_engine.connect() as conn:
            rp_t = self._rows(conn, rps, 'uuid', node)[0]
            inv_t = self._rows(conn, invs, 'resource_provider_id', rp_t['id'])
            trait_t = self._rows(conn, rp_traits, 'resource_provider_id',
                                 rp_t['id'])
        next_rp = rp_t['id'] + 1
        next_inv = max(row['id'] for row in inv_t) + 1
        next_mapping = mapping_t['id'] + 1
        mapping_rows, rp_rows, inv_rows, trait_rows = [], [], [], []
        for cell, names in hosts_of:
            if cell is first_cell:
                names = names[1:]
            service_rows, node_rows = [], []
            for i, name in enumerate(names):
                node_uuid = str(uuid.uuid4())
                self.cell_of[node_uuid] = cell.uuid
                ident = service_t['id'] + 1 + i
                service_rows.append(dict(service_t, id=ident, host=name,
                                         uuid=str(uuid.uuid4())))
                node_rows.append(dict(
                    node_t, id=node_t['id'] + 1 + i, uuid=node_uuid,
                    host=name, hypervisor_hostname=name, service_id=ident))
                mapping_rows.append(dict(mapping_t, id=next_mapping,
                                         cell_id=cell.id, host=name))
                next_mapping += 1
                rp_rows.append(dict(rp_t, id=next_rp, uuid=node_uuid,
                                    name=name, root_provider_id=next_rp))
                for inv in inv_t:
                    inv_rows.append(dict(inv, id=next_inv,
                                         resource_provider_id=next_rp))
                    next_inv += 1
                trait_rows.extend(dict(row, resource_provider_id=next_rp)
                                  for row in trait_t)
                next_rp += 1
            if service_rows:
                with nova_context.target_cell(self.ctxt, cell) as cctxt:
                    engine = cctxt.db_connection.writer.get_engine()
                    with engine.begin() as conn:
                        conn.execute(services.insert(), service_rows)
                        conn.execute(nodes.insert(), node_rows)
        with api_engine.begin() as conn:
            conn.execute(mappings.insert(), mapping_rows)
        with pl_engine.begin() as conn:
            conn.execute(rps.insert(), rp_rows)
            conn.execute(invs.insert(), inv_rows)
            conn.execute(rp_traits.insert(), trait_rows)

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
        syncs = {}
        for workers in ARGS.sync_workers or [None]:
            if syncs:
                self._sync(cells, 8, nodes_of=lambda cm: frozenset())
            for label in ('first', 'no_change'):
                self.counts.clear()
                self.latency['s'] = ARGS.placement_latency / 1000.0
                started = time.perf_counter()
                rows = self._sync(cells, workers)
                self.latency['s'] = 0.0
                syncs['%s/%s' % (workers or 'default', label)] = {
                    'seconds': time.perf_counter() - started,
                    'changes': len(rows),
                    'failed': sum(1 for row in rows if row.failed),
                    'requests': dict(self.counts)}
        RESULTS.update({
            'hosts': ARGS.hosts, 'cells': ARGS.cells,
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

    def _one(self, manager, project, outcome):
        """One select_destinations; its ms into *outcome*."""
        spec = self._spec(project)
        t0 = time.perf_counter()
        try:
            sel = manager.select_destinations(
                self.ctxt, spec_obj=spec,
                instance_uuids=[spec.instance_uuid],
                return_objects=True, return_alternates=False)
            outcome['landed'].append(sel[0][0].cell_uuid)
        except rpc_dispatcher.ExpectedException as exc:
            # select_destinations is an RPC endpoint: its NoValidHost
            # comes wrapped (expected_exceptions).
            if not isinstance(exc.exc_info[1], nova_exception.NoValidHost):
                raise
            outcome['no_valid_host'] += 1
        except nova_exception.NoValidHost:
            outcome['no_valid_host'] += 1
        outcome['times'].append((time.perf_counter() - t0) * 1000.0)

    def _batch(self, manager, project, outcome, count, concurrency):
        """*count* requests, *concurrency* in flight; adds the wall time."""
        started = time.perf_counter()
        if concurrency == 1:
            for _ in range(count):
                self._one(manager, project, outcome)
        else:
            with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
                for future in [pool.submit(self._one, manager, project,
                                           outcome) for _ in range(count)]:
                    future.result()
        outcome['wall_s'] += time.perf_counter() - started

    def _mode(self, mode):
        """Set the pre-filter's options (and the one-cell naming) of *mode*.
        """
        on, form, name_cell = MODES[mode]
        self.flags(placement_prefilter=on, placement_prefilter_form=form,
                   group='cellsched')
        self.name_cell['on'] = name_cell

    def _profile(self, manager, measured):
        """cProfile one request of each kind and mode, after the timed
        ones: ``PROFILE_DIR/placement_profile_<kind>_<mode>.txt``.
        """
        os.makedirs(ARGS.profile_dir, exist_ok=True)
        for kind in KINDS:
            project, allowed = measured[kind]
            self.allowed.clear()
            self.allowed.update(allowed)
            for mode in MODES_OF[kind]:
                self._mode(mode)
                outcome = {'times': [], 'landed': [], 'no_valid_host': 0}
                profiler = cProfile.Profile()
                profiler.enable()
                self._one(manager, project, outcome)
                profiler.disable()
                text = io.StringIO()
                text.write('%s request, pre-filter %s: %.0f ms under '
                           'cProfile (one request after the timed ones; '
                           'the timed figures are in placement.md)\n'
                           % (kind, mode, outcome['times'][0]))
                stats = pstats.Stats(profiler, stream=text)
                stats.sort_stats('cumulative').print_stats(45)
                stats.sort_stats('tottime').print_stats(25)
                path = os.path.join(ARGS.profile_dir,
                                    'placement_profile_%s_%s.txt'
                                    % (kind, mode))
                with open(path, 'w') as handle:
                    handle.write(runinfo.scrub(text.getvalue()))
                progress('wrote %s' % path)

    def runTest(self):
        roles = layout(ARGS.cells, ARGS.dedicated_cells, ARGS.disabled_cells)
        by_number = {int(cm.name[4:]): cm
                     for cm in cells_mod.load_cell_mappings()
                     if cm.name != 'cell0'}
        cells = [by_number[n] for n in sorted(by_number)]
        per_cell = [ARGS.hosts // ARGS.cells + (1 if i < ARGS.hosts %
                                                 ARGS.cells else 0)
                    for i in range(ARGS.cells)]
        hosts_of, first = [], 0
        for cm, count in zip(cells, per_cell):
            hosts_of.append((cm, ['h%05d' % n for n in
                                  range(first, first + count)]))
            first += count
        progress('writing %d hosts' % ARGS.hosts)
        started = time.perf_counter()
        self._build(hosts_of)
        build_s = time.perf_counter() - started
        progress('hosts written in %.1f s' % build_s)
        if ARGS.sync_only:
            self._sync_only(cells, build_s)
            return
        self.latency['s'] = ARGS.placement_latency / 1000.0
        started = time.perf_counter()
        # One worker: placement's database here is the fixture's SQLite,
        # one writer at a time, and under nova's eventlet patching the
        # sync's workers are green threads of one OS thread; a writer
        # waiting in SQLite's busy handler blocks the green thread that
        # holds the lock, until "database is locked" (seen as a 500 on a
        # loaded CI machine). bench_sync.py measures the parallel sync
        # against a real placement.
        rows = self._sync(cells, 1)
        sync_s = time.perf_counter() - started
        progress('sync-aggregates: %d changes in %.1f s' % (len(rows),
                                                             sync_s))
        failed = [row for row in rows if row.failed]
        if failed:
            raise RuntimeError('sync-aggregates: expected no failed change, '
                               'got %d, first: %s' % (len(failed), failed[0]))
        dedicated = [by_number[n] for n in sorted(roles)
                     if roles[n] == 'dedicated']
        default = [by_number[n] for n in sorted(roles)
                   if roles[n] == 'default']
        self.flags(cells_default=[cm.name for cm in default],
                   cells_projects=','.join(
                       '%s:%s' % (cm.name, project_of(i))
                       for i, cm in enumerate(dedicated)),
                   group='cellsched')
        measured = {'dedicated': (project_of(len(dedicated) - 1),
                                  {dedicated[-1].uuid}),
                    'unmapped': (UNMAPPED, {cm.uuid for cm in default})}
        manager = scheduler_manager.SchedulerManager()
        manager.placement_client  # noqa: B018 - build it now
        lines = {}
        for kind in KINDS:
            for mode in MODES_OF[kind]:
                for conc in sorted({1, ARGS.concurrency}):
                    lines['%s/%s/c%d' % (kind, mode, conc)] = {
                        'times': [], 'landed': [], 'no_valid_host': 0,
                        'wall_s': 0.0, 'sizes': [], 'allowed_sizes': []}
        # Warm up nova (host state cache, placement's caches, imports).
        self.flags(placement_prefilter=False, group='cellsched')
        for _ in range(2):
            self._one(manager, UNMAPPED, {'times': [], 'landed': [],
                                          'no_valid_host': 0})
        progress('scheduler ready')
        for rnd in range(ARGS.rounds):
            progress('round %d of %d' % (rnd + 1, ARGS.rounds))
            # ABAB..., and the order turns each round (BCA, CAB...).
            for kind in KINDS:
                project, allowed = measured[kind]
                modes = MODES_OF[kind]
                for mode in modes[rnd % len(modes):] + modes[
                        :rnd % len(modes)]:
                    self._mode(mode)
                    for conc, total in ((1, ARGS.requests),
                                        (ARGS.concurrency,
                                         ARGS.concurrent_requests)):
                        line = lines['%s/%s/c%d' % (kind, mode, conc)]
                        count = total // ARGS.rounds + (
                            1 if rnd < total % ARGS.rounds else 0)
                        del self.sizes[:], self.allowed_sizes[:]
                        self.allowed.clear()
                        self.allowed.update(allowed)
                        self._batch(manager, project, line, count, conc)
                        line['sizes'] += self.sizes
                        line['allowed_sizes'] += self.allowed_sizes
        self.latency['s'] = 0.0
        if ARGS.profile_dir:
            self._profile(manager, measured)
        runs = {}
        for key, line in lines.items():
            kind = key.split('/')[0]
            allowed = measured[kind][1]
            times = line['times']
            runs[key] = {
                'requests': len(times),
                'median_ms': statistics.median(times),
                'p99_ms': reporting.percentile(times, 99),
                'mean_ms': statistics.fmean(times),
                'requests_per_s': len(times) / line['wall_s'],
                'candidates_mean': statistics.fmean(line['sizes'])
                if line['sizes'] else 0,
                'allowed_candidates_mean': statistics.fmean(
                    line['allowed_sizes']) if line['allowed_sizes'] else 0,
                'no_valid_host': line['no_valid_host'],
                'outside_allowed_cells': sum(
                    1 for cell in line['landed'] if cell not in allowed)}
        RESULTS.update({
            'hosts': ARGS.hosts, 'cells': ARGS.cells,
            'hosts_per_cell': sorted(set(per_cell)),
            'dedicated_cells': [cm.name for cm in dedicated],
            'disabled_cells': [by_number[n].name for n in sorted(roles)
                               if roles[n] == 'disabled'],
            'default_cells': len(default),
            'measured_dedicated_cell': dedicated[-1].name,
            'max_placement_results': CONF.scheduler.max_placement_results,
            'concurrency': ARGS.concurrency, 'rounds': ARGS.rounds,
            'placement_latency_ms': ARGS.placement_latency,
            'eventlet': not nova_utils.concurrency_mode_threading(),
            'build_s': build_s, 'sync_s': sync_s, 'sync_changes': len(rows),
            'runs': runs, 'python': platform.python_version()})


def ratios(runs: dict) -> dict:
    """Median (and, concurrent, requests/s) of each line against *off*."""
    out = {}
    for key, run in runs.items():
        kind, mode, conc = key.split('/')
        base = runs['%s/off/%s' % (kind, conc)]
        out[key] = {'median': run['median_ms'] / base['median_ms'],
                    'mean': run['mean_ms'] / base['mean_ms'],
                    'throughput': run['requests_per_s'] /
                    base['requests_per_s']}
    return out


def table(report: dict) -> list[str]:
    """The results as markdown table rows."""
    runs, rel = report['runs'], ratios(report['runs'])
    lines = [
        '| request | mode | in flight | requests | median ms | p99 ms '
        '| mean ms | req/s | median / off | NoValidHost | candidates '
        '| in allowed cells | outside allowed cells |',
        '|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for key, run in runs.items():
        kind, mode, conc = key.split('/')
        lines.append(
            '| %s | %s | %s | %d | %.0f | %.0f | %.0f | %.1f | %.2f | %d '
            '| %.0f | %.0f | %d |' % (
                kind, mode, conc[1:], run['requests'], run['median_ms'],
                run['p99_ms'], run['mean_ms'], run['requests_per_s'],
                rel[key]['median'], run['no_valid_host'],
                run['candidates_mean'], run['allowed_candidates_mean'],
                run['outside_allowed_cells']))
    return lines


def write_markdown(path, report):
    """The results as a table, every column explained."""
    lines = [
        '# Scheduling with and without the placement pre-filter', '',
        '`%s` on %s (commit %s), nova %s, Python %s, %s CPU(s), %s.' % (
            report.get('command', 'python benchmarks/bench_placement.py'),
            report.get('date', '?')[:16], report.get('commit'),
            report.get('nova'), report['python'], report.get('cpus', '?'),
            report.get('machine', '?')),
        '',
        '%d compute node resource providers in %d cells (%s hosts a cell) '
        'of nova\'s in-memory test databases and nova\'s in-process '
        'placement fixture. Dedicated cells (each to one project in '
        '`cells_projects`): %s; the measured dedicated project owns %s. '
        'Cells in neither option (disabled): %s. The other %d cells are '
        '`cells_default`. `[scheduler] max_placement_results` %d. '
        'Placement latency added: %s ms. Hosts written in %.0f s; '
        '`sync-aggregates` (nova-cellsched\'s sync, %d changes) took '
        '%.0f s. Modes alternate round by round (%d rounds).' % (
            report['hosts'], report['cells'],
            '/'.join(str(n) for n in report['hosts_per_cell']),
            ', '.join(report['dedicated_cells']),
            report['measured_dedicated_cell'],
            ', '.join(report['disabled_cells']) or 'none',
            report['default_cells'], report['max_placement_results'],
            report['placement_latency_ms'], report['build_s'],
            report['sync_changes'], report['sync_s'], report['rounds']),
        '']
    lines += table(report)
    lines += [
        '', 'Columns:', '',
        '* request: *dedicated* is a project in `cells_projects` (one '
        'cell), *unmapped* a project named nowhere (it may use the default '
        'cells).',
        '* mode: *off* has `[cellsched] placement_prefilter = false`; '
        '*member_of* and *forbidden* have it on with that '
        '`placement_prefilter_form`. A project in `cells_projects` always '
        'gets `member_of`, so both modes ask the same for *dedicated*; '
        '*auto* picks *forbidden* for *unmapped* here (fewer cells are '
        'outside the default cells than in them) and is not run apart. '
        '*member_of_every_cell* is *member_of* without naming the one '
        'allowed cell to nova\'s HostManager (the pre-filter before it '
        'did), which then reads the services of every cell.',
        '* in flight: requests run at once: 1, one after the other; %d, '
        'green threads of one process calling '
        '`SchedulerManager.select_destinations` (nova\'s functional '
        'environment runs under eventlet%s, as nova-scheduler\'s RPC '
        'server does with eventlet: one CPU at a time).' % (
            report['concurrency'],
            '' if report.get('eventlet', True) else ' (here: native threads)'),
        '* median, p99, mean ms: one single-instance request (request '
        'filters, placement, host states, filters, weighers, claim). p99 '
        'by nearest rank: the maximum below 100 requests.',
        '* req/s: requests of the line / their wall time.',
        '* median / off: median ms against the same request with the '
        'pre-filter off, same number in flight, same run.',
        '* NoValidHost: requests that found no host.',
        '* candidates: resource providers in placement\'s allocation '
        'candidates, mean per request (at most max_placement_results); '
        'in allowed cells: of those, the providers in a cell the request '
        'may use.',
        '* outside allowed cells: requests placed in a cell they may not '
        'use (must be 0).']
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=10000)
    parser.add_argument('--cells', type=int, default=50)
    parser.add_argument('--dedicated-cells', type=int, default=10,
                        help='cells dedicated to a project each')
    parser.add_argument('--disabled-cells', type=int, default=5,
                        help='cells in neither cells_default nor '
                        'cells_projects')
    parser.add_argument('--requests', type=int, default=30,
                        help='requests one at a time, per line')
    parser.add_argument('--concurrent-requests', type=int, default=48,
                        help='requests with --concurrency in flight, per '
                        'line')
    parser.add_argument('--concurrency', type=int, default=8)
    parser.add_argument('--rounds', type=int, default=3,
                        help='the requests of each line are cut in this '
                        'many rounds; every round runs every mode')
    parser.add_argument('--max-placement-results', type=int,
                        help='Default: nova\'s (1000).')
    parser.add_argument('--quick', action='store_true',
                        help='a small world and few requests (%s), to '
                        'check the benchmark, not to measure' % ', '.join(
                            '%s %s' % kv for kv in QUICK.items()))
    parser.add_argument('--fixture-target-cell', action='store_true',
                        help='keep nova\'s CellDatabases fixture\'s '
                        'target_cell (fails with many cells at once)')
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
                        help='ms added to each placement request of the '
                        'sync and the scheduling (network and a remote '
                        'placement service)')
    parser.add_argument('--profile-dir', metavar='DIR',
                        help='after the timed requests, profile one '
                        'request per kind and mode into DIR')
    reporting.add_output_arguments(parser, name='placement')
    parser.parse_args(argv, namespace=ARGS)
    if ARGS.render:
        return reporting.rerender(ARGS.render, write_markdown)
    if ARGS.quick:
        for name, value in QUICK.items():
            setattr(ARGS, name, value)
    layout(ARGS.cells, ARGS.dedicated_cells, ARGS.disabled_cells)
    if ARGS.rounds < 1 or min(ARGS.requests, ARGS.concurrent_requests) < \
            ARGS.rounds:
        parser.error('expected --requests and --concurrent-requests of at '
                     'least --rounds (%d), got %d and %d' % (
                         ARGS.rounds, ARGS.requests,
                         ARGS.concurrent_requests))
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
        reporting.write_results(RESULTS, name=ARGS.name,
                                json_path=ARGS.json)
        return 0
    print('%(hosts)d hosts in %(cells)d cells, max_placement_results '
          '%(max_placement_results)d; hosts written in %(build_s).1f s, '
          'sync-aggregates %(sync_s).1f s' % RESULTS)
    rel = ratios(RESULTS['runs'])
    print('%-34s %5s %8s %8s %8s %7s %7s %5s %6s %7s %7s' % (
        'request/mode/in flight', 'n', 'median', 'p99', 'mean', 'req/s',
        '/off', 'NVH', 'cands', 'allowed', 'outside'))
    for key, run in RESULTS['runs'].items():
        print('%-34s %5d %8.1f %8.1f %8.1f %7.2f %7.2f %5d %6.0f %7.0f %7d'
              % (key, run['requests'], run['median_ms'], run['p99_ms'],
                 run['mean_ms'], run['requests_per_s'], rel[key]['median'],
                 run['no_valid_host'], run['candidates_mean'],
                 run['allowed_candidates_mean'],
                 run['outside_allowed_cells']))
    paths = reporting.write_results(RESULTS, name=ARGS.name, out=ARGS.out,
                                    json_path=ARGS.json,
                                    write_markdown=write_markdown)
    if ARGS.out:
        print('wrote %s' % ', '.join(paths))
    return 0


if __name__ == '__main__':
    sys.exit(main())
