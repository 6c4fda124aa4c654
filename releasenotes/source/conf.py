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

"""Sphinx configuration of the release notes (``tox -e releasenotes``).

reno reads the notes of ``releasenotes/notes`` from the git history; the
guide shows the same notes (``doc/source/reference/release-notes.rst``).
"""

extensions = [
    'reno.sphinxext',
]

project = 'nova-cellsched Release Notes'
copyright = '2026, The nova-cellsched Authors'
author = 'The nova-cellsched Authors'

master_doc = 'index'
exclude_patterns = ['_build']
pygments_style = 'native'

# As the guide: Sphinx's own theme (see doc/source/conf.py).
html_theme = 'alabaster'
