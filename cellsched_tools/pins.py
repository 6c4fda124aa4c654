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

"""Write a nova release's pin file from openstack/requirements.

In a checkout of this repository, with one of openstack/requirements::

    python -m cellsched_tools.pins 35 --requirements PATH
        [--ref stable/2027.1] [--nova 35.0.0] [--placement 17.0.0]

writes ``tools/releases/nova35.txt`` (``tools/nova-release-venv``'s
constraints for that release): the libraries of a template pin file
(the newest other ``tools/releases/novaNN.txt``), in its order and
sections, each at the version ``upper-constraints.txt`` names at *ref*
(default: the release's branch, ``stable/2027.1``, else ``master``, as
before a release's branch is cut), under the header every pin file
has, naming the commit read. nova and placement are services, not in
upper-constraints: their newest point release of the series on the
package index (``pip index versions``), unless given.
``tools/nova-release-check`` runs it for a release with no pin file.

Exit status: 0 written; 1 written, but a library of the template is not
in upper-constraints (its line says so: pin it by hand or drop it); 2 on
bad input (one line on stderr).
"""

import argparse
from collections.abc import Sequence
import dataclasses
import os
import re
import subprocess
import sys
from typing import NoReturn

from packaging import markers
from packaging import utils
from packaging import version as packaging_version

PROG = 'python -m cellsched_tools.pins'
REQUIREMENTS_REPO = 'NOVA_CELLSCHED_REQUIREMENTS_REPO'

#: OpenStack's series names (openstack/releases); a newer one is given
#: with --series-name.
SERIES_NAMES = {
    '2025.1': 'Epoxy',
    '2025.2': 'Flamingo',
    '2026.1': 'Gazpacho',
    '2026.2': 'Hibiscus',
}

#: The services of the pin file: not in upper-constraints.
NOVA = 'nova'
PLACEMENT = 'openstack-placement'

HEADER = """\
# nova {major}.x ({series}): its newest point release,
# nova {nova}, and the versions of the libraries its deployments run,
# as constraints (pip -c) for tools/nova-release-venv {major} and
# tests/functional/test_install.py.
#
# Not a copy: each version was read from openstack/requirements
# upper-constraints.txt (what devstack, kolla and openstack-ansible install
# that nova with) at
#
# upper-constraints: {branch} {commit} ({date})
#
# Only the libraries this plugin and its tests use, directly or through
# nova, and whose version differs between the supported releases (Routes,
# Paste, PasteDeploy, os-resource-classes and wsgi_intercept are the same
# on all four and the newest on the package index). Where a library has
# two pins, the one for Python >= 3.10. nova and placement are services,
# not in upper-constraints: the newest point release of the series.
# python -m cellsched_tools.pins {major} --ref COMMIT writes this
# file again; a pin changed by hand says why on its line. With a
# checkout of openstack/requirements at hand, test_install.py checks
# every pin against the commit above (NOVA_CELLSCHED_REQUIREMENTS_REPO).
"""

_PIN = re.compile(r'^([A-Za-z0-9_.-]+)==([^\s#]+)\s*(#.*)?$')


