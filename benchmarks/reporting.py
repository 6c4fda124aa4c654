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

"""The one runner and report writer every benchmark script uses.

What each script in ``benchmarks/`` does around its measurements, the
same way:

* :func:`require` checks the run's requirements (the modules of
  ``benchmarks/requirements.txt`` it needs, and any other problem such as
  a missing uwsgi) before anything is made: one message naming what is
  missing and how to install it, exit status 1, nothing created;
* :func:`cleanly` runs the measurements with a stack of clean-up steps
  that run however the run ends (success, failure, Ctrl-C, SIGTERM), and
  :func:`cleanup_selection` says which benchmark databases a clean-up
  drops: only this run's (or a named run's), never one that existed
  before, never one another connection is using;
* :func:`add_output_arguments` gives every script ``--out DIR``,
  ``--json PATH``, ``--name NAME`` and ``--render JSON``;
  :func:`write_results` writes a run's JSON (``--json`` and/or
  ``--out DIR/NAME.json``) and its Markdown (``DIR/NAME.md``),
  :func:`rerender` the Markdown of a stored run;
* :func:`percentile` is the one percentile of the reports (nearest
  rank), :func:`percentiles` a row of them.

A benchmark reports; it does not gate: nothing here fails a run on a
timing. Light on purpose (no nova import), like :mod:`runinfo`.
"""

import argparse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
import contextlib
import dataclasses
import importlib.util
import json
import os
import signal
import threading
from typing import Any

