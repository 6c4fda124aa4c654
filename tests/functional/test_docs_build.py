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

"""The built guide shows commands that can be copied as they are.

Sphinx's smartquotes would turn the ``--`` of an option in prose (the
command reference is cliff's help text, prose) into an en dash and
``'`` into a curly quote: ``–config-file`` pasted into a shell is no
option. The guide is built as tools/docs builds it, with the docs
virtualenv tools/docs makes (``NOVA_CELLSCHED_DOCS_VENV``, else
``.venv-docs`` of this checkout or next to it); without one the test is
skipped (run tools/docs once).
"""

import html
import os
import re
import subprocess

import fixtures

from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
#: An en or em dash, or a curly quote, just before a word: smartquotes.
MANGLED = re.compile('[\u2013\u2014\u2018\u2019\u201c\u201d][a-z]')


def docs_sphinx_build():
    """The sphinx-build of the docs virtualenv, or None."""
    candidates = [os.environ.get('NOVA_CELLSCHED_DOCS_VENV'),
                  os.path.join(TOP, '.venv-docs'),
                  os.path.join(os.path.dirname(TOP), '.venv-docs')]
    for venv in filter(None, candidates):
        path = os.path.join(venv, 'bin', 'sphinx-build')
        if os.access(path, os.X_OK):
            return path
    return None


class BuiltDocsTest(base.TestCase):

    def test_cli_reference_keeps_double_hyphens(self):
        sphinx_build = docs_sphinx_build()
        if sphinx_build is None:
            self.skipTest('no docs virtualenv: run tools/docs (or set '
                          'NOVA_CELLSCHED_DOCS_VENV) first')
        out = self.useFixture(fixtures.TempDir()).path
        env = dict(os.environ, PYTHONPATH=TOP)
        build = subprocess.run(
            [sphinx_build, '-q', '-W', '--keep-going', '-E', '-b', 'html',
             '-d', os.path.join(out, 'doctrees'), 'doc/source',
             os.path.join(out, 'html')],
            cwd=TOP, env=env, capture_output=True, text=True, timeout=900)
        self.assertEqual(0, build.returncode, build.stderr)
        page = os.path.join(out, 'html', 'cli', 'nova-cellsched.html')
        with open(page, encoding='utf-8') as handle:
            text = html.unescape(re.sub(r'<[^>]+>', '', handle.read()))
        mangled = MANGLED.findall(text)
        # In cliff's help texts (prose), not only in the option lists.
        for prose in ('--clean drops the', 'after --config-file.',
                      "nova's default locations"):
            if prose not in text:
                self.fail('%r not in the page; mangled: %s'
                          % (prose, sorted(set(mangled))))
        self.assertEqual([], mangled)
