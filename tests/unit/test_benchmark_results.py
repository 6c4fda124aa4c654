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

"""The benchmarks' runner and report writer; no local paths in results."""

import argparse
import ast
import gzip
import json
import os
import signal
import subprocess
import sys
import sysconfig
import threading

import fixtures

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BENCHMARKS = os.path.join(TOP, 'benchmarks')
RESULTS = os.path.join(BENCHMARKS, 'results')
sys.path.insert(1, BENCHMARKS)

import reporting  # noqa: E402
import runinfo  # noqa: E402

from tests import base  # noqa: E402


class RunInfoTest(base.TestCase):

    def test_command_line_keeps_no_absolute_path(self):
        args = ['--out', os.path.join(TOP, 'benchmarks', 'results'),
                '--baseline=/tmp/wt-before', '--json', '/srv/x/s.json',
                '--cells', '1,2']
        self.assertEqual(['--out', os.path.join('benchmarks', 'results'),
                          '--baseline=.../wt-before', '--json',
                          '.../s.json', '--cells', '1,2'],
                         runinfo.public_args(args))
        info = runinfo.run_info('bench_x.py', args)
        self.assertTrue(info['command'].startswith(
            'python benchmarks/bench_x.py --out benchmarks/results'))
        self.assertNotIn('/tmp', info['command'])

    def test_no_nova_argument_asks_for_no_release(self):
        self.assertIsNone(runinfo.release_argument(['--out', 'x']))

    def test_nova_argument_names_a_release_with_a_pin_file(self):
        for args in (['--nova', '33'], ['--quick', '--nova=31']):
            self.assertIn(runinfo.release_argument(args), (33, 31))

    def test_installed_release_runs_here(self):
        """``--nova`` naming the installed release replaces nothing."""
        self.assertIsNone(runinfo.run_in_release(
            'bench_x.py', ['--nova', str(runinfo.nova_major())]))

    def _run(self, args, env=None):
        return subprocess.run(
            [sys.executable, '-c',
             'import sys; sys.path.insert(0, %r); import runinfo; '
             'runinfo.run_in_release("bench_x.py", sys.argv[1:])'
             % BENCHMARKS] + args, capture_output=True, text=True,
            timeout=120, env=dict(os.environ, **(env or {})))

    def test_bad_nova_argument_is_one_line_and_exit_2(self):
        for args, got in ((['--nova', '30'], "'30'"),
                          (['--nova=3x'], "'3x'"), (['--nova'], "''")):
            done = self._run(args)
            self.assertEqual(2, done.returncode, args)
            self.assertEqual(
                ['bench_x.py: error: --nova: expected a nova major release '
                 'with a pin file in tools/releases (one of: 31, 32, 33, '
                 '34), got %s' % got], done.stderr.splitlines(), args)

    def test_a_release_venv_with_another_nova_stops_instead_of_looping(self):
        """The re-run found nova N again: exit 2, never exec again."""
        other = 31 if runinfo.nova_major() != 31 else 32
        done = self._run(['--nova', str(other)],
                         {'NOVA_CELLSCHED_RELEASE_BENCH': str(other)})
        self.assertEqual(2, done.returncode)
        (line,) = done.stderr.splitlines()
        self.assertIn('bench_x.py: error: --nova %d: expected nova %d in '
                      % (other, other), line)
        self.assertIn('got nova %s; remove that venv' % runinfo._version(
            'nova'), line)

    def test_scrub_replaces_the_machines_paths(self):
        site = sysconfig.get_paths()['purelib']
        text = ('%s/nova/db/utils.py:33(wrapper)\n'
                '%s/nova_cellsched/gather.py:190(gated)\n'
                % (site, TOP))
        self.assertEqual('<site-packages>/nova/db/utils.py:33(wrapper)\n'
                         '<checkout>/nova_cellsched/gather.py:190(gated)\n',
                         runinfo.scrub(text))

    def test_stored_text_results_carry_no_local_path(self):
        """Every text file in benchmarks/results/ (profiles included)."""
        for name in sorted(os.listdir(RESULTS)):
            if name.endswith(('.png', '.pstats')):
                continue
            path = os.path.join(RESULTS, name)
            if name.endswith('.gz'):
                # A gzipped trace (bench_bootstorm.py --trace).
                with gzip.open(path, 'rt') as handle:
                    text = handle.read()
            else:
                with open(path) as handle:
                    text = handle.read()
            for prefix in ('/work/', '/root/', '/home/', '/tmp/',
                           sys.prefix, TOP):
                self.assertNotIn(prefix, text, name)


