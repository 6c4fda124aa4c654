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

"""Sphinx configuration of the nova-cellsched guide (``tox -e docs``).

The configuration reference is generated from the options nova-cellsched
registers (``oslo.config.opts`` entry point ``nova_cellsched``), the
command reference from its cliff commands (entry points
``nova_cellsched.cli``) and the release notes by reno from
``releasenotes/notes``: install the package into the docs virtualenv
(``pip install --no-deps -e .``, see ``doc/requirements.txt``).
"""

extensions = [
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'cliff.sphinxext',
    'reno.sphinxext',
]

project = 'nova-cellsched'
copyright = '2026, The nova-cellsched Authors'
author = 'The nova-cellsched Authors'

master_doc = 'index'
exclude_patterns = ['_build']
pygments_style = 'native'
# No "smart" quotes or dashes: the guide and the command reference (cliff's
# help texts, prose) show options and commands to copy; "--config-file"
# must not become an en dash, nor "'" a curly quote.
smartquotes = False

# Sphinx's own theme. openstackdocstheme builds offline too, but its
# pages load openstack.org's navigation, search widget and analytics:
# this is not an OpenStack project on opendev.org.
html_theme = 'alabaster'
html_static_path = ['_static']
html_last_updated_fmt = '%Y-%m-%d'

# oslo_config.sphinxconfiggen: _static/nova-cellsched.conf.sample, the
# file "tox -e genconfig" writes, shown in configuration/sample.rst.
config_generator_config_file = (
    '../../etc/nova-cellsched/nova-cellsched-config-generator.conf')
sample_config_basename = '_static/nova-cellsched'

# cliff.sphinxext
autoprogram_cliff_application = 'nova-cellsched'
