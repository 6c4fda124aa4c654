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

"""One lock, one install, one restore, one check for every part.

Reads :data:`.parts.PARTS` and the table of the tested releases'
relied-on sources (:mod:`.sources`):

- :func:`check` says, per part, what differs from every tested nova: a
  relied-on source passes if it equals *any* tested version of it, so an
  untouched point release passes, and a changed source turns off only
  the parts that rely on it (and the parts that require those); but
  the part's sources together must equal one tested release's (else
  the nova is no tested release, and the part is off too);
- :func:`install` puts the parts that pass into nova, after the parts
  they require, and logs one WARNING per asked-for part that stays off,
  naming the nova function (or the library, :mod:`.checks`) and what
  to do;
- :func:`restore` gives nova back exactly the attributes it had;
- :func:`original` is nova's own of a replaced attribute, for the
  replacements that fall back to it.

What differs between the releases in nova-cellsched's calls on nova is
gated in one adapter (:mod:`.adapter`), on the installed nova's version.

A tested release may lack what a part needs (nova 31 and 32 validate no
server-list response, so the response validation has nothing to do):
its table says so (``LACKS``, part -> why). On a nova whose sources of
the part equal only such releases' versions the part stays off and says
why (:func:`lacking`), at INFO: nova's behaviour is the tested one.
"""

from collections.abc import Iterable, Iterator
import contextlib
import dataclasses
import functools
import importlib
import inspect
import sys
import threading
from typing import Any

from oslo_log import log as logging

from nova_cellsched.compat import hashing
from nova_cellsched.compat import parts as parts_mod

LOG = logging.getLogger(__name__)

#: Held while anything is installed or restored; re-entrant, so a check
#: run during an install may install a part for a while.
LOCK = threading.RLock()

HOW_TO_FIX = ('install the nova-cellsched release tested with this nova '
              '(maintainers: python -m cellsched_tools.maintainer, in '
              'a checkout, lists what changed)')


@dataclasses.dataclass(frozen=True)
class Release:
    """A tested nova release: its relied-on sources' hashes.

    :ivar version: nova's version, e.g. ``34.0.0``.
    :ivar hashes: :attr:`.Source.name` -> :func:`.hashing.source_hash`.
    :ivar lacks: part name -> why this release cannot have it (what of
        nova it lacks, what nova does instead).
    """

    version: str
    hashes: dict[str, str]
    lacks: dict[str, str] = dataclasses.field(default_factory=dict)


def version_key(version: str) -> tuple[int, ...]:
    """Orders releases: 34.10.0 after 34.9.0."""
    return tuple(int(part) if part.isdigit() else -1
                 for part in version.split('.'))


#: In a version's releases in :mod:`.sources`: and every later release.
LATER = 'later'


def releases_having(versions: Iterable[str],
                    releases: Iterable[str]) -> set[str]:
    """The *releases* a version of a source is in, by its table entry.

    *versions* lists releases, and ends with :data:`LATER` when every
    release after the last one listed has the version too.
    """
    listed = [v for v in versions if v != LATER]
    having = set(listed)
    if LATER in versions and listed:
        last = version_key(max(listed, key=version_key))
        having.update(r for r in releases if version_key(r) > last)
    return having


def releases_entry(having: Iterable[str],
                   releases: Iterable[str]) -> tuple[str, ...]:
    """*having* as a table entry: the run to the newest as :data:`LATER`.

    The inverse of :func:`releases_having`: the releases of *having*
    oldest first, those that run without a gap up to the newest of
    *releases* written as the first of them and :data:`LATER`, so that
    a new release with the same version changes no entry.
    """
    ordered = sorted(releases, key=version_key)
    having = set(having)
    run: list[str] = []
    for release in reversed(ordered):
        if release not in having:
            break
        run.insert(0, release)
    if not run:
        return tuple(sorted(having, key=version_key))
    older = sorted(having - set(run), key=version_key)
    return tuple(older) + (run[0], LATER)


@functools.lru_cache(maxsize=1)
def tested() -> tuple[Release, ...]:
    """Every tested release, oldest first (:mod:`.sources`)."""
    from nova_cellsched.compat import sources

    ordered = sorted(sources.RELEASES, key=version_key)
    hashes: dict[str, dict[str, str]] = {r: {} for r in ordered}
    for name, versions in sources.HASHES.items():
        for digest, entry in versions.items():
            for release in releases_having(entry, ordered):
                hashes[release][name] = digest
    return tuple(Release(release, hashes[release],
                         dict(sources.LACKS.get(release, {})))
                 for release in ordered)


