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

"""nova's decorator stack on a controller method: found, then rebuilt.

nova 34 decorates ``ServersController.index`` and ``detail`` with
``expected_errors``, ``query_schema`` (any number) and one
``response_body_schema`` per microversion range. :func:`layers` reads
that stack from the wrappers' code and closures (each decorator is
recognised by its wrapper's code object, found by decorating a probe
with it); :func:`response_schemas` gives the response schemas in the
order nova validates; :func:`rebuild` puts nova's own outer decorators,
called again with the same arguments, around a replacement of the
response decorators. Only nova's decorators are relied on; their
sources are pinned by :mod:`nova_cellsched.compat` (part ``validation``).
"""

from collections.abc import Callable
import inspect
import types
from typing import Any

#: One decorator of the stack: (its name, its closure's arguments, its
#: wrapper).
Layer = tuple[str, Any, Any]

def _wrapper_codes() -> dict[types.CodeType, str]:
    """The code of each nova decorator's wrapper -> the decorator."""
    from nova.api.openstack import wsgi
    from nova.api import validation as nova_validation

    def probe(self: Any, req: Any) -> None:
        """Decorated only to find the decorators' wrapper code."""

    return {
        wsgi.expected_errors(400)(probe).__code__: 'expected_errors',
        nova_validation.query_schema({})(probe).__code__: 'query_schema',
        nova_validation.response_body_schema({})(probe).__code__:
            'response_body_schema',
    }


_ORDER = ('expected_errors', 'query_schema', 'response_body_schema')
_NEXT = {'expected_errors': 'f', 'query_schema': 'func',
         'response_body_schema': 'func'}


def layers(method: Callable[..., Any]
            ) -> tuple[list[Layer], Any]:
    """nova's decorators on *method*, outermost first, and the function.

    Each decorator as (name, its arguments, its wrapper).

    :raises ValueError: the stack is not expected_errors, query_schema
        (any number), response_body_schema (at least one), function.
    """
    codes = _wrapper_codes()
    found: list[Layer] = []
    function = method
    while getattr(function, '__code__', None) in codes:
        kind = codes[function.__code__]
        arguments = inspect.getclosurevars(function).nonlocals
        found.append((kind, arguments, function))
        function = arguments[_NEXT[kind]]
    kinds = [kind for kind, _, _ in found]
    if (kinds[:1] != ['expected_errors'] or
            kinds != sorted(kinds, key=_ORDER.index) or
            'response_body_schema' not in kinds or
            kinds.count('expected_errors') != 1):
        raise ValueError('decorators %s' % ', '.join(kinds))
    return found, function


def response_schemas(found: list[Layer]
                     ) -> tuple[list[tuple[Any, Any, Any]], Any]:
    """The ``response_body_schema`` layers of *found*, as nova applies them.

    :returns: ((schema, min_version, max_version) in the order nova's
        stack validates: innermost first; the outermost
        ``response_body_schema`` wrapper, which runs nova's whole
        response validation).
    """
    responses = [(arguments, wrapper) for kind, arguments, wrapper in found
                 if kind == 'response_body_schema']
    # nova's innermost decorator validates first.
    schemas = [(a['response_body_schema'], a['min_version'],
                a['max_version']) for a, _ in reversed(responses)]
    return schemas, responses[0][1]


def rebuild(found: list[Layer], inner: Callable[..., Any]
            ) -> Callable[..., Any]:
    """*inner* inside nova's own outer decorators of *found*, re-applied.

    ``query_schema`` and ``expected_errors`` are called again with the
    arguments found in nova's stack, so request validation, its 400s and
    the error handling stay nova's code; the response decorators are
    left out (*inner* stands for them).
    """
    from nova.api.openstack import wsgi
    from nova.api import validation as nova_validation

    rebuilt = inner
    for kind, arguments, _ in reversed(found):
        if kind == 'query_schema':
            rebuilt = nova_validation.query_schema(
                arguments['request_query_schema'],
                arguments['min_version'], arguments['max_version'])(rebuilt)
        elif kind == 'expected_errors':
            rebuilt = wsgi.expected_errors(
                arguments['errors'], arguments['min_version'],
                arguments['max_version'])(rebuilt)
    return rebuilt