#: The benchmarks' own requirements, on top of the project's.
REQUIREMENTS = 'benchmarks/requirements.txt'


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank *pct* percentile of *values*; None when empty.

    The smallest value with at least *pct* % of the values at or below
    it: p50 of 1..4 is 2, p99 of 100 values the 99th, p100 the largest.
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(-(-pct * len(ordered) // 100)))
    return ordered[min(rank, len(ordered)) - 1]


def percentiles(values: Sequence[float], pcts: Mapping[str, float], *,
                scale: float = 1.0,
                digits: int | None = None) -> dict[str, float | None]:
    """``{name: percentile}`` for each ``name: pct`` of *pcts*.

    Each value is :func:`percentile` times *scale*, rounded to *digits*
    when given; None for every name when *values* is empty.
    """
    row: dict[str, float | None] = {}
    for name, pct in pcts.items():
        value = percentile(values, pct)
        if value is not None:
            value *= scale
            if digits is not None:
                value = round(value, digits)
        row[name] = value
    return row


def require(script: str, modules: Mapping[str, str] | None = None,
            problems: Iterable[str | None] = ()) -> None:
    """Stop (exit status 1) unless the run's requirements are met.

    Called before anything is made (a database, a server, a file), so a
    missing requirement leaves nothing behind.

    :param script: the script's file name, first on the message.
    :param modules: module name -> what needs it (shown when the module
        cannot be imported), e.g. ``{'MySQLdb': 'mysqlclient: the
        seeder'}``; installed by ``pip install -r`` :data:`REQUIREMENTS`.
    :param problems: other reasons the run cannot start (None for none),
        each a sentence that says how to fix it.
    :raises SystemExit: with one line per kind of problem.
    """
    missing = [what for name, what in (modules or {}).items()
               if importlib.util.find_spec(name) is None]
    lines = []
    if missing:
        lines.append('%s: missing %s; install the benchmark requirements: '
                     'pip install -r %s' % (script, '; '.join(missing),
                                            REQUIREMENTS))
    lines += ['%s: %s' % (script, problem) for problem in problems
              if problem]
    if lines:
        raise SystemExit('\n'.join(lines) + ' (nothing was created)')


@dataclasses.dataclass(frozen=True)
class Selection:
    """What a clean-up drops, and what it leaves because it is in use."""

    drop: list[str]
    in_use: list[str]


def cleanup_selection(present: Iterable[str], *, prefix: str,
                      runs: Iterable[str] | None = None,
                      made: Iterable[str] | None = None,
                      before: Iterable[str] = (),
                      in_use: Iterable[str] = ()) -> Selection:
    """Which of the databases *present* a benchmark's clean-up drops.

    Only a benchmark database (name starting with *prefix*) is ever
    chosen; of those, only a run's own:

    :param present: the names on the server now.
    :param runs: name prefixes of the runs whose databases count (a
        world's prefix, for ``--cleanup`` or a run's own worlds); None:
        any benchmark database.
    :param made: the names this run created (None: not tracked).
    :param before: names present before the run began: never this run's.
    :param in_use: names another connection is using (another user's
        running benchmark): left, and listed in :attr:`Selection.in_use`.
    :returns: both lists sorted.
    """
    runs = None if runs is None else tuple(runs)
    made = None if made is None else set(made)
    before, in_use = set(before), set(in_use)
    chosen = sorted(
        name for name in set(present)
        if name.startswith(prefix) and name not in before and
        (runs is None or name.startswith(runs)) and
        (made is None or name in made))
    return Selection(drop=[n for n in chosen if n not in in_use],
                     in_use=[n for n in chosen if n in in_use])


@contextlib.contextmanager
def cleanly() -> Iterator[contextlib.ExitStack]:
    """Run a benchmark with clean-up steps that always run.

    Yields a :class:`contextlib.ExitStack`: push what the run makes
    (``stack.callback(world.close)``, ``stack.enter_context(...)``) as
    it is made; it is undone, last first, when the block ends, fails or
    is interrupted. SIGTERM is turned into :class:`KeyboardInterrupt`
    for the block (as Ctrl-C is), so a killed run cleans up too; the
    previous handler is restored afterwards. Outside the main thread
    the steps still run, SIGTERM keeps its handler.
    """
    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt('signal %d' % signum)

    # Only the main thread may set a handler (a test may call a main()
    # from another thread: then SIGTERM is left as it is).
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if main else None
    try:
        with contextlib.ExitStack() as stack:
            yield stack
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def add_output_arguments(parser: argparse.ArgumentParser, *,
                         name: str | None, out: str | None = None,
                         what: str = 'the results') -> None:
    """``--out DIR``, ``--json PATH``, ``--name NAME``, ``--render JSON``.

    :param name: the default ``--name`` (the file name under ``--out``);
        None when the script derives it (e.g. ``NAME_quick``).
    :param out: the default ``--out`` (None: no results directory).
    """
    parser.add_argument('--out', metavar='DIR', default=out,
                        help='directory for NAME.json and NAME.md (%s)'
                        % what)
    parser.add_argument('--json', metavar='PATH',
                        help='also write the results JSON here')
    parser.add_argument('--name', default=name,
                        help='file name of the results under --out '
                        '(default %s)' % (name or 'the script\'s'))
    parser.add_argument('--render', metavar='JSON',
                        help='only write the Markdown of a stored results '
                        'JSON file again, next to it (nothing is measured)')


def text_writer(render: Callable[[Any], str]) -> Callable[[str, Any], None]:
    """A ``write_markdown`` for a benchmark whose ``render`` returns text.
    """
    def write_markdown(path: str, report: Any) -> None:
        with open(path, 'w') as handle:
            handle.write(render(report))
    return write_markdown


def write_results(report: Any, *, name: str, out: str | None = None,
                  json_path: str | None = None,
                  write_markdown: Callable[[str, Any], None] | None = None,
                  render: Callable[[Any], str] | None = None,
                  markdown: bool = True, indent: int = 2,
                  sort_keys: bool = True,
                  default: Callable[[Any], Any] | None = None,
                  say: Callable[[str], None] | None = None) -> list[str]:
    """Write *report* as JSON, and as Markdown next to it under *out*.

    :param name: the file name under *out* without extension
        (``NAME.json``, ``NAME.md``).
    :param out: ``--out DIR`` (made if missing); None writes no file
        there.
    :param json_path: ``--json PATH``, one more copy of the JSON.
    :param write_markdown: ``write_markdown(path, report)``, or
        *render* (``render(report)`` returns the text); the Markdown is
        written only with *out*, *markdown* and one of these.
    :param markdown: False to leave the Markdown out (a partial run).
    :param indent: *sort_keys*, *default*: as :func:`json.dump` takes
        them (each script keeps the format of its stored results).
    :param say: told ``wrote PATH, PATH`` when anything was written.
    :returns: the paths written, JSON first.
    """
    if write_markdown is None and render is not None:
        write_markdown = text_writer(render)
    paths = [json_path] if json_path else []
    if out:
        os.makedirs(out, exist_ok=True)
        paths.append(os.path.join(out, name + '.json'))
    for path in paths:
        with open(path, 'w') as handle:
            json.dump(report, handle, indent=indent, sort_keys=sort_keys,
                      default=default)
            handle.write('\n')
    if out and markdown and write_markdown is not None:
        path = os.path.join(out, name + '.md')
        write_markdown(path, report)
        paths.append(path)
    if say is not None and paths:
        say('wrote %s' % ', '.join(paths))
    return paths


def rerender(results: str,
             write_markdown: Callable[[str, Any], None]) -> int:
    """``--render JSON``: write the markdown of a stored run next to it.

    :param results: a results file (``NAME.json``); ``NAME.md`` is
        written by ``write_markdown(path, report)``.
    :returns: 0, the benchmark's exit code.
    """
    with open(results) as handle:
        report = json.load(handle)
    path = os.path.splitext(results)[0] + '.md'
    write_markdown(path, report)
    print('wrote %s' % path)
    return 0
