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

"""Time the ``nova-cellsched`` command line from process start to exit.

Every run is a new process, as an operator's call is::

    python benchmarks/bench_startup.py [--repeat 5] [--dir DIR]
        [--json results.json] [--out DIR] [--baseline CHECKOUT]

It builds (or reuses) the demo world in ``--dir`` (``nova-cellsched demo
--cells 10 --instances 10000``, SQLite files, as the README's quick start
does), then runs ``nova-cellsched --config-file DIR/nova.conf list --limit
20`` and ``nova-cellsched --help`` ``--repeat`` times each as
subprocesses, and prints the median wall time of each against its target
(list <= 1.0 s, --help <= 0.3 s), and the median CPU time (user + system)
of the process, which a busy machine inflates less than wall time. The
command is the console script next
to this Python when installed, else ``python -m
nova_cellsched.cmd.cellsched``; the environment is the caller's, so
``PYTHONPATH`` chooses the checkout. A median over its target is
reported (``over target``), not a failure: the exit status is 0 once the
runs are measured, so a busy machine does not stop ``tox -e bench``; the
tests never time anything.

``--baseline CHECKOUT`` also runs another checkout of this repository
(``git worktree add /tmp/before REV``) with the same Python, each of its
runs right before one of this checkout's, and prints its medians and the
ratio: this machine's speed has been seen to change by a factor of two
within minutes, so a before/after comparison is only fair within one
run. The baseline runs the console script's code (``console_main``)
from ``python -c``, not ``python -m`` (which imports the command's
module twice). Then ``list --limit 20`` runs once more in each checkout,
untimed, and the modules one imports that the other does not are
printed: what start-up imports now that it did not. A fixed pure-Python
loop is timed before and after as well and printed as the machine's
speed at the time.

``--json PATH`` writes the results as JSON, ``--out DIR`` as
``DIR/startup.json`` and ``DIR/startup.md`` (``--name`` for another
name), the same way as every benchmark (``benchmarks/reporting.py``).

To see where the time goes: ``python -X importtime -m
nova_cellsched.cmd.cellsched --config-file DIR/nova.conf list --limit 20``.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import reporting  # noqa: E402
import runinfo  # noqa: E402

TARGETS = {'list --limit 20': 1.0, '--help': 0.3}


#: ``nova-cellsched`` as its console script runs it (argv[1:]); with
#: ``BENCH_STARTUP_MODULES`` set, the names of the modules it imported
#: are written to that file at exit.
CONSOLE = """
import atexit
import os
import sys
path = os.environ.get('BENCH_STARTUP_MODULES')
if path:
    atexit.register(lambda: open(path, 'w').write('\\n'.join(sys.modules)))
from nova_cellsched.cmd.cellsched import console_main
sys.argv[0] = 'nova-cellsched'
sys.exit(console_main())
"""


def command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), 'nova-cellsched')
    if os.path.exists(script):
        return [script]
    return [sys.executable, '-m', 'nova_cellsched.cmd.cellsched']


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], **kwargs: Any) -> tuple[float, float]:
    """Wall and CPU seconds of one process; it must exit 0."""
    cpu = cpu_of_children()
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - start, cpu_of_children() - cpu


def reference_loop() -> float:
    """CPU seconds of a fixed pure-Python loop: the machine's speed."""
    start = time.process_time()
    sum(range(20_000_000))
    return time.process_time() - start


def baseline_runner(checkout: str) -> dict[str, Any]:
    """subprocess.run arguments for the command of another checkout.

    ``python -m`` with the checkout as the working directory and on
    ``PYTHONPATH``, so its package shadows the installed one.
    """
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [checkout] + ([env['PYTHONPATH']] if env.get('PYTHONPATH') else []))
    return {'cwd': checkout, 'env': env}


def imported(args: list[str], **kwargs: Any) -> set[str]:
    """The modules ``nova-cellsched *args*`` imports, in one run."""
    env = dict(kwargs.pop('env', os.environ))
    with tempfile.TemporaryDirectory() as tmp:
        env['BENCH_STARTUP_MODULES'] = os.path.join(tmp, 'modules')
        subprocess.run([sys.executable, '-c', CONSOLE] + args, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env, **kwargs)
        with open(env['BENCH_STARTUP_MODULES']) as modules:
            return set(modules.read().split())


def summary(runs: list[tuple[float, float]]) -> dict[str, Any]:
    times = [wall for wall, _cpu in runs]
    return {'median_s': statistics.median(times),
            'cpu_median_s': statistics.median(cpu for _wall, cpu in runs),
            'runs_s': times}


