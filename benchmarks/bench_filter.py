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

"""Time ProjectCellFilter against nova's AggregateMultiTenancyIsolation.

Both filters run in the same process over the same host states::

    python benchmarks/bench_filter.py --hosts 10000 --cells 70 \\
        --repeat 21 --json results.json

The hosts are nova's ``FakeHostState`` objects spread round robin over
``--cells`` cells (``cell_uuid`` set). Each host is in two real
``objects.Aggregate``: its cell's aggregate and an availability zone
aggregate. The aggregates of the ``--dedicated`` first cells carry
``filter_tenant_id`` metadata naming the dedicated project, which is what
AggregateMultiTenancyIsolation reads (through
``nova.scheduler.filters.utils.aggregate_metadata_get_by_host``); the same
cells are given to that project in ``[cellsched] cells_projects`` and the
others are ``[cellsched] cells_default``, so both filters express the same
isolation.

How ProjectCellFilter gets its cell mappings: the filter is built as
nova builds it (reading ``[cellsched]`` from ``nova.conf.CONF``, set here
with ``CONF.set_override``), then its ``_cache`` is replaced by a
``PolicyCache`` with the filter's own option reader and a load function
returning the benchmark's ``CellInfo`` values. That is the simplest
correct route: the filter's hot path (option read and compare, policy
lookup, one set membership test per host) is the real one, and only the
API database query, which runs on the first request and on reloads, not
per request, is left out. Setting up nova's in-memory API database would
time the same per-request code with more moving parts.

Each repeat times one ``filter_all()`` call over every host, with
``list()`` consuming AggregateMultiTenancyIsolation's generator; the
median of ``--repeat`` runs is reported in ns per host, for a request of
the dedicated project and one of an unmapped project, plus the ratio
AggregateMultiTenancyIsolation / ProjectCellFilter. Logging is left at
its default (WARNING), so neither filter's debug lines are formatted.
"""

# nova.tests first: importing it applies nova's eventlet monkey patching,
# which must happen before the rest of nova (and oslo) is imported.
from nova.tests.unit.scheduler import fakes  # isort: skip

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
import uuid

import nova.conf
from nova import objects
from nova.scheduler.filters import aggregate_multitenancy_isolation as amti
from nova import version as nova_version

try:
    import nova_cellsched  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))

from nova_cellsched.scheduler import host_filter as cellsched_filters  # noqa: E402
from nova_cellsched.scheduler.policy import CellInfo  # noqa: E402
from nova_cellsched.scheduler import policy_cache  # noqa: E402

CONF = nova.conf.CONF

DEDICATED_PROJECT = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'
UNMAPPED_PROJECT = '5b1e0a9f2c8d4e8fa1b2c3d4e5f60718'
AZ_COUNT = 3


def build_world(n_hosts, n_cells, n_dedicated):
    """Return (cell infos, host states) for the benchmark."""
    ns = uuid.UUID('6ba7b811-9dad-11d1-80b4-00c04fd430c8')
    cells = [CellInfo(str(uuid.uuid5(ns, 'cell%03d' % i)), 'cell%03d' % i)
             for i in range(n_cells)]
    cell_aggregates = []
    for i, cell in enumerate(cells):
        metadata = {}
        if i < n_dedicated:
            metadata['filter_tenant_id'] = DEDICATED_PROJECT
        cell_aggregates.append(objects.Aggregate(
            id=i + 1, uuid=str(uuid.uuid5(ns, 'agg-%s' % cell.name)),
            name='agg-%s' % cell.name, hosts=[], metadata=metadata))
    az_aggregates = [objects.Aggregate(
        id=1000 + z, uuid=str(uuid.uuid5(ns, 'az%d' % z)), name='az%d' % z,
        hosts=[], metadata={'availability_zone': 'az%d' % z})
        for z in range(AZ_COUNT)]

    hosts = []
    for h in range(n_hosts):
        c = h % n_cells
        name = 'compute%05d' % h
        aggs = [cell_aggregates[c], az_aggregates[h % AZ_COUNT]]
        for agg in aggs:
            agg.hosts.append(name)
        hosts.append(fakes.FakeHostState(name, name, {
            'cell_uuid': cells[c].uuid, 'aggregates': aggs}))
    return cells, hosts


