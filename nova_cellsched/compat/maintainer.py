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

    python -m nova_cellsched.compat.maintainer

It prints, for each relied-on source (:data:`.parts.PARTS`) that equals
no version in the tested releases' tables, what each part relies on it
for, then the table of the running nova as a ``sources_nova<N>.py``
module. Read each changed source against what it is relied on for,
adapt the release's adapter (``nova<N>.py``) if needed, run the tests,
and save the printed module as
``nova_cellsched/compat/sources_nova<N>.py`` (the newest point release
of each series).
"""

from collections.abc import Callable, Sequence
import sys
from typing import Any

from nova_cellsched.compat import core
from nova_cellsched.compat import hashing
from nova_cellsched.compat import parts as parts_mod


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


def module_text(version: str, hashes: dict[str, str]) -> str:
    """A ``sources_nova<N>.py`` for *version*, as Python source."""
    series = version.split('.')[0]
    lines = [
        '# Licensed under the Apache License, Version 2.0 (the "License");'
        ' you may',
        '# not use this file except in compliance with the License. You '
        'may obtain',
        '# a copy of the License at',
        '#',
        '#      http://www.apache.org/licenses/LICENSE-2.0',
        '#',
        '# Unless required by applicable law or agreed to in writing, '
        'software',
        '# distributed under the License is distributed on an "AS IS" '
        'BASIS, WITHOUT',
        '# WARRANTIES OR CONDITIONS OF ANY KIND, either express or '
        'implied. See the',
        '# License for the specific language governing permissions and '
        'limitations',
        '# under the License.',
        '',
        '"""The relied-on sources as tested with nova %s.' % version,
        '',
        'Printed by ``python -m nova_cellsched.compat.maintainer``; data '
        'only.',
        '"""',
        '',
        'RELEASE = %r' % version,
        'ADAPTER = %r' % ('nova%s' % series),
        '',
        '#: :attr:`.parts.Source.name` -> :func:`.hashing.source_hash`.',
        'HASHES: dict[str, str] = {',
    ]
    for name, digest in hashes.items():
        lines.append('    %r:' % name)
        lines.append('        %r,' % digest)
    lines.append('}')
    return '\n'.join(lines) + '\n'


def main(argv: Sequence[str] | None = None,
         write: Callable[[str], Any] = sys.stdout.write) -> int:
    """Print what changed and the running nova's table.

    Exit 0 if the running nova is a tested release with exactly its
    tested sources, 1 otherwise.
    """
    version = hashing.nova_version()
    hashes, unreadable = current()
    for line in unreadable:
        write('ERROR: %s\n' % line)
    releases = core.tested()
    known = {r.version: r.hashes for r in releases}.get(version)
    by_name = {s.name: s for s in parts_mod.all_sources()}
    users: dict[str, list[str]] = {}
    for part in parts_mod.PARTS:
        for source in part.sources:
            users.setdefault(source.name, []).append(part.name)
    changed = [name for name, digest in hashes.items()
               if not any(r.hashes.get(name) == digest for r in releases)]
    write('# nova %s against tested nova %s: %d of %d relied-on sources '
          'equal no tested version\n'
          % (version, ', '.join(r.version for r in releases) or 'none',
             len(changed), len(hashes)))
    for name in changed:
        write('#   %s (part %s; relied on: %s)\n'
              % (name, ', '.join(users[name]), by_name[name].why))
    write('# Save as nova_cellsched/compat/sources_nova%s.py once the '
          'tests pass:\n' % version.split('.')[0])
    write(module_text(version, hashes))
    return 0 if not unreadable and known == hashes else 1


if __name__ == '__main__':
    sys.exit(main())
