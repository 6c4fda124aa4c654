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

"""Every snippet of README.rst and of the guide (doc/source) is checked.

README.rst is valid reStructuredText, its quick start's test command is
the one ``.ci/run`` runs, and its links into the guide lead to files. In
the guide, the nova.conf block of the scheduling guide is loaded with
oslo.config and nova's filter loader, the api-paste.ini block of the
nova-api guide is nova's pipelines plus the filter, the numbers of its
"What is checked" section are the code's, the log lines it quotes are
the ones the code writes, the Python block of the listing guide runs as
written (the config path pointed at a demo world), and every
``nova-cellsched`` command line of README.rst and the guide runs against
that world.
"""

import decimal
import json
import os
import re
import shlex
import subprocess
import sys

import docutils.core
import fixtures
from nova.scheduler import filters as nova_filters
from oslo_config import cfg

from nova_cellsched import conf as conf_mod
from nova_cellsched.demo import seed
from nova_cellsched.demo import world as demo
from nova_cellsched.scheduler import mapping
from tests import base
from tests.fixtures import nova_api

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
README = os.path.join(TOP, 'README.rst')
GUIDE = os.path.join(TOP, 'doc', 'source')
CONFIG = '/etc/nova/nova.conf'
#: Run on nova's api-paste.ini with the filter added as the guide says.
API_PASTE = '/etc/nova/api-paste.ini'


def read_readme():
    with open(README) as handle:
        return handle.read()


def read_guide(page):
    """The text of doc/source/<page>.rst."""
    with open(os.path.join(GUIDE, page + '.rst')) as handle:
        return handle.read()


def guide_pages():
    """Every page of the guide, as paths under doc/source, sorted."""
    pages = []
    for directory, _dirs, files in os.walk(GUIDE):
        pages += [os.path.relpath(os.path.join(directory, name), GUIDE)
                  for name in files if name.endswith('.rst')]
    return sorted(pages)


def all_texts():
    """README.rst and every page of the guide."""
    texts = [read_readme()]
    for page in guide_pages():
        with open(os.path.join(GUIDE, page)) as handle:
            texts.append(handle.read())
    return texts


def flat(text):
    """*text* with every run of white space made one space."""
    return ' '.join(text.split())


def code_blocks(text, language):
    """Bodies of ``.. code-block:: <language>`` directives."""
    pattern = re.compile(
        r'^\.\. code-block:: %s\n\n((?:(?:    .*)?\n)+)' % language,
        re.MULTILINE)
    return [re.sub(r'^    ', '', m.group(1), flags=re.MULTILINE)
            for m in pattern.finditer(text)]


def command_lines(text):
    """Every literal ``nova-cellsched ...`` or ``tools/...`` line.

    Indented by four spaces or more: a literal block, also one inside a
    list item.
    """
    return [line.strip() for line in text.splitlines()
            if re.match(r'^ {4,}(nova-cellsched|tools/\w+) ', line)]


