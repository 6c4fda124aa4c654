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

"""Public path of the timings and traces (:mod:`.listing.timing`).

The listing's summary (:class:`Timings`, :func:`format_table`), and the
recorder and Chrome trace writer any code can use (:class:`Recorder`,
:class:`Span`, :func:`spans_trace`: ``benchmarks/bench_bootstorm.py``).
"""

from nova_cellsched.listing.timing import format_table
from nova_cellsched.listing.timing import Recorder
from nova_cellsched.listing.timing import Span
from nova_cellsched.listing.timing import spans_trace
from nova_cellsched.listing.timing import Timings

__all__ = ['format_table', 'Recorder', 'Span', 'spans_trace', 'Timings']
