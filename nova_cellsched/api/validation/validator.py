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

"""Response validation of GET /servers and /servers/detail, once and fast.

nova 34 stacks one ``validation.response_body_schema`` decorator per
microversion range on ``ServersController.index`` (2) and ``detail``
(14). Each serializes the whole response to JSON and parses it back
before it asks whether its range applies, and the one that applies
builds a new jsonschema validator and runs jsonschema's pure-Python
Draft 2020-12 validation: for 1,000 servers about a second per request.

:func:`_served` is the new ``index`` and ``detail`` that
:mod:`nova_cellsched.compat` (part ``validation``, which also holds the
hashes of what this relies on) puts on the controller class: nova's own
``expected_errors`` and ``query_schema`` decorators, applied again with the
arguments found in nova's stack (so request validation, its 400s and the error
handling are nova's code), around one wrapper that replaces the response
decorators. Per request it picks the schema nova would validate with (the first
in nova's order whose range applies), and checks the view's body with a
validator compiled once per schema by
:func:`.schema_compiler.compile_schema`:

- valid: the response goes out; nothing was serialized;
- anything else (the compiled validator answers invalid, meets a value
  whose JSON round trip could differ, raises, or could not be
  compiled): the body is serialized and parsed once as nova does and
  nova's own ``_schema_validation_helper`` decides, so what ``warn``
  logs and ``error`` raises is nova's, from nova's code.

The contract is nova's verdict (see
:func:`.schema_compiler.compile_schema`): a body
nova rejects is never accepted, one nova accepts never rejected.
``[api] response_validation`` is read per request as nova does.
``[cellsched] api_fast_validation = False`` calls nova's own decorated
method instead, per request.

The parts: :mod:`.schema_compiler` (a schema as one function),
:mod:`.response_stack` (nova's decorators found and re-applied); this
module holds the request path (:func:`validate_response`, the compiled
validators per schema, the counts) and :func:`_served`. What it relies
on (nova's sources by hash, jsonschema's public API by
:func:`nova_cellsched.compat.checks.jsonschema_problems`) and its
registration are :mod:`nova_cellsched.compat`'s part ``validation``.
"""

from collections.abc import Callable
import functools
import re
import threading
from typing import Any

from oslo_log import log as logging

from nova_cellsched.api.middleware import server_timing
from nova_cellsched.api.validation import response_stack
from nova_cellsched.api.validation import schema_compiler
from nova_cellsched.api.validation.schema_compiler import Check
from nova_cellsched import counters

LOG = logging.getLogger(__name__)

#: The controller methods served.
METHODS = ('index', 'detail')


# The validators, per schema, built on first use.

class _Validators:
    """Compiled validators per schema, and the schemas given up on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # id(schema) -> (schema, compiled check or None)
        self._compiled: dict[int, tuple[Any, Check | None]] = {}

    def get(self, schema: Any) -> Check | None:
        """The compiled check of *schema*, None if nova's must judge.

        A schema the compiler refuses is logged once, and validated by
        nova's validator from then on.
        """
        entry = self._compiled.get(id(schema))
        if entry is not None and entry[0] is schema:
            return entry[1]
        with self._lock:
            entry = self._compiled.get(id(schema))
            if entry is not None and entry[0] is schema:
                return entry[1]
            check: Check | None
            try:
                check = schema_compiler.compile_schema(schema,
                                                       *_nova_parts())
            except (schema_compiler.Unsupported, re.error, TypeError,
                    ValueError) as exc:
                LOG.warning("nova-cellsched cannot compile a response schema "
                            "of GET /servers (%s): nova's validator checks "
                            'the responses it applies to', exc)
                check = None
            self._compiled[id(schema)] = (schema, check)
            return check

    def give_up(self, schema: Any, exc: BaseException) -> None:
        """*schema*'s compiled check raised: nova's judges it from now."""
        with self._lock:
            entry = self._compiled.get(id(schema))
            if entry is None or entry[1] is None:
                return
            self._compiled[id(schema)] = (schema, None)
        LOG.warning("nova-cellsched's response validator failed on GET "
                    "/servers (%s: %s): nova's validator checks the "
                    'responses of that schema from now on',
                    type(exc).__name__, exc)

    def clear(self) -> None:
        with self._lock:
            self._compiled.clear()


VALIDATORS = _Validators()


def _nova_parts() -> tuple[Any, Callable[[Any], Any]]:
    """nova's format checker and string-number reading."""
    from nova.api.validation import validators

    def number_from_str(value: Any) -> Any:
        return validators._SchemaValidator._number_from_str(None, value)

    return validators._FORMAT_CHECKER, number_from_str


#: How server-list responses were validated in this process.
#: ``fast``: the compiled validator accepted the body;
#: ``nova_rejected`` / ``nova_accepted``: it did not, and nova's
#: validator judged (``nova_accepted`` on a body of nova's own views
#: means the compiled validator could not tell: slower, never wrong);
#: ``none``: no schema applied (legacy v2) or ``[api]
#: response_validation = ignore``; ``off``: ``[cellsched]
#: api_fast_validation = False``, nova's own decorators ran.
#: ``serialized``: of all these, the bodies that were serialized and
#: parsed (once) on the way: nova's views give plain JSON types, so a
#: valid body is validated as it is.
VALIDATED = counters.Counts(('fast', 'nova_rejected', 'nova_accepted',
                             'none', 'off', 'serialized'))


# The request path.

