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

"""What the fast response validation relies on, pinned by source hash.

:data:`SOURCES` holds the hash of each function or class the request
path (:mod:`.validation`), the stack rebuilding (:mod:`.response_stack`)
and the compiler (:mod:`.schema_compiler`) rely on;
:func:`source_problems` says which differ in the running process.
"""

import hashlib
import inspect
from typing import Any

from oslo_versionedobjects import fields as ovo_fields

#: The controller methods whose stack is replaced: their own code is
#: pinned here.
METHODS = ('index', 'detail')

#: sha256 (first 16 hex digits) of the source of what this relies on, in
#: nova 34.0.0, oslo.serialization 5.11 and oslo.versionedobjects: the
#: stack's decorators, nova's validator and serializer, and the
#: collections nova's views hand over. jsonschema is not pinned by
#: source: only its public API is used (:data:`JSONSCHEMA_TESTED`).
SOURCES = {
    'nova.api.openstack.compute.servers.ServersController.detail':
        'dc6ae562b29a13e5',
    'nova.api.openstack.compute.servers.ServersController.index':
        '34dc752aee3db14b',
    'nova.api.openstack.wsgi.JSONDictSerializer':
        'c89e859438f827d6',
    'nova.api.openstack.wsgi.expected_errors':
        '1082228ad25fd92a',
    'nova.api.validation._schema_validation_helper':
        '5e4fdf53f592e790',
    'nova.api.validation.query_schema':
        'dc9e09cdcad042fe',
    'nova.api.validation.response_body_schema':
        '9c623feda7dcfbdf',
    'nova.api.validation.validators':
        '5e869102b36944f7',
    'oslo_serialization.jsonutils.dumps':
        'c192853b022f10a5',
    'oslo_serialization.jsonutils.to_primitive':
        'c5c87b528e6f77ae',
    'oslo_versionedobjects.fields.CoercedCollectionMixin':
        'b256f508737e1331',
    'oslo_versionedobjects.fields.CoercedDict':
        '9d99dcae0fcb08e0',
    'oslo_versionedobjects.fields.CoercedList':
        '46a193f9933bfb9a',
}


def _relied_on() -> dict[str, Any]:
    """name -> the function or class whose source :data:`SOURCES` pins."""
    from nova.api.openstack.compute import servers
    from nova.api.openstack import wsgi
    from nova.api import validation as nova_validation
    from nova.api.validation import validators
    from oslo_serialization import jsonutils

    found: dict[str, Any] = {
        'nova.api.validation.response_body_schema':
            nova_validation.response_body_schema,
        'nova.api.validation._schema_validation_helper':
            nova_validation._schema_validation_helper,
        'nova.api.validation.query_schema': nova_validation.query_schema,
        # _SchemaValidator and the format checks, whose verdicts on a
        # string are remembered.
        'nova.api.validation.validators': validators,
        'nova.api.openstack.wsgi.expected_errors': wsgi.expected_errors,
        'nova.api.openstack.wsgi.JSONDictSerializer':
            wsgi.JSONDictSerializer,
        'oslo_serialization.jsonutils.dumps': jsonutils.dumps,
        'oslo_versionedobjects.fields.CoercedCollectionMixin':
            ovo_fields.CoercedCollectionMixin,
        'oslo_versionedobjects.fields.CoercedDict': ovo_fields.CoercedDict,
        'oslo_versionedobjects.fields.CoercedList': ovo_fields.CoercedList,
        'oslo_serialization.jsonutils.to_primitive': jsonutils.to_primitive,
    }
    for name in METHODS:
        found['nova.api.openstack.compute.servers.ServersController.%s'
              % name] = inspect.unwrap(getattr(servers.ServersController,
                                               name))
    return found


def source_hash(thing: Any) -> str:
    """First 16 hex digits of the sha256 of *thing*'s source."""
    source = inspect.getsource(thing)
    return hashlib.sha256(source.encode('utf-8')).hexdigest()[:16]


#: The jsonschema releases the verdict tests passed with, and the nova
#: releases whose upper-constraints pin them. Not a gate: the compiler
#: relies on the draft's semantics and jsonschema's public API only
#: (:func:`jsonschema_problems`), so another release keeps the fast
#: path; to add one, run the verdict tests with it (contributor guide).
JSONSCHEMA_TESTED = {
    '4.23.0': 'nova 31 (2025.1)',
    '4.25.0': 'nova 32 (2025.2)',
    '4.26.0': 'nova 33 (2026.1), nova 34',
}


def jsonschema_problems() -> list[str]:
    """What the fast path needs of jsonschema's public API, if missing.

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


def source_problems() -> list[str]:
    """One line per relied-on source that differs from :data:`SOURCES`."""
    problems = []
    try:
        relied_on = _relied_on()
    except (ImportError, AttributeError) as exc:
        return ['nova lacks what response validation uses '
                '(%s)' % exc]
    for name, expected in SOURCES.items():
        thing = relied_on.get(name)
        if thing is None:
            problems.append('%s is missing' % name)
            continue
        try:
            found = source_hash(thing)
        except (OSError, TypeError) as exc:
            problems.append('the source of %s cannot be read (%s)'
                            % (name, exc))
            continue
        if found != expected:
            problems.append('%s is not the code this was built for '
                            '(source sha256 %s, expected %s)'
                            % (name, found, expected))
    missing = set(relied_on) - set(SOURCES)
    if missing:
        problems.append('no source hash for %s' % ', '.join(sorted(missing)))
    return problems

