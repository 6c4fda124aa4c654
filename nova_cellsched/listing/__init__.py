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

"""The cross-cell listing engine: rounds, order, merge and timing.

What both listers share, the command line's (:mod:`nova_cellsched.records`)
and nova-api's (:mod:`nova_cellsched.api.hooks`): :mod:`.cross_cell`
drives the rounds over the cells (:mod:`.rounds`), each cell asked for
:mod:`.batches` of rows in the order :mod:`.sorting` defines and
:mod:`.order` puts in SQL, the cells' sorted runs merged by
:mod:`.sorting`; :mod:`.timing` and :mod:`.profiling` say where the time
went. The cells are asked in parallel by :mod:`nova_cellsched.gather`.
"""