class ReportingTest(base.TestCase):
    """The percentile and the results files every benchmark writes."""

    def test_percentile_is_the_nearest_rank(self):
        values = [4.0, 1.0, 3.0, 2.0]
        self.assertEqual(2.0, reporting.percentile(values, 50))
        self.assertEqual(4.0, reporting.percentile(values, 99))
        self.assertEqual(1.0, reporting.percentile(values, 1))
        hundred = [float(v) for v in range(100, 0, -1)]
        self.assertEqual(99.0, reporting.percentile(hundred, 99))
        self.assertEqual(95.0, reporting.percentile(hundred, 95))
        self.assertIsNone(reporting.percentile([], 50))

    def test_json_and_markdown_under_out_and_json_elsewhere(self):
        top = self.useFixture(fixtures.TempDir()).path
        out = os.path.join(top, 'results')
        extra = os.path.join(top, 'copy.json')
        report = {'b': 1, 'a': [1.5]}

        def write_markdown(path, got):
            with open(path, 'w') as handle:
                handle.write('# %s\n' % sorted(got))

        paths = reporting.write_results(report, name='x', out=out,
                                        json_path=extra,
                                        write_markdown=write_markdown)
        self.assertEqual([extra, os.path.join(out, 'x.json'),
                          os.path.join(out, 'x.md')], paths)
        for path in paths[:2]:
            with open(path) as handle:
                text = handle.read()
            self.assertEqual(report, json.loads(text))
            self.assertEqual(json.dumps(report, indent=2, sort_keys=True) +
                             '\n', text)
        with open(paths[2]) as handle:
            self.assertEqual("# ['a', 'b']\n", handle.read())

    def test_partial_run_writes_no_markdown(self):
        out = self.useFixture(fixtures.TempDir()).path
        paths = reporting.write_results({}, name='x', out=out,
                                        write_markdown=self.fail,
                                        markdown=False)
        self.assertEqual([os.path.join(out, 'x.json')], paths)

    def test_percentiles_row_scaled_and_rounded(self):
        values = [0.0011, 0.0042, 0.0023, 0.0034]
        self.assertEqual({'p50': 2.3, 'p99': 4.2, 'max': 4.2},
                         reporting.percentiles(
                             values, {'p50': 50, 'p99': 99, 'max': 100},
                             scale=1000, digits=1))
        self.assertEqual({'p50': None, 'max': None},
                         reporting.percentiles([], {'p50': 50, 'max': 100},
                                               digits=2))

    def test_render_writes_the_text_and_says_what_was_written(self):
        out = self.useFixture(fixtures.TempDir()).path
        said = []
        report = {'when': object()}
        paths = reporting.write_results(
            report, name='x', out=out, render=lambda r: '# x\n',
            indent=1, sort_keys=False, default=lambda v: 'an object',
            say=said.append)
        self.assertEqual([os.path.join(out, 'x.json'),
                          os.path.join(out, 'x.md')], paths)
        with open(paths[0]) as handle:
            self.assertEqual('{\n "when": "an object"\n}\n', handle.read())
        with open(paths[1]) as handle:
            self.assertEqual('# x\n', handle.read())
        self.assertEqual(['wrote %s, %s' % tuple(paths)], said)

    def test_nothing_asked_nothing_written_nothing_said(self):
        said = []
        self.assertEqual([], reporting.write_results(
            {}, name='x', render=self.fail, say=said.append))
        self.assertEqual([], said)

    def test_rerender_writes_the_markdown_next_to_the_json(self):
        out = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(out, 'run.json')
        with open(path, 'w') as handle:
            json.dump({'n': 3}, handle)
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', open(
            os.devnull, 'w')))
        self.assertEqual(0, reporting.rerender(path, reporting.text_writer(
            lambda report: 'n = %d\n' % report['n'])))
        with open(os.path.join(out, 'run.md')) as handle:
            self.assertEqual('n = 3\n', handle.read())

    def test_output_arguments(self):
        parser = argparse.ArgumentParser()
        reporting.add_output_arguments(parser, name='x', out='/r')
        args = parser.parse_args([])
        self.assertEqual(('/r', None, 'x', None),
                         (args.out, args.json, args.name, args.render))
        args = parser.parse_args(['--out', 'd', '--json', 'j.json',
                                  '--name', 'y', '--render', 'y.json'])
        self.assertEqual(('d', 'j.json', 'y', 'y.json'),
                         (args.out, args.json, args.name, args.render))


