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

"""Bodies for the verdict equivalence of the response validators.

nova's response schemas of ``ServersController.index`` and ``detail``
(read from nova's decorators), valid bodies from nova's api-samples
templates, and bodies mutated one place at a time, guided by the schema:
each required key removed, each value's type changed, null, values that
break or stretch each ``format``, ``enum``, ``pattern``, length and
``minimum``/``maximum`` (string numbers at and across the limit), an
extra key where ``additionalProperties`` is false, keys that miss the
``patternProperties``, empty and too long lists.

:func:`verdicts` compares nova's validator with the compiled one on each.
"""

import collections
import copy
import datetime
import json
import os
import re
import uuid

from nova.api.openstack.compute import servers
from nova.api.validation import validators
from oslo_serialization import jsonutils
from oslo_versionedobjects import fields as ovo_fields

from nova_cellsched.api.validation import response_stack
from nova_cellsched.api.validation import schema_compiler
from nova_cellsched.api.validation import validator as validation
from nova_cellsched import compat

#: api-samples templates (shipped in nova's wheel with its tests).
SAMPLES = os.path.join(
    os.path.dirname(servers.__file__), os.pardir, os.pardir, os.pardir,
    'tests', 'functional', 'api_sample_tests', 'api_samples',
    'servers')

#: Values for the templates' placeholders (the sample tests' shapes).
SUBS = {
    'access_ip_v4': '1.2.3.4', 'access_ip_v6': '80fe::',
    'ip': '192.168.1.30', 'ip6': 'fe80::1',
    'isotime': '2026-11-24T10:00:00Z',
    'strtime': '2026-11-24T10:00:00.000000',
    'hostid': 'a' * 56, 'cdrive': '',
    'compute_endpoint':
        'http://openstack.example.com/6f70656e737461636b20342065766572',
    'versioned_compute_endpoint':
        'http://openstack.example.com/v2.1/6f70656e737461636b20342065766572',
    'glance_host': 'http://glance.openstack.example.com',
    'host': 'http://openstack.example.com', 'compute_host': 'compute',
    'hypervisor_hostname': 'fake-mini', 'user_data': 'ZWNobyAiaGVsbG8i',
    'reservation_id': 'r-abcdefgh', 'hostname': 'new-server-test',
    'instance_name': 'instance-00000001', 'int': '1', 'text': 'text',
    'user_id': 'fake',
}

TEMPLATES = {'index': 'servers-list-resp', 'detail': 'servers-details-resp'}


def response_schemas(method):
    """[(schema, min_version, max_version)] of nova's *method*, in order."""
    layers, _ = response_stack.layers(compat.original(
        'nova.api.openstack.compute.servers:ServersController', method))
    return [(a['response_body_schema'], a['min_version'], a['max_version'])
            for kind, a, _ in reversed(layers)
            if kind == 'response_body_schema']


def fill(text, server_uuid=None):
    """A template with its placeholders replaced."""
    def replace(match):
        key = match.group(1)
        if key in ('id', 'uuid'):
            return server_uuid or str(uuid.uuid4())
        return SUBS.get(key, 'x')
    return re.sub(r'%\((\w+)\)s', replace, text)


def template_bodies(method):
    """{version directory: body} of every api-samples list template."""
    found = {}
    if not os.path.isdir(SAMPLES):
        return found
    for directory in [''] + sorted(os.listdir(SAMPLES)):
        path = os.path.join(SAMPLES, directory,
                            TEMPLATES[method] + '.json.tpl')
        if os.path.exists(path):
            with open(path) as f:
                found[directory or 'v2.1'] = json.loads(
                    fill(f.read(), str(uuid.uuid4())))
    return found


def version_of(directory):
    return directory[1:] if directory.startswith('v') else directory


_DELETE = object()
SAMPLE_OF_TYPE = {'string': 'x', 'integer': 7, 'number': 1.5,
                  'boolean': True, 'null': None, 'object': {}, 'array': []}

