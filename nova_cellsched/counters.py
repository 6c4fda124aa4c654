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

"""Process-wide event counts, safe to bump from any thread.

What the API integration counts (listings served by each lister, view
lookups, response validations) and tests and tools read back. Pure
Python, no nova import.
"""

from collections.abc import Iterable
import threading


class Counts:
    """Named counts of this process, bumped under a lock.

    :param names: the counts a :meth:`snapshot` always has (0 until
        counted). Counting another name adds it; a :class:`Counts` made
        with no names (``type(counts)()``, a fresh copy) starts empty.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(names, 0)

    def count(self, name: str, n: int = 1) -> None:
        """Add *n* to count *name*."""
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + n

    def snapshot(self) -> dict[str, int]:
        """Name -> count so far (a copy)."""
        with self._lock:
            return dict(self._counts)