class RequireTest(base.TestCase):
    """The requirements check: one message, before anything is made."""

    def test_met_requirements_pass(self):
        self.assertIsNone(reporting.require('bench_x.py', {'os': 'os'},
                                            [None]))
        self.assertIsNone(reporting.require('bench_x.py'))

    def test_missing_module_names_what_needs_it_and_how_to_install(self):
        error = self.assertRaises(
            SystemExit, reporting.require, 'bench_x.py',
            {'no_such_module_a': 'a: the seeder', 'os': 'os',
             'no_such_module_b': 'b: the chart'})
        self.assertEqual(
            'bench_x.py: missing a: the seeder; b: the chart; install the '
            'benchmark requirements: pip install -r '
            'benchmarks/requirements.txt (nothing was created)',
            error.code)

    def test_other_problems_are_said_as_given(self):
        error = self.assertRaises(
            SystemExit, reporting.require, 'bench_x.py',
            {'no_such_module_a': 'a'}, [None, 'uwsgi is not installed'])
        self.assertEqual(
            ['bench_x.py: missing a; install the benchmark requirements: '
             'pip install -r benchmarks/requirements.txt',
             'bench_x.py: uwsgi is not installed (nothing was created)'],
            error.code.splitlines())

    def test_every_checked_module_is_a_known_requirement(self):
        """What a script asks for is in one of the requirement files."""
        known = set()
        for name in ('requirements.txt', 'test-requirements.txt',
                     os.path.join('benchmarks', 'requirements.txt')):
            with open(os.path.join(TOP, name)) as handle:
                for line in handle:
                    line = line.split('#')[0].strip()
                    if line and not line.startswith('-'):
                        known.add(line.split('>')[0].split('=')[0]
                                  .split('<')[0].split('[')[0].strip()
                                  .lower())
        # Module -> the distribution that installs it.
        distribution = {'MySQLdb': 'mysqlclient', 'openstack': 'nova',
                        'psutil': 'nova', 'osprofiler': 'osprofiler',
                        'redis': 'redis', 'matplotlib': 'matplotlib'}
        for script, modules in _required_modules().items():
            for module in modules:
                self.assertIn(module, distribution, script)
                self.assertIn(distribution[module].lower(), known,
                              (script, module))


NEEDS = ('needs', 'needed', 'REQUIRED')


def _required_modules():
    """script -> the modules its reporting.require() calls name."""
    found = {}
    for name in sorted(os.listdir(BENCHMARKS)):
        if not name.endswith('.py'):
            continue
        with open(os.path.join(BENCHMARKS, name)) as handle:
            tree = ast.parse(handle.read())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == 'MySQLdb'
                    for k in node.keys):
                modules.update(k.value for k in node.keys)
            # needs.update(redis=...), needed['matplotlib'] = ...,
            # needs = {...}: the scripts' names for what they check.
            if (isinstance(node, ast.Call) and
                    getattr(node.func, 'attr', None) == 'update' and
                    getattr(node.func.value, 'id', None) in NEEDS):
                modules.update(k.arg for k in node.keywords)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if getattr(target, 'id', None) in NEEDS and isinstance(
                            node.value, ast.Dict):
                        modules.update(k.value for k in node.value.keys)
                    if (isinstance(target, ast.Subscript) and
                            getattr(target.value, 'id', None) in NEEDS):
                        modules.add(target.slice.value)
        if modules:
            found[name] = modules
    return found


