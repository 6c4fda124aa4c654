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

"""The response-schema compiler: a JSON Schema as one Python function.

:func:`compile_schema` turns one of nova's response schemas into a
function answering whether nova's validator accepts a body, without
serializing it; :class:`Unsupported` and :class:`NotNative` say when it
cannot. Pure: it imports neither nova nor jsonschema (what it needs of
them is handed in); :mod:`.validation` uses it on the request path.
"""

import collections
from collections.abc import Callable
import datetime
import re
from typing import Any

from oslo_versionedobjects import fields as ovo_fields

Check = Callable[[Any], bool]


class Unsupported(Exception):
    """A schema uses a keyword or value the compiler does not handle."""


class NotNative(Exception):
    """A value whose JSON round trip may differ from itself was met."""


#: The types of a body whose JSON round trip gives the same verdict: the
#: JSON types, and the dict and list subclasses nova's views hand over,
#: which only change how items are set, and serialize as the dict or list
#: they are: ``OrderedDict`` (the addresses) and oslo.versionedobjects'
#: ``CoercedDict`` and ``CoercedList`` (a flavor's extra specs...).
_DICT_TYPES = frozenset((dict, collections.OrderedDict,
                         ovo_fields.CoercedDict))
_LIST_TYPES = frozenset((list, ovo_fields.CoercedList))
_NATIVE_TYPES = _DICT_TYPES | _LIST_TYPES | frozenset((
    str, int, float, bool, type(None)))

#: Keywords jsonschema's Draft 2020-12 validator does not act on alone.
_ANNOTATIONS = frozenset((
    'description', 'title', 'default', 'examples', '$comment',
    'deprecated', 'readOnly', 'writeOnly', '$schema', '$id'))

_OBJECT_KEYWORDS = frozenset((
    'properties', 'required', 'additionalProperties', 'patternProperties',
    'minProperties', 'maxProperties'))

_SUPPORTED = _ANNOTATIONS | _OBJECT_KEYWORDS | frozenset((
    'type', 'enum', 'const', 'items', 'minItems', 'maxItems', 'minLength',
    'maxLength', 'pattern', 'format', 'oneOf', 'anyOf', 'allOf', 'not',
    'minimum', 'maximum'))


def _is_integer(value: Any, kind: type) -> bool:
    return kind is int or (kind is float and value.is_integer())


#: JSON Schema type name -> test on (value, type(value)) of a native value,
#: as jsonschema's Draft 2020-12 type checker answers for it.
_TYPE_TESTS: dict[str, Callable[[Any, type], bool]] = {
    'string': lambda v, t: t is str,
    'object': lambda v, t: t in _DICT_TYPES,
    'array': lambda v, t: t in _LIST_TYPES,
    'boolean': lambda v, t: t is bool,
    'null': lambda v, t: t is type(None),
    'number': lambda v, t: t is int or t is float,
    'integer': _is_integer,
}

_TYPES_OF = {'string': (str,), 'object': tuple(_DICT_TYPES),
             'array': tuple(_LIST_TYPES),
             'boolean': (bool,), 'null': (type(None),),
             'number': (int, float), 'integer': (int,)}


def json_equal(one: Any, two: Any) -> bool:
    """Whether *two* equals the ``enum``/``const`` value *one*, as JSON.

    *one* is a string, number, boolean or null (the compiler refuses
    objects and arrays there). JSON equality: a boolean equals only the
    same boolean (``true`` is not ``1``, ``false`` not ``0``), a number
    equals the same number whatever its type (``1`` is ``1.0``), a
    string the same string. This is Draft 2020-12's rule, which
    jsonschema's validators apply (checked against the public
    ``Draft202012Validator`` by the unit tests).
    """
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, bool) or isinstance(two, bool):
        return (isinstance(one, bool) and isinstance(two, bool) and
                one == two)
    if type(two) in _DICT_TYPES or type(two) in _LIST_TYPES:
        return False
    return bool(one == two)


