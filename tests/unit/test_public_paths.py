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

"""The documented import paths keep working after the package layout.

Operators write ``nova_cellsched.filters.ProjectCellFilter`` into
nova.conf, and scripts import the listing by its documented names; these
must name the very objects the subpackages define.
"""

import ast
import importlib
from importlib import metadata
import pathlib
import subprocess
import sys


import nova_cellsched
from tests import base

PACKAGE = pathlib.Path(nova_cellsched.__file__).parent


class TestPublicPaths(base.TestCase):

    def test_filter_path_in_nova_conf_is_the_host_filter(self):
        """The path in nova.conf loads the scheduler's filter class."""
        from nova.scheduler import filters as nova_filters

        from nova_cellsched.scheduler import host_filter
        handler = nova_filters.HostFilterHandler()
        classes = handler.get_matching_classes(
            ['nova_cellsched.filters.ProjectCellFilter'])
        self.assertEqual([host_filter.ProjectCellFilter], classes)

    def test_listing_names(self):
        """list_instances and the field sets are at nova_cellsched.records."""
        from nova_cellsched import records
        from nova_cellsched.records import fields as record_fields
        from nova_cellsched.records import lister
        self.assertIs(lister.list_instances, records.list_instances)
        self.assertIs(lister.admin_context, records.admin_context)
        self.assertIs(record_fields.DETAIL_FIELDS, records.DETAIL_FIELDS)
        self.assertIs(record_fields.BASE_FIELDS, records.BASE_FIELDS)
        self.assertIn('uuid', records.BASE_FIELDS)

    def test_listing_unknown_name_is_an_attribute_error(self):
        from nova_cellsched import records
        self.assertRaises(AttributeError, getattr, records, 'no_such_name')

    def test_entry_points_resolve(self):
        """The console script and the sample-config hook still load."""
        eps = metadata.entry_points()
        script = [ep for ep in eps.select(group='console_scripts')
                  if ep.name == 'nova-cellsched']
        self.assertEqual(1, len(script))
        self.assertTrue(callable(script[0].load()))
        opts = [ep for ep in eps.select(group='oslo.config.opts')
                if ep.name == 'nova_cellsched']
        self.assertEqual(1, len(opts))
        groups = dict(opts[0].load()())
        self.assertIn('cellsched', {str(g) for g in groups})

    def test_light_modules_do_not_import_nova(self):
        """The pure parts load without nova (they are the typed core)."""
        code = ('import sys\n'
                'import nova_cellsched.listing.timing\n'
                'import nova_cellsched.listing.sorting\n'
                'import nova_cellsched.scheduler.decision\n'
                'import nova_cellsched.gather\n'
                'print(sorted(m for m in sys.modules'
                ' if m == "nova" or m.startswith("nova.")))\n')
        out = subprocess.run([sys.executable, '-c', code], check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual('[]', out.strip())


class TestLayout(base.TestCase):
    """Imports run one way: cmd/wsgi -> api/scheduler/records/demo ->
    listing -> core.
    """

    PARTS = ('scheduler', 'listing', 'records', 'demo', 'cmd', 'api', 'wsgi',
             'compat')

    def _imports(self, path):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                yield node.module
                for alias in node.names:
                    yield node.module + '.' + alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield alias.name

    def _part(self, module):
        parts = module.split('.')
        if parts[0] != 'nova_cellsched' or len(parts) < 2:
            return None
        return parts[1] if parts[1] in self.PARTS else 'core'

    def test_every_module_opens_with_a_one_line_summary(self):
        for path in sorted(PACKAGE.rglob('*.py')):
            doc = ast.get_docstring(ast.parse(path.read_text()))
            self.assertTrue(doc, '%s has no module docstring' % path)
            self.assertTrue(doc.splitlines()[0].strip(), path)

    def test_imports_run_one_way(self):
        allowed = {
            'core': {'core'},
            'scheduler': {'core', 'scheduler', 'compat'},
            'listing': {'core', 'listing'},
            'records': {'core', 'listing', 'records'},
            'demo': {'core', 'demo'},
            'api': {'core', 'api', 'listing', 'scheduler', 'compat'},
            'cmd': {'core', 'cmd', 'listing', 'records', 'scheduler', 'demo',
                    'api', 'compat'},
            'wsgi': {'core', 'wsgi', 'api'},
            # What nova must look like, below every part: it names the
            # parts' functions in compat/parts.py (strings), never
            # imports them.
            'compat': {'core', 'compat'},
        }
        for path in sorted(PACKAGE.rglob('*.py')):
            rel = path.relative_to(PACKAGE.parent).with_suffix('')
            module = '.'.join(rel.parts)
            own = self._part(module) or 'core'
            if path.name == '__init__.py' and own == 'core':
                continue
            # The public path in nova.conf re-exports the filter.
            if module == 'nova_cellsched.filters':
                continue
            for target in self._imports(path):
                part = self._part(target)
                if part is None:
                    continue
                self.assertIn(part, allowed[own],
                              '%s imports %s' % (module, target))

    def test_public_modules_import(self):
        for name in ('nova_cellsched.filters', 'nova_cellsched.listing',
                     'nova_cellsched.records', 'nova_cellsched.conf'):
            importlib.import_module(name)

    def test_the_installed_package_holds_no_maintainers_tool(self):
        """setup.cfg ships nova_cellsched alone, and it never imports them.

        The maintainers' tools (``cellsched_tools``) run from a checkout;
        a nova-api or nova-scheduler host has the plugin only.
        """
        import configparser

        setup = configparser.ConfigParser()
        setup.read(PACKAGE.parent / 'setup.cfg')
        self.assertEqual(['nova_cellsched'],
                         setup['files']['packages'].split())
        self.assertFalse((PACKAGE / 'compat' / 'maintainer.py').exists())
        self.assertFalse((PACKAGE / 'compat' / 'pins.py').exists())
        self.assertFalse((PACKAGE / 'demo' / 'cloud.py').exists())
        for path in sorted(PACKAGE.rglob('*.py')):
            for target in self._imports(path):
                self.assertFalse(target.split('.')[0] == 'cellsched_tools',
                                 '%s imports %s' % (path, target))