class BadInput(Exception):
    """One line saying what was expected and what was got: exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BadInput('%s (%s --help lists the options)' % (message, PROG))


def series(major: int) -> str:
    """nova *major*'s series: two a year since 2023.1, nova 27."""
    return '%d.%d' % (2025 + (major - 31) // 2, (major - 31) % 2 + 1)


def placement_major(major: int) -> int:
    """The placement major release of nova *major*'s series."""
    return major - 18


def series_title(major: int, name: str | None = None) -> str:
    """``2026.1 Gazpacho, SLURP``: the series, its name, SLURP or not.

    Every ``.1`` release since 2023.1 is SLURP (upgraded to from the
    previous one, skipping a release).
    """
    number = series(major)
    name = name or SERIES_NAMES.get(number)
    title = '%s %s' % (number, name) if name else number
    return title + (', SLURP' if number.endswith('.1') else '')


def upper_constraints(text: str) -> dict[str, str]:
    """canonical name -> version of ``upper-constraints.txt``'s lines.

    Of a library with two pins (``numpy===2.0.0;python_version=='3.9'``),
    the one whose environment marker this Python meets.
    """
    found = {}
    for line in text.splitlines():
        match = re.match(r'^([A-Za-z0-9_.-]+)===([^;\s]+)\s*(?:;(.*))?$',
                         line.strip())
        if not match:
            continue
        if match.group(3) and not markers.Marker(match.group(3)).evaluate():
            continue
        found[utils.canonicalize_name(match.group(1))] = match.group(2)
    return found


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """``upper-constraints.txt`` at one commit of openstack/requirements.

    :ivar branch: the branch it is read from, as the header names it.
    :ivar commit: its full hash.
    :ivar date: its commit date, ``YYYY-MM-DD``.
    :ivar text: the file.
    :ivar note: what to tell the maintainer (the branch was not there).
    """

    branch: str
    commit: str
    date: str
    text: str
    note: str | None = None


def _git(repo: str, *argv: str) -> str | None:
    result = subprocess.run(  # noqa: S603 - git, on the given checkout
        ['git', '-C', repo] + list(argv), capture_output=True, text=True,
        timeout=120)
    return result.stdout.strip() if result.returncode == 0 else None


def _resolve(repo: str, ref: str) -> str | None:
    for candidate in (ref, 'origin/' + ref):
        commit = _git(repo, 'rev-parse', '--verify', '--quiet',
                      candidate + '^{commit}')
        if commit:
            return commit
    return None


def _branch_of(repo: str, commit: str, wanted: str) -> str:
    """The branch the header names for *commit*.

    *wanted* if it has the commit, else master if it has it, else the
    first branch that has it.
    """
    listed = _git(repo, 'for-each-ref', '--contains', commit,
                  '--format=%(refname:short)', 'refs/heads', 'refs/remotes')
    branches = []
    for name in (listed or '').splitlines():
        name = name.removeprefix('origin/')
        if name not in branches and name != 'HEAD' and name != 'origin':
            branches.append(name)
    for choice in (wanted, 'master'):
        if choice in branches:
            return choice
    return branches[0] if branches else commit[:12]


def check_repository(repo: str) -> None:
    """:raises BadInput: *repo* is no git repository."""
    if _git(repo, 'rev-parse', '--git-dir') is None:
        raise BadInput('expected a checkout (or bare mirror) of '
                       'openstack/requirements, got %s: not a git '
                       'repository' % repo)


def read_snapshot(repo: str, major: int, ref: str | None = None
                  ) -> Snapshot:
    """upper-constraints at *ref* of the openstack/requirements at *repo*.

    *ref*: a branch or commit; default ``stable/<series of major>``,
    else ``master`` (the newest release before its branch is cut).
    A bare mirror or a clone (``origin/<branch>``) will do.

    :raises BadInput: *repo* is no git repository, or has no *ref*, or
        no upper-constraints.txt there.
    """
    check_repository(repo)
    branch = 'stable/%s' % series(major)
    note = None
    if ref is None:
        ref = branch if _resolve(repo, branch) else 'master'
        if ref == 'master':
            note = '%s has no %s yet: reading master' % (repo, branch)
    commit = _resolve(repo, ref)
    if commit is None:
        raise BadInput('expected a branch or commit of %s, got %r'
                       % (repo, ref))
    text = _git(repo, 'show', '%s:upper-constraints.txt' % commit)
    if text is None:
        raise BadInput('expected upper-constraints.txt at %s of %s, found '
                       'none' % (ref, repo))
    label = ref.removeprefix('origin/')
    if label == commit or commit.startswith(label):
        label = _branch_of(repo, commit, branch)
    date = _git(repo, 'log', '-1', '--format=%cd', '--date=short', commit)
    return Snapshot(label, commit, date or 'unknown', text + '\n', note)


def newest_on_index(project: str, major: int) -> str:
    """*project*'s newest *major*.x release on the package index.

    Asks pip (``pip index versions``), as an install would ask.

    :raises BadInput: there is none, or pip cannot say.
    """
    result = subprocess.run(  # noqa: S603 - this Python's pip
        [sys.executable, '-m', 'pip', 'index', 'versions', project,
         '--disable-pip-version-check'],
        capture_output=True, text=True, timeout=300)
    listed = re.search(r'^Available versions: (.*)$', result.stdout, re.M)
    found = []
    for text in (listed.group(1).split(', ') if listed else ()):
        try:
            parsed = packaging_version.Version(text)
        except packaging_version.InvalidVersion:
            continue
        if parsed.major == major and not parsed.is_prerelease:
            found.append(parsed)
    if not found:
        option = '--nova' if project == NOVA else '--placement'
        raise BadInput('expected a %d.x release of %s on the package '
                       'index (pip index versions %s), found none; give %s '
                       'VERSION' % (major, project, project, option))
    return str(max(found))


def render(major: int, template: str, snapshot: Snapshot, nova: str,
           placement: str, series_name: str | None = None
           ) -> tuple[str, list[str]]:
    """nova *major*'s pin file, and the template's libraries not pinned.

    The template's body (all after its header, the first comment block)
    is kept line for line, each pin set to upper-constraints' version
    (comments after a pin dropped: they were about the template's
    release); a library upper-constraints lacks becomes a comment
    saying so.
    """
    upper = upper_constraints(snapshot.text)
    lines = template.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if not line.startswith('#')), len(lines))
    out = [HEADER.format(
        major=major, series=series_title(major, series_name), nova=nova,
        branch=snapshot.branch, commit=snapshot.commit,
        date=snapshot.date).rstrip('\n')]
    unpinned = []
    for line in lines[start:]:
        match = _PIN.match(line)
        if not match:
            out.append(line)
            continue
        name = match.group(1)
        key = utils.canonicalize_name(name)
        pinned = {NOVA: nova, PLACEMENT: placement}.get(key, upper.get(key))
        if pinned is None:
            unpinned.append(name)
            out.append('# %s: not in upper-constraints at %s (pin it by '
                       'hand, saying why, or drop it)'
                       % (name, snapshot.commit[:12]))
        else:
            out.append('%s==%s' % (name, pinned))
    return '\n'.join(out) + '\n', unpinned