def compile_schema(schema: Any, format_checker: Any,
                   number_from_str: Callable[[Any], Any]) -> Check:
    """A function answering whether nova's validator accepts a body.

    The compiled function takes the object nova's view returned (or the
    body parsed from JSON) and returns True only where nova's
    ``_SchemaValidator(schema).validate`` of that object's JSON round
    trip succeeds; False where it may not. It raises :class:`NotNative`
    when it meets a value it would have to judge whose JSON round trip
    could differ from the value (anything but exactly ``dict``,
    ``OrderedDict`` or ``CoercedDict`` with ``str`` keys, ``list`` or
    ``CoercedList``, ``str``, ``int``, ``float``, ``bool`` and ``None``;
    a ``datetime`` is judged as the string nova's serializer makes of
    it): the caller then serializes the body and asks again.

    It applies JSON Schema Draft 2020-12's semantics for each keyword
    nova's response schemas use, as jsonschema 4's public
    ``Draft202012Validator`` implements them (nova's validator extends
    it), with nova's changes: *format_checker* (nova's
    ``_FORMAT_CHECKER``, a public ``jsonschema.FormatChecker`` whose
    ``checkers`` are nova's own date-time, uuid, uri... and the
    standard ipv4/ipv6) and nova's string-number ``minimum``/``maximum``
    (*number_from_str*); ``enum`` and ``const`` compare by
    :func:`json_equal`. Nothing private of jsonschema is used: a
    jsonschema release keeps the fast path as long as it implements the
    draft (the verdict tests prove it per release; see
    :data:`nova_cellsched.compat.checks.JSONSCHEMA_TESTED`).

    :raises Unsupported: the schema uses anything else (``$ref``,
        ``prefixItems``, an unknown type...): validate with nova's.
    """
    return _compile(schema, format_checker, number_from_str)


