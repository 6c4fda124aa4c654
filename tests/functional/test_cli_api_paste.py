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

"""``nova-cellsched check --api-paste FILE`` as an operator runs it.

Each test runs the installed console script in a subprocess on an
api-paste.ini made from the one nova 34 installs
(``<venv>/etc/nova/api-paste.ini``), in a temporary directory, with no
nova.conf: the check reads the file and the installed nova only.
"""

import io
import json
import os
import subprocess

import fixtures
import nova.conf
from oslo_config import fixture as config_fixture

from nova_cellsched.api.startup import install as patch
from nova_cellsched.cmd import cellsched
from nova_cellsched.compat import core as compat_core
from tests import base
from tests.fixtures import nova_api
from tests.fixtures import releases
from tests.functional.test_cli import COMMAND
from tests.functional.test_cli import Run

V21 = 'composite:openstack_compute_api_v21'
LEGACY = 'composite:openstack_compute_api_v21_legacy_v2_compatible'
SECRET = 'Sup3rS3cret'


class CheckApiPasteTestCase(base.TestCase):
    """The filter in every server-list pipeline, and a nova it fits."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.env = dict(os.environ)
        self.env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
        with open(nova_api.NOVA_API_PASTE) as f:
            self.stock = f.read()

    def check(self, path, *extra):
        argv = ['check', '--api-paste', path] + list(extra)
        proc = subprocess.run(COMMAND + argv, cwd=self.tmp, env=self.env,
                              capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
        return Run(argv, proc.returncode, proc.stdout, proc.stderr)

    def write(self, text, name='api-paste.ini'):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def with_filter(self):
        """nova's file with the filter added as the README says."""
        return nova_api.paste_with_filter(self.tmp)

    def rows(self, run):
        return {(row['Section'], row['Key']): row for row in run.json()}

    def problems(self, run):
        return [line for line in run.err.splitlines()
                if line.startswith('problem: ')]

    def needs_nova_api_part(self):
        """Skip where the check rightly reports the installed nova.

        On a nova no table is for, every check ends in that nova's
        problem (exit 1), so what these tests assert of a fitting nova
        cannot hold.
        """
        if not releases.nova_api_part_runs():
            self.skipTest(releases.NOVA_API_SKIP)

    def assert_nova_fits(self, run):
        nova_row = self.rows(run)[('(installed nova)', '')]
        self.assertEqual('ok', nova_row['Result'], run)
        self.assertEqual('nova %s' % releases.NOVA_VERSION,
                         nova_row['Pipeline'], run)

    def test_nova_stock_file_lacks_the_filter_in_both_pipelines(self):
        """nova's own api-paste.ini: exit 1, each pipeline named."""
        self.needs_nova_api_part()
        run = self.check(nova_api.NOVA_API_PASTE, '-f', 'json')
        self.assertEqual(1, run.code, run)
        rows = self.rows(run)
        for section, served_at in ((V21, '/v2.1/+'), (LEGACY, '/v2/+')):
            row = rows[(section, 'keystone')]
            self.assertEqual('no', row['Filter'], run)
            self.assertEqual(served_at, row['Served at'], run)
            self.assertEqual('problem: filter missing', row['Result'], run)
            self.assertTrue(row['Pipeline'].endswith(nova_api.APP), run)
        problems = self.problems(run)
        self.assertEqual(2, len(problems), run)
        self.assertIn('[%s] keystone: the cellsched filter is not in this '
                      'pipeline' % V21, run.err)
        self.assertIn('[%s] keystone: the cellsched filter is not in this '
                      'pipeline' % LEGACY, run.err)
        self.assert_nova_fits(run)

    def test_filter_added_as_the_readme_says_is_fine(self):
        """The filter before the app in both pipelines: exit 0."""
        self.needs_nova_api_part()
        run = self.check(self.with_filter(), '-f', 'json')
        self.assertEqual(0, run.code, run)
        self.assertEqual([], self.problems(run), run)
        rows = self.rows(run)
        for section in (V21, LEGACY):
            row = rows[(section, 'keystone')]
            self.assertEqual('yes', row['Filter'], run)
            self.assertEqual('ok', row['Result'], run)
            self.assertIn('before %s' % nova_api.APP, row['Position'], run)
        self.assertEqual('10 of 11, before osapi_compute_app_v21',
                         rows[(V21, 'keystone')]['Position'])
        self.assertEqual('11 of 12, before osapi_compute_app_v21',
                         rows[(LEGACY, 'keystone')]['Position'])
        self.assert_nova_fits(run)

    def test_filter_in_one_pipeline_only_names_the_other(self):
        """In /v2.1 but not in the legacy /v2 pipeline: exit 1, /v2 named.
        """
        self.needs_nova_api_part()
        with open(self.with_filter()) as f:
            filtered = f.read()
        legacy_line = next(line for line in filtered.splitlines()
                           if 'legacy_v2_compatible cellsched' in line)
        path = self.write(filtered.replace(
            legacy_line, legacy_line.replace(' cellsched', '')),
            'one.ini')
        run = self.check(path, '-f', 'json')
        self.assertEqual(1, run.code, run)
        rows = self.rows(run)
        self.assertEqual('yes', rows[(V21, 'keystone')]['Filter'])
        self.assertEqual('no', rows[(LEGACY, 'keystone')]['Filter'])
        problems = self.problems(run)
        self.assertEqual(1, len(problems), run)
        self.assertIn('[%s] keystone' % LEGACY, problems[0])
        self.assertIn('/v2/+', problems[0])

    def test_filter_is_found_by_its_factory_whatever_its_name(self):
        """A [filter:...] of another name with our factory counts."""
        self.needs_nova_api_part()
        with open(self.with_filter()) as f:
            renamed = f.read().replace('[filter:cellsched]',
                                       '[filter:fastlist]').replace(
                                           ' cellsched ', ' fastlist ')
        run = self.check(self.write(renamed, 'renamed.ini'), '-f', 'json')
        self.assertEqual(0, run.code, run)
        self.assertEqual('yes', self.rows(run)[(V21, 'keystone')]['Filter'])

    def test_table_output_names_pipelines_and_nova(self):
        """The default table: one row per pipeline and one for nova."""
        self.needs_nova_api_part()
        run = self.check(self.with_filter())
        self.assertEqual(0, run.code, run)
        table = run.table()
        parts = ['guard', 'keyset', 'lister', 'view', 'render', 'validation',
                 'min_version', 'startup']
        # nova 31's own file still has a noauth2 pipeline per composite,
        # which nova reads only with [api] auth_strategy = noauth2.
        pipelines = [row for row in table
                     if not row['Section'].startswith('(')]
        self.assertEqual([(LEGACY, 'yes', 'ok'), (V21, 'yes', 'ok')],
                         [(row['Section'], row['Filter'], row['Result'])
                          for row in pipelines if row['Key'] == 'keystone'],
                         run)
        self.assertEqual(
            set(), {row['Result'] for row in pipelines
                    if row['Key'] != 'keystone'} - {'not used by nova-api'},
            run)
        self.assertEqual(['(part %s)' % p for p in parts] +
                         ['(installed nova)'],
                         [row['Section'] for row in table[len(pipelines):]],
                         run)
        # A part this release lacks (validation on nova 31 and 32) is
        # off with that reason; every other fits.
        self.assertEqual(
            ['off: %s' % compat_core.lacking(p) if compat_core.lacking(p)
             else 'fits' for p in parts],
            [row['Result'] for row in table[len(pipelines):-1]], run)

    def test_unused_auth_key_without_filter_is_a_note(self):
        """A noauth2 key nova never reads is listed, not a problem."""
        self.needs_nova_api_part()
        with open(self.with_filter()) as f:
            text = f.read()
        # nova 31's own file has a noauth2 key (given the filter like
        # the keystone one): replaced by one without it; nova 32 on has
        # none.
        lines, section = [], None
        for line in text.splitlines():
            if line.startswith('['):
                section = line.strip('[]')
            if section == V21 and line.startswith('noauth2'):
                continue
            lines.append(line)
            if line == '[%s]' % V21:
                lines.append('noauth2 = cors compute_req_id faultwrap '
                             'osapi_compute_app_v21')
        text = '\n'.join(lines) + '\n'
        run = self.check(self.write(text, 'noauth2.ini'), '-f', 'json')
        self.assertEqual(0, run.code, run)
        row = self.rows(run)[(V21, 'noauth2')]
        self.assertEqual('no', row['Filter'])
        self.assertEqual('not used by nova-api', row['Result'])
        self.assertIn('note: [%s] noauth2 is not used' % V21, run.err)

    def test_filter_named_without_its_section_would_stop_nova_api(self):
        """``cellsched`` in a pipeline, no [filter:cellsched]: exit 1."""
        with open(self.with_filter()) as f:
            text = f.read()
        start = text.index('[filter:cellsched]')
        end = text.index('nova_cellsched.api:filter_factory') + len(
            'nova_cellsched.api:filter_factory')
        run = self.check(self.write(text[:start] + text[end:], 'nf.ini'))
        self.assertEqual(1, run.code, run)
        self.assertIn("'cellsched' names no section (expected "
                      '[filter:cellsched]): nova-api would fail to start',
                      run.err)

    def test_nova_the_filter_refuses_is_a_problem(self):
        """patch.check() raising IncompatibleNova: exit 1, each listed.

        The one fake here: another nova cannot be installed beside the
        real one, so check() is made to raise as it does on nova 35.
        """
        found = ['expected nova 34.x, found nova 35.0.0',
                 'nova.context.scatter_gather_cells is missing (x)']

        def incompatible():
            raise patch.IncompatibleNova(found)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.api.startup.install.check', incompatible))
        # The app parses nova's CONF (default locations) in this process.
        self.useFixture(config_fixture.Config(nova.conf.CONF))
        out, err = io.StringIO(), io.StringIO()
        app = cellsched.CellschedApp()
        app.stdout, app.stderr = out, err
        code = app.run(['check', '--api-paste', self.with_filter(),
                        '-f', 'json'])
        self.assertEqual(1, code, err.getvalue())
        nova_row = json.loads(out.getvalue())[-1]
        self.assertEqual('(installed nova)', nova_row['Section'])
        self.assertEqual('problem: ' + '; '.join(found), nova_row['Result'])
        lines = err.getvalue().splitlines()
        self.assertEqual(['problem: installed nova: %s' % line
                          for line in found],
                         [line for line in lines
                          if not line.startswith('note: ')])
        # Notes only for the keys nova does not read: nova 31's stock
        # file still has noauth2 pipelines, read when [api]
        # auth_strategy names them; nova 32 and later have none.
        for line in lines:
            if line.startswith('note: '):
                self.assertRegex(line, r'noauth2 is not used: nova 31\.'
                                 r"\S+ builds this composite from the "
                                 r"pipeline nova\.conf's \[api\] "
                                 r'auth_strategy names \(keystone\)$')

    def test_malformed_file_is_one_line_error_without_its_values(self):
        """Not INI: exit 2, one line naming the file, no value quoted."""
        path = self.write(self.stock + '\nadmin_password %s\n' % SECRET,
                          'bad.ini')
        run = self.check(path)
        self.assertEqual(2, run.code, run)
        self.assertEqual('', run.out, run)
        self.assertEqual(1, len(run.err.splitlines()), run)
        self.assertIn('nova-cellsched: error: %s is not a valid '
                      'api-paste.ini: line ' % path, run.err)
        self.assertNotIn(SECRET, run.err)

    def test_file_without_nova_api_composite_is_bad_input(self):
        """An INI file that is not nova-api's: exit 2, one line."""
        path = self.write('[app:main]\npaste.app_factory = x:y\n', 'x.ini')
        run = self.check(path)
        self.assertEqual(2, run.code, run)
        self.assertEqual(1, len(run.err.splitlines()), run)
        self.assertIn('has no [composite:osapi_compute]', run.err)

    def test_missing_file_is_one_line_error(self):
        """No such file: exit 2, one line naming it."""
        path = os.path.join(self.tmp, 'nope.ini')
        run = self.check(path)
        self.assertEqual(2, run.code, run)
        self.assertEqual('', run.out, run)
        self.assertEqual(['nova-cellsched: error: %s: no such file; give '
                          "the path of nova-api's api-paste.ini ([wsgi] "
                          'api_paste_config in nova.conf)' % path],
                         run.err.splitlines())
