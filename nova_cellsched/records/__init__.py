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

"""The command-line lister: servers of every cell as records.

:func:`list_instances` answers the question nova's ``GET /servers``
answers, for the command line and for scripts, with SQL of its own on
nova's table models. The flow, one module a step: :mod:`.lister`
selects the cells and drives the rounds of the engine
(:mod:`nova_cellsched.listing`); :mod:`.query` (nova adapter) builds
one cell's statement; :mod:`.fields` builds the records and
:mod:`.codec` encodes them.

The public names below are loaded on first use, so importing this
package does not import nova.
"""

import importlib
from typing import Any

#: Public name -> the module of this package that defines it.
_PUBLIC = {
    'list_instances': 'lister',
    'ListResult': 'lister',
    'Cell': 'lister',
    'CellFailure': 'lister',
    'admin_context': 'lister',
    'normalize_filters': 'lister',
    'select_cells': 'lister',
    'FILTERS': 'lister',
    'ALLOWED_SORT_KEYS': 'lister',
    'BASE_FIELDS': 'fields',
    'DETAIL_FIELDS': 'fields',
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError('module %r has no attribute %r'
                             % (__name__, name))
    value = getattr(importlib.import_module('.' + module, __name__), name)
    globals()[name] = value
    return value
