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

"""Moved: :mod:`nova_cellsched.compat` (kept for the command's old name).

``python -m nova_cellsched.api.fingerprint`` runs
``python -m nova_cellsched.compat.maintainer``; the hasher is
:mod:`nova_cellsched.compat.hashing`, the relied-on sources are the
parts' (:mod:`nova_cellsched.compat.parts`) and their hashes per tested
release are in ``nova_cellsched/compat/sources_nova*.py``.
"""

import sys

from nova_cellsched.compat.hashing import normalise
from nova_cellsched.compat.hashing import nova_version
from nova_cellsched.compat.hashing import source_hash
from nova_cellsched.compat.maintainer import main

__all__ = ['main', 'normalise', 'nova_version', 'source_hash']

if __name__ == '__main__':
    sys.exit(main())
