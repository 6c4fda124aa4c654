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

"""The modules of nova-cellsched a request runs through, in every thread.

:class:`RequestPath` records each call from one module of the package
into another (``sys.setprofile`` in the calling thread,
``threading.setprofile`` in the threads started inside the block: start
the listing workers inside it). :meth:`RequestPath.summary` says what the
contributor guide reports: the modules a request runs in, the edges
between the package's parts (``api.hooks``, ``listing``, ``compat``...)
and the calls that go up from ``compat``.
"""

import sys
import threading

PACKAGE = 'nova_cellsched'

#: What ``compat`` may call of the package: itself and the core below it.
BELOW_COMPAT = frozenset({'compat', 'core'})


def part(module):
    """``api.hooks`` of ``nova_cellsched.api.hooks.pool``; ``core`` of a
    top-level module; None outside the package.
    """
    names = module.split('.')
    if names[0] != PACKAGE:
        return None
    if len(names) == 2:
        return 'core'
    if names[1] == 'api' and len(names) > 3:
        return 'api.' + names[2]
    return names[1]


class EveryThread:
    """:meth:`_profile` at Python calls in every thread, in a block.

    ``sys.setprofile`` for the calling thread (:attr:`_owner`),
    ``threading.setprofile`` for the threads started inside the block;
    both as they were after it (:attr:`_previous`).
    """

    def _profile(self, frame, event, arg):
        raise NotImplementedError

    def __enter__(self):
        self._owner = threading.current_thread()
        self._previous = (sys.getprofile(), threading.getprofile())
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc_info):
        sys.setprofile(self._previous[0])
        threading.setprofile(self._previous[1])
        return False


class RequestPath(EveryThread):
    """Calls between the package's modules while the block runs."""

    def __init__(self):
        self.modules = set()
        #: (caller module, callee module) -> calls.
        self.edges = {}
        self._lock = threading.Lock()

    def _profile(self, frame, event, arg):
        if event != 'call':
            return
        callee = frame.f_globals.get('__name__', '')
        if not callee.startswith(PACKAGE + '.') and callee != PACKAGE:
            return
        caller = frame.f_back.f_globals.get('__name__', '') if (
            frame.f_back is not None) else ''
        with self._lock:
            self.modules.add(callee)
            if caller != callee and (caller == PACKAGE or
                                     caller.startswith(PACKAGE + '.')):
                key = (caller, callee)
                self.edges[key] = self.edges.get(key, 0) + 1

    def part_edges(self):
        """(caller part, callee part) of every edge between two parts."""
        return sorted({(part(a), part(b)) for a, b in self.edges
                       if part(a) != part(b)})

    def up_from_compat(self):
        """Edges from ``compat`` into a part above it (none allowed)."""
        return sorted((a, b) for a, b in self.edges
                      if part(a) == 'compat' and part(b) not in BELOW_COMPAT)

    def summary(self):
        return ('%d modules, %d parts, %d edges between parts: %s'
                % (len(self.modules),
                   len({part(m) for m in self.modules}),
                   len(self.part_edges()),
                   ', '.join('%s->%s' % edge for edge in self.part_edges())))