def nova_chooses_threads() -> None:
    """Let nova choose its thread model before the check imports nova.

    nova's services import the package that chooses it first: nova 31's
    ``nova.api.openstack`` imports ``nova.monkey_patch`` (eventlet
    patched on import), nova 32's calls ``monkey_patch.patch()``
    (eventlet, or native threads with ``OS_NOVA_DISABLE_EVENTLET_PATCHING``,
    which selects oslo.service's backend). The relied-on sources are
    imported in declaration order, ``nova.db.main.api`` first, whose
    imports select oslo.service's default (eventlet) backend: in a plain
    interpreter (``python -m``, a script, a test runner) nova 32's
    later ``patch()`` then failed with ``BackendAlreadySelected``, and
    nova 31 and 32 patched eventlet while :data:`LOCK` was held. So,
    unless a nova entry point has chosen already (``nova.monkey_patch``
    imported, as in nova-api, nova-scheduler and ``nova-cellsched``),
    ``nova.api.openstack`` is imported first, as nova-api does; it
    chooses nothing on nova 33 and 34.
    """
    if 'nova.monkey_patch' not in sys.modules:
        importlib.import_module('nova.api.openstack')


# What is installed -------------------------------------------------------

@dataclasses.dataclass
class _Put:
    """One target while its part is on: how to take it out again."""

    target: parts_mod.Target
    owner: Any
    ours: Any
    had: bool = True
    original: Any = None


@dataclasses.dataclass
class _On:
    part: parts_mod.Part
    put: list[_Put]
    asked: bool


_ON: dict[str, _On] = {}
#: ``module.Class.attribute`` -> nova's own, while replaced.
_ORIGINALS: dict[str, Any] = {}


def is_on(name: str) -> bool:
    """Whether part *name* is installed in this process."""
    return name in _ON


def on() -> list[str]:
    """The parts installed in this process, in declaration order."""
    return [part.name for part in parts_mod.PARTS if part.name in _ON]


def original(owner: str, attribute: str) -> Any:
    """nova's own ``owner.attribute`` (a plain function, not a wrapper).

    While a part replaces it, the one it replaced; otherwise what nova
    has now. *owner* as in :class:`.parts.Swap`.
    """
    found = _ORIGINALS.get('%s.%s' % (owner.replace(':', '.'), attribute))
    if found is None:
        found = inspect.getattr_static(_owner(owner), attribute)
    if isinstance(found, (staticmethod, classmethod)):
        return found.__func__
    return found


def _owner(spec: str) -> Any:
    module, _, qualname = spec.partition(':')
    return hashing.resolve(module, qualname)


def _ours(spec: str) -> Any:
    module, _, name = spec.partition(':')
    if module == 'adapter':
        module = 'nova_cellsched.compat.adapter'
    return hashing.resolve(module, name)


# Checking ----------------------------------------------------------------

def _value(source: parts_mod.Source) -> Any:
    """The relied-on source as nova has it (its own while replaced)."""
    if source.name in _ORIGINALS:
        return _ORIGINALS[source.name]
    return hashing.resolve(source.module, source.path)


def source_problems(part: parts_mod.Part,
                    releases: Iterable[Release] | None = None
                    ) -> list[str]:
    """What of *part*'s sources equals no tested version of it.

    :returns: one line per source that is missing, unreadable or whose
        source is not one tested version of it, or one line naming the
        sources and the releases each equals when each equals a tested
        version but no one release has them all.
    """
    releases = tuple(tested() if releases is None else releases)
    return _match(part, releases)[0]


def releases_matching(names: Iterable[str]) -> list[str]:
    """The tested releases whose versions all sources of *names* equal.

    Oldest first; the parts *names* require count too.
    """
    releases = tested()
    fits = {r.version for r in releases}
    for name in _with_requirements(names):
        fits &= _match(parts_mod.BY_NAME[name], releases)[1]
    return [r.version for r in releases if r.version in fits]


