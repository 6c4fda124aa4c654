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
from importlib import metadata

from cliff import command as cliff_command
import fixtures
from oslotest import base

from nova_cellsched.cmd import cellsched


class EpilogTestCase(base.BaseTestCase):
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