class CleanupSelectionTest(base.TestCase):
    """Which databases a clean-up drops: only a run's own."""

    PRESENT = ['ncsbench_2c_7_0_api', 'ncsbench_2c_7_0_cell1',
               'ncsbench_2c_70_0_api', 'ncsbench_3c_7_0_api', 'keepme',
               'nova_api']

    def test_only_benchmark_databases_ever(self):
        chosen = reporting.cleanup_selection(self.PRESENT,
                                             prefix='ncsbench_')
        self.assertEqual(sorted(n for n in self.PRESENT
                                if n.startswith('ncsbench_')), chosen.drop)
        self.assertEqual([], chosen.in_use)

    def test_a_named_run_only(self):
        """A world's prefix ends in _: 2c_7_0 is not 2c_70_0."""
        chosen = reporting.cleanup_selection(
            self.PRESENT, prefix='ncsbench_', runs=['ncsbench_2c_7_0_'])
        self.assertEqual(['ncsbench_2c_7_0_api', 'ncsbench_2c_7_0_cell1'],
                         chosen.drop)

    def test_what_existed_before_is_not_this_runs(self):
        chosen = reporting.cleanup_selection(
            self.PRESENT, prefix='ncsbench_', runs=['ncsbench_2c_7_0_'],
            before=['ncsbench_2c_7_0_api'])
        self.assertEqual(['ncsbench_2c_7_0_cell1'], chosen.drop)

    def test_only_what_the_run_made_when_it_kept_count(self):
        chosen = reporting.cleanup_selection(
            self.PRESENT + ['ncsbench_sync_1c_5_9_api'],
            prefix='ncsbench_sync_1c_5_9',
            made=['ncsbench_sync_1c_5_9_api', 'ncsbench_sync_1c_5_9_cell1',
                  'ncsbench_3c_7_0_api'])
        # Made but gone already, or made but not under the prefix: not
        # dropped.
        self.assertEqual(['ncsbench_sync_1c_5_9_api'], chosen.drop)

    def test_in_use_is_left_and_said(self):
        chosen = reporting.cleanup_selection(
            self.PRESENT, prefix='ncsbench_', runs=['ncsbench_2c_7_0_'],
            in_use=['ncsbench_2c_7_0_cell1', 'ncsbench_3c_7_0_api'])
        self.assertEqual(['ncsbench_2c_7_0_api'], chosen.drop)
        self.assertEqual(['ncsbench_2c_7_0_cell1'], chosen.in_use)


class CleanlyTest(base.TestCase):
    """The clean-up steps run however the run ends."""

    def test_steps_run_last_first_on_success_and_failure(self):
        done = []
        with reporting.cleanly() as stack:
            stack.callback(done.append, 'first made')
            stack.callback(done.append, 'then made')
        self.assertEqual(['then made', 'first made'], done)
        done = []

        def fail():
            with reporting.cleanly() as stack:
                stack.callback(done.append, 'made')
                raise RuntimeError('the run broke')
        self.assertRaises(RuntimeError, fail)
        self.assertEqual(['made'], done)

    def test_sigterm_cleans_up_and_the_handler_is_restored(self):
        before = signal.getsignal(signal.SIGTERM)
        done = []

        def killed():
            with reporting.cleanly() as stack:
                stack.callback(done.append, 'made')
                os.kill(os.getpid(), signal.SIGTERM)
                done.append('not reached')
        self.assertRaises(KeyboardInterrupt, killed)
        self.assertEqual(['made'], done)
        self.assertIs(before, signal.getsignal(signal.SIGTERM))


    def test_outside_the_main_thread_steps_still_run(self):
        before = signal.getsignal(signal.SIGTERM)
        done, seen = [], []

        def run():
            with reporting.cleanly() as stack:
                stack.callback(done.append, 'made')
                seen.append(signal.getsignal(signal.SIGTERM))
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        self.assertEqual(['made'], done)
        self.assertEqual([before], seen)


class SharedRunnerTest(base.TestCase):
    """Every benchmark script uses the one runner and report writer."""

    PRIVATE = {'percentile', 'require', 'rerender', 'text_writer',
               'write_results', 'run_info'}

    def scripts(self):
        for name in sorted(os.listdir(BENCHMARKS)):
            if name.startswith('bench_') and name.endswith('.py'):
                with open(os.path.join(BENCHMARKS, name)) as handle:
                    yield name, handle.read()

    def test_no_script_keeps_its_own_copy(self):
        for name, text in self.scripts():
            tree = ast.parse(text)
            defined = {node.name for node in ast.walk(tree)
                       if isinstance(node, ast.FunctionDef)}
            self.assertEqual(set(), defined & self.PRIVATE, name)
            # Results are written by reporting.write_results only.
            self.assertNotIn('json.dump(', text, name)

    def test_every_script_has_the_output_options(self):
        for name, text in self.scripts():
            self.assertIn('reporting.add_output_arguments(', text, name)
            self.assertIn('reporting.write_results(', text, name)

    def test_reporting_and_runinfo_import_no_nova(self):
        done = subprocess.run(
            [sys.executable, '-c',
             'import sys; sys.path.insert(0, %r); import reporting, '
             'runinfo; print(sorted(m for m in sys.modules if '
             'm.split(".")[0] in ("nova", "nova_cellsched")))'
             % BENCHMARKS], capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=''))
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertEqual('[]', done.stdout.strip())