def _match(part: parts_mod.Part, releases: tuple[Release, ...]
           ) -> tuple[list[str], set[str]]:
    """(:func:`source_problems`' problems, the releases all sources equal)."""
    problems = []
    fits = {r.version for r in releases}
    # Source -> the tested releases whose version of it it equals.
    equals: dict[str, set[str]] = {}
    for source in part.sources:
        try:
            value = _value(source)
        except (ImportError, AttributeError) as exc:
            problems.append('%s is missing (%s)' % (source.name, exc))
            fits.clear()
            continue
        try:
            digest = hashing.source_hash(value)
        except (OSError, TypeError) as exc:
            problems.append('the source of %s cannot be read (%s)'
                            % (source.name, exc))
            fits.clear()
            continue
        known = [(r.version, r.hashes[source.name]) for r in releases
                 if source.name in r.hashes]
        matching = {version for version, h in known if h == digest}
        fits &= matching
        if matching:
            equals[source.name] = matching
            continue
        if not known:
            problems.append('%s has no tested hash' % source.name)
            continue
        signature = (hashing.signature(value)
                     if inspect.isfunction(value) else '')
        by_hash: dict[str, list[str]] = {}
        for version, h in known:
            by_hash.setdefault(h, []).append(version)
        problems.append(
            '%s%s: source differs from the tested ones (sha256 expected %s, '
            'found %s; relied on: %s)'
            % (source.name, signature,
               ' or '.join('%s (nova %s)' % (h[:16], ', '.join(versions))
                           for h, versions in by_hash.items()),
               digest[:16], source.why))
    if not problems and equals and not fits:
        problems.append(_no_one_release(equals, releases))
    return problems, fits


def _no_one_release(equals: dict[str, set[str]],
                    releases: tuple[Release, ...]) -> str:
    """The problem of sources that each equal a tested release, not one.

    Such a nova is no tested release (a backport of one function, or a
    mix of two releases' files): what the part puts in was tested with
    each release's sources together, never with such a mix, so the part
    stays off. Names each
    source that some tested release does not share, and the releases
    whose version of it it equals.
    """
    every = {r.version for r in releases}
    order = {r.version: version_key(r.version) for r in releases}
    telling = ['%s equals nova %s' % (
        name, ', '.join(sorted(versions, key=order.__getitem__)))
        for name, versions in equals.items() if versions != every]
    return ('its sources each equal a tested nova release but no one '
            'release has them all, so this nova is no tested release: %s'
            % '; '.join(telling))


def lacking(name: str, releases: Iterable[Release] | None = None
            ) -> str | None:
    """Why part *name* cannot be on this nova, if its release lacks it.

    Only when the part's sources all equal tested versions and every
    tested release they equal lists the part in its ``LACKS``: such a
    nova is known to lack what the part needs (a microversion, a
    decorator, a field), and nova's own behaviour is the right one.

    :returns: one line naming the running nova and the reason; None
        when the part may be on (or differs from every tested release,
        which :func:`source_problems` reports).
    """
    releases = tuple(tested() if releases is None else releases)
    problems, fits = _match(parts_mod.BY_NAME[name], releases)
    if problems or not fits:
        return None
    fitting = sorted((r for r in releases if r.version in fits),
                     key=lambda r: version_key(r.version))
    if any(name not in r.lacks for r in fitting):
        return None
    return 'nova %s %s' % (hashing.nova_version(), fitting[-1].lacks[name])


def _own_problems(part: parts_mod.Part,
                  releases: Iterable[Release] | None = None) -> list[str]:
    releases = tuple(tested() if releases is None else releases)
    problems = source_problems(part, releases)
    if not problems:
        reason = lacking(part.name, releases)
        if reason is not None:
            # Its checks would only repeat what it lacks.
            return [reason]
    differs = bool(problems)
    for spec in part.checks:
        if differs and spec in _library_checks():
            # NOTE: they run nova's code, which differs: not the library.
            continue
        problems.extend(_ours(spec)())
    return problems


def _library_checks() -> set[str]:
    """The ``module:function`` of each :data:`.checks.LIBRARY_CHECKS`."""
    from nova_cellsched.compat import checks

    return {'%s:%s' % (check.__module__, check.__name__)
            for found in checks.LIBRARY_CHECKS.values() for check in found}


def _with_requirements(names: Iterable[str]) -> list[str]:
    """*names* and the parts they require, requirements first."""
    wanted: list[str] = []

    def add(name: str) -> None:
        if name not in parts_mod.BY_NAME:
            raise KeyError('no nova-cellsched part %r (parts: %s)'
                           % (name, ', '.join(parts_mod.BY_NAME)))
        for required in parts_mod.BY_NAME[name].requires:
            add(required)
        if name not in wanted:
            wanted.append(name)

    for name in names:
        add(name)
    return wanted