def _compile(schema: Any, fc: Any,
             number_from_str: Callable[[Any], Any]) -> Check:
    if schema is True:
        return _plain
    if schema is False:
        return lambda v: False
    if not isinstance(schema, dict):
        raise Unsupported('schema %r is not an object or a boolean'
                          % (schema,))
    unknown = set(schema) - _SUPPORTED
    if unknown:
        raise Unsupported('keywords %s' % ', '.join(sorted(unknown)))

    def sub(s: Any) -> Check:
        return _compile(s, fc, number_from_str)

    checks: list[Callable[[Any, type], bool]] = []

    if 'type' in schema:
        names = schema['type']
        if isinstance(names, str):
            names = [names]
        if (not isinstance(names, list) or not names or
                any(n not in _TYPE_TESTS for n in names)):
            raise Unsupported('type %r' % (schema['type'],))
        if 'integer' not in names:
            allowed = frozenset(t for n in names for t in _TYPES_OF[n])
            checks.append(lambda v, t: t in allowed)
        else:
            tests = [_TYPE_TESTS[n] for n in names]
            checks.append(lambda v, t: any(f(v, t) for f in tests))

    for keyword in ('enum', 'const'):
        if keyword not in schema:
            continue
        values = (schema[keyword] if keyword == 'enum'
                  else [schema[keyword]])
        if not isinstance(values, list) or any(
                type(e) not in _NATIVE_TYPES or type(e) in (dict, list)
                for e in values):
            raise Unsupported('%s %r' % (keyword, schema[keyword]))
        if all(type(e) is str for e in values):
            strings = frozenset(values)
            checks.append(lambda v, t: t is str and v in strings)
        else:
            def enum_check(v: Any, t: type,
                           values: list[Any] = values) -> bool:
                return any(json_equal(e, v) for e in values)
            checks.append(enum_check)

    if 'format' in schema:
        checker = fc.checkers.get(schema['format'])
        if checker is not None:
            checks.append(_format_check(*checker))

    for keyword, compare in (('minimum', lambda n, m: n < m),
                             ('maximum', lambda n, m: n > m)):
        if keyword not in schema:
            continue
        limit = schema[keyword]
        if type(limit) not in (int, float):
            raise Unsupported('%s %r' % (keyword, limit))

        def number_check(v: Any, t: type, limit: Any = limit,
                         compare: Any = compare) -> bool:
            number = number_from_str(v)
            return number is None or not compare(number, limit)
        checks.append(number_check)

    for keyword, kinds, compare in (
            ('minLength', {str}, lambda n, m: n < m),
            ('maxLength', {str}, lambda n, m: n > m),
            ('minItems', _LIST_TYPES, lambda n, m: n < m),
            ('maxItems', _LIST_TYPES, lambda n, m: n > m),
            ('minProperties', _DICT_TYPES, lambda n, m: n < m),
            ('maxProperties', _DICT_TYPES, lambda n, m: n > m)):
        if keyword not in schema:
            continue
        limit = schema[keyword]
        if type(limit) is not int:
            raise Unsupported('%s %r' % (keyword, limit))
        def length_check(v: Any, t: type, kinds: Any = kinds,
                         limit: int = limit, compare: Any = compare) -> bool:
            return t not in kinds or not compare(len(v), limit)
        checks.append(length_check)

    if 'pattern' in schema:
        search = re.compile(schema['pattern']).search
        checks.append(lambda v, t: t is not str or search(v) is not None)

    if 'items' in schema:
        items = sub(schema['items'])

        def items_check(v: Any, t: type) -> bool:
            if t not in _LIST_TYPES:
                return True
            for item in v:
                if not items(item):
                    return False
            return True
        checks.append(items_check)

    if _OBJECT_KEYWORDS & set(schema):
        checks.append(_object_check(schema, sub))

    # Contents no keyword here looks into (a bare 'type': 'object', an
    # empty schema): nova serializes them all the same, and a value its
    # serializer cannot write fails nova's request. Applicators leave it
    # to the subschema that passes; 'not' passes on a failing one.
    applied = bool({'oneOf', 'anyOf', 'allOf'} & set(schema))
    if not applied and not _OBJECT_KEYWORDS & set(schema):
        checks.append(lambda v, t: t not in _DICT_TYPES or _plain(v))
    if not applied and 'items' not in schema:
        checks.append(lambda v, t: t not in _LIST_TYPES or _plain(v))

    for keyword in ('oneOf', 'anyOf', 'allOf'):
        if keyword not in schema:
            continue
        if not isinstance(schema[keyword], list) or not schema[keyword]:
            raise Unsupported('%s %r' % (keyword, schema[keyword]))
        subs = [sub(s) for s in schema[keyword]]
        if keyword == 'oneOf':
            def one_of(v: Any, t: type, subs: list[Check] = subs) -> bool:
                found = 0
                for f in subs:
                    if f(v):
                        found += 1
                        if found > 1:
                            return False
                return found == 1
            checks.append(one_of)
        elif keyword == 'anyOf':
            def any_of(v: Any, t: type, subs: list[Check] = subs) -> bool:
                return any(f(v) for f in subs)
            checks.append(any_of)
        else:
            def all_of(v: Any, t: type, subs: list[Check] = subs) -> bool:
                return all(f(v) for f in subs)
            checks.append(all_of)

    if 'not' in schema:
        negated = sub(schema['not'])
        checks.append(lambda v, t: not negated(v))

    return _node(checks)


#: Results of nova's format checks, per checker function: {str: bool}.
_FORMAT_RESULTS: dict[Any, dict[str, bool]] = {}
#: Strings remembered per format before that format's memory is cleared.
FORMAT_RESULTS_SIZE = 20000


def _format_check(func: Callable[[Any], Any],
                  raises: Any) -> Callable[[Any, type], bool]:
    """A ``FormatChecker``'s verdict on a value, remembered.

    As jsonschema's public ``FormatChecker.conforms``: the checker
    function's false result, or its ``raises`` exception, is a failure.

    nova's format checkers are functions of the string alone (uuid,
    date-time, uri, ipv4...): their verdict on a string is remembered
    (a server's links and ids come back in every listing). Exceptions
    other than the checker's ``raises`` propagate, as in jsonschema.
    """
    results = _FORMAT_RESULTS.setdefault(func, {})

    def format_check(v: Any, t: type) -> bool:
        if t is str:
            known = results.get(v)
            if known is not None:
                return known
        try:
            verdict = bool(func(v))
        except raises:
            verdict = False
        if t is str:
            if len(results) >= FORMAT_RESULTS_SIZE:
                results.clear()
            results[v] = verdict
        return verdict
    return format_check