def releases_dir() -> str:
    """``tools/releases`` of the checkout this package runs from."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(top, 'tools', 'releases')


def default_template(major: int, directory: str) -> str:
    """The newest pin file in *directory* but nova *major*'s own.

    :raises BadInput: there is none.
    """
    found = []
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            match = re.match(r'^nova(\d+)\.txt$', name)
            if match and int(match.group(1)) != major:
                found.append((int(match.group(1)), name))
    if not found:
        raise BadInput('expected a pin file (novaNN.txt) in %s to take the '
                       'libraries from, found none; give --template FILE'
                       % directory)
    return os.path.join(directory, max(found)[1])


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description="Write tools/releases/novaNN.txt from "
        "openstack/requirements' upper-constraints.txt.")
    parser.add_argument('major', metavar='NN', help='nova major release, '
                        'e.g. 35 (2027.1)')
    parser.add_argument(
        '--requirements', metavar='PATH',
        default=os.environ.get(REQUIREMENTS_REPO),
        help='A checkout or bare mirror of openstack/requirements '
             '(default $%s).' % REQUIREMENTS_REPO)
    parser.add_argument(
        '--ref', help='Its branch or commit to read (default '
                      'stable/<series>, else master).')
    parser.add_argument('--nova', metavar='VERSION', help='Default: the '
                        'newest NN.x on the package index.')
    parser.add_argument('--placement', metavar='VERSION', help='Default: '
                        'the newest of the series on the package index.')
    parser.add_argument('--series-name', metavar='NAME', help='e.g. '
                        'Gazpacho (known up to 2026.2).')
    parser.add_argument('--template', metavar='FILE', help='The pin file '
                        'whose libraries and sections to keep (default: '
                        'the newest other tools/releases/novaNN.txt).')
    parser.add_argument('--output', metavar='FILE', help='Default: '
                        'tools/releases/novaNN.txt; - for stdout.')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Write the pin file; the exit status (module docstring)."""
    try:
        return _main(_parser().parse_args(argv))
    except BadInput as exc:
        sys.stderr.write('%s: error: %s\n' % (PROG, exc))
        return 2


def _main(args: argparse.Namespace) -> int:
    if not re.fullmatch(r'[1-9][0-9]', args.major):
        raise BadInput('expected a nova major release such as 35, got %r'
                       % args.major)
    major = int(args.major)
    if not args.requirements:
        raise BadInput('expected a checkout of openstack/requirements '
                       '(--requirements PATH or $%s), got none'
                       % REQUIREMENTS_REPO)
    template = args.template or default_template(major, releases_dir())
    try:
        with open(template) as handle:
            template_text = handle.read()
    except OSError as exc:
        raise BadInput('expected a pin file as --template, got %s (%s)'
                       % (template, exc.strerror))
    snapshot = read_snapshot(args.requirements, major, args.ref)
    nova = args.nova or newest_on_index(NOVA, major)
    placement = args.placement or newest_on_index(
        PLACEMENT, placement_major(major))
    # Said once the input is good: bad input stays one line.
    if snapshot.note:
        sys.stderr.write('%s: %s\n' % (PROG, snapshot.note))
    text, unpinned = render(major, template_text, snapshot, nova, placement,
                            args.series_name)
    output = args.output or os.path.join(releases_dir(),
                                         'nova%d.txt' % major)
    if output == '-':
        sys.stdout.write(text)
    else:
        with open(output, 'w') as handle:
            handle.write(text)
        sys.stderr.write('%s: wrote %s: nova %s, placement %s, the '
                         'libraries of %s at %s %s (%s)\n' % (
                             PROG, output, nova, placement,
                             os.path.basename(template), snapshot.branch,
                             snapshot.commit[:12], snapshot.date))
    if unpinned:
        sys.stderr.write('%s: not in upper-constraints at %s: %s (their '
                         'lines say so)\n' % (PROG, snapshot.commit[:12],
                                              ', '.join(unpinned)))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
