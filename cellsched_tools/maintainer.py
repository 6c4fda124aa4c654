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

"""The maintainers' command for a new nova release.

Install the nova release, then run::

    python -m cellsched_tools.maintainer [--tested-python PYTHON]
                                               [--against MAJOR]

(``tools/nova-release-check NN`` builds the release's virtualenv, runs
it there beside the default one's nova, then that release's tests.)

It prints, for each relied-on source (:data:`.parts.PARTS`) that equals
no tested version (or none of release *MAJOR*'s alone), what each part
relies on it for, and the parts that would be off on this nova (what
``nova-cellsched check`` finds: the parts' checks, libraries' behaviours
among them, run too). With ``--tested-python``, the Python of a
virtualenv holding a tested nova (the default venv's nova 34), each
such source is shown beside that nova's text of it as a unified diff
(``---`` tested, ``+++`` running), read there by a subprocess
(``--source-texts``).
Then it prints the one table of relied-on sources
(``nova_cellsched/compat/sources.py``) with the running nova added
(:func:`table_text`), or writes it to ``--table``'s file. Read each
changed source against what it is relied on for, write the comment
above each new version, add a version gate to the adapter
(``nova_cellsched/compat/adapter.py``) where the release does otherwise,
run the tests, and save the table.

Exit status, as nova-manage's: 0 when the running nova is a tested
release with exactly its tested sources, 1 otherwise (a source differs,
is missing or cannot be read), 2 on bad input (one line on stderr: an
unknown option or release, a tested side that does not run a tested
nova).
"""

import argparse
from collections.abc import Callable, Iterable, Sequence
import difflib
import json
import logging
import os
import pprint
import re
import shutil
import subprocess
import sys
from typing import Any, NoReturn
import warnings

from nova_cellsched.compat import core
from nova_cellsched.compat import hashing
from nova_cellsched.compat import parts as parts_mod

PROG = 'python -m cellsched_tools.maintainer'

#: How long the tested side may take to import nova and read its sources.
TESTED_SIDE_TIMEOUT = 300


class BadInput(Exception):
    """The command was asked something it cannot do: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BadInput('%s (%s --help lists the options)' % (message, PROG))


def current() -> tuple[dict[str, str], list[str]]:
    """The running nova's hashes of every source, and what failed.

    :returns: ({:attr:`.Source.name`: hash}, problems).
    """
    hashes = {}
    problems = []
    core.nova_chooses_threads()
    for source in parts_mod.all_sources():
        try:
            value = core._value(source)
        except (ImportError, AttributeError) as exc:
            problems.append('%s is missing (%s)' % (source.name, exc))
            continue
        try:
            hashes[source.name] = hashing.source_hash(value)
        except (OSError, TypeError) as exc:
            problems.append('the source of %s cannot be read (%s)'
                            % (source.name, exc))
    return hashes, problems


#: ``    'source': {`` (a long one with ruff's E501 waived on its line).
_SOURCE = re.compile(r"^    '([^']+)': \{(  # noqa: E501)?$")
#: ``        'hash':`` of a tested version, then its releases' line.
_HASH = re.compile(r"^        '([0-9a-f]{64})':$")
_RELEASES_LINE = re.compile(r'^RELEASES: tuple\[str, \.\.\.\] = \(.*\)$')


def _versions_line(entry: Sequence[str]) -> str:
    if len(entry) == 1:
        return '            (%r,),' % entry[0]
    return '            (%s),' % ', '.join(repr(v) for v in entry)


def _noqa(line: str) -> str:
    return line + '  # noqa: E501' if len(line) > 79 else line


def table_text(version: str, hashes: dict[str, str], text: str) -> str:
    """:mod:`nova_cellsched.compat.sources` (*text*) with *version* added.

    The release of *version*'s series tested so far, if any, is taken
    out first (a series keeps its newest point release). Each source's
    version that *hashes* names gains *version*; an entry running to the
    newest release (``'later'``, :func:`.core.releases_entry`) that the
    new release shares changes nothing. A version no release had is
    added after the source's others, under a comment to write: what
    differs and why what the part relies on holds. A source the table
    lacks is added at its end. Comments stay where they are; a version
    no release has any more goes, with the comment above it.
    """
    series = version.split('.')[0]
    lines = text.split('\n')
    before: list[str] = []
    releases: list[str] = []
    for index, line in enumerate(lines):
        if _RELEASES_LINE.match(line):
            before = re.findall(r"'([^']+)'", line)
            releases = sorted([v for v in before
                               if v.split('.')[0] != series] + [version],
                              key=core.version_key)
            lines[index] = _noqa('RELEASES: tuple[str, ...] = (%s)' % (
                ', '.join(repr(v) for v in releases)))
    out: list[str] = []
    seen: set[str] = set()
    source: str | None = None
    added = False
    comment: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        found = _SOURCE.match(line)
        hash_line = _HASH.match(line)
        if found:
            source, added = found.group(1), False
            seen.add(source)
        elif source is not None and line.startswith('        #'):
            comment.append(line)
            index += 1
            continue
        elif source is not None and hash_line:
            digest = hash_line.group(1)
            having = {v for v in core.releases_having(
                re.findall(r"'([^']+)'", lines[index + 1]), before)
                if v.split('.')[0] != series}
            if hashes.get(source) == digest:
                having.add(version)
                added = True
            if having:
                out.extend(comment)
                out.append(line)
                out.append(_versions_line(
                    core.releases_entry(having, releases)))
            comment = []
            index += 2
            continue
        elif source is not None and line == '    },':
            if source in hashes and not added:
                out.append('        # nova %s: what differs, and why what '
                           'its part relies on holds.' % series)
                out.append("        %r:" % hashes[source])
                out.append(_versions_line(
                    core.releases_entry([version], releases)))
            source = None
        elif line == '}' and source is None and seen:
            for name in hashes:
                if name not in seen:
                    out.append(_noqa('    %r: {' % name))
                    out.append("        %r:" % hashes[name])
                    out.append(_versions_line(
                        core.releases_entry([version], releases)))
                    out.append('    },')
            seen = set()
        out.append(line)
        index += 1
    return '\n'.join(out)


def _table_path() -> str:
    """The installed table's file (``nova_cellsched/compat/sources.py``)."""
    from nova_cellsched.compat import sources

    return str(sources.__file__)