class ReadmeTest(base.TestCase):
    """README.rst says only what works, and leads into the guide."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.text = read_readme()

    def test_readme_is_valid_restructuredtext(self):
        docutils.core.publish_doctree(
            self.text, settings_overrides={'report_level': 2,
                                           'halt_level': 2})

    def test_quick_start_is_two_commands_and_ci_runs_the_test_one(self):
        # Up to the next section title (not a table's border).
        quick = re.split(r'\n\S[^\n]*\n=+\n', self.text.split(
            'Quick start\n===========\n')[1])[0]
        commands = command_lines(quick)
        self.assertEqual(['tools/venv nova-cellsched demo',
                          'tools/databases && tools/venv stestr run'],
                         commands)
        with open(os.path.join(TOP, '.ci', 'run')) as handle:
            ci_lines = [line.strip() for line in handle]
        self.assertIn('tools/databases', ci_lines)
        self.assertIn('tools/venv stestr run || status=$?', ci_lines)
        self.assertLess(ci_lines.index('tools/databases'),
                        ci_lines.index('tools/venv stestr run || status=$?'))
        for variable in ('NOVA_CELLSCHED_TEST_MYSQL_URL',
                         'NOVA_CELLSCHED_TEST_POSTGRESQL_URL'):
            self.assertIn(variable, quick)

    def test_ci_builds_the_guide_before_the_tests_and_fails_with_it(self):
        """Before: test_docs_build checks the built guide with .venv-docs."""
        with open(os.path.join(TOP, '.ci', 'run')) as handle:
            ci_lines = [line.strip() for line in handle]
        docs = 'tools/docs || { docs=FAILED; status=1; }'
        self.assertIn(docs, ci_lines)
        self.assertLess(ci_lines.index(docs),
                        ci_lines.index('tools/venv stestr run || status=$?'))
        self.assertEqual('exit $status', ci_lines[-1])
        with open(os.path.join(TOP, 'tools', 'docs')) as handle:
            script = handle.read()
        self.assertIn('sphinx-build" -W --keep-going', script)
        self.assertTrue(os.access(os.path.join(TOP, 'tools', 'docs'),
                                  os.X_OK))

    def test_links_lead_into_the_guide(self):
        links = re.findall(r'`[^`<]+<([^>]+)>`_', self.text)
        self.assertGreaterEqual(len(links), 8)
        for link in links:
            self.assertTrue(link.startswith('doc/source/'), link)
            self.assertTrue(os.path.isfile(os.path.join(TOP, link)), link)

    def test_quick_start_mentions_the_api_demo_as_it_runs(self):
        """The prose names ``demo --api``; the guide shows how it runs."""
        quick = flat(self.text.split('Quick start\n===========\n')[1]
                     .split('\nThe parts\n')[0])
        self.assertIn('``tools/venv nova-cellsched demo --api``', quick)
        self.assertIn('tools/venv nova-cellsched demo --api',
                      command_lines(read_guide('admin/nova-api')))

    def test_install_is_from_a_checkout(self):
        """Nothing is released: no page says to install it from PyPI."""
        for text in all_texts():
            self.assertNotIn('pip install nova-cellsched', text)
        install = flat(read_guide('install/index'))
        self.assertIn('Nothing is released yet', install)
        self.assertIn("**nova-api** (every API host", install)
        self.assertIn("**nova-scheduler**", install)


class GuideTest(base.TestCase):
    """The guide's snippets, numbers and log lines are the code's."""

    def test_api_paste_block_is_nova_pipeline_plus_the_filter(self):
        """The api-paste.ini block: nova's pipelines with cellsched added.

        Each pipeline shown is nova's own (from the api-paste.ini nova
        installs) with ``cellsched`` just before the app, and the filter
        section names the factory that exists.
        """
        import configparser
        import importlib

        (block,) = [b for b in code_blocks(read_guide('admin/nova-api'),
                                           'ini')
                    if '[filter:cellsched]' in b]
        shown = configparser.RawConfigParser()
        shown.read_string(block)
        nova_ini = configparser.RawConfigParser()
        nova_ini.read(os.path.join(sys.prefix, 'etc', 'nova',
                                   'api-paste.ini'))
        factory = shown['filter:cellsched']['paste.filter_factory']
        module, _, name = factory.partition(':')
        self.assertTrue(callable(getattr(importlib.import_module(module),
                                         name)), factory)
        composites = [s for s in shown.sections()
                      if s.startswith('composite:')]
        self.assertEqual(2, len(composites))
        for section in composites:
            words = nova_ini[section]['keystone'].split()
            self.assertEqual(words[:-1] + ['cellsched', words[-1]],
                             shown[section]['keystone'].split(), section)
            self.assertEqual(nova_ini[section]['use'], shown[section]['use'])

    def test_nova_conf_block_loads_and_enables_the_filter(self):
        """The ini block parses, and nova's loader finds the filter."""
        (block,) = [b for b in code_blocks(read_guide('admin/scheduling'),
                                           'ini')
                    if '[filter_scheduler]' in b]
        path = self.useFixture(fixtures.TempDir()).join('nova.conf')
        with open(path, 'w') as handle:
            handle.write(block)
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf.register_opts([
            cfg.MultiStrOpt('available_filters'),
            cfg.ListOpt('enabled_filters')], group='filter_scheduler')
        conf(['--config-file', path])
        parsed = mapping.parse(conf.cellsched.cells_default,
                               conf.cellsched.cells_projects)
        self.assertEqual(('cell1', 'cell2'), parsed.default)
        self.assertEqual({'cell3', 'cell4'},
                         {c for c, _ in parsed.projects})
        classes = nova_filters.HostFilterHandler().get_matching_classes(
            conf.filter_scheduler.available_filters)
        names = {c.__name__ for c in classes}
        self.assertIn('ProjectCellFilter', names)
        for enabled in conf.filter_scheduler.enabled_filters:
            self.assertIn(enabled, names)

    def test_nova_check_section_says_what_is_checked(self):
        """The numbers and release the guide gives are the code's."""
        from nova_cellsched.api.startup import selftest
        from nova_cellsched import compat
        from nova_cellsched.compat import parts

        section = flat(read_guide('admin/nova-api').split(
            'What is checked before it installs\n')[1].split(
            'Paging and the DB API\n')[0])
        relied_on = [(s.module, s.path, s.why) for name in ('lister', 'keyset')
                     for s in parts.BY_NAME[name].sources]
        relied_on += [(s.module, s.path, s.why)
                      for name in ('view', 'render')
                      for s in parts.BY_NAME[name].sources]
        # Libraries are checked by behaviour, not by their source.
        self.assertEqual([], [r for r in relied_on
                              if not r[0].startswith('nova.')])
        self.assertIn('%d nova functions, classes and values'
                      % len(relied_on), section)
        self.assertIn('(nova %s for this release)' % ', '.join(
            r.version for r in compat.tested()), section)
        self.assertIn('waits for it at most %d s' % selftest.TIMEOUT,
                      section)
        for _module, path, _why in relied_on:
            # A method is named as Class._method, or by its name after
            # "the ``_from_db_object`` of".
            self.assertTrue(
                '``%s``' % path in section or
                '``%s``' % path.split('.')[0] in section, path)
        self.assertIn('python -m cellsched_tools.maintainer', section)

    def _quoted_lines(self, page, prefix):
        """Log lines of *page* (literal blocks) that start with *prefix*."""
        return [line.strip()[len(prefix):]
                for line in read_guide(page).splitlines()
                if line.strip().startswith(prefix)]

    def test_start_up_check_line_is_the_codes(self):
        """The start-up check's line quoted in the uwsgi guide."""
        from nova_cellsched.api.startup import service_versions as startup

        (line,) = self._quoted_lines(
            'admin/nova-api-uwsgi',
            'INFO nova_cellsched.api.startup.service_versions [-] ')
        self.assertEqual(startup.checked_message(74, 4, 4, 0.031, 60.0),
                         line)

    def test_nova_api_log_lines_are_the_codes(self):
        """Each start-up line the guide quotes is the one install() logs."""
        from nova_cellsched.api.startup import install as patch
        from nova_cellsched import compat

        from nova_cellsched.compat import hashing

        (tested,) = [r for r in compat.tested()
                     if r.version == hashing.nova_version()]
        matched = patch._matched()
        self.assertEqual([tested.version], matched[1])
        on = ['guard', 'keyset', 'lister', 'view', 'render', 'validation',
              'min_version']
        info = self._quoted_lines(
            'admin/nova-api', 'INFO nova_cellsched.api.startup.install [-] ')
        self.assertEqual(
            [patch.installed_message(True, tested.version, matched, on),
             patch.installed_message(False, tested.version, matched, on)],
            info)
        (error,) = self._quoted_lines('admin/nova-api',
                                      'ERROR nova_cellsched.api [-] ')
        self.assertEqual(str(patch.IncompatibleNova(
            ['nova.db.main.api._manual_join_columns(columns_to_join): '
             'source differs from the tested ones (sha256 expected %s '
             '(nova %s), found 0c4f5b1d8e2a9f37; relied on: the joins nova '
             'makes by hand)' % (
                 tested.hashes['nova.db.main.api._manual_join_columns'][:16],
                 tested.version)])), error)

    def test_try_it_commands_are_the_ones_the_demo_prints(self):
        """The curl and openstack lines of "Try it", as demo --api prints."""
        from nova_cellsched.cmd import list_cmd

        lines = [line.strip()
                 for line in read_guide('admin/nova-api').splitlines()]
        url = re.search(r'nova-api serves (\S+) ', '\n'.join(lines)).group(1)
        for command in list_cmd.api_commands(url, 'tools/venv openstack',
                                             'admin:admin'):
            self.assertIn(command, lines)

    def test_prefilter_log_line_is_the_codes(self):
        """The registration line the scheduling guide quotes, as logged."""
        from nova_cellsched.scheduler import request_filter

        logs = self.useFixture(fixtures.FakeLogger(
            name=request_filter.__name__, format='%(message)s'))
        request_filter._log_registered()
        (quoted,) = self._quoted_lines(
            'admin/scheduling',
            'INFO nova_cellsched.scheduler.request_filter [-] ')
        self.assertEqual(logs.output.strip(), quoted)


