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

"""The checks of a part beyond its sources' hashes.

Each answers a list of problems, one line each; [] when the part fits.
Named in :data:`.parts.PARTS` (``checks``). A check of a part's own
state lives beside the part (``api.keyset.fits``,
``api.validation.stack_check``) and uses the helpers here: this module
imports no part (``guard``, whose check is here, is a core module).

What a part relies on of a library (SQLAlchemy, oslo.serialization,
oslo.versionedobjects, oslo.db, jsonschema) is checked by what it does,
never pinned by its source: nova runs with whatever its requirements
allow, and so must the parts. Each library check
(:data:`LIBRARY_CHECKS`) exercises exactly the behaviour its part
relies on and answers a :class:`LibraryProblem` naming the library, its
installed version, the versions it was tested with
(:data:`LIBRARIES_TESTED`) and the fix. They run at install, in every
``check`` and in ``nova-cellsched check --selftest``
(:func:`library_problems`).
"""

from collections.abc import Callable
import functools
import importlib.metadata
import inspect
import threading
from typing import Any

#: Per library, the releases its behaviour checks (and the tests of the
#: parts relying on it) passed with: each tested nova release's
#: upper-constraints (tools/releases/novaNN.txt), the default venv, and
#: what a plain ``pip install nova==X`` resolved to on 2026-11-28.
#: Not a gate: another release passes if it behaves the same.
LIBRARIES_TESTED: dict[str, tuple[str, ...]] = {
    'SQLAlchemy': ('2.0.38', '2.0.42', '2.0.46', '2.0.58', '2.1.9'),
    'oslo.serialization': ('5.7.0', '5.8.0', '5.9.1', '5.11.0'),
    'oslo.versionedobjects': ('3.6.0', '3.8.0', '3.9.0', '3.12.0'),
    'oslo.db': ('17.2.1', '17.4.0', '18.0.0', '18.1.1'),
    'jsonschema': ('4.23.0', '4.25.0', '4.26.0'),
}

#: Where each series' upper-constraints are (``%s``: ``2026.2``).
UPPER_CONSTRAINTS = 'https://releases.openstack.org/constraints/upper/%s'


class LibraryProblem(str):
    """A problem of a library nova's venv holds, not of nova's code.

    Its text names the library, its version, the tested versions and
    the fix (:func:`library_problem`); an install that leaves a part
    off for it says that fix, not a nova-cellsched upgrade.
    """


def _installed(library: str) -> str:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return 'not installed'