def _where(filename: str, line: int) -> str:
    """*filename* from its ``sys.path`` entry (``nova/context.py``)."""
    roots = sorted((os.path.join(os.path.abspath(p), '') for p in sys.path
                    if p), key=len, reverse=True)
    for root in roots:
        if filename.startswith(root):
            return '%s:%d' % (filename[len(root):], line)
    return '%s:%d' % (filename, line)


def source_texts(names: Iterable[str]) -> dict[str, Any]:
    """The running nova's text of each relied-on source in *names*.

    What a maintainer reads, not what is hashed: code as it is in its
    file (:func:`.hashing.code_source`), a plain value pretty-printed.

    :returns: ``{"nova": version, "sources": {name: {"text", "where",
        "hash"}}}``; a source that is missing or cannot be read has
        ``{"error": why}`` instead.
    :raises BadInput: a name is no relied-on source.
    """
    by_name = {s.name: s for s in parts_mod.all_sources()}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise BadInput('expected relied-on sources (nova_cellsched/compat/'
                       'parts.py), got %s' % ', '.join(unknown))
    core.nova_chooses_threads()
    found: dict[str, dict[str, str]] = {}
    for name in names:
        try:
            value = core._value(by_name[name])
        except (ImportError, AttributeError) as exc:
            found[name] = {'error': '%s is missing (%s)' % (name, exc)}
            continue
        try:
            digest = hashing.source_hash(value)
            code = hashing.code_source(value)
        except (OSError, TypeError) as exc:
            found[name] = {'error': 'the source of %s cannot be read (%s)'
                           % (name, exc)}
            continue
        if code is None:
            shown = sorted(value) if isinstance(value, (set, frozenset)) \
                else value
            text, where = pprint.pformat(shown, width=72) + '\n', 'a value'
        else:
            text, where = code[0], _where(code[1], code[2])
        found[name] = {'text': text, 'where': where, 'hash': digest}
    return {'nova': hashing.nova_version(), 'sources': found}


#: Run by the tested side's Python: this checkout's ``nova_cellsched``
#: and ``cellsched_tools`` packages (not its directory's others), nova
#: and the libraries from that Python's own environment. argv: the
#: checkout's directory, then the source names.
_TESTED_SIDE = """
import importlib.util, os, sys
top = sys.argv[1]
for name in ('nova_cellsched', 'cellsched_tools'):
    package = os.path.join(top, name)
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(package, '__init__.py'),
        submodule_search_locations=[package])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
from cellsched_tools import maintainer
sys.exit(maintainer.main(['--source-texts'] + sys.argv[2:]))
"""


