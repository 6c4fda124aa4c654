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

"""Tests of nova-cellsched.

The suite runs nova in native threading mode, the default of nova-api and
nova-scheduler since 2026.1: the lister's parallelism is real threads,
and must be tested as such, not as eventlet green threads. This module is
imported before any test module, so the choice is made before anything
could import eventlet.
"""

import os

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

from nova import monkey_patch  # noqa: E402

monkey_patch.patch()
