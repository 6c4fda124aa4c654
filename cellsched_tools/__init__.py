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

"""The maintainers' tools, run from a checkout; not installed.

Not part of the plugin that operators install into nova's virtualenv
(``setup.cfg`` packages ``nova_cellsched`` only). Run from the
checkout's top directory (or with it on ``PYTHONPATH``):

- :mod:`.maintainer`: what of nova's relied-on sources differs from the
  tested releases', and the running nova's table
  (``python -m cellsched_tools.maintainer``);
- :mod:`.pins`: a nova release's pin file from openstack/requirements
  (``python -m cellsched_tools.pins NN``);
- :mod:`.cloud`: a multi-cell nova on this machine, every service its
  own process (``tools/cloud up``), for the smoke test and the boot
  storm benchmark.
"""
