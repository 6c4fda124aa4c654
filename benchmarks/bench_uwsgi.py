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

"""nova-api under uwsgi with concurrent clients and a failing cell.

Stock nova-api and nova-api with the ``cellsched`` filter, each served by
uwsgi as devstack serves it (``tests/fixtures/uwsgi_api.py``: same
processes and threads for both), on the same MariaDB world: an API
database and cells on one private mariadbd, the last cell on a second
one that is frozen (SIGSTOP), thawed, killed and restarted::

    python benchmarks/bench_uwsgi.py --out benchmarks/results/
    python benchmarks/bench_uwsgi.py --quick

**Load.** ``--clients`` threads (8) list ``GET /servers/detail?all_tenants
=1&limit=1000`` back to back; a probe every 0.5 s asks ``GET /flavors``
and ``GET /servers/{id}`` of a server in a healthy cell. Every request
has a client timeout (``--request-timeout``): a request that gets no
answer counts as an error ``timeout``.

**Phases** (``--phase-seconds`` each): healthy; the last cell frozen;
thawed; its server killed; restarted. A phase's clients stop issuing
requests at its end and the phase waits for the requests in flight (at
most the client timeout) before the next one starts.

**Measured** per (variant, phase): list p50/p95/p99/max, probe
p50/p99/max, lists per second, errors by kind (HTTP status or
``timeout``), lists that missed a healthy cell's server, and at the end
of the phase the threads of uwsgi's workers and their TCP connections
to the MariaDB servers. Results: ``uwsgi.json`` and ``uwsgi.md`` in
``--out`` (``uwsgi_quick.*`` with ``--quick``).

``--quick`` runs a small world (4 cells of 25 servers, 4 s phases) to
show the machinery works; the full run lists 998 servers (4 cells of
249 and cell0's 2: one page of nova's ``[api] max_limit``) for 60 s per
phase. ``--processes`` and ``--threads`` size uwsgi (the same for both
variants); ``--name`` names the results files.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(1, TOP)

import tests  # noqa: E402,F401  (nova's monkey patching, before nova)

import argparse  # noqa: E402
import collections  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from nova_cellsched.demo import seed  # noqa: E402
import reporting  # noqa: E402
import runinfo  # noqa: E402
from tests.fixtures import mariadb_server as mdb  # noqa: E402
from tests.fixtures import uwsgi_api  # noqa: E402

DETAIL = '/servers/detail?all_tenants=1&limit=1000'
PHASES = ('healthy', 'frozen', 'thawed', 'killed', 'restarted')
PROBE_EVERY = 0.5


def worker_resources(api: uwsgi_api.UwsgiNovaApi,
                     db_ports: list[int]) -> dict[str, int]:
    """Threads of uwsgi's workers and their TCP connections to MariaDB.

    Read from ``/proc``: a frozen server cannot be asked.
    """
    threads = connections = 0
    remotes = {'0100007F:%04X' % port for port in db_ports}
    for pid in api.worker_pids():
        try:
            with open('/proc/%d/status' % pid) as handle:
                for line in handle:
                    if line.startswith('Threads:'):
                        threads += int(line.split()[1])
            inodes = set()
            for fd in os.listdir('/proc/%d/fd' % pid):
                try:
                    target = os.readlink('/proc/%d/fd/%s' % (pid, fd))
                except OSError:
                    continue
                if target.startswith('socket:['):
                    inodes.add(target[8:-1])
            with open('/proc/%d/net/tcp' % pid) as handle:
                for line in handle.readlines()[1:]:
                    fields = line.split()
                    if (fields[2] in remotes and fields[3] == '01' and
                            fields[9] in inodes):
                        connections += 1
        except OSError:
            continue  # the worker ended meanwhile
    return {'threads': threads, 'connections': connections}


class Phase:
    """One phase's clients and probe against one API."""

    def __init__(self, api: uwsgi_api.UwsgiNovaApi, clients: int,
                 seconds: float, timeout: float, healthy: set[str],
                 probe_id: str) -> None:
        self.api = api
        self.clients = clients
        self.seconds = seconds
        self.timeout = timeout
        self.healthy = healthy
        self.probe_id = probe_id
        self.lock = threading.Lock()
        self.lists: list[float] = []
        self.probes: list[float] = []
        self.errors: collections.Counter[str] = collections.Counter()
        self.incomplete = 0

    def _call(self, path: str) -> tuple[float, Any, str | None]:
        start = time.monotonic()
        try:
            status, body, _ = self.api.get(path, timeout=self.timeout)
        except OSError as exc:  # a timeout or a refused connection
            kind = 'timeout' if 'timed out' in str(exc) else type(
                exc).__name__
            return time.monotonic() - start, None, kind
        error = None if status == 200 else str(status)
        return time.monotonic() - start, body, error

    def _client(self, end: float) -> None:
        while time.monotonic() < end:
            seconds, body, error = self._call(DETAIL)
            with self.lock:
                self.lists.append(seconds)
                if error:
                    self.errors['list ' + error] += 1
                elif not self.healthy <= {s['id'] for s in body['servers']}:
                    self.incomplete += 1

    def _probe(self, end: float) -> None:
        while time.monotonic() < end:
            start = time.monotonic()
            for path in ('/flavors', '/servers/%s' % self.probe_id):
                seconds, _body, error = self._call(path)
                with self.lock:
                    self.probes.append(seconds)
                    if error:
                        self.errors['probe ' + error] += 1
            time.sleep(max(0.0, PROBE_EVERY - (time.monotonic() - start)))

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        end = start + self.seconds
        threads = [threading.Thread(target=self._client, args=(end,))
                   for _ in range(self.clients)]
        threads.append(threading.Thread(target=self._probe, args=(end,)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - start

        def ms(value: float | None) -> float | None:
            return None if value is None else round(value * 1000, 1)

        return {
            'lists': len(self.lists),
            'lists_per_s': round(len(self.lists) / elapsed, 2),
            'list_p50_ms': ms(reporting.percentile(self.lists, 50)),
            'list_p95_ms': ms(reporting.percentile(self.lists, 95)),
            'list_p99_ms': ms(reporting.percentile(self.lists, 99)),
            'list_max_ms': ms(max(self.lists, default=None)),
            'probe_p50_ms': ms(reporting.percentile(self.probes, 50)),
            'probe_p99_ms': ms(reporting.percentile(self.probes, 99)),
            'probe_max_ms': ms(max(self.probes, default=None)),
            'errors': dict(self.errors),
            'incomplete_lists': self.incomplete,
            'seconds': round(elapsed, 1),
        }


def run_variant(name: str, world: mdb.World, victim: mdb.MariaDBServer,
                neutron_url: str, args: argparse.Namespace,
                healthy: set[str], probe_id: str,
                say: Any) -> dict[str, Any]:
    """Every phase against one nova-api (stock or with the filter)."""
    api = uwsgi_api.UwsgiNovaApi(
        world, neutron_url, with_filter=(name == 'filter'),
        processes=args.processes, threads=args.threads,
        cellsched={'list_cell_timeout': args.cell_timeout})
    api.setUp()
    ports = sorted({world.api_server.port, victim.port})
    out: dict[str, Any] = {}
    try:
        for phase in PHASES:
            if phase == 'frozen':
                victim.freeze()
            elif phase == 'thawed':
                victim.thaw()
            elif phase == 'killed':
                victim.kill()
            elif phase == 'restarted':
                victim.start()
            result = Phase(api, args.clients, args.phase_seconds,
                           args.request_timeout, healthy, probe_id).run()
            result.update(worker_resources(api, ports))
            out[phase] = result
            say('%-6s %-9s lists %4d  p50 %8s  p99 %8s  max %8s ms  '
                'probe p99 %8s ms  errors %s  threads %d  conns %d' % (
                    name, phase, result['lists'], result['list_p50_ms'],
                    result['list_p99_ms'], result['list_max_ms'],
                    result['probe_p99_ms'], result['errors'] or '-',
                    result['threads'], result['connections']))
    finally:
        if victim.frozen:
            victim.thaw()
        if not victim.running:
            victim.start()
        api.cleanUp()
    return out


def render(report: dict[str, Any]) -> str:
    lines = ['# nova-api under uwsgi: stock vs the cellsched filter', '',
             '%(cells)d cells x %(per_cell)d servers, %(clients)d clients, '
             '%(processes)d processes x %(threads)d threads, '
             'list_cell_timeout %(cell_timeout)s s, phases of '
             '%(phase_seconds)s s, client timeout %(request_timeout)s s'
             % report['setup'], '',
             '| variant | phase | lists | lists/s | p50 | p95 | p99 | max '
             '| probe p50 | probe p99 | probe max | errors | incomplete '
             '| threads | conns |',
             '|' + '---|' * 15]
    for variant, phases in report['results'].items():
        for phase, r in phases.items():
            lines.append(
                '| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s '
                '| %s | %d | %d | %d |' % (
                    variant, phase, r['lists'], r['lists_per_s'],
                    r['list_p50_ms'], r['list_p95_ms'], r['list_p99_ms'],
                    r['list_max_ms'], r['probe_p50_ms'], r['probe_p99_ms'],
                    r['probe_max_ms'],
                    ', '.join('%s: %d' % e for e in r['errors'].items())
                    or '-', r['incomplete_lists'], r['threads'],
                    r['connections']))
    lines.append('')
    lines.append('Times in ms. "incomplete": 200 answers missing a '
                 "healthy cell's server.")
    return '\n'.join(lines) + '\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='a small world and short phases')
    reporting.add_output_arguments(parser, name=None,
                                   out=os.path.join(HERE, 'results'))
    parser.add_argument('--cells', type=int, default=4)
    # 4 x 249 + cell0's 2 = 998: every server fits one page of nova's
    # [api] max_limit (1,000), so a complete answer has them all.
    parser.add_argument('--per-cell', type=int, default=249)
    parser.add_argument('--clients', type=int, default=8)
    parser.add_argument('--phase-seconds', type=float, default=60.0)
    parser.add_argument('--request-timeout', type=float, default=180.0)
    parser.add_argument('--cell-timeout', type=float, default=3.0)
    parser.add_argument('--processes', type=int, default=2)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--variants', default='filter,stock')
    args = parser.parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, reporting.text_writer(render))
    if args.quick:
        args.per_cell = min(args.per_cell, 25)
        args.phase_seconds = min(args.phase_seconds, 4.0)
        args.request_timeout = min(args.request_timeout, 15.0)
    reporting.require('bench_uwsgi.py', problems=[uwsgi_api.unavailable()])

    def say(text: str) -> None:
        print(text, flush=True)

    with reporting.cleanly() as stack:
        servers = [mdb.MariaDBServer('bench-uwsgi'),
                   mdb.MariaDBServer('bench-uwsgi-victim')]
        neutron = uwsgi_api.FakeNeutron()
        for fixture in servers + [neutron]:
            stack.callback(fixture.cleanUp)
            fixture.setUp()
        main_server, victim = servers
        population = seed.Population(instances=args.per_cell, hosts=4,
                                     metadata_keys=1)
        cells: list[tuple[str, mdb.MariaDBServer, seed.Population]] = [
            ('cell0', main_server, seed.Population(instances=2,
                                                   error_only=True))]
        for index in range(1, args.cells + 1):
            cells.append(('cell%d' % index,
                          victim if index == args.cells else main_server,
                          population))
        say('building %d cells x %d servers' % (args.cells, args.per_cell))
        world = mdb.build_world(main_server, cells)
        live = world.live_uuids()
        healthy = set().union(*(ids for name, ids in live.items()
                                if name != 'cell%d' % args.cells))
        if sum(len(ids) for ids in live.values()) > 1000:
            # A page is at most [api] max_limit servers: a complete
            # answer could not be told from one missing a healthy cell.
            raise SystemExit('bench_uwsgi.py: %d servers do not fit one '
                             'page of 1,000; lower --cells or --per-cell'
                             % sum(len(ids) for ids in live.values()))
        probe_id = sorted(live['cell1'])[0]
        results = {}
        for variant in args.variants.split(','):
            results[variant] = run_variant(variant, world, victim,
                                           neutron.url, args, healthy,
                                           probe_id, say)
    report = dict(runinfo.run_info('bench_uwsgi.py', argv), **{
        'setup': {'cells': args.cells, 'per_cell': args.per_cell,
                  'clients': args.clients, 'processes': args.processes,
                  'threads': args.threads,
                  'cell_timeout': args.cell_timeout,
                  'phase_seconds': args.phase_seconds,
                  'request_timeout': args.request_timeout},
        'results': results})
    reporting.write_results(
        report, name=args.name or ('uwsgi_quick' if args.quick else 'uwsgi'),
        out=args.out, json_path=args.json, render=render, indent=1)
    say(render(report))
    return 0


if __name__ == '__main__':
    sys.exit(main())