def _plain(v: Any, depth: int = 0) -> bool:
    """True if *v* is JSON types all through; else :class:`NotNative`.

    For the parts of a body no keyword judges: serialized as they are,
    they can neither change a verdict nor fail nova's serializer.
    """
    t = type(v)
    if depth > 100:
        raise NotNative(t)
    if t in _DICT_TYPES:
        for key, value in v.items():
            if type(key) is not str:
                raise NotNative(type(key))
            _plain(value, depth + 1)
    elif t in _LIST_TYPES:
        for value in v:
            _plain(value, depth + 1)
    elif t not in _NATIVE_TYPES:
        raise NotNative(t)
    return True


def _as_json(v: Any, t: type) -> str:
    """What nova's serializer makes of *v* (a ``datetime``), or raise.

    nova's ``JSONDictSerializer`` writes with ``jsonutils.dumps``, whose
    ``default=jsonutils.to_primitive`` turns a ``datetime`` into a
    string (nova's server view gives ``launched_at`` and
    ``terminated_at`` as ``datetime``): the string is what nova
    validates. Anything else: :class:`NotNative`.
    """
    if t is not datetime.datetime:
        raise NotNative(t)
    from oslo_serialization import jsonutils
    try:
        text = jsonutils.to_primitive(v)
    except Exception as exc:  # noqa: B902 -- nova's serializer will say
        raise NotNative(t) from exc
    if type(text) is not str:
        raise NotNative(t)
    return text


def _node(checks: list[Callable[[Any, type], bool]]) -> Check:
    if len(checks) == 1:
        (only,) = checks

        def node_one(v: Any) -> bool:
            t = type(v)
            if t not in _NATIVE_TYPES:
                v = _as_json(v, t)
                t = str
            return only(v, t)
        return node_one

    def node(v: Any) -> bool:
        t = type(v)
        if t not in _NATIVE_TYPES:
            v = _as_json(v, t)
            t = str
        for check in checks:
            if not check(v, t):
                return False
        return True
    return node


def _object_check(schema: dict[str, Any],
                  sub: Callable[[Any], Check]
                  ) -> Callable[[Any, type], bool]:
    """properties, required, additionalProperties, patternProperties."""
    properties = schema.get('properties', {})
    patterns = schema.get('patternProperties', {})
    additional = schema.get('additionalProperties', True)
    if not isinstance(properties, dict) or not isinstance(patterns, dict):
        raise Unsupported('properties %r' % (properties,))
    required = schema.get('required', [])
    if not isinstance(required, list) or any(type(r) is not str
                                             for r in required):
        raise Unsupported('required %r' % (required,))
    required_keys = frozenset(required)
    property_checks = {name: sub(s) for name, s in properties.items()}
    names = frozenset(properties)
    pattern_checks = [(re.compile(p).search, sub(s))
                      for p, s in patterns.items()]
    # jsonschema finds additional properties with one search of the
    # patterns joined by '|'.
    joined = re.compile('|'.join(patterns)).search if patterns else None
    # None: any extra key is allowed; False: none is; else their check.
    additional_check: Check | bool | None
    if additional is True:
        additional_check = None
    elif additional is False:
        additional_check = False
    else:
        additional_check = sub(additional)
    closed = additional_check is False and not patterns

    def object_check(v: Any, t: type) -> bool:
        if t not in _DICT_TYPES:
            return True
        keys = v.keys()
        if closed:
            # Every key equals one of the schema's names (so it is a str,
            # and serializes to that name); any other key is an extra.
            if not keys <= names:
                return False
        else:
            for key in keys:
                if type(key) is not str:
                    raise NotNative(type(key))
        if not required_keys <= keys:
            return False
        for key, value in v.items():
            check = property_checks.get(key)
            if check is not None and not check(value):
                return False
            for search, pattern_check in pattern_checks:
                if search(key) and not pattern_check(value):
                    return False
            if check is None and (joined is None or not joined(key)):
                if additional_check is None:
                    # Allowed, and judged by nothing: plain JSON only.
                    _plain(value)
                elif additional_check is False or (
                        callable(additional_check) and
                        not additional_check(value)):
                    return False
        return True
    return object_check
