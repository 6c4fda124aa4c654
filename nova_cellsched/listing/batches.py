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

"""How many rows a listing asks each cell for: nova's ``[api]`` options.

``instance_list_cells_batch_strategy`` and
``instance_list_cells_batch_fixed_size`` as both listers read them: the
first round's batch (:func:`first_batch_size`) and whether later
batches may grow (:func:`batches_grow`).
"""

import nova.conf

CONF = nova.conf.CONF


#: Smallest first batch asked from a cell.
MIN_BATCH = 10
#: ``distributed``: a cell's first batch is its even share of the page
#: times this.
SHARE_MARGIN = 1.5


def first_batch_size(limit: int | None, cells: int) -> int:
    """Rows to ask each cell for in the first round.

    ``[api] instance_list_cells_batch_strategy`` as nova reads it, with
    two differences. ``distributed`` asks every cell for 50% more than
    its even share of *limit*, where nova asks for 10% more: in nova a
    cell that needs more costs one more query inside the merge, here a
    further round (:mod:`.rounds`) costs a round trip of every cell
    still below the cut, which at 50 cells cost more than the rows the
    wider margin fetches (measured with
    ``benchmarks/bench_listing.py``). And there is no floor of 100 rows,
    which made nova's 50 cells fetch 5,000 rows for a page of 1,000; the
    least is :data:`MIN_BATCH`. ``fixed`` asks for
    ``instance_list_cells_batch_fixed_size`` rows; one cell is asked for
    *limit*.
    """
    limit = limit or CONF.api.max_limit
    if cells <= 1:
        return limit
    if CONF.api.instance_list_cells_batch_strategy == 'fixed':
        size = CONF.api.instance_list_cells_batch_fixed_size
    else:
        size = int((limit / cells) * SHARE_MARGIN)
    return int(max(1, min(limit, max(size, MIN_BATCH))))


def batches_grow() -> bool:
    """Whether a cell's later batches may grow beyond the first's.

    With ``distributed`` (nova's default) they do: a cell that keeps
    filling its batches is asked for up to twice the rows it has given
    (:func:`nova_cellsched.gather.refetch_sizes`), so a page that lives
    in one cell (a project dedicated to it) costs a few rounds, not
    ``limit / batch``.
    ``fixed`` is the operator's size of every query, as nova documents
    ``instance_list_cells_batch_fixed_size``: no batch is larger.
    """
    return bool(CONF.api.instance_list_cells_batch_strategy != 'fixed')