def configure(cells, n_dedicated):
    """Set [cellsched]: n_dedicated cells for one project, rest default."""
    CONF.set_override('cells_default',
                      [c.name for c in cells[n_dedicated:]],
                      group='cellsched')
    CONF.set_override('cells_projects', ','.join(
        '%s:%s' % (c.name, DEDICATED_PROJECT) for c in cells[:n_dedicated]),
        group='cellsched')


def make_project_cell_filter(cells):
    """A ProjectCellFilter whose cell mappings come from *cells*."""
    filt = cellsched_filters.ProjectCellFilter()
    filt._cache = policy_cache.PolicyCache(
        cellsched_filters._read_options, lambda: list(cells))
    return filt


def time_filter(filt, hosts, spec, repeat):
    """Median ns of filt.filter_all over hosts, and the hosts passed."""
    passed = list(filt.filter_all(hosts, spec))      # warm up, load cells
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter_ns()
            list(filt.filter_all(hosts, spec))
            samples.append(time.perf_counter_ns() - start)
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples), samples, len(passed)


def run(args):
    objects.register_all()
    cells, hosts = build_world(args.hosts, args.cells, args.dedicated)
    configure(cells, args.dedicated)
    pcf = make_project_cell_filter(cells)
    mti = amti.AggregateMultiTenancyIsolation()

    results = []
    for label, project in (('dedicated project', DEDICATED_PROJECT),
                           ('unmapped project', UNMAPPED_PROJECT)):
        spec = objects.RequestSpec(project_id=project,
                                   instance_uuid=str(uuid.uuid4()))
        row = {'request': label, 'project_id': project}
        for key, filt in (('project_cell_filter', pcf),
                          ('aggregate_multitenancy_isolation', mti)):
            median, samples, passed = time_filter(filt, hosts, spec,
                                                  args.repeat)
            row[key] = {'median_ns': median,
                        'ns_per_host': median / len(hosts),
                        'min_ns': min(samples), 'max_ns': max(samples),
                        'hosts_passed': passed}
        row['ratio_amti_over_pcf'] = (
            row['aggregate_multitenancy_isolation']['median_ns'] /
            row['project_cell_filter']['median_ns'])
        results.append(row)

    report = {
        'hosts': args.hosts, 'cells': args.cells,
        'dedicated_cells': args.dedicated, 'repeat': args.repeat,
        'aggregates_per_host': 2,
        'python': platform.python_version(),
        'nova': nova_version.version_string(),
        'machine': platform.machine(), 'cpus': os.cpu_count(),
        'results': results,
    }
    print('%d hosts in %d cells (%d dedicated), median of %d runs'
          % (args.hosts, args.cells, args.dedicated, args.repeat))
    print('%-18s %-34s %12s %10s %8s' % ('request', 'filter', 'median ms',
                                          'ns/host', 'passed'))
    for row in results:
        for key, name in (('project_cell_filter', 'ProjectCellFilter'),
                          ('aggregate_multitenancy_isolation',
                           'AggregateMultiTenancyIsolation')):
            r = row[key]
            print('%-18s %-34s %12.3f %10.1f %8d'
                  % (row['request'], name, r['median_ns'] / 1e6,
                     r['ns_per_host'], r['hosts_passed']))
        print('%-18s %-34s %12s %9.1fx'
              % (row['request'], 'ratio AMTI / ProjectCellFilter', '',
                 row['ratio_amti_over_pcf']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(report, f, indent=2, sort_keys=True)
            f.write('\n')
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=10000,
                        help='number of host states (default 10000)')
    parser.add_argument('--cells', type=int, default=70,
                        help='number of cells (default 70)')
    parser.add_argument('--dedicated', type=int, default=5,
                        help='cells dedicated to one project (default 5)')
    parser.add_argument('--repeat', type=int, default=21,
                        help='timed runs per filter and request; the '
                             'median is reported (default 21)')
    parser.add_argument('--json', metavar='FILE',
                        help='also write the results as JSON to FILE')
    args = parser.parse_args(argv)
    if not 0 < args.dedicated < args.cells:
        parser.error('--dedicated must be between 1 and --cells - 1')
    if args.hosts < args.cells or args.repeat < 1:
        parser.error('--hosts must be >= --cells, --repeat >= 1')
    run(args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
