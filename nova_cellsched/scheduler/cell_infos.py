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

"""Nova adapter: the cells of nova's API database as the policy's values.
"""

from typing import Any

from nova_cellsched import cells
from nova_cellsched.scheduler.policy import CellInfo


def to_cell_info(cell_mapping: Any) -> CellInfo:
    """Convert a nova ``CellMapping`` to a :class:`CellInfo`.

    The mapping itself is kept as :attr:`CellInfo.source`, so that the
    pre-filter can name the cell to nova's HostManager without reading
    it back from the API database.
    """
    return CellInfo(uuid=cell_mapping.uuid, name=cell_mapping.name or None,
                    disabled=bool(cell_mapping.disabled),
                    source=cell_mapping)


def load_cell_infos(context: Any = None) -> list[CellInfo]:
    """Return every cell mapping as :class:`CellInfo`, cell0 included."""
    return [to_cell_info(cm) for cm in cells.load_cell_mappings(context)]