def tested_texts(python: str, names: Sequence[str]) -> dict[str, Any]:
    """:func:`source_texts` of *names* as *python*'s nova has them.

    *python* is the interpreter of another virtualenv (one with a tested
    nova); it runs this checkout's ``nova_cellsched``, its own nova.

    :raises BadInput: *python* does not run, or fails (its last line).
    """
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        result = subprocess.run(  # noqa: S603 - the maintainer's Python
            [python, '-c', _TESTED_SIDE, top] + list(names),
            capture_output=True, text=True, timeout=TESTED_SIDE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadInput('expected --tested-python to be the Python of a '
                       'virtualenv with a tested nova, got %s (%s)'
                       % (python, exc))
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        said = (result.stderr.strip().splitlines() or ['no output'])[-1]
        raise BadInput('expected --tested-python %s to read its nova\'s '
                       'sources, it exited %d: %s'
                       % (python, result.returncode, said))
    try:
        answer: dict[str, Any] = json.loads(lines[-1])
    except ValueError:
        raise BadInput('expected --tested-python %s to answer one JSON '
                       'line, got %r' % (python, lines[-1][:200]))
    return answer


def side_by_side(name: str, tested: dict[str, str], tested_label: str,
                 running: dict[str, str], running_label: str) -> str:
    """A unified diff of *name*: the tested text (``-``), the running one.

    *tested* and *running* are :func:`source_texts` entries; a missing
    one (``error``) is an empty side, its reason in the header.
    """
    def side(entry: dict[str, str], label: str) -> tuple[list[str], str]:
        if 'error' in entry:
            return [], '%s: %s' % (label, entry['error'])
        return (entry['text'].splitlines(keepends=True),
                '%s %s' % (label, entry['where']))

    old, old_label = side(tested, tested_label)
    new, new_label = side(running, running_label)
    lines = list(difflib.unified_diff(old, new, old_label, new_label))
    if not lines and not old:
        return '(%s: on neither side: %s; %s)\n' % (name, old_label,
                                                    new_label)
    if not lines:
        return ('(%s: the same text on both sides; the tested side\'s '
                'nova is not as its table has it)\n' % name)
    return ''.join(line if line.endswith('\n') else line + '\n'
                   for line in lines)


def relied_on(name: str) -> list[tuple[str, str]]:
    """(part, what it relies on *name* for), each part relying on it."""
    return [(part.name, source.why) for part in parts_mod.PARTS
            for source in part.sources if source.name == name]


def parts_off(changed: Iterable[str],
              releases: Sequence[core.Release]) -> dict[str, str]:
    """The parts that would be off on the running nova, and why.

    What :func:`.core.check` finds against *releases*, as
    ``nova-cellsched check`` does: a part is off when a source of it is
    in *changed* (equals no version of *releases*; counted), when a
    part it requires is off, when its sources equal no one release,
    when the releases its sources equal all lack it
    (:func:`.core.lacking`), or when one of its checks (a library's
    behaviour, a signature, the thread model) fails.
    """
    changed = set(changed)
    found = core.check(releases=releases)
    off: dict[str, str] = {}
    for part in parts_mod.PARTS:
        differing = [s.name for s in part.sources if s.name in changed]
        required = [name for name in part.requires if name in off]
        if differing:
            off[part.name] = '%d relied-on source%s differ%s' % (
                len(differing), '' if len(differing) == 1 else 's',
                's' if len(differing) == 1 else '')
        elif required:
            off[part.name] = 'requires %s' % ', '.join(required)
        elif found[part.name]:
            off[part.name] = '; '.join(found[part.name])
    return off


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description="What of nova's relied-on sources differs "
        'on the running nova, and the table with it added.')
    parser.add_argument(
        '--tested-python', metavar='PYTHON',
        help='Python of a virtualenv with a tested nova (e.g. the default '
             "venv's .venv/bin/python, nova 34): each differing source is "
             "shown beside that nova's text of it.")
    parser.add_argument(
        '--against', metavar='MAJOR', type=int,
        help='Compare with that tested release alone (e.g. 34), as if it '
             'were the only one; default: every tested release.')
    parser.add_argument(
        '--table', metavar='PATH',
        help='Write the table of relied-on sources with the running '
             "nova's added (nova_cellsched/compat/sources.py) there "
             'instead of printing it.')
    parser.add_argument(
        '--source-texts', nargs='*', metavar='NAME',
        help='Print the running nova\'s text of these relied-on sources '
             'as one JSON line, and nothing else (what --tested-python '
             'runs on the tested side).')
    return parser


