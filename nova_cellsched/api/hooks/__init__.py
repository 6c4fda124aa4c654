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

"""nova-api's lister hooks: nova's listing functions, served by the engine.

:mod:`.instance_list` holds the replacements of nova's listing functions
and of ``scatter_gather_cells``, with the pool of listing workers; the
cells' batches are nova's query paged by sort values (:mod:`.keyset`)
and read as plain rows (:mod:`.rows`); :mod:`.stuck` is the breaker of
queries given up on, :mod:`.driver_advice` the advice on unbounded
database drivers, :mod:`.min_version` nova's minimum service version
over the cells, bounded.
"""
