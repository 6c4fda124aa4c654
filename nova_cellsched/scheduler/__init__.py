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

"""Project-to-cell scheduling: which cells may take a project's servers.

The flow, one module a step: :mod:`.mapping` parses the two options
(pure); :mod:`.decision` resolves the parsed mapping to real cells,
keeps the policy in force and answers for one request, for the host
filter and for placement (pure, read top to bottom);
:mod:`.state` holds the one policy of a nova-scheduler, on the cells
it reads from nova's API database, rebuilt by its SIGHUP mutate hook;
:mod:`.host_filter` is nova's scheduler host filter,
:class:`~.host_filter.ProjectCellFilter` (public path:
``nova_cellsched.filters.ProjectCellFilter``), which registers the
placement pre-filter of :mod:`.request_filter` when nova builds it, and
sets up :mod:`.periodic_sync`, the scheduler's periodic sync of the cell
aggregates (:mod:`.aggregate_sync`, diffed by the pure
:mod:`.aggregates`).
"""
