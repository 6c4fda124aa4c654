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

"""osprofiler trace points, when nova's ``[profiler] enabled`` is set.

osprofiler is optional, as it is for nova. When it is installed and the
request being served is profiled (``osprofiler.profiler.get()`` is set in
the calling thread), every timed phase of a listing becomes a trace point
named ``cellsched.<phase>``, and the worker threads join the caller's
trace the way nova's own thread pools do (``hmac_key``, ``base_id``,
``parent_id``).
"""

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from oslo_utils import importutils

profiler = importutils.try_import('osprofiler.profiler')

TRACE_PREFIX = 'cellsched.'


def caller_info(conf: Any) -> dict[str, Any] | None:
    """The caller's trace, to hand to worker threads; None if off."""
    if profiler is None:
        return None
    group = getattr(conf, 'profiler', None)
    try:
        if group is None or not group.enabled:
            return None
    except Exception:  # noqa: BLE001 - [profiler] not registered
        return None
    prof = profiler.get()
    if prof is None:
        return None
    return {'hmac_key': prof.hmac_key, 'base_id': prof.get_base_id(),
            'parent_id': prof.get_id()}


def join(info: Mapping[str, Any] | None) -> None:
    """In a worker thread: continue the trace described by *info*."""
    if info and profiler is not None:
        profiler.init(**info)


@contextlib.contextmanager
def trace(name: str, cell: str | None,
          args: Mapping[str, Any]) -> Iterator[None]:
    """A trace point around the body (a no-op without a profiler)."""
    if profiler is None or profiler.get() is None:
        yield
        return
    info = {k: v for k, v in args.items()
            if isinstance(v, (str, int, float, bool))}
    if cell is not None:
        info['cell_uuid'] = cell
    with profiler.Trace(TRACE_PREFIX + name, info={'cellsched': info}):
        yield