#: Values around each format nova's schemas use (some nova accepts and
#: a standard checker would not, e.g. a date-time without timezone).
FORMAT_VALUES = {
    'uuid': ['not-a-uuid', '', '6F9619FF-8B86-D011-B42D-00C04FC964FF',
             '6f9619ff8b86d011b42d00c04fc964ff',
             '{6f9619ff-8b86-d011-b42d-00c04fc964ff}',
             'urn:uuid:6f9619ff-8b86-d011-b42d-00c04fc964ff',
             '6f9619ff-8b86-d011-b42d-00c04fc964f'],
    'date-time': ['yesterday', '', '2026-11-24T10:00:00',
                  '2026-11-24 10:00:00', '2026-13-01T00:00:00Z',
                  '2026-11-24T10:00:00+02:00', '2026-11-24',
                  '2026-11-24T10:00:00.123456789Z', '20261124T100000Z'],
    'ipv4': ['256.0.0.1', '1.2.3', '01.2.3.4', 'fe80::1', '', '1.2.3.4 '],
    'ipv6': [':::1', '1.2.3.4', 'fe80::1%eth0', '', '::ffff:1.2.3.4',
             'FE80::1'],
    'uri': ['example.com/a', 'http://', 'http://ex ample.com/',
            'mailto:a@b.c', 'http://example.com:99999/',
            'http://example.com/\u00e4', '', 'http://[::1]/a',
            'https://u@example.com/a?b=c#d', 'http://example.com/%zz'],
    'base64': ['!!!', 'YQ', 'YQ==', '', 'Y Q =='],
    'mac-address': ['zz', ''],
    'name': ['', ' lead', 'x', 'trail '],
}


def _number_values(limit):
    return [str(limit), str(limit - 1), str(limit + 1), limit - 1,
            limit + 1, limit - 0.5, limit + 0.5, ' %s ' % limit,
            '1_0', 'nan', 'inf', '-inf', 'x', True, False,
            str(float(limit)), '%se0' % limit]


def mutations(schema, value, path=()):
    """(kind, path, new value or _DELETE) for one body node."""
    if not isinstance(schema, dict):
        return
    types = schema.get('type')
    types = [types] if isinstance(types, str) else (types or [])
    if 'null' not in types:
        yield 'null', path, None
    # One scalar and one container of a type the schema does not allow.
    for group in (('string', 'integer', 'boolean'), ('object', 'array')):
        name = next((n for n in group if n not in types), None)
        if name is not None:
            yield 'type', path, SAMPLE_OF_TYPE[name]
    if 'integer' in types or 'number' in types:
        yield 'type', path, 4.0
        yield 'type', path, '4'
    if 'format' in schema:
        for new in FORMAT_VALUES.get(schema['format'], ['zz']):
            yield 'format', path, new
        if schema['format'] == 'date-time':
            # What nova's view gives for launched_at: a datetime, which
            # nova's serializer writes as a string.
            for new in (datetime.datetime(2026, 11, 24, 10, 0, 0, 123),
                        datetime.datetime(2026, 11, 24, 10, 0, 0,
                                          tzinfo=datetime.timezone.utc)):
                yield 'json-type', path, new
    for keyword in ('enum', 'const'):
        if keyword in schema:
            values = (schema['enum'] if keyword == 'enum'
                      else [schema['const']])
            yield 'enum', path, 'BOGUS'
            for each in values:
                if isinstance(each, (int, float)) and not isinstance(
                        each, bool):
                    for new in (float(each), str(each), each == 1):
                        yield 'enum', path, new
    if 'pattern' in schema:
        for new in ('bad value!', 'abc\n', '\u00e9', ''):
            yield 'pattern', path, new
    for keyword in ('minLength', 'maxLength'):
        if keyword in schema:
            n = schema[keyword]
            for new in ('x' * max(n - 1, 0), 'x' * n, 'x' * (n + 1)):
                yield 'length', path, new
    for keyword in ('minimum', 'maximum'):
        if keyword in schema:
            for new in _number_values(schema[keyword]):
                yield 'number', path, new
    for keyword in ('oneOf', 'anyOf', 'allOf'):
        for sub in schema.get(keyword, []):
            yield from mutations(sub, value, path)
    if isinstance(value, dict):
        # Values JSON turns into others: an OrderedDict (nova's address
        # view), a non-string key.
        yield 'json-type', path, collections.OrderedDict(value)
        yield 'json-type', path, ovo_fields.CoercedDict(value)
        yield 'json-type', path, dict(value, **{'1': 'y'}) | {1: 'x'}
        yield from _object_mutations(schema, value, path)
    if isinstance(value, list):
        yield 'json-type', path, tuple(value)
        yield 'json-type', path, ovo_fields.CoercedList(value)
        if 'minItems' in schema:
            yield 'minItems', path, []
        else:
            yield 'empty-list', path, []
        if 'maxItems' in schema and value:
            yield 'maxItems', path, value * (schema['maxItems'] + 1)
        items = schema.get('items')
        for index, item in enumerate(value[:2]):
            yield from mutations(items, item, path + (index,))


