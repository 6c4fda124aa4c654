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

"""GET /servers/detail as users pay for it: stock nova-api vs the filter.

Two nova-api processes, each served by uwsgi as devstack serves it
(``tests/fixtures/uwsgi_api.py``: one worker process, one thread,
``debug = false``): **stock** (nova's api-paste.ini, no nova-cellsched
at all) and **ours** (the same with the ``cellsched`` filter and every
``[cellsched]`` option at its default). A client sends
``GET /servers/detail?limit=N`` to one, then the other, alternating
which goes first, and times each request from sending it to the last
byte of the body. Nothing is done to the workers between requests (no
forced garbage collection): they run as a real API worker runs::

    python benchmarks/bench_api_e2e.py --out benchmarks/results/
    python benchmarks/bench_api_e2e.py --quick

**Releases** (``--nova NN``): the same against nova NN (31 to 34),
stock nova NN against nova NN with the filter. The command runs again
in that release's virtualenv (``tools/nova-release-bench NN``: nova and
its libraries as that release's upper-constraints pin them, built on
first use), seeds worlds with that release's schema (their databases
are named after it), asks that release's newest microversion, and
writes ``api_e2e_novaNN``. Both nova-api processes run in the
release's own concurrency mode (``OS_NOVA_DISABLE_EVENTLET_PATCHING``
unset: what its ``nova/wsgi/osapi_compute.py`` chooses). The
per-release figures of the benchmarks page come from::

    python benchmarks/bench_api_e2e.py --nova 31 --layouts even \
        --roles admin --limits 1000 --validations warn \
        --out benchmarks/results/

**Requests** (``--layouts``, ``--roles``, ``--limits``): per layout,
as an admin and as a project member, with each limit:

* ``even``: the servers spread over every cell. The admin lists every
  project (``all_tenants=1``); the member lists one of the world's 12
  projects, whose servers are in every cell.
* ``onecell``: a project dedicated to one cell (``cell1`` holds
  ``--dedicated`` servers of it, no other cell any). The admin lists it
  (``all_tenants=1&project_id=...``), the member is in it. Every other
  cell answers its first batch empty; the page lives in one cell.

The admin is the noauth stand-in's ``admin`` (roles admin, member,
reader); the member has the roles member and reader only.

**Data.** The worlds of ``benchmarks/bench_listing.py`` (seeded by
``benchmarks/seed_fast.py``) plus one ``request_specs`` row per instance
(``bench_api.seed_request_specs``), on ``--server``; the cell mappings
of the world's API database name the cells with PyMySQL, as devstack
configures nova. Neutron is a stand-in answering no ports (the same for
both).

**Measured**, per (world, microversion, ``[api] response_validation``):
the median (and min, max) of ``--repeat`` requests per variant, and the
ratio stock / ours; for ours, the medians of the phases its
``Server-Timing`` header reports (gather, merge, objects, view,
validation, other) and validation's share of the request; the floor of
the same response (``benchmarks/floor.py``: its rows read with plain SQL, its
body encoded) and ours / floor (``--no-floor``: not timed). The bodies of
the two are compared (after replacing each one's own base URL in the
links): equal, or the run stops. Where nova's time goes inside the
request is measured in one process by ``benchmarks/bench_api.py``.

**Databases.** As ``bench_api.py``: ``--keep``, ``--cleanup``; the run
drops the ``ncsbench_*`` databases it created when it ends.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import runinfo  # noqa: E402  (no nova import)

if __name__ == '__main__':
    # --nova NN: this command again in nova NN's venv, before nova loads.
    runinfo.run_in_release('bench_api_e2e.py')

import bench_api  # noqa: E402  (nova's patching, objects registered)

import argparse  # noqa: E402
import http.client  # noqa: E402
from importlib import metadata  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from typing import Any  # noqa: E402
import urllib.parse  # noqa: E402

import sqlalchemy as sa  # noqa: E402

import bench_listing  # noqa: E402
import floor as floor_mod  # noqa: E402
import reporting  # noqa: E402
import seed_fast  # noqa: E402
from tests.fixtures import server_timing_grammar  # noqa: E402
from tests.fixtures import uwsgi_api  # noqa: E402

PATH = '/v2.1/servers/detail?all_tenants=1&limit=%d'
LAYOUTS = ('even', 'onecell')
ROLES = ('admin', 'member')


def request(layout: str, role: str, limit: int,
            projects: dict[str, str]) -> tuple[str, str]:
    """(path, token) of one request of the matrix.

    :param projects: layout -> the project listed.
    """
    project = projects[layout]
    if role == 'admin':
        query = {'all_tenants': '1', 'limit': str(limit)}
        if layout == 'onecell':
            query['project_id'] = project
        return ('/v2.1/servers/detail?' + urllib.parse.urlencode(query),
                uwsgi_api.TOKEN)
    return ('/v2.1/servers/detail?limit=%d' % limit,
            'member:%s:member,reader' % project)
PHASES = ('gather', 'merge', 'objects', 'view', 'validation', 'other')


def concurrency_mode() -> str:
    """nova-api's concurrency mode here, and what in nova chooses it.

    As :func:`nova_cellsched.wsgi.concurrency.threads_by_default` tells
    it (the variable unset, as both nova-api processes run).
    """
    from nova_cellsched.wsgi import concurrency

    if concurrency.threads_by_default():
        return ('native threads: nova/wsgi/osapi_compute.py calls '
                'monkey_patch.patch(backend=\'threading\')')
    return ('eventlet: nova/wsgi/osapi_compute.py imports '
            'nova.api.openstack, which patches')


def parts_note() -> str:
    """The nova-api filter's parts that are off on this nova, and why.

    ``compat.check()``: the answer the filter's start-up gives in the
    nova-api process (its INFO line); nothing is installed here.
    """
    from nova_cellsched.compat import core as compat_core

    off = {name: problems for name, problems in compat_core.check().items()
           if problems}
    if not off:
        return ''
    return '; parts off here, as the filter says at start: %s' % '; '.join(
        '%s (%s)' % (name, problems[0]) for name, problems in off.items())


def pymysql_world(world: dict[str, Any]) -> types.SimpleNamespace:
    """*world* as :class:`uwsgi_api.UwsgiNovaApi` takes it, on PyMySQL.

    Rewrites the cell mappings of the world's API database to PyMySQL
    URLs (nova-api reads the cells' URLs there).
    """
    def pymysql(url: str) -> str:
        return bench_listing.driver_url(url, 'pymysql')

    api_url = pymysql(world['api_url'])
    engine = sa.create_engine(api_url)
    try:
        with engine.begin() as conn:
            for cell_id, url in conn.execute(sa.text(
                    'SELECT id, database_connection FROM cell_mappings')
                    ).all():
                conn.execute(sa.text(
                    'UPDATE cell_mappings SET database_connection = :u '
                    'WHERE id = :i'), {'u': pymysql(url), 'i': cell_id})
    finally:
        engine.dispose()
    return types.SimpleNamespace(api_url=api_url, cells={
        name: types.SimpleNamespace(name=name, url=pymysql(url))
        for name, _uuid, url in world['cells']})


def get(api: uwsgi_api.UwsgiNovaApi, path: str, version: str,
        token: str = uwsgi_api.TOKEN
        ) -> tuple[float, bytes, dict[str, str]]:
    """(seconds to the body's last byte, body, headers) of GET *path*."""
    parts = urllib.parse.urlsplit(api.base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port,
                                      timeout=600)
    try:
        start = time.perf_counter()
        conn.request('GET', path, headers={
            'X-Auth-Token': token, 'Accept': 'application/json',
            'OpenStack-API-Version': 'compute %s' % version})
        response = conn.getresponse()
        body = response.read()
        seconds = time.perf_counter() - start
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError('%s %s answered %d: %s' % (
            api.base, path, response.status, body[:500]))
    return seconds, body, dict(response.getheaders())


def measure(apis: dict[str, uwsgi_api.UwsgiNovaApi], version: str,
            limit: int, repeat: int, log: Any, path: str | None = None,
            token: str = uwsgi_api.TOKEN,
            floor: 'floor_mod.Floor | None' = None) -> dict[str, Any]:
    """*repeat* requests per variant, alternating; the medians.

    With *floor*, each round also times the floor of the body stock
    answered (:class:`floor_mod.Floor`), in this process.
    """
    path = path or PATH % limit
    times: dict[str, list[float]] = {'stock': [], 'ours': [], 'floor': []}
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    servers = None
    for number in range(repeat):
        order = ('stock', 'ours') if number % 2 == 0 else ('ours', 'stock')
        bodies = {}
        for variant in order:
            seconds, body, headers = get(apis[variant], path, version,
                                         token)
            times[variant].append(seconds)
            bodies[variant] = body.replace(
                apis[variant].base.encode(), b'http://nova-api')
            if variant == 'ours' and 'Server-Timing' in headers:
                # Absent where the filter sends it to admins only.
                metrics = server_timing_grammar.parse(
                    headers['Server-Timing'])
                for name in PHASES:
                    phases[name].append(
                        float(metrics.get(name, {}).get('dur', 0.0)))
        if bodies['stock'] != bodies['ours']:
            raise RuntimeError('%s at %s: the bodies differ' % (path,
                                                                version))
        if floor is not None:
            times['floor'].append(floor.measure(bodies['stock'], version)[0])
        servers = len(json.loads(bodies['ours'])['servers'])
    stock = statistics.median(times['stock'])
    ours = statistics.median(times['ours'])
    point = {
        'version': version, 'servers': servers,
        'stock_ms': round(stock * 1000, 1), 'ours_ms': round(ours * 1000, 1),
        'ratio': round(stock / ours, 2),
        'stock_range_ms': [round(min(times['stock']) * 1000, 1),
                           round(max(times['stock']) * 1000, 1)],
        'ours_range_ms': [round(min(times['ours']) * 1000, 1),
                          round(max(times['ours']) * 1000, 1)],
        # None: no Server-Timing (sent to admins only).
        'ours_phases_ms': {name: round(statistics.median(values), 1)
                           for name, values in phases.items()
                           } if phases['gather'] else None,
    }
    if times['floor']:
        floor_s = statistics.median(times['floor'])
        point.update(floor_ms=round(floor_s * 1000, 1),
                     ours_over_floor=round(ours / floor_s, 2))
    log('  %s %s: stock %.0f ms, ours %.0f ms, %.2fx%s; ours: %s'
        % (path, version, point['stock_ms'], point['ours_ms'], point['ratio'],
           '; floor %.0f ms, ours %.2fx it' % (
               point['floor_ms'], point['ours_over_floor'])
           if 'floor_ms' in point else '',
           ', '.join('%s %.0f' % kv
                     for kv in (point['ours_phases_ms'] or {}).items())
           or 'no Server-Timing (not an admin)'))
    return point


def render(report: dict[str, Any]) -> str:
    lines = [
        '# GET /servers/detail end to end: stock nova-api vs the filter',
        '',
        '`%s` on %s, nova %s, Python %s, %s CPUs, medians of %d requests '
        'per variant, alternating.' % (
            report['command'], report['date'], report['nova'],
            report['python'], report['cpus'], report['repeat']),
        '',
    ]
    if report.get('ours_options'):
        lines += ['Ours with `[cellsched]` %s (every other option at its '
                  'default).' % ', '.join(
                      '`%s = %s`' % kv
                      for kv in sorted(report['ours_options'].items())), '']
    if report.get('nova_options'):
        lines += ['Both with nova.conf %s.' % ', '.join(
            '`[%s] %s = %s`' % (section, key, value)
            for section, values in sorted(report['nova_options'].items())
            for key, value in sorted(values.items())), '']
    if report.get('load'):
        lines += ['Load average (1, 5, 15 min) at the start %s, at the end '
                  '%s.' % tuple(', '.join('%.2f' % v for v in report['load']
                                          [at]) for at in ('start', 'end')),
                  '']
    matrix = any('layout' in p for p in report['points'])
    floor = any('floor_ms' in p for p in report['points'])
    lines += [
        '| world | %sversion | validation | servers | stock ms | ours ms '
        '| x | %sours: gather | merge | objects | view | validation | other '
        '| validation share |' % (
            'layout | role | limit | ' if matrix else '',
            'floor ms | ours / floor | ' if floor else ''),
        '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|%s%s' % (
            '---|---|---|' if matrix else '', '---|---|' if floor else ''),
    ]
    for p in report['points']:
        ph = p['ours_phases_ms']
        if ph is None:
            timed = '- | - | - | - | - | - | - |'
        else:
            timed = '%.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f%% |' % (
                ph['gather'], ph['merge'], ph['objects'], ph['view'],
                ph['validation'], ph['other'],
                100.0 * ph['validation'] / p['ours_ms'])
        lines.append(
            '| %s | %s%s | %s | %d | %.0f | %.0f | %.2f | %s%s' % (
                p['world'], '%s | %s | %d | ' % (
                    p['layout'], p['role'], p['limit']) if matrix else '',
                p['version'], p['validation'], p['servers'],
                p['stock_ms'], p['ours_ms'], p['ratio'],
                ('%.0f | %.2f | ' % (p['floor_ms'], p['ours_over_floor'])
                 if 'floor_ms' in p else '- | - | ') if floor else '',
                timed))
    lines += [
        '',
        'Columns:',
        '',
        '* world: cells x servers per cell; version: the request\'s '
        'microversion; validation: `[api] response_validation` of both '
        'processes (`warn` is nova\'s default).',
    ] + ([
        '* layout: `even`, the servers listed are spread over every cell '
        '(admin: every project; member: one of 12 projects spread over '
        'every cell); `onecell`, a project dedicated to `cell1` (admin: '
        '`project_id` of it; member: in it). role: `admin` (all_tenants) '
        'or a project `member` (roles member, reader); limit: the '
        'request\'s.',
    ] if matrix else []) + [
        '* stock ms, ours ms: the client\'s time from sending the request '
        'to the last byte of the body (HTTP on the loopback, uwsgi, the '
        'paste pipeline, nova-api, JSON); x: stock / ours. Plain medians, '
        'no figure stabilised.',
    ] + ([
        '* floor ms: the same page\'s rows read from their cells with plain '
        'SQL (PyMySQL, the cells in parallel, a connection per thread '
        'and database server, '
        'every table the body draws on, by the page\'s uuids) and the same '
        'body encoded with nova\'s `jsonutils.dumps`, in this run\'s '
        'client process, between the requests; ours / floor: what ours '
        'costs over it (the floor has no HTTP, policy, merge or '
        'rendering).',
    ] if floor else []) + [
        '* ours: the medians of the phases of the `Server-Timing` header '
        'the filter adds (each a median on its own: they need not add up '
        'to ours ms; `-` where the filter sends no header: to admins '
        'only); other: the rest of the request inside nova-api '
        '(policy, the faults, the build requests, the WSGI stack); the '
        'HTTP transfer is outside all of them. validation share: '
        'validation / ours ms.',
        '',
    ] + ['* %s' % note for note in report['notes']]
    return '\n'.join(lines) + '\n'


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--server', default=os.environ.get(
        'NOVA_CELLSCHED_BENCH_URL', 'mysql+pymysql://root@127.0.0.1/'))
    parser.add_argument('--worlds', default='10x1000,50x200')
    parser.add_argument('--versions',
                        default='2.1,%s' % bench_api.MAX_VERSION)
    parser.add_argument('--validations', default='warn,ignore')
    parser.add_argument('--limits', default='50,1000',
                        help='page sizes (comma separated)')
    parser.add_argument('--layouts', default=','.join(LAYOUTS),
                        help='even, onecell (see the module docstring)')
    parser.add_argument('--roles', default=','.join(ROLES),
                        help='admin, member')
    parser.add_argument('--dedicated', type=int, default=1000,
                        help='servers of the project dedicated to cell1 '
                        '(the onecell layout)')
    parser.add_argument('--repeat', type=int, default=7)
    parser.add_argument('--no-floor', dest='floor', action='store_false',
                        help='do not time the floor (plain SQL and JSON) '
                        'of each request')
    parser.add_argument('--quick', action='store_true',
                        help='one small world (4x100), 3 requests each')
    reporting.add_output_arguments(parser, name='api_e2e')
    parser.add_argument('--nova', type=int, metavar='NN',
                        help='run against nova NN (31 to 34) in its own '
                        'virtualenv (tools/nova-release-bench NN); the '
                        'results are named NAME_novaNN')
    parser.add_argument('--ours-option', action='append', default=[],
                        metavar='NAME=VALUE',
                        help='a [cellsched] option of ours other than its '
                        'default (repeatable), to measure what one option '
                        'gives: e.g. api_view_bdms=false')
    parser.add_argument('--nova-option', action='append', default=[],
                        metavar='SECTION.NAME=VALUE',
                        help="a nova.conf option of both processes, stock "
                        "and ours (repeatable): e.g. "
                        "api.instance_list_per_project_cells=true")
    seed_fast.add_database_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.worlds, args.repeat, args.name = '4x100', 3, args.name + '_quick'
    if args.nova is not None:
        args.name += '_nova%d' % args.nova
    args.worlds = [tuple(int(n) for n in w.split('x'))
                   for w in args.worlds.split(',')]
    args.versions = args.versions.split(',')
    args.validations = args.validations.split(',')
    args.limits = [int(n) for n in args.limits.split(',')]
    args.layouts = args.layouts.split(',')
    args.roles = args.roles.split(',')
    for name, values, allowed in (('layout', args.layouts, LAYOUTS),
                                  ('role', args.roles, ROLES)):
        for value in values:
            if value not in allowed:
                parser.error('--%ss: %r is not one of %s'
                             % (name, value, ', '.join(allowed)))
    args.ours_options = dict(o.split('=', 1) for o in args.ours_option)
    args.nova_options = {}
    for option in args.nova_option:
        name, sep, value = option.partition('=')
        section, dot, key = name.partition('.')
        if not (sep and dot and section and key):
            parser.error('--nova-option: expected SECTION.NAME=VALUE, got '
                         '%r' % option)
        args.nova_options.setdefault(section, {})[key] = value
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, reporting.text_writer(render))
    worlds = [(cells, per_cell, 0) for cells, per_cell in args.worlds]
    if args.cleanup:
        reporting.require('bench_api_e2e.py')
        seed_fast.cleanup(args.server, worlds)
        return 0
    reporting.require('bench_api_e2e.py', {
        'MySQLdb': 'mysqlclient: the seeder (LOAD DATA)'},
        [uwsgi_api.unavailable()])
    with reporting.cleanly() as stack:
        stack.enter_context(seed_fast.databases_of_this_run(
            args.server, args.keep, worlds))
        return _main(args, argv)


