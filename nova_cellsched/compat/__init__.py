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

"""What nova must look like, release by release, in one place.

- :mod:`.parts`: the declarative list of what nova-cellsched replaces
  in nova (target, replacement, the nova sources it relies on and why);
- :mod:`.sources`: the one table of those sources' tested versions
  (source -> hash -> the releases that have it; the maintainers'
  ``python -m cellsched_tools.maintainer``, run from a checkout, adds a
  release);
- :mod:`.adapter`: nova-cellsched's calls on nova, each written once,
  with a version gate where releases differ;
- :mod:`.core`: the one lock, install, restore and check;
- :mod:`.hashing`: the hasher; :mod:`.checks`: checks beyond hashes.

The contributor guide's "Where nova is touched" is the map.
"""

from nova_cellsched.compat.core import check
from nova_cellsched.compat.core import install
from nova_cellsched.compat.core import is_on
from nova_cellsched.compat.core import LOCK
from nova_cellsched.compat.core import on
from nova_cellsched.compat.core import original
from nova_cellsched.compat.core import restore
from nova_cellsched.compat.core import same_function
from nova_cellsched.compat.core import temporarily
from nova_cellsched.compat.core import tested
from nova_cellsched.compat.parts import API_PARTS
from nova_cellsched.compat.parts import PARTS

__all__ = ['API_PARTS', 'LOCK', 'PARTS', 'check', 'install', 'is_on', 'on',
           'original', 'restore', 'same_function', 'temporarily', 'tested']