def library_fix() -> str:
    """What to do about a library that lacks a behaviour: one line.

    Build nova's venv with the upper-constraints of the running nova's
    series, as nova's own deployments do.
    """
    from nova_cellsched.compat import hashing

    version = hashing.nova_version()
    try:
        major = int(version.split('.')[0])
    except ValueError:
        series = '<series>'
    else:
        # NOTE: pins.series, without importing pins (and packaging).
        series = '%d.%d' % (2025 + (major - 31) // 2, (major - 31) % 2 + 1)
    return ("build nova's venv with its release's upper-constraints "
            '(pip install -c %s nova==%s), then install nova-cellsched '
            'into it' % (UPPER_CONSTRAINTS % series, version))


def library_problem(library: str, what: str) -> LibraryProblem:
    """One line: *library*'s installed version does not do *what*.

    :param what: the behaviour found missing and who relies on it.
    """
    return LibraryProblem(
        '%s %s (installed) %s; tested with %s %s. To fix: %s' % (
            library, _installed(library), what, library,
            ', '.join(LIBRARIES_TESTED.get(library, ())) or 'none',
            library_fix()))


def parameters(function: Callable[..., Any]) -> str:
    """The parameters (names, kinds, defaults) without annotations."""
    signature = inspect.signature(inspect.unwrap(function))
    return str(signature.replace(
        parameters=[p.replace(annotation=p.empty)
                    for p in signature.parameters.values()],
        return_annotation=signature.empty))


def per_thread(name: str, local: Any) -> list[str]:
    """The problem of a part whose state lives in thread-local *local*.

    :param name: the module that holds it.
    """
    # Scoped by a thread-local: under eventlet it must be
    # green-thread-local, or another request's query running in the
    # same OS thread would see it too.
    if local is not None and not isinstance(local, threading.local):
        return ['the per-thread state of %s was made '
                'before threading was monkey-patched (import nova, and '
                'patch, before nova_cellsched)' % name]
    return []


def guard_state() -> list[str]:
    """Part ``guard``'s check: its per-thread bound is per green thread.
    """
    from nova_cellsched import guard

    return per_thread('nova_cellsched.guard', guard._local)


@functools.lru_cache(maxsize=1)
def _query_models() -> tuple[Any, Any]:
    """Two mapped classes, server and tag, of a registry of their own."""
    import sqlalchemy as sa
    from sqlalchemy import orm

    registry = orm.registry()
    servers = sa.Table('servers', registry.metadata,
                       sa.Column('id', sa.Integer, primary_key=True))
    tags = sa.Table('tags', registry.metadata,
                    sa.Column('server_id', sa.ForeignKey('servers.id'),
                              primary_key=True),
                    sa.Column('tag', sa.String(60), primary_key=True))

    class Server:
        pass

    class Tag:
        pass

    registry.map_imperatively(Tag, tags)
    registry.map_imperatively(Server, servers, properties={
        'tags': orm.relationship(Tag)})
    return Server, Tag


def keyset_sqlalchemy() -> list[str]:
    """What :func:`.api.keyset.one_row_per_instance` needs of SQLAlchemy.

    It reads two attributes of the legacy ``Query`` that have no public
    reader: ``_setup_joins`` (empty unless ``join()`` was called) and
    ``_with_options`` (the loader options given to ``options()``). Run
    on two models of its own shaped as nova's instances and tags (a
    relationship joined, one eagerly loaded), with a session bound to
    nothing; the self-test's tags-any case lists through the whole
    rebuild on nova's models.
    """
    from sqlalchemy import orm

    session = orm.Session()
    try:
        server, _tag = _query_models()
        plain = session.query(server)
        joined = plain.join(server.tags)
        option = orm.joinedload(server.tags)
        loaded = plain.options(option)
        if plain._setup_joins or not joined._setup_joins:
            return [library_problem(
                'SQLAlchemy', 'Query.join does not record its joins in '
                'Query._setup_joins, which nova-cellsched\'s '
                'keyset.one_row_per_instance reads')]
        if option not in tuple(loaded._with_options):
            return [library_problem(
                'SQLAlchemy', 'Query.options does not record its loader '
                'options in Query._with_options, which nova-cellsched\'s '
                'keyset.one_row_per_instance reads')]
    except Exception as exc:  # noqa: BLE001 -- any failure is the answer
        return [library_problem(
            'SQLAlchemy', "lacks what nova-cellsched's "
            'keyset.one_row_per_instance reads of Query (%s: %s)'
            % (type(exc).__name__, exc))]
    finally:
        session.close()
    return []


def validation_serialization() -> list[str]:
    """What the compiled validation needs of oslo's serialization.

    nova serializes a response with ``jsonutils.dumps`` (default
    ``to_primitive``) and validates what that parses back to; the
    compiled validation (:mod:`.api.schema_compiler`) skips that round
    trip for the types whose JSON is themselves: oslo.versionedobjects'
    ``CoercedDict`` and ``CoercedList`` must be ``dict`` and ``list``
    that serialize as one, and a ``datetime`` must serialize as the
    string ``to_primitive`` gives.
    """
    import collections
    import datetime
    import json

    from oslo_serialization import jsonutils
    from oslo_versionedobjects import fields

    problems: list[str] = []
    try:
        coerced = {
            'dict': fields.Dict(fields.String()).coerce(
                None, 'specs', {'a': 'b'}),
            'list': fields.List(fields.String()).coerce(None, 'tags', ['a']),
        }
    except Exception as exc:  # noqa: BLE001 -- any failure is the answer
        coerced = {}
        problems.append(library_problem(
            'oslo.versionedobjects', 'cannot coerce a Dict or List field '
            '(%s)' % exc))
    if coerced and not (
            isinstance(coerced['dict'], fields.CoercedDict) and
            isinstance(coerced['dict'], dict) and
            isinstance(coerced['list'], fields.CoercedList) and
            isinstance(coerced['list'], list)):
        problems.append(library_problem(
            'oslo.versionedobjects', 'coerces Dict and List fields to %s '
            'and %s, expected CoercedDict and CoercedList, a dict and a '
            'list (nova-cellsched\'s compiled validation takes them as '
            'JSON)' % (type(coerced['dict']).__name__,
                       type(coerced['list']).__name__)))
        coerced = {}
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 6)
    body = dict(coerced, ordered=collections.OrderedDict(a=1), when=when,
                values=[None, True, 1, 1.5, 'x'])
    try:
        text = jsonutils.to_primitive(when)
        parsed = json.loads(jsonutils.dumps(body))
    except Exception as exc:  # noqa: BLE001 -- any failure is the answer
        return problems + [library_problem(
            'oslo.serialization', 'cannot serialize a server-list body '
            'with jsonutils.dumps (%s)' % exc)]
    expected = {'ordered': {'a': 1}, 'when': text,
                'values': [None, True, 1, 1.5, 'x']}
    if coerced:
        expected.update({'dict': {'a': 'b'}, 'list': ['a']})
    if not isinstance(text, str) or parsed != expected:
        problems.append(library_problem(
            'oslo.serialization', 'jsonutils.dumps gives %r, expected %r '
            "(nova validates what it serializes; nova-cellsched's compiled "
            'validation takes these types as their JSON)'
            % (parsed, expected)))
    return problems