def _main(args: argparse.Namespace, argv: list[str] | None) -> int:
    def log(text: str) -> None:
        print(text, flush=True)

    points = []
    # Both nova-api processes run as this release runs them by default
    # (nova 34's entry point forces native threads; nova 31 to 33 choose
    # by this variable, which bench_listing set for this process only).
    os.environ.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
    load = {'start': os.getloadavg()}
    neutron = uwsgi_api.FakeNeutron()
    floors: list[floor_mod.Floor] = []
    neutron.setUp()
    try:
        for cells, per_cell in args.worlds:
            world = seed_fast.ensure_world(args.server, cells, per_cell, 0,
                                           progress=log)
            projects = {'even': seed_fast.seed.project_ids(12, seed=42)[0]}
            if 'onecell' in args.layouts:
                projects['onecell'] = seed_fast.ensure_dedicated_project(
                    world, args.dedicated, progress=log)
            bench_api.seed_request_specs(world['api_url'], log)
            nova_world = pymysql_world(world)
            label = '%dx%d' % (cells, per_cell)
            floor = floor_mod.Floor(nova_world) if args.floor else None
            if floor is not None:
                floors.append(floor)
            matrix = [(layout, role, limit) for layout in args.layouts
                      for role in args.roles for limit in args.limits]
            for validation in args.validations:
                log('%s, response_validation = %s:' % (label, validation))
                conf = {'DEFAULT': {'debug': 'false'},
                        'api': {'response_validation': validation}}
                for section, values in args.nova_options.items():
                    conf.setdefault(section, {}).update(values)
                apis = {}
                try:
                    for variant in ('stock', 'ours'):
                        api = uwsgi_api.UwsgiNovaApi(
                            nova_world, neutron.url,
                            with_filter=variant == 'ours', processes=1,
                            threads=1, nova_conf=conf, start_timeout=300,
                            cellsched=(args.ours_options
                                       if variant == 'ours' else None))
                        api.setUp()
                        apis[variant] = api
                    for version in args.versions:
                        for layout, role, limit in matrix:  # warm up
                            path, token = request(layout, role, limit,
                                                  projects)
                            for variant in ('stock', 'ours'):
                                get(apis[variant], path, version, token)
                    for version in args.versions:
                        for layout, role, limit in matrix:
                            path, token = request(layout, role, limit,
                                                  projects)
                            point = measure(apis, version, limit,
                                            args.repeat, log, path, token,
                                            floor)
                            point.update(world=label, validation=validation,
                                         layout=layout, role=role,
                                         limit=limit)
                            points.append(point)
                finally:
                    for api in apis.values():
                        api.cleanUp()
    finally:
        # Before the run drops its databases: the floor's connections.
        for floor in floors:
            floor.close()
        neutron.cleanUp()
    report = dict(runinfo.run_info('bench_api_e2e.py', argv), **{
        'repeat': args.repeat, 'points': points,
        'load': dict(load, end=os.getloadavg()),
        'ours_options': args.ours_options,
        'nova_options': args.nova_options,
        'notes': [
            'two uwsgi processes (one worker, one thread each, as devstack '
            'configures nova-api but for the worker count), nova-api in '
            'nova %d\'s own concurrency mode (%s), debug off; one client, '
            'one request at a time.' % (runinfo.nova_major(),
                                        concurrency_mode()),
            'stock: nova %s as released, no nova-cellsched; ours: the '
            '`cellsched` filter in the pipelines, every `[cellsched]` '
            'option at its default%s.' % (
                metadata.version('nova'), parts_note()),
            'authentication: the tests\' noauth stand-in in place of '
            'keystone\'s authtoken (both); neutron: a stand-in with no '
            'ports (both).',
        ]})
    text = render(report)
    print(text)
    reporting.write_results(report, name=args.name, out=args.out,
                            json_path=args.json, render=render, indent=1,
                            sort_keys=False, default=str, say=log)
    return 0


if __name__ == '__main__':
    sys.exit(main())