class _OnlyReading(logging.Filter):
    """Drops nova 31's warning that modules came before eventlet's patch.

    nova 31.3.1 ``nova/monkey_patch.py:61-69`` logs it (a WARNING, on
    stderr before logging is configured) when ``oslo_context`` was
    imported before the patch, and says it "can usually be ignored if the
    caller is only importing and not executing nova code": this command
    reads nova's sources and runs none of them. Without the filter it was
    the first of two lines of every bad-input error on nova 31.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(
            'Modules with known eventlet monkey patching issues')


def main(argv: Sequence[str] | None = None,
         write: Callable[[str], Any] = sys.stdout.write) -> int:
    """Print what changed and the running nova's table.

    Exit 0 if the running nova is a tested release with exactly its
    tested sources, 1 otherwise, 2 on bad input (one line on stderr).
    """
    # futurist (under nova's database code) imports eventlet when it is
    # installed, and eventlet warns on import: not this command's news.
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    reading = _OnlyReading()
    nova_log = logging.getLogger('nova.monkey_patch')
    nova_log.addFilter(reading)
    try:
        return _main(_parser().parse_args(argv), write)
    except BadInput as exc:
        sys.stderr.write('%s: error: %s\n' % (PROG, exc))
        return 2
    finally:
        nova_log.removeFilter(reading)


def _main(args: argparse.Namespace, write: Callable[[str], Any]) -> int:
    if args.source_texts is not None:
        write(json.dumps(source_texts(args.source_texts)) + '\n')
        return 0
    releases = core.tested()
    if args.against is not None:
        releases = tuple(r for r in releases
                         if r.version.split('.')[0] == str(args.against))
        if not releases:
            raise BadInput('expected --against to name a tested nova major '
                           'release (one of %s), got %d' % (
                               ', '.join(r.version.split('.')[0]
                                         for r in core.tested()),
                               args.against))
    if args.tested_python and shutil.which(args.tested_python) is None:
        raise BadInput('expected --tested-python to be the Python of a '
                       'virtualenv with a tested nova (e.g. .venv/bin/'
                       'python), got %s: no such program'
                       % args.tested_python)
    version = hashing.nova_version()
    hashes, unreadable = current()
    by_name = {s.name: s for s in parts_mod.all_sources()}
    changed = [name for name in by_name if name not in hashes] + [
        name for name, digest in hashes.items()
        if not any(r.hashes.get(name) == digest for r in releases)]
    theirs = None
    if args.tested_python:
        # Asked before anything is written: a tested side that cannot
        # answer is bad input whether or not anything differs.
        theirs = tested_texts(args.tested_python, changed)
        if theirs['nova'] not in {r.version for r in releases}:
            raise BadInput(
                'expected --tested-python to run a tested nova (%s), got '
                'nova %s in %s' % (', '.join(r.version for r in releases),
                                   theirs['nova'], args.tested_python))
    with open(_table_path()) as handle:
        table = table_text(version, hashes, handle.read())
    if args.table:
        try:
            with open(args.table, 'w') as handle:
                handle.write(table)
        except OSError as exc:
            raise BadInput('expected --table to be a file to write, got %s '
                           '(%s)' % (args.table, exc.strerror))
    for line in unreadable:
        write('ERROR: %s\n' % line)
    known = {r.version: r.hashes for r in releases}.get(version)
    write('# nova %s against tested nova %s: %d of %d relied-on sources '
          'equal no tested version\n'
          % (version, ', '.join(r.version for r in releases) or 'none',
             len(changed), len(by_name)))
    for name in changed:
        write('#   %s (part %s; relied on: %s)\n'
              % (name, ', '.join(part for part, _why in relied_on(name)),
                 by_name[name].why))
    off = parts_off(changed, releases)
    write('# parts off on nova %s: %s\n' % (version, '; '.join(
        '%s (%s)' % item for item in off.items()) or 'none'))
    if theirs is not None and changed:
        _write_side_by_side(theirs, changed, version, write)
    destination = 'nova_cellsched/compat/sources.py'
    if args.table:
        write('# The table with nova %s: %s (save as %s once the tests '
              'pass)\n' % (version, args.table, destination))
    else:
        write('# Save as %s once the tests pass:\n' % destination)
        write(table)
    return 0 if not unreadable and known == hashes else 1


def _write_side_by_side(theirs: dict[str, Any], changed: Sequence[str],
                        version: str, write: Callable[[str], Any]) -> None:
    """Each changed source beside the tested side's text of it.

    *theirs*: :func:`tested_texts` of *changed*.
    """
    ours = source_texts(changed)['sources']
    tested_version = theirs['nova']
    table = {r.version: r for r in core.tested()}[tested_version].hashes
    for name in changed:
        tested = theirs['sources'][name]
        write('\n## %s\n' % name)
        for part, why in relied_on(name):
            write('#  part %s relies on it for: %s\n' % (part, why))
        if 'hash' in tested and tested['hash'] != table.get(name):
            write('#  (nova %s of the tested side is not as its table has '
                  'it: hash %s, the table\'s %s)\n' % (
                      tested_version, tested['hash'][:16],
                      (table.get(name) or 'none')[:16]))
        write(side_by_side(name, tested, 'nova %s (tested)' % tested_version,
                           ours[name], 'nova %s' % version))
    write('\n')


if __name__ == '__main__':
    sys.exit(main())