class _Schema:
    """One ``response_body_schema`` of nova's stack."""

    def __init__(self, schema: Any, min_version: str | None,
                 max_version: str | None) -> None:
        from nova.api.openstack import api_version_request
        self.schema = schema
        self.min_version = min_version
        self.max_version = max_version
        self.min = api_version_request.APIVersionRequest(min_version)
        self.max = api_version_request.APIVersionRequest(max_version)

    def applies(self, req: Any) -> bool:
        """Whether nova's ``_schema_validation_helper`` validates."""
        if req.is_legacy_v2():
            return self.min_version is None or self.min_version == '2.0'
        return bool(req.api_version_request.matches(self.min, self.max))


def _enabled() -> bool:
    """``[cellsched] api_fast_validation`` (registered by :func:`_served`)."""
    import nova.conf
    return bool(nova.conf.CONF.cellsched.api_fast_validation)


def _nova_body(response: Any) -> Any:
    """The body nova's response decorator validates (its own code)."""
    import webob

    from nova.api.openstack import wsgi
    from oslo_serialization import jsonutils
    if isinstance(response, wsgi.ResponseObject):
        serialized = wsgi.JSONDictSerializer().serialize(response.obj)
    elif isinstance(response, webob.Response):
        serialized = response.body
    else:
        serialized = wsgi.JSONDictSerializer().serialize(response)
    VALIDATED.count('serialized')
    if serialized == b'':
        return None
    return jsonutils.loads(serialized)


def _fast_verdict(check: Check, schema: Any, body: Any) -> bool | None:
    """True/False from *check*; None: the body needs its JSON round trip.

    A check that raises is given up on for good (logged once) and
    answers False, so nova's validator judges.
    """
    try:
        return check(body)
    except schema_compiler.NotNative as exc:
        LOG.debug('GET /servers response holds a %s: validating its JSON',
                  exc)
        return None
    except Exception as exc:  # noqa: B902 -- any fault: nova judges.
        VALIDATORS.give_up(schema, exc)
        return False


def validate_response(schemas: list[_Schema], response: Any,
                      args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """What nova's stack of response decorators does, once.

    :raises nova.exception.ValidationError: ``[api] response_validation
        = error`` and nova's validator rejects the body.
    """
    import nova.conf
    conf = nova.conf.CONF
    if conf.api.response_validation == 'ignore':
        VALIDATED.count('none')
        return
    req = kwargs['req'] if 'req' in kwargs else args[1]
    applying = next((s for s in schemas if s.applies(req)), None)
    if applying is None:
        # nova serializes the body even so (an unserializable body fails
        # there): once is enough for that.
        _nova_body(response)
        VALIDATED.count('none')
        return
    check = VALIDATORS.get(applying.schema)
    body: Any = None
    parsed = False
    if check is not None:
        from nova.api.openstack import wsgi
        import webob
        if isinstance(response, wsgi.ResponseObject):
            verdict = _fast_verdict(check, applying.schema, response.obj)
        elif isinstance(response, webob.Response):
            verdict = None
        else:
            verdict = _fast_verdict(check, applying.schema, response)
        if verdict is None:
            body, parsed = _nova_body(response), True
            verdict = _fast_verdict(check, applying.schema, body)
        if verdict:
            VALIDATED.count('fast')
            return
    if not parsed:
        body = _nova_body(response)
    from nova.api import validation as nova_validation
    from nova import exception
    try:
        nova_validation._schema_validation_helper(
            applying.schema, body, applying.min_version,
            applying.max_version, args, kwargs)
    except exception.ValidationError:
        VALIDATED.count('nova_rejected')
        if conf.api.response_validation == 'warn':
            nova_validation.LOG.exception('Schema failed to validate')
        else:
            raise
    except BaseException:
        VALIDATED.count('nova_rejected')
        raise
    else:
        VALIDATED.count('nova_accepted')


def _served(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """*method* rebuilt: nova's outer decorators around one validation.

    What :mod:`nova_cellsched.compat` (part ``validation``) puts on
    ``ServersController`` as *name*, *method* being nova's.

    :raises ValueError: nova's stack is not the one this rebuilds.
    """
    import nova.conf

    from nova_cellsched import conf as conf_mod
    conf_mod.register_opts(nova.conf.CONF)

    found, function = response_stack.layers(method)
    found_schemas, nova_responses = response_stack.response_schemas(found)
    schemas = [_Schema(*s) for s in found_schemas]

    @functools.wraps(function)
    def validated_once(*args: Any, **kwargs: Any) -> Any:
        if not _enabled():
            VALIDATED.count('off')
            return nova_responses(*args, **kwargs)
        response = function(*args, **kwargs)
        with server_timing.phase('validation'):
            validate_response(schemas, response, args, kwargs)
        return response

    for key, value in vars(nova_responses).items():
        if key != '__wrapped__':
            setattr(validated_once, key, value)
    rebuilt = response_stack.rebuild(found, validated_once)
    setattr(rebuilt, '_cellsched_validation', name)
    return rebuilt


def validated() -> dict[str, int]:
    """Server-list responses validated so far, by how (:data:`VALIDATED`)."""
    return VALIDATED.snapshot()


def stack_check() -> list[str]:
    """Part ``validation``'s check: nova's decorator stack on the two
    methods is the one :mod:`.response_stack` rebuilds.
    """
    from nova_cellsched.compat import core

    problems = []
    for name in METHODS:
        try:
            response_stack.layers(core.original(
                'nova.api.openstack.compute.servers:ServersController',
                name))
        except (AttributeError, KeyError, ValueError) as exc:
            problems.append('ServersController.%s: unexpected %s'
                            % (name, exc))
    return problems
