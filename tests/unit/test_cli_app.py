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

"""The command line's commands, as cliff builds them."""

import argparse
import configparser
from importlib import metadata
import os
import re
import subprocess

from cliff import command as cliff_command
import fixtures

from nova_cellsched.cmd import cellsched
from tests import base


class EpilogTestCase(base.TestCase):
    """A command's parser is built without reading distribution metadata.

    cliff's own ``Command.get_epilog`` reads the metadata of every
    installed distribution to name a plugin's distribution; ours gives
    the same text without that read.
    """

    def setUp(self):
        super().setUp()
        self.app = cellsched.CellschedApp()

    def commands(self):
        for name, cls in sorted(cellsched.COMMANDS.items()):
            yield name, cls(self.app, argparse.Namespace(),
                            cmd_name=name)

    def test_epilog_is_the_one_cliff_gives(self):
        """Same text as cliff's (commands and app share a distribution)."""
        for name, cmd in self.commands():
            self.assertEqual(cliff_command.Command.get_epilog(cmd),
                             cmd.get_epilog(), name)

    def test_parser_reads_no_distribution_metadata(self):
        """``get_parser`` does not scan the installed distributions."""

        def scanned():
            raise AssertionError('packages_distributions() was called')

        self.useFixture(fixtures.MonkeyPatch(
            'cliff.command.packages_distributions', scanned))
        self.useFixture(fixtures.MonkeyPatch(
            'cliff.command._dists_by_mods', None))
        for name, cmd in self.commands():
            parser = cmd.get_parser('nova-cellsched ' + name)
            self.assertIsInstance(parser, argparse.ArgumentParser, name)
        # The guard works: cliff's own epilog does scan.
        cmd = dict(self.commands())['list']
        self.assertRaises(AssertionError,
                          cliff_command.Command.get_epilog, cmd)
        self.assertTrue(metadata.packages_distributions())


class EntryPointsTestCase(base.TestCase):
    """setup.cfg lists the application's commands, for the CLI reference.

    ``doc/source/cli`` documents the commands of the ``nova_cellsched.cli``
    entry point namespace (cliff's ``autoprogram-cliff``); the
    application adds ``COMMANDS`` itself, so the two must not drift.
    """

    def test_entry_points_are_the_commands(self):
        top = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        setup_cfg = configparser.ConfigParser()
        setup_cfg.read(os.path.join(top, 'setup.cfg'))
        listed = {}
        for line in setup_cfg['entry_points'][
                'nova_cellsched.cli'].strip().splitlines():
            name, _, target = (part.strip() for part in line.partition('='))
            listed[name] = target
        self.assertEqual(
            {name: '%s:%s' % (cls.__module__, cls.__name__)
             for name, cls in cellsched.COMMANDS.items()}, listed)


class CellOrderTestCase(base.TestCase):
    """check, explain and sync-aggregates show cells in natural order."""

    NAMES = ['cell10', 'cell-a', 'cell2', 'cell1', 'cell0', 'cell2']

    def mappings(self):
        from nova import objects

        # Run alone, no other test registered nova's objects.
        objects.register_all()
        return [objects.CellMapping(
            uuid='%08d-0000-4000-8000-000000000000' % (9 - i), name=name)
            for i, name in enumerate(self.NAMES)]

    def test_cell_order_sorts_numbers_by_value(self):
        """cell2 before cell10; a word after the numbers; uuid breaks ties."""
        from nova_cellsched.cmd import base as cmd_base

        ordered = cmd_base.cell_order(self.mappings())
        self.assertEqual(['cell0', 'cell1', 'cell2', 'cell2', 'cell10',
                          'cell-a'], [cm.name for cm in ordered])
        twins = [cm.uuid for cm in ordered if cm.name == 'cell2']
        self.assertEqual(sorted(twins), twins)

    def test_cell_choice_error_lists_cells_in_natural_order(self):
        from nova_cellsched.cmd import aggregates_cmd
        from nova_cellsched import exception

        error = self.assertRaises(
            exception.InvalidListRequest, aggregates_cmd.select_cells,
            self.mappings(), 'cell99')
        listed = re.findall(r'(cell[\w-]*) \([0-9a-f-]{36}\)', str(error))
        self.assertEqual(['cell0', 'cell1', 'cell2', 'cell2', 'cell10',
                          'cell-a'], listed, str(error))


class BoundedParametersTestCase(base.TestCase):
    """The API database's driver timeouts the commands add, and keep."""

    def bounded(self, url, parameters=None):
        from nova_cellsched.cmd import nova_setup

        return nova_setup.bounded_parameters(url, parameters, 5)

    def test_each_driver_gets_its_bound(self):
        self.assertEqual('connect_timeout=5&read_timeout=5',
                         self.bounded('mysql+pymysql://u@h/nova_api'))
        for url in ('mysql://u@h/nova_api', 'postgresql://u@h/nova_api',
                    'postgresql+psycopg2://u@h/nova_api'):
            self.assertEqual('connect_timeout=5', self.bounded(url), url)
        self.assertIsNone(self.bounded('sqlite:////tmp/nova_api.db'))

    def test_the_operators_timeouts_are_kept(self):
        self.assertEqual(
            'charset=utf8&read_timeout=5',
            self.bounded('mysql+pymysql://u@h/nova_api?connect_timeout=20',
                         'charset=utf8'))
        self.assertIsNone(self.bounded(
            'mysql+pymysql://u@h/nova_api',
            'connect_timeout=20&read_timeout=30'))
        self.assertIsNone(self.bounded('postgresql://u@h/x',
                                       'connect_timeout=20'))


class PackagingTestCase(base.TestCase):
    """What pip shows of the package, and what it leaves in a checkout."""

    TOP = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))

    def test_home_page_is_set_and_the_install_guide_uses_it(self):
        setup_cfg = configparser.ConfigParser()
        setup_cfg.read(os.path.join(self.TOP, 'setup.cfg'))
        home = setup_cfg['metadata'].get('home_page', '')
        self.assertRegex(home, r'^https://[a-z0-9.-]+/\S+$')
        with open(os.path.join(self.TOP, 'doc', 'source', 'install',
                               'index.rst')) as handle:
            guide = handle.read()
        self.assertNotIn('<the nova-cellsched repository>', guide)
        self.assertIn('git clone %s /opt/src/nova-cellsched' % home, guide)
        self.assertIn("pip install 'git+%s@<commit>'" % home, guide)

    def test_what_pip_install_leaves_in_the_checkout_is_ignored(self):
        """build/, the egg-info and pbr's AUTHORS and ChangeLog."""
        left = ['build/lib/nova_cellsched/__init__.py',
                'nova_cellsched.egg-info/PKG-INFO', 'AUTHORS', 'ChangeLog']
        done = subprocess.run(
            ['git', 'check-ignore', '--no-index', *left], cwd=self.TOP,
            capture_output=True, text=True, check=False)
        self.assertEqual(left, done.stdout.splitlines(), done.stderr)
