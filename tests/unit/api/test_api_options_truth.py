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

"""The ``api_*`` options say truthfully when a change takes effect.

nova 34's nova-api runs only under uwsgi or mod_wsgi: no oslo.service, no
SIGHUP handler, nothing that runs oslo.config's mutate hooks. A SIGHUP to
the uwsgi master reloads the workers, which read nova.conf again. So no
``api_*`` option is declared mutable (oslo-config-generator would print
"can be changed without restarting"), every help text says a change
takes effect when the workers are reloaded, and none tells the operator
to "send nova-api a SIGHUP" as if a running worker re-read its options.
nova 31 still ships the deprecated eventlet ``nova-api`` (oslo.service,
whose SIGHUP runs the mutate hooks): there a SIGHUP leaves every
``api_*`` option as it was, since none is mutable.
"""

import importlib.util
import io
import os
import tempfile

from oslo_config import cfg
from oslo_config import generator

from nova_cellsched.api.startup import install as patch
from nova_cellsched import conf
from tests import base
from tests.fixtures import releases


class ApiOptionsTest(base.TestCase):

    def test_nova_api_has_no_service_that_runs_mutate_hooks(self):
        """What the texts rest on: nova 32 on ships no eventlet nova-api.

        nova 31 ships the deprecated one (``nova.cmd.api``), removed in
        nova 32: there its SIGHUP changes none of these options
        (:meth:`test_mutate_hooks_change_no_api_option`).
        """
        self.assertEqual(releases.NOVA_MAJOR <= 31,
                         importlib.util.find_spec('nova.cmd.api') is not None)

    def test_mutate_hooks_change_no_api_option(self):
        """What an oslo.service SIGHUP does: each option keeps its value."""
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, 'nova.conf')
            with open(path, 'w') as f:
                f.write('[cellsched]\n')
            options = cfg.ConfigOpts()
            options.register_opts(conf.api_opts, group=conf.GROUP_NAME)
            options(['--config-file', path])
            before = {opt.name: options.cellsched[opt.name]
                      for opt in conf.api_opts}
            with open(path, 'w') as f:
                f.write('[cellsched]\napi_lister = %s\n'
                        % (not before['api_lister']))
            options.mutate_config_files()
            self.assertEqual(before, {opt.name: options.cellsched[opt.name]
                                      for opt in conf.api_opts})

    def test_no_api_option_is_declared_mutable(self):
        names = [opt.name for opt in conf.api_opts]
        self.assertIn('api_lister', names)
        self.assertEqual([], [opt.name for opt in conf.api_opts
                              if opt.mutable])

    def test_each_help_says_a_reload_of_the_workers_applies_a_change(self):
        for opt in conf.api_opts:
            text = ' '.join(opt.help.split())
            self.assertIn("reload", text, opt.name)
            self.assertIn('mod_wsgi', text, opt.name)
            self.assertNotIn('send nova-api a SIGHUP', text, opt.name)
            self.assertNotIn('(mutable)', text, opt.name)
            self.assertNotIn('is mutable', text, opt.name)

    def test_generated_sample_does_not_promise_a_change_without_restart(
            self):
        """oslo-config-generator's note for mutable options is absent."""
        out = io.StringIO()
        options = cfg.ConfigOpts()
        generator.register_cli_opts(options)
        options(['--namespace', 'nova_cellsched'])
        formatter = generator._OptFormatter(options, output_file=out)
        for opt in conf.api_opts:
            formatter.format(opt, 'cellsched')
        self.assertNotIn('can be changed without restarting',
                         out.getvalue())

    def test_start_up_line_says_a_reload_turns_the_lister_on(self):
        line = patch.installed_message(False, '34.0.0', (63, ['34.0.0']),
                                      ['lister'])
        self.assertIn("[cellsched] api_lister = True and a reload of "
                      "nova-api's workers (uwsgi: SIGHUP to the master) "
                      'make nova-cellsched serve them', line)
        self.assertNotIn('and a SIGHUP make', line)