class CloudStormServerTimingTest(base.TestCase):
    """bench_cloud_storm's reading of the filter's Server-Timing header."""

    def test_durations_of_each_metric(self):
        import bench_cloud_storm

        for header, expected in (
                ('gather;dur=350.2, merge;dur=0.9, objects;dur=702.0, '
                 'other;dur=118.4',
                 {'gather': 350.2, 'merge': 0.9, 'objects': 702.0,
                  'other': 118.4}),
                ('gather;dur=12.0;desc="slowest cell1 12.0 ms; down cell4, '
                 'cell5", merge;dur=0.1, other;dur=3.0, total',
                 {'gather': 12.0, 'merge': 0.1, 'other': 3.0,
                  'total': 0.0}),
                ('', {})):
            self.assertEqual(expected,
                             bench_cloud_storm.server_timing(header), header)


class CloudStormRoundsTest(base.TestCase):
    """bench_cloud_storm pools the rounds and reports the checks."""

    @staticmethod
    def _run(config, number, times, outside=0):
        import bench_cloud_storm

        return {'scheduling': config, 'round': number, 'servers': 4,
                'concurrency': 2, 'active': len(times),
                'active_each_s': times, 'outside_allowed_cells': outside,
                'cpu_total_s': 10.0 * number,
                'active_s': bench_cloud_storm.reporting.percentiles(
                    times, {'p50': 50}, digits=2)}

    def test_each_configuration_pools_its_rounds(self):
        import bench_cloud_storm

        rows = bench_cloud_storm.pooled([
            self._run('nova', 1, [1.0, 2.0, 3.0, 4.0], outside=2),
            self._run('filter', 1, [5.0, 6.0, 7.0, 8.0]),
            self._run('filter', 2, [1.0, 2.0, 3.0, 4.0]),
            self._run('nova', 2, [5.0, 6.0, 7.0], outside=1)])
        by_config = {row['scheduling']: row for row in rows}
        self.assertEqual([1, 2], by_config['nova']['rounds'])
        self.assertEqual(3, by_config['nova']['outside_allowed_cells'])
        # Four servers a storm: the round that had three ACTIVE.
        self.assertEqual(1, by_config['nova']['not_active'])
        # Both rounds' eight boots together, and each round's own p50.
        self.assertEqual(
            bench_cloud_storm.reporting.percentiles(
                [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
                {'p50': 50, 'p95': 95, 'p99': 99, 'max': 100}, digits=2),
            by_config['filter']['active_s'])
        self.assertEqual(8.0, by_config['filter']['active_s']['max'])
        self.assertEqual([6.0, 2.0], by_config['filter']['p50_each_round_s'])

    def test_rounds_alternate_the_order(self):
        """Every other round runs the configurations in reverse order."""
        import bench_cloud_storm

        configs = ['nova', 'filter', 'prefilter']
        self.assertEqual(
            [configs, configs[::-1], configs, configs[::-1]],
            [bench_cloud_storm.round_order(configs, n) for n in range(4)])

    def test_report_names_the_frozen_cell_and_the_added_compute(self):
        import bench_cloud_storm

        boots = {'boots': 2, 'statuses': {'ACTIVE': 2},
                 'by_cell': {'cell1': 2}, 'end_s': {'p50': 3.0, 'max': 4.0}}
        lists = {'lists': 3, 'failed': 0, 'servers': [667, 1000],
                 's': {'p50': 1.5, 'max': 60.2}, 'filter_total_max_s': 60.1}
        text = bench_cloud_storm.render({
            'cloud': {}, 'storms': [],
            'frozen': [{'scheduling': 'prefilter', 'servers': 6,
                        'concurrency': 2, 'frozen_cell': 'cell2',
                        'frozen_from_s': 10.0, 'frozen_to_s': 100.0,
                        'boots': {'before': boots, 'during': boots,
                                  'after': boots},
                        'lists': {'before': lists, 'during': lists,
                                  'after': lists},
                        'not_active_or_error': 0, 'faults': []}],
            'new_compute': {'cell': 'cell3', 'host': 'cell3-compute11',
                            'mapped_s': 20.0, 'joined_aggregate_s': 31.0,
                            'sync_interval_s': 30, 'others_disabled': 3,
                            'boot_status': 'ACTIVE',
                            'boot_host': 'cell3-compute11',
                            'boot_fault': None}})
        self.assertIn('cell2 frozen from 10.0 s to 100.0 s', text)
        self.assertIn('| during the freeze | 3 | 0 | 667, 1000 | 1.5 | '
                      '60.2 | 60.1 |', text)
        self.assertIn('Servers neither ACTIVE nor ERROR at the end: 0.',
                      text)
        self.assertIn("the dedicated project's boot: ACTIVE on "
                      'cell3-compute11.', text)