def public_command(cmd: list[str]) -> list[str]:
    """*cmd* as the results file records it: no local paths."""
    if len(cmd) == 1:
        return [os.path.basename(cmd[0])]
    return ['python'] + cmd[1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--dir', default='./cellsched-demo',
                        help='Demo world (built when missing).')
    reporting.add_output_arguments(parser, name='startup')
    parser.add_argument('--baseline', metavar='CHECKOUT',
                        help='Another checkout to run alternately, for '
                             'a before/after ratio.')
    args = parser.parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, reporting.text_writer(render))
    # Taken now: the loops below reuse the name argv.
    info = runinfo.run_info('bench_startup.py', argv)

    cmd = command()
    conf = os.path.join(os.path.abspath(args.dir), 'nova.conf')
    if not os.path.exists(conf):
        print('Building the demo world in %s ...' % args.dir)
        subprocess.run(cmd + ['demo', '--dir', args.dir], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cases = {'list --limit 20': cmd + ['--config-file', conf, 'list',
                                       '--limit', '20'],
             '--help': cmd + ['--help']}
    base = baseline_runner(os.path.abspath(args.baseline)) \
        if args.baseline else None
    base_cmd = [sys.executable, '-c', CONSOLE]
    for argv in cases.values():
        run(argv)  # warm the file system cache and the bytecode
        if base:
            run(base_cmd + argv[len(cmd):], **base)
    speed = [reference_loop()]
    results: dict[str, Any] = {}
    for name, argv in cases.items():
        runs, base_runs = [], []
        for _ in range(args.repeat):
            if base:
                base_runs.append(run(base_cmd + argv[len(cmd):], **base))
            runs.append(run(argv))
        results[name] = summary(runs)
        results[name]['target_s'] = TARGETS[name]
        if base:
            results[name]['baseline'] = summary(base_runs)
    speed.append(reference_loop())
    imports = None
    if base:
        listing = cases['list --limit 20'][len(cmd):]
        now, then = imported(listing), imported(listing, **base)
        imports = {'modules': len(now), 'baseline_modules': len(then),
                   'added': sorted(now - then), 'gone': sorted(then - now)}

    print('%-18s %9s %9s %9s  %s' % ('command', 'median s', 'target s',
                                     'cpu s', 'runs s'))
    over = 0
    for name, result in results.items():
        ok = result['median_s'] <= result['target_s']
        over += not ok
        print('%-18s %9.3f %9.1f %9.3f  %s  %s' % (
            name, result['median_s'], result['target_s'],
            result['cpu_median_s'],
            ' '.join('%.3f' % t for t in result['runs_s']),
            'ok' if ok else 'over target'))
        if base:
            b = result['baseline']
            print('%-18s %9.3f %9s %9.3f  %s  (%.2fx)' % (
                '  baseline', b['median_s'], '', b['cpu_median_s'],
                ' '.join('%.3f' % t for t in b['runs_s']),
                b['median_s'] / result['median_s']))
    if imports:
        print('list --limit 20 imports %d modules, the baseline %d; '
              'added: %s; gone: %s' % (
                  imports['modules'], imports['baseline_modules'],
                  ' '.join(imports['added']) or '-',
                  ' '.join(imports['gone']) or '-'))
    print('machine speed: a fixed loop took %.3f s before the runs and '
          '%.3f s after' % tuple(speed))
    if over:
        print('%d of %d medians over target (reported, not a failure: '
              'compare the machine speed, or use --baseline for a fair '
              'before/after)' % (over, len(results)))
    # Published with the repository: the baseline by its commit, the
    # command without the machine's paths.
    report = dict(info, **{
        'measured': public_command(cmd),
        'baseline': {'commit': runinfo.commit(
            os.path.abspath(args.baseline))} if args.baseline else None,
        'reference_loop_s': speed, 'results': results, 'imports': imports})
    reporting.write_results(report, name=args.name, out=args.out,
                            json_path=args.json, render=render, indent=1,
                            sort_keys=False)
    return 0


def render(report: dict[str, Any]) -> str:
    """The Markdown of a run: medians against targets, reported only."""
    # Older results files (before runinfo's header) have only some.
    fields = dict(report, date=(report.get('date') or '')[:16] or None)
    header = ', '.join('%s %s' % (label, fields[key]) for key, label in (
        ('command', 'run'), ('date', 'on'), ('commit', 'commit'),
        ('nova', 'nova'), ('python', 'Python'), ('cpus', 'CPUs'))
        if fields.get(key) is not None)
    lines = ['# nova-cellsched command line: process start to exit', '',
             '%s.' % header, '',
             '| command | median s | target s | CPU median s | runs s | '
             'baseline median s | baseline CPU median s |',
             '|---|---|---|---|---|---|---|']
    for name, result in report['results'].items():
        base = result.get('baseline')
        lines.append('| `%s` | %.3f | %.1f | %.3f | %s | %s | %s |' % (
            name, result['median_s'], result['target_s'],
            result['cpu_median_s'],
            ' '.join('%.3f' % t for t in result['runs_s']),
            '%.3f (%.2fx)' % (base['median_s'], base['median_s'] /
                              result['median_s']) if base else '-',
            '%.3f' % base['cpu_median_s'] if base else '-'))
    imports = report.get('imports')
    if imports:
        lines += ['', '`list --limit 20` imports %d modules, the baseline %d; '
                  'added: %s; gone: %s.' % (
                      imports['modules'], imports['baseline_modules'],
                      ', '.join('`%s`' % m for m in imports['added']) or '-',
                      ', '.join('`%s`' % m for m in imports['gone']) or '-')]
    lines += ['', 'Machine speed: a fixed loop took %.3f s before the runs '
              'and %.3f s after. A median over its target is reported, not '
              'a failure.' % tuple(report['reference_loop_s'])]
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    sys.exit(main())
