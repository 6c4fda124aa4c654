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

"""nova's minimum service version over all cells, bounded (``min_version``).

nova-api asks every cell for the minimum version of a service before a
boot (``nova/compute/api.py``, ``_validate_and_build_base_options``),
a rebuild, an evacuation and a few other actions, through
``nova.objects.service.get_minimum_version_all_cells``, each cell with
nova's 60 s ``CELL_TIMEOUT``. With ``require_all=False`` nova leaves
out a cell that does not answer. While the part is on, that call runs
nova's own function, whose cell reads are made as the view's lookups
after a listing are (:func:`.instance_list.scatter_gather_listed_cells`):

==========================  =========================================
the cell                    what the call counts for it
==========================  =========================================
answers in time             its answer (remembered)
held down, or silent past   the answer it last gave this process;
``list_cell_timeout``       none before (nova's rule: left out)
fails                       the same
==========================  =========================================

A remembered answer is never newer than the cell's own now, so the
minimum taken is at most the one nova would take with every cell
answering: what nova then allows, it would allow with every cell
answering. ``require_all=True`` (data migrations' gates) is nova's
call, unchanged.
"""

from collections.abc import Callable, Iterable
import functools
import threading
from typing import Any

from nova import context as nova_context
from oslo_log import log as logging


from nova_cellsched.api.hooks import pool
from nova_cellsched.api.middleware import request_state

LOG = logging.getLogger(__name__)

_LOCK = threading.Lock()
#: (cell uuid, what was asked) -> the cell's last answer to it.
_LAST: dict[tuple[str, str], Any] = {}


def forget() -> None:
    """Remember no answer: in a forked child, or a test."""
    with _LOCK:
        _LAST.clear()


def _gather(context: Any, cell_mappings: Iterable[Any],
            fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """Every cell's answer, bounded, or its last one (module docstring)."""
    cell_mappings = list(cell_mappings)
    results = pool.scatter_gather_listed_cells(
        context, cell_mappings, fn, *args)
    asked = '%s%r' % (getattr(fn, '__qualname__', fn), args)
    with _LOCK:
        for cm in cell_mappings:
            answer = results.get(cm.uuid)
            key = (cm.uuid, asked)
            if not nova_context.is_cell_failure_sentinel(answer):
                _LAST[key] = answer
            elif key in _LAST:
                LOG.warning('Cell %s did not answer for the minimum service '
                            'version: counted with the answer it last gave '
                            'this process', cm.uuid)
                results[cm.uuid] = _LAST[key]
    return results


def wrap(attribute: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """nova's ``get_minimum_version_all_cells`` (*original*), bounded.

    Put in by :mod:`nova_cellsched.compat` (``Swap(wraps=True)``).
    """

    @functools.wraps(original)
    def get_minimum_version_all_cells(context: Any, binaries: Any,
                                      require_all: bool = False) -> Any:
        if require_all:
            return original(context, binaries, require_all=require_all)
        with request_state.cell_reads(_gather):
            return original(context, binaries, require_all=require_all)

    return get_minimum_version_all_cells
