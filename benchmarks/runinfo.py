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

"""What every benchmark results file starts with, and no local paths.

Results in ``benchmarks/results/`` are published with the repository:
they say what ran (command, date, versions, commit) but never where on
the machine it ran. :func:`run_info` gives the common header;
:func:`public_args` and :func:`scrub` take the machine's paths out of a
command line and of text (profiles) before it is written.

Light on purpose (no nova import): ``bench_startup.py`` uses it too.
"""

import datetime
from importlib import metadata
import os
import platform
import subprocess
import sys
import sysconfig
from typing import Any

#: The checkout the benchmarks belong to.
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The pin files of the nova releases (``tools/releases/novaNN.txt``).
RELEASES = os.path.join(TOP, 'tools', 'releases')


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def commit(checkout: str = TOP) -> str | None:
    """The short commit of *checkout* (``+`` when it has local changes)."""
    try:
        rev = subprocess.run(['git', '-C', checkout, 'rev-parse', '--short',
                              'HEAD'], capture_output=True, text=True,
                             timeout=30)
        dirty = subprocess.run(['git', '-C', checkout, 'status',
                                '--porcelain', '--untracked-files=no'],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ('+' if dirty.stdout.strip() else '')


def _replacements() -> list[tuple[str, str]]:
    """Local path prefixes, longest first, and what stands for them."""
    pairs = []
    for key in ('purelib', 'platlib'):
        pairs.append((sysconfig.get_paths()[key], '<site-packages>'))
    pairs += [(sys.prefix, '<venv>'), (sys.base_prefix, '<python>'),
              (TOP, '<checkout>')]
    try:
        import nova_cellsched
        pairs.append((os.path.dirname(os.path.dirname(os.path.abspath(
            nova_cellsched.__file__))), '<checkout>'))
    except ImportError:
        pass
    pairs.append((os.path.expanduser('~'), '~'))
    seen = {}
    for path, token in pairs:
        path = os.path.abspath(path)
        if path not in ('/', '') and path not in seen:
            seen[path] = token
    return sorted(seen.items(), key=lambda kv: -len(kv[0]))


def scrub(text: str) -> str:
    """*text* with the machine's paths replaced by placeholders.

    The virtualenv's site-packages become ``<site-packages>``, the venv
    ``<venv>``, the Python installation ``<python>``, this checkout (and
    the one ``nova_cellsched`` is imported from) ``<checkout>``, the home
    directory ``~``.
    """
    for path, token in _replacements():
        text = text.replace(path + os.sep, token + '/')
        text = text.replace(path, token)
    return text


def public_args(args: list[str]) -> list[str]:
    """A command line as it may be published: no absolute local paths.

    A path inside this checkout becomes relative to it; any other
    absolute path keeps only its last component (``.../wt-before``).
    """
    out = []
    for arg in args:
        prefix, value = '', arg
        if arg.startswith('--') and '=' in arg:
            prefix, value = arg.split('=', 1)
            prefix += '='
        if os.path.isabs(value):
            path = os.path.abspath(value)
            if path == TOP or path.startswith(TOP + os.sep):
                value = os.path.relpath(path, TOP)
            else:
                value = '.../' + os.path.basename(path.rstrip(os.sep))
        out.append(prefix + value)
    return out


def nova_major() -> int | None:
    """The installed nova's major release (34 for 34.0.0), or None."""
    version = _version('nova')
    return int(version.split('.')[0]) if version else None


def release_argument(argv: list[str], script: str = 'benchmark'
                     ) -> int | None:
    """The release ``--nova NN`` (or ``--nova=NN``) of *argv* asks for.

    :raises SystemExit: (exit status 2, one line) ``--nova`` without a
        release, or with one that has no pin file in ``tools/releases``.
    """
    value = None
    for number, arg in enumerate(argv):
        if arg == '--nova':
            if number + 1 == len(argv):
                value = ''
            else:
                value = argv[number + 1]
        elif arg.startswith('--nova='):
            value = arg.split('=', 1)[1]
    if value is None:
        return None
    known = sorted(int(name[4:-4]) for name in os.listdir(RELEASES)
                   if name.startswith('nova') and name.endswith('.txt')
                   and name[4:-4].isdigit())
    if not value.isdigit() or int(value) not in known:
        sys.stderr.write(
            '%s: error: --nova: expected a nova major release with a pin '
            'file in tools/releases (one of: %s), got %r\n'
            % (script, ', '.join(str(k) for k in known), value))
        raise SystemExit(2)
    return int(value)


def run_in_release(script: str, argv: list[str] | None = None) -> None:
    """Run *script* again in nova NN's virtualenv if ``--nova NN`` asks.

    Call it first thing, before nova is imported. With ``--nova NN``
    and another nova installed here, the process is replaced by the
    same command in ``tools/nova-release-bench NN`` (that release's
    venv, built on first use, with the benchmark requirements); with
    nova NN installed, or no ``--nova``, it returns.

    :param script: the script's file name in ``benchmarks/``.
    :raises SystemExit: (exit status 2) a bad ``--nova``, or a release
        venv whose nova is not the one asked for.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    release = release_argument(args, script)
    if release is None or release == nova_major():
        return
    if os.environ.get('NOVA_CELLSCHED_RELEASE_BENCH') == str(release):
        sys.stderr.write(
            '%s: error: --nova %d: expected nova %d in %s, got nova %s; '
            'remove that venv (tools/nova-release-venv builds it again)\n'
            % (script, release, release, sys.prefix, _version('nova')))
        raise SystemExit(2)
    env = dict(os.environ, NOVA_CELLSCHED_RELEASE_BENCH=str(release))
    bench = os.path.join(TOP, 'tools', 'nova-release-bench')
    os.execve(bench, [bench, str(release), 'python',
                      os.path.join(TOP, 'benchmarks', script)] + args, env)


def run_info(script: str, argv: list[str] | None) -> dict[str, Any]:
    """What every results file starts with: command, date, versions.

    :param script: the script's file name in ``benchmarks/``.
    :param argv: its arguments (``None``: ``sys.argv[1:]``).
    """
    args = sys.argv[1:] if argv is None else list(argv)
    return {
        'command': ' '.join(['python', 'benchmarks/' + script] +
                            public_args(args)),
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(),
        'commit': commit(),
        'nova': _version('nova'),
        'sqlalchemy': _version('SQLAlchemy'),
        'python': platform.python_version(),
        'machine': platform.machine(),
        'cpus': os.cpu_count(),
    }


def scrub_stats(stats: Any, text_scrub: Any = None) -> Any:
    """*stats* (a :class:`pstats.Stats`) with its file names scrubbed.

    Rewrites, in place, every ``(file, line, function)`` key of the
    profile and of its callers with :func:`scrub` (or *text_scrub*), so
    that a dumped ``.pstats`` file carries no local path either.
    """
    fix = text_scrub or scrub

    def key(k: tuple[str, int, str]) -> tuple[str, int, str]:
        return (fix(k[0]), k[1], k[2])

    stats.stats = {
        key(func): (cc, nc, tt, ct, {key(c): v for c, v in callers.items()})
        for func, (cc, nc, tt, ct, callers) in stats.stats.items()}
    return stats