def _object_mutations(schema, value, path):
    properties = schema.get('properties', {})
    patterns = schema.get('patternProperties', {})
    for key in schema.get('required', []):
        if key in value:
            yield 'required', path + (key,), _DELETE
    if schema.get('additionalProperties', True) is not True:
        yield 'extra', path + ('cellsched-extra',), 'x'
    if patterns:
        for key in ('', 'bad key!', 'k\n', 'x' * 256, '\u00e9'):
            yield 'pattern-key', path + (key,), 'x'
    for key, sub in properties.items():
        if key in value:
            yield from mutations(sub, value[key], path + (key,))
    for key, item in value.items():
        for pattern, sub in patterns.items():
            if re.search(pattern, key):
                yield from mutations(sub, item, path + (key,))


def apply(body, path, new):
    """A copy of *body* with *new* at *path* (or that key removed)."""
    if not path:
        return copy.deepcopy(new)
    body = copy.deepcopy(body)
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    if new is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(new)
    return body


_NOVA = {}


def nova_accepts(schema, body):
    """nova's verdict: (accepted, its error text).

    One nova validator per schema (nova builds one per request; the
    verdict is the same).
    """
    if id(schema) not in _NOVA:
        _NOVA[id(schema)] = (schema, validators._SchemaValidator(schema))
    try:
        _NOVA[id(schema)][1].validate(body)
    except Exception as exc:  # noqa: B902 -- nova's text, whatever it is
        return False, '%s: %s' % (type(exc).__name__, exc)
    return True, None


def fast_accepts(check, body):
    """The compiled verdict, as ``validate_response`` reaches it."""
    try:
        return bool(check(body))
    except schema_compiler.NotNative:
        return bool(check(jsonutils.loads(jsonutils.dumps(body))))


def verdicts(schema, bodies, counts, mismatches, limit_mutations=None,
             check=None, kind='valid'):
    """Compare the verdicts on *bodies* and their mutations.

    Counts each (schema, body) pair by kind in *counts*; appends each
    disagreement to *mismatches*. *check*: the compiled validator to
    compare (the one nova-api uses by default); *kind*: what to count
    the bodies themselves as.
    """
    check = check or validation.VALIDATORS.get(schema)
    assert check is not None, 'the compiler refused a response schema'
    for body in bodies:
        tried = [(kind, body)]
        seen = set()
        for mutation, path, new in mutations(schema, body):
            key = (path, type(new), repr(new))
            if key in seen:
                continue
            seen.add(key)
            tried.append((mutation, apply(body, path, new)))
        for tried_kind, candidate in tried[:limit_mutations]:
            counts[tried_kind] += 1
            # nova validates the body as its serializer writes it.
            nova, text = nova_accepts(
                schema, jsonutils.loads(jsonutils.dumps(candidate)))
            ours = fast_accepts(check, candidate)
            if nova != ours:
                mismatches.append((tried_kind, nova, ours, text,
                                   json.dumps(candidate)[:300]))


def new_counts():
    return collections.Counter()