def supported_releases():
    """{major: 'X.Y.Z'} from the install guide's matrix of releases.

    The one place support is stated: its header names the series, its
    first row the point release each is tested on.
    """
    text = read_guide('install/index')
    table = text.split('Supported nova releases\n')[1].split('.. [#')[0]
    majors = [int(m) for m in re.findall(r'- nova (\d+)\.x,', table)]
    first_row = table.split('* - ``ProjectCellFilter``')[1].split('* -')[0]
    points = re.findall(r'yes \((\d+\.\d+\.\d+)\)', first_row)
    return dict(zip(majors, points))


def results(name):
    with open(os.path.join(TOP, 'benchmarks', 'results', name)) as handle:
        return json.load(handle)


def one_decimal(ratio):
    """*ratio* to one decimal, a half rounded up (3.25: 3.3)."""
    return str(decimal.Decimal(str(ratio)).quantize(
        decimal.Decimal('0.1'), rounding=decimal.ROUND_HALF_UP))


class ClaimsTest(base.TestCase):
    """README.rst and the guide on support and speed, against the sources.

    What they say is what the matrix and the benchmark results say,
    release by release.
    """

    def setUp(self):
        super().setUp()
        self.readme = ' '.join(read_readme().split())

    def test_the_matrix_names_each_release_tested(self):
        releases = supported_releases()
        self.assertEqual([31, 32, 33, 34], sorted(releases))
        for major, point in releases.items():
            with open(os.path.join(TOP, 'tools', 'releases',
                                   'nova%d.txt' % major)) as handle:
                self.assertIn('nova==%s\n' % point, handle.read())
        with open(os.path.join(TOP, 'test-requirements.txt')) as handle:
            self.assertIn('nova==%s ' % releases[34], handle.read())

    def test_readme_and_guide_name_the_matrix_range(self):
        releases = supported_releases()
        span = 'nova %d.x (2025.1) to %d.x (2026.2)' % (min(releases),
                                                       max(releases))
        self.assertIn(span, self.readme)
        self.assertIn(span, ' '.join(read_guide('index').split()))

    def test_no_page_claims_less_support_than_the_matrix(self):
        stale = ('so far', 'exact nova release', '(nova 34.x)',
                 'refuses to install', 'refuses any nova')
        texts = {'README.rst': self.readme}
        for page in ('index', 'install/index', 'admin/nova-api'):
            texts[page] = ' '.join(read_guide(page).split())
        with open(os.path.join(TOP, 'test-requirements.txt')) as handle:
            texts['test-requirements.txt'] = ' '.join(handle.read().split())
        for name, text in texts.items():
            for phrase in stale:
                self.assertNotIn(phrase, text, name)

    def test_end_to_end_speed_is_each_releases_results(self):
        """"A to B on nova NN" for each release: its results' range."""
        for major in supported_releases():
            ratios = [point['ratio'] for point in
                      results('api_e2e_nova%d.json' % major)['points']]
            claim = '%s to %s' % (one_decimal(min(ratios)),
                                  one_decimal(max(ratios)))
            said = re.search(r'([\d.]+ to [\d.]+)(?: times)? on (?:nova )?%d\b'
                             % major, self.readme)
            self.assertIsNotNone(said, 'no figure for nova %d' % major)
            self.assertEqual(claim, said.group(1), 'nova %d' % major)

    def test_listing_speed_is_the_listing_results(self):
        """10 to 50 cells of 1,000, PyMySQL, pages of 1,000, nova 34."""
        found = results('listing.json')
        ratios = [point['nova_over_ours'] for point in found['points']
                  if point['limit'] == 1000 and point['cells'] in (10, 50)
                  and point['driver'] == 'pymysql' and not point['deleted']
                  and not point['marker']]
        self.assertEqual(2, len(ratios))
        claim = '%d to %d times less time' % (round(min(ratios)),
                                              round(max(ratios)))
        self.assertIn(claim, self.readme)
        self.assertIn('on nova %d' % int(found['nova'].split('.')[0]),
                      self.readme)


