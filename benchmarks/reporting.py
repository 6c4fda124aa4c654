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

"""What the benchmarks share to report: percentiles and the results files.

:func:`percentile` is the one percentile of the reports (nearest rank);
:func:`write_results` writes a run's JSON (``--json`` and/or
``--out DIR/NAME.json``) and its Markdown (``DIR/NAME.md``) the same
way for every script.

Light on purpose (no nova import), like :mod:`runinfo`.
"""

from collections.abc import Callable, Sequence
import json
import os
from typing import Any


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank *pct* percentile of *values*; None when empty.

    The smallest value with at least *pct* % of the values at or below
    it: p50 of 1..4 is 2, p99 of 100 values the 99th.
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(-(-pct * len(ordered) // 100)))
    return ordered[min(rank, len(ordered)) - 1]


def write_results(report: Any, *, name: str, out: str | None = None,
                  json_path: str | None = None,
                  write_markdown: Callable[[str, Any], None] | None = None,
                  markdown: bool = True, indent: int = 2,
                  sort_keys: bool = True) -> list[str]:
    """Write *report* as JSON, and as Markdown next to it under *out*.

    :param name: the file name under *out* without extension
        (``NAME.json``, ``NAME.md``).
    :param out: ``--out DIR`` (made if missing); None writes no file
        there.
    :param json_path: ``--json PATH``, one more copy of the JSON.
    :param write_markdown: ``write_markdown(path, report)``; the
        Markdown is written only with *out*, *markdown* and this.
    :param markdown: False to leave the Markdown out (a partial run).
    :returns: the paths written, JSON first.
    """
    paths = [json_path] if json_path else []
    if out:
        os.makedirs(out, exist_ok=True)
        paths.append(os.path.join(out, name + '.json'))
    for path in paths:
        with open(path, 'w') as handle:
            json.dump(report, handle, indent=indent, sort_keys=sort_keys)
            handle.write('\n')
    if out and markdown and write_markdown is not None:
        path = os.path.join(out, name + '.md')
        write_markdown(path, report)
        paths.append(path)
    return paths