def check(names: Iterable[str] | None = None,
          releases: Iterable[Release] | None = None
          ) -> dict[str, list[str]]:
    """Per part (and the parts it requires): why it cannot be on.

    An empty list: the part fits the running nova. A part whose required
    part does not fit has that part's problems. Its sources, then its
    checks (library behaviours among them,
    :data:`.checks.LIBRARY_CHECKS`). Changes nothing.

    :param releases: the tested releases to match (default: all).
    """
    releases = tuple(tested() if releases is None else releases)
    wanted = _with_requirements(
        [p.name for p in parts_mod.PARTS] if names is None else names)
    found: dict[str, list[str]] = {}
    nova_chooses_threads()
    with LOCK:
        for name in wanted:
            part = parts_mod.BY_NAME[name]
            problems = []
            for required in part.requires:
                problems.extend(found[required])
            problems.extend(_own_problems(part, releases))
            found[name] = problems
    return found


# Installing and restoring -------------------------------------------------

def _apply(part: parts_mod.Part) -> list[_Put]:
    """Put *part*'s targets into nova, then run its ``on_install``.

    All or none: a target or hook that fails takes the targets out.
    """
    import sqlalchemy as sa

    done: list[_Put] = []
    try:
        for target in part.targets:
            if isinstance(target, parts_mod.Listen):
                owner = _owner(target.target)
                ours = _ours(target.listener)
                put = _Put(target, owner, ours,
                           had=sa.event.contains(owner, target.event, ours))
                if not put.had:
                    sa.event.listen(owner, target.event, ours)
            elif isinstance(target, parts_mod.Append):
                owner = getattr(_owner(target.owner), target.attribute)
                ours = _ours(target.replacement)
                if not isinstance(owner, list):
                    raise TypeError(
                        '%s is %s, expected a list'
                        % (target.name, type(owner).__name__))
                put = _Put(target, owner, ours)
                for index, entry in enumerate(owner):
                    if same_function(entry, ours):
                        put.original = entry
                        owner[index] = ours
                        break
                else:
                    put.had = False
                    owner.append(ours)
            else:
                owner = _owner(target.owner)
                saved = (owner.__dict__.get(target.attribute)
                         if isinstance(owner, type)
                         else getattr(owner, target.attribute, None))
                had = (target.attribute in owner.__dict__
                       if isinstance(owner, type)
                       else hasattr(owner, target.attribute))
                if not had and not isinstance(owner, type):
                    raise AttributeError('%s is missing' % target.name)
                nova_own = original(target.owner, target.attribute)
                ours = _ours(target.replacement)
                if target.wraps:
                    ours = ours(target.attribute, nova_own)
                if target.static:
                    ours = staticmethod(ours)
                put = _Put(target, owner, ours, had=had, original=saved)
                setattr(owner, target.attribute, ours)
                _ORIGINALS[target.name] = (saved if had else nova_own)
            done.append(put)
        for spec in part.on_install:
            _ours(spec)()
    except Exception:
        _undo(done)
        raise
    return done


def same_function(entry: Any, ours: Any) -> bool:
    """True if *entry* is *ours* or an earlier import's copy of it.

    Same module and name: what a reload of our module leaves in a nova
    list is replaced in place, not added twice.
    """
    return bool(getattr(entry, '__module__', None) == ours.__module__ and
                getattr(entry, '__name__', None) == ours.__name__)


def _undo(put: list[_Put]) -> None:
    """Take *put* out of nova, last first; only what is still ours."""
    import sqlalchemy as sa

    for one in reversed(put):
        target = one.target
        if isinstance(target, parts_mod.Listen):
            if not one.had and sa.event.contains(one.owner, target.event,
                                                 one.ours):
                sa.event.remove(one.owner, target.event, one.ours)
        elif isinstance(target, parts_mod.Append):
            if one.ours in one.owner:
                index = one.owner.index(one.ours)
                if one.had:
                    one.owner[index] = one.original
                else:
                    del one.owner[index]
        else:
            current = (one.owner.__dict__.get(target.attribute)
                       if isinstance(one.owner, type)
                       else getattr(one.owner, target.attribute, None))
            if current is one.ours:
                if one.had:
                    setattr(one.owner, target.attribute, one.original)
                else:
                    delattr(one.owner, target.attribute)
            _ORIGINALS.pop(target.name, None)


