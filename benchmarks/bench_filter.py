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
        --repeat 21 --out benchmarks/results/

The hosts are nova's ``FakeHostState`` objects spread round robin over
``--cells`` cells (``cell_uuid`` set). Each host is in two real
``objects.Aggregate``: its cell's aggregate and an availability zone
aggregate. The aggregates of the ``--dedicated`` first cells carry
``filter_tenant_id`` metadata naming the dedicated project, which is what
AggregateMultiTenancyIsolation reads (through
``nova.scheduler.filters.utils.aggregate_metadata_get_by_host``).

**Equal decisions.** AggregateMultiTenancyIsolation keeps other projects
out of the dedicated hosts but lets the dedicated project go anywhere
(a host in no ``filter_tenant_id`` aggregate passes every project).
ProjectCellFilter is configured to decide exactly that: the dedicated
cells are given to the project in ``[cellsched] cells_projects``, and so
are the shared cells, which are also ``cells_default`` for every other
project. Before timing, the script checks that both filters pass the
same hosts for each request, and stops otherwise. (ProjectCellFilter's
stricter isolation, a dedicated project kept *inside* its cells, has no
AggregateMultiTenancyIsolation equivalent; it costs the same set lookup
per host.)

How ProjectCellFilter gets its cell mappings: the filter is built as
nova builds it, on the process's shared policy (``scheduler.state``)
built first from ``nova.conf.CONF`` (``[cellsched]`` set here with
``CONF.set_override``) with a load function returning the benchmark's
``CellInfo`` values. That is the simplest correct route: the filter's
hot path (installed options compared, policy lookup, one set membership
test per host) is the real one, and only the
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
import logging
import os
import statistics
import sys
import time
import uuid

import nova.conf
from nova import objects
from nova.scheduler.filters import aggregate_multitenancy_isolation as amti

try:
    import nova_cellsched  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import reporting  # noqa: E402
import runinfo  # noqa: E402

from nova_cellsched.scheduler.decision import CellInfo  # noqa: E402
from nova_cellsched.scheduler import host_filter as cellsched_filters  # noqa: E402
from nova_cellsched.scheduler import state  # noqa: E402

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
    """Set [cellsched] to AggregateMultiTenancyIsolation's decisions.

    The first *n_dedicated* cells for the dedicated project only; the
    others are the default cells, and the dedicated project's too (it
    may use every host, as AggregateMultiTenancyIsolation lets it).
    """
    CONF.set_override('cells_default',
                      [c.name for c in cells[n_dedicated:]],
                      group='cellsched')
    CONF.set_override('cells_projects', ','.join(
        '%s:%s' % (c.name, DEDICATED_PROJECT) for c in cells),
        group='cellsched')


def passed_hosts(filt, hosts, spec):
    """The names of the hosts *filt* lets through for *spec*."""
    return {h.host for h in filt.filter_all(hosts, spec)}


def make_project_cell_filter(cells):
    """A ProjectCellFilter whose cell mappings come from *cells*."""
    state._shared = state.SharedPolicy(CONF, lambda: list(cells))
    return cellsched_filters.ProjectCellFilter()


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
    # The shared cells are both default and the dedicated project's, on
    # purpose (see the module docstring): the policy's warning about
    # each of them at load is not news here.
    logging.getLogger('nova_cellsched.scheduler').setLevel(logging.ERROR)
    cells, hosts = build_world(args.hosts, args.cells, args.dedicated)
    configure(cells, args.dedicated)
    pcf = make_project_cell_filter(cells)
    mti = amti.AggregateMultiTenancyIsolation()

    results = []
    for label, project in (('dedicated project', DEDICATED_PROJECT),
                           ('unmapped project', UNMAPPED_PROJECT)):
        spec = objects.RequestSpec(project_id=project,
                                   instance_uuid=str(uuid.uuid4()))
        ours, novas = (passed_hosts(pcf, hosts, spec),
                       passed_hosts(mti, hosts, spec))
        if ours != novas:
            raise SystemExit(
                'ABORT: the filters decide differently for the %s: '
                'ProjectCellFilter passes %d hosts, '
                'AggregateMultiTenancyIsolation %d (%d differ); expected '
                'the same hosts' % (label, len(ours), len(novas),
                                    len(ours ^ novas)))
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

    report = dict(runinfo.run_info('bench_filter.py', args.argv), **{
        'hosts': args.hosts, 'cells': args.cells,
        'dedicated_cells': args.dedicated, 'repeat': args.repeat,
        'aggregates_per_host': 2,
        'results': results,
    })
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
    reporting.write_results(report, name=args.name, out=args.out,
                            json_path=args.json,
                            write_markdown=write_markdown)
    return report


def write_markdown(path, report):
    """The results as a table, every column explained."""
    lines = [
        '# ProjectCellFilter vs AggregateMultiTenancyIsolation', '',
        '`%s` on %s (commit %s), nova %s, Python %s, %s CPU(s).' % (
            report['command'], report['date'][:16], report['commit'],
            report['nova'], report['python'], report['cpus']), '',
        '%(hosts)d host states in %(cells)d cells, the first '
        '%(dedicated_cells)d dedicated to one project; each host in '
        '%(aggregates_per_host)d aggregates; median of %(repeat)d runs of '
        '`filter_all()` over every host.' % report, '',
        '| request | hosts passed (both) | ProjectCellFilter ns/host | '
        'AggregateMultiTenancyIsolation ns/host | ratio |',
        '|---|---|---|---|---|']
    for row in report['results']:
        pcf = row['project_cell_filter']
        mti = row['aggregate_multitenancy_isolation']
        lines.append('| %s | %d | %.0f | %.0f | %.1fx |' % (
            row['request'], pcf['hosts_passed'], pcf['ns_per_host'],
            mti['ns_per_host'], row['ratio_amti_over_pcf']))
    lines += [
        '', 'Columns:', '',
        '* request: a new server of the project the dedicated cells '
        'belong to, or of a project named nowhere.',
        '* hosts passed (both): the hosts each filter lets through; the '
        'script checks, before timing, that both pass the same hosts.',
        '* ns/host: median time of one `filter_all()` call over all '
        'hosts, divided by the number of hosts.',
        '* ratio: AggregateMultiTenancyIsolation / ProjectCellFilter.']
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')


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
    reporting.add_output_arguments(parser, name='filter')
    args = parser.parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, write_markdown)
    args.argv = argv
    if not 0 < args.dedicated < args.cells:
        parser.error('--dedicated must be between 1 and --cells - 1')
    if args.hosts < args.cells or args.repeat < 1:
        parser.error('--hosts must be >= --cells, --repeat >= 1')
    run(args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
