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

"""Benchmark results are published: no local paths in them."""

import gzip
import json
import os
import sys
import sysconfig

import fixtures
from oslotest import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RESULTS = os.path.join(TOP, 'benchmarks', 'results')
sys.path.insert(1, os.path.join(TOP, 'benchmarks'))

import reporting  # noqa: E402
import runinfo  # noqa: E402


class RunInfoTest(base.BaseTestCase):

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


class ReportingTest(base.BaseTestCase):
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