def install(names: Iterable[str], warn: bool = True
            ) -> dict[str, list[str]]:
    """Put the parts *names* (and those they require) into nova.

    Idempotent and thread-safe. Each part is checked (:func:`check`)
    and installed only if it fits and its required parts are on; a part
    that does not stays off alone. With *warn*, each part of *names*
    that stays off logs one WARNING: what differs, what nova does
    meanwhile, what to do; or, for a part its nova release lacks what
    it needs for (:func:`lacking`), one INFO line saying so.

    :returns: per part (of *names* and their requirements), the
        problems that keep it off; [] for a part that is on.
    """
    asked = list(names)
    found: dict[str, list[str]] = {}
    nova_chooses_threads()
    with LOCK:
        for name in _with_requirements(asked):
            part = parts_mod.BY_NAME[name]
            if name in _ON:
                _ON[name].asked = _ON[name].asked or name in asked
                found[name] = []
                continue
            missing = [r for r in part.requires if r not in _ON]
            if missing:
                found[name] = ['needs %s, which is off' % r
                               for r in missing]
                continue
            problems = _own_problems(part)
            if not problems:
                try:
                    put = _apply(part)
                except (ImportError, AttributeError, LookupError,
                        TypeError) as exc:
                    problems = ['%s could not be put into nova (%s)'
                                % (name, exc)]
                else:
                    _ON[name] = _On(part, put, asked=name in asked)
            found[name] = problems
        _release_unneeded()
    if warn:
        for name in asked:
            if found[name] and lacking(name) in found[name]:
                # Known and expected on this release: nova's behaviour
                # is the tested one, nothing to fix.
                LOG.info("nova-cellsched's part %s, which %s, is off: %s.",
                         name, parts_mod.BY_NAME[name].what,
                         '; '.join(found[name]))
            elif found[name]:
                part = parts_mod.BY_NAME[name]
                LOG.warning(
                    "nova-cellsched's part %s, which %s, is off: %s. "
                    'Meanwhile %s.%s', name, part.what,
                    '; '.join(found[name]), part.off,
                    fix_for(found[name]))
    return found


def fix_for(problems: Iterable[str]) -> str:
    """`` To fix: ...`` for *problems*, or nothing if each says its own.

    A library's problem (:class:`.checks.LibraryProblem`) names its fix
    (nova's venv built with its upper-constraints); any other is fixed
    by the nova-cellsched release tested with this nova.
    """
    from nova_cellsched.compat import checks

    if all(isinstance(p, checks.LibraryProblem) for p in problems):
        return ''
    return ' To fix: %s.' % HOW_TO_FIX


def restore(names: Iterable[str] | None = None) -> list[str]:
    """Give nova back its own for *names* (default: every part).

    Also the parts that require them, and the parts installed only as a
    requirement that nothing on needs any more. Only what is still
    ours is put back (a later swap by someone else stays).

    :returns: the parts taken out, in the order they were.
    """
    with LOCK:
        gone = set(_ON) if names is None else set(names)
        # What requires a part taken out goes too.
        changed = True
        while changed:
            changed = False
            for name, record in _ON.items():
                if name not in gone and gone & set(record.part.requires):
                    gone.add(name)
                    changed = True
        taken = [name for name in reversed(list(_ON)) if name in gone]
        for name in taken:
            _undo(_ON.pop(name).put)
        taken += _release_unneeded()
        return taken


def _release_unneeded() -> list[str]:
    """Take out parts not asked for that no part on requires."""
    taken = []
    changed = True
    while changed:
        changed = False
        needed = {r for record in _ON.values() for r in record.part.requires}
        for name in reversed(list(_ON)):
            if not _ON[name].asked and name not in needed:
                _undo(_ON.pop(name).put)
                taken.append(name)
                changed = True
                break
    return taken


@contextlib.contextmanager
def temporarily(name: str) -> Iterator[None]:
    """Part *name* on inside the block, unchecked; as it was after.

    For the lister's self-test (``nova-cellsched check --selftest``),
    which pages through the keyset part without installing the lister.
    """
    nova_chooses_threads()
    with LOCK:
        if name in _ON:
            put = None
        else:
            part = parts_mod.BY_NAME[name]
            put = _apply(part)
            _ON[name] = _On(part, put, asked=True)
    try:
        yield
    finally:
        if put is not None:
            with LOCK:
                if name in _ON and _ON[name].put is put:
                    _undo(_ON.pop(name).put)
