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
Named in :data:`.parts.PARTS` (``checks``).
"""

from collections.abc import Callable
import inspect
import threading
from typing import Any


def _parameters(function: Callable[..., Any]) -> str:
    """The parameters (names, kinds, defaults) without annotations."""
    signature = inspect.signature(inspect.unwrap(function))
    return str(signature.replace(
        parameters=[p.replace(annotation=p.empty)
                    for p in signature.parameters.values()],
        return_annotation=signature.empty))


def _per_thread(name: str, local: Any) -> list[str]:
    # Scoped by a thread-local: under eventlet it must be
    # green-thread-local, or another request's query running in the
    # same OS thread would see it too.
    if local is not None and not isinstance(local, threading.local):
        return ['the per-thread state of nova_cellsched.api.%s was made '
                'before threading was monkey-patched (import nova, and '
                'patch, before nova_cellsched)' % name]
    return []


def guard_state() -> list[str]:
    """:mod:`.api.guard`'s per-thread bound is per green thread."""
    from nova_cellsched.api import guard
    return _per_thread('guard', getattr(guard, '_local', None))


def keyset_fits() -> list[str]:
    """What :mod:`.api.keyset` needs from oslo.db and the thread model."""
    from nova.db.main import api as db_api
    from oslo_db.sqlalchemy import utils as oslo_utils

    from nova_cellsched.api import keyset
    from nova_cellsched.compat import core

    problems = []
    ours = _parameters(keyset.paginate_query)
    theirs = _parameters(oslo_utils.paginate_query)
    if ours != theirs:
        problems.append(
            'oslo_db.sqlalchemy.utils.paginate_query%s was expected to be '
            'paginate_query%s (nova.db.main.api reaches it through '
            "nova-cellsched's stand-in)" % (theirs, ours))
    module = getattr(db_api, 'sqlalchemyutils', None)
    if module is not oslo_utils and not core.is_on('keyset'):
        problems.append("nova.db.main.api.sqlalchemyutils is not oslo.db's "
                        'sqlalchemy.utils (found %r)' % (module,))
    return problems + _per_thread('keyset', keyset.local_state())


def validation_stack() -> list[str]:
    """nova's decorator stack on the two methods is the one rebuilt."""
    from nova_cellsched.api import response_stack
    from nova_cellsched.api import validation
    from nova_cellsched.compat import core

    problems = []
    for name in validation.METHODS:
        try:
            response_stack.layers(core.original(
                'nova.api.openstack.compute.servers:ServersController',
                name))
        except (AttributeError, KeyError, ValueError) as exc:
            problems.append('ServersController.%s: unexpected %s'
                            % (name, exc))
    return problems


#: The jsonschema releases the verdict tests passed with, and the nova
#: releases whose upper-constraints pin them. Not a gate: the compiler
#: (:mod:`nova_cellsched.api.schema_compiler`) relies on the draft's
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
        return ['jsonschema cannot be imported (%s)' % exc]
    problems = []
    if not hasattr(jsonschema, 'Draft202012Validator'):
        problems.append('jsonschema has no Draft202012Validator')
    checker = getattr(validators, '_FORMAT_CHECKER', None)
    if not isinstance(checker, jsonschema.FormatChecker) or not isinstance(
            getattr(checker, 'checkers', None), dict):
        problems.append("nova's _FORMAT_CHECKER is not a "
                        'jsonschema.FormatChecker with a checkers mapping')
    return problems