def lister_object_lists() -> list[str]:
    """What the lister's rows need of ``obj_make_list``.

    nova's ``Instance._from_db_object`` builds the tags, services and
    PCI device lists of each instance with oslo.versionedobjects'
    ``obj_make_list`` (``nova.objects.base`` re-exports it), which must
    call the item class's ``_from_db_object`` on each row as given, in
    order: the lister hands it dicts, not ORM rows. Called as nova 31
    to 33 call it (with the item class) and, where oslo.versionedobjects
    takes no item class any more (3.12), as nova 34 does (without it).
    """
    import warnings

    from nova import context as nova_context
    from nova.objects import base
    from nova.objects import tag

    context = nova_context.RequestContext('cellsched-check', 'check',
                                          is_admin=True)
    rows = [{'resource_id': 'server-1', 'tag': 'b'},
            {'resource_id': 'server-1', 'tag': 'a'}]
    forms: dict[str, Callable[[], Any]] = {
        'with the item class (as nova 31 to 33 call it)':
            lambda: base.obj_make_list(context, tag.TagList(context),
                                       tag.Tag, rows)}
    if 'item_cls' not in inspect.signature(base.obj_make_list).parameters:
        forms['without the item class (as nova 34 calls it)'] = (
            lambda: base.obj_make_list(context, tag.TagList(context), rows))
    problems: list[str] = []
    for how, make in forms.items():
        try:
            with warnings.catch_warnings():
                # NOTE: 3.12 deprecates the item class nova 31-33 pass.
                warnings.simplefilter('ignore', DeprecationWarning)
                made = make()
            found: list[Any] = [(item.resource_id, item.tag)
                                for item in made]
        except Exception as exc:  # noqa: BLE001 -- any failure is the answer
            found = ['%s: %s' % (type(exc).__name__, exc)]
        if found != [('server-1', 'b'), ('server-1', 'a')]:
            problems.append(library_problem(
                'oslo.versionedobjects', 'obj_make_list, called %s on two '
                'tag rows given as dicts, gives %r, expected the two tags '
                "in order (nova builds the lister's instances' tags, "
                'services and PCI devices with it)' % (how, found)))
    return problems


#: Every check of a library behaviour, by the part relying on it.
LIBRARY_CHECKS: dict[str, tuple[Callable[[], list[str]], ...]] = {
    'lister': (lister_object_lists,),
    'keyset': (keyset_sqlalchemy,),
    'validation': (validation_serialization,),
}


def library_problems() -> list[str]:
    """Every library check's problems (``check --selftest`` runs them).

    Whatever part is on: the self-test lists through the keyset part
    and builds the views the validation reads.
    """
    problems: list[str] = []
    for found in LIBRARY_CHECKS.values():
        for one in found:
            problems.extend(one())
    return problems


#: The jsonschema releases the verdict tests passed with, and the nova
#: releases whose upper-constraints pin them. Not a gate: the compiler
#: (:mod:`nova_cellsched.api.validation.schema_compiler`) relies on the draft's
#: semantics and jsonschema's public API only
#: (:func:`jsonschema_problems`), so another release keeps the fast
#: path; to add one, run the verdict tests with it (contributor guide).
JSONSCHEMA_TESTED = {
    '4.23.0': 'nova 31 (2025.1)',
    '4.25.0': 'nova 32 (2025.2)',
    '4.26.0': 'nova 33 (2026.1), nova 34',
}


def jsonschema_problems() -> list[str]:
    """What the fast validation needs of jsonschema's public API, if missing.

    nova's ``_SchemaValidator`` extends jsonschema's
    ``Draft202012Validator`` and hands its ``_FORMAT_CHECKER`` (a
    ``jsonschema.FormatChecker``) to it; the compiler reads that
    checker's public ``checkers`` mapping.
    """
    try:
        import jsonschema
        from nova.api.validation import validators
    except ImportError as exc:
        return [library_problem('jsonschema', 'cannot be imported (%s)'
                                % exc)]
    problems: list[str] = []
    if not hasattr(jsonschema, 'Draft202012Validator'):
        problems.append(library_problem(
            'jsonschema', 'has no Draft202012Validator'))
    checker = getattr(validators, '_FORMAT_CHECKER', None)
    if not isinstance(checker, jsonschema.FormatChecker) or not isinstance(
            getattr(checker, 'checkers', None), dict):
        problems.append("nova's _FORMAT_CHECKER is not a "
                        'jsonschema.FormatChecker with a checkers mapping')
    return problems