class ReadmeCommandsTest(base.TestCase):
    """The guide's Python and every command line run against a demo world."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.world = demo.build(os.path.join(self.dir, 'demo'), cells=2,
                                instances=80)
        self.env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')

    def _run(self, argv):
        return subprocess.run(argv, cwd=self.dir, env=self.env,
                              capture_output=True, text=True, timeout=300)

    def test_python_block_runs_as_written(self):
        (block,) = code_blocks(read_guide('admin/listing'), 'python')
        code = block.replace(CONFIG, self.world.config_file)
        done = self._run([sys.executable, '-c', code])
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('Total ms', done.stdout)
        lines = [line for line in done.stdout.splitlines()
                 if re.match(r'^[0-9a-f-]{36} ', line)]
        # Every live instance is listed; the demo's deleted ones are not.
        self.assertGreater(self.world.deleted, 0)
        self.assertEqual(min(100, self.world.instances - self.world.deleted),
                         len(lines), done.stdout)

    def test_every_command_line_runs(self):
        """Each runs; sync-aggregates gets as far as asking placement.

        The demo world has no placement: a sync line must parse and read
        the cells, then stop on the missing ``[placement]`` credentials
        (exit 2, one line), which shows its arguments were accepted.
        """
        # "demo --api" serves until Ctrl-C: tests/functional/
        # test_demo_api.py runs it, and the commands it prints.
        commands = sorted({c for text in all_texts()
                           for c in command_lines(text)
                           if c.startswith('nova-cellsched') and
                           '[' not in c and '<' not in c and
                           '--api ' not in c + ' '})
        self.assertGreaterEqual(len(commands), 7)
        script = os.path.join(os.path.dirname(sys.executable),
                              'nova-cellsched')
        paste_dir = os.path.join(self.dir, 'paste')
        os.mkdir(paste_dir)
        paste = nova_api.paste_with_filter(paste_dir)
        synced = 0
        for line in commands:
            argv = shlex.split(line.replace(CONFIG, self.world.config_file)
                               .replace(API_PASTE, paste))
            done = self._run([script] + argv[1:])
            self.assertNotIn('Traceback', done.stderr)
            if 'sync-aggregates' in argv:
                synced += 1
                self.assertEqual(2, done.returncode, line)
                self.assertIn('fix the [placement] options', done.stderr)
                self.assertNotIn('usage:', done.stderr)
                continue
            self.assertEqual(0, done.returncode,
                             '%s\n%s' % (line, done.stderr))
        self.assertGreaterEqual(synced, 2)
        self.assertTrue(os.path.exists(os.path.join(self.dir,
                                                    'trace.json')))

    def test_demo_world_matches_the_demo_description(self):
        """cell0 holds ERROR instances; every cell has nova's schema."""
        names = [name for name, _url in self.world.cells]
        self.assertEqual(['cell0', 'cell1', 'cell2'], names)
        for _name, url in self.world.cells:
            self.assertTrue(seed.has_schema(url))
