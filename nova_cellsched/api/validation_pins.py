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
#: nova 34.0.0, jsonschema 4.26, oslo.serialization 5.11 and
#: oslo.versionedobjects: the stack's decorators, nova's validator and
#: serializer, the collections nova's views hand over, and the jsonschema
#: keywords :func:`.schema_compiler.compile_schema` mirrors.
SOURCES = {
    'jsonschema._format.FormatChecker.check':
        'a7903aa7a089f0fc',
    'jsonschema._keywords.additionalProperties':
        '500c00dac931d1a6',
    'jsonschema._keywords.allOf':
        'e753c4f0133b2943',
    'jsonschema._keywords.anyOf':
        '4f916080dbfd0dea',
    'jsonschema._keywords.const':
        '7c9e71eb8a8c6cf9',
    'jsonschema._keywords.enum':
        '97de12f9544b4ec1',
    'jsonschema._keywords.format':
        'ebb50870557454a0',
    'jsonschema._keywords.items':
        '9dd5782548180505',
    'jsonschema._keywords.maxItems':
        'cbd16cd28cf827af',
    'jsonschema._keywords.maxLength':
        '075e985d62423836',
    'jsonschema._keywords.maxProperties':
        '1492b2febfb3eb3f',
    'jsonschema._keywords.maximum':
        'fa71d1f796a691d6',
    'jsonschema._keywords.minItems':
        '7a584d497333110c',
    'jsonschema._keywords.minLength':
        'aac64739db5e90db',
    'jsonschema._keywords.minProperties':
        '9a1882bd97c53483',
    'jsonschema._keywords.minimum':
        'da7b8e14ec1ed333',
    'jsonschema._keywords.not_':
        'f4048ac0cd6e23fb',
    'jsonschema._keywords.oneOf':
        '9ee6562975a5aa6f',
    'jsonschema._keywords.pattern':
        'ff726169b8850b7c',
    'jsonschema._keywords.patternProperties':
        '2e7ed22d6372bca6',
    'jsonschema._keywords.properties':
        '3aa8c9ee4ee6ec77',
    'jsonschema._keywords.required':
        '56681ce071a7fd4b',
    'jsonschema._keywords.type':
        'aa2ddb789910afe8',
    'jsonschema._types.is_integer':
        'ecacab20efc94ad3',
    'jsonschema._types.is_number':
        'efcbe401fba3d43c',
    'jsonschema._utils.equal':
        '8c575622555b3860',
    'jsonschema._utils.find_additional_properties':
        '3790449fcf479b43',
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
    from jsonschema import _format
    from jsonschema import _keywords
    from jsonschema import _types
    from jsonschema import _utils as jsonschema_utils
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
        'jsonschema._format.FormatChecker.check':
            _format.FormatChecker.check,
        'jsonschema._utils.equal': jsonschema_utils.equal,
        'jsonschema._utils.find_additional_properties':
            jsonschema_utils.find_additional_properties,
        'jsonschema._types.is_number': _types.is_number,
        'jsonschema._types.is_integer': _types.is_integer,
    }
    for name in METHODS:
        found['nova.api.openstack.compute.servers.ServersController.%s'
              % name] = inspect.unwrap(getattr(servers.ServersController,
                                               name))
    for keyword in ('type', 'enum', 'const', 'properties', 'required',
                    'additionalProperties', 'patternProperties', 'items',
                    'minItems', 'maxItems', 'minLength', 'maxLength',
                    'pattern', 'format', 'oneOf', 'anyOf', 'allOf', 'not_',
                    'minimum', 'maximum', 'minProperties',
                    'maxProperties'):
        found['jsonschema._keywords.%s' % keyword] = getattr(_keywords,
                                                             keyword)
    return found


def source_hash(thing: Any) -> str:
    """First 16 hex digits of the sha256 of *thing*'s source."""
    source = inspect.getsource(thing)
    return hashlib.sha256(source.encode('utf-8')).hexdigest()[:16]


def source_problems() -> list[str]:
    """One line per relied-on source that differs from :data:`SOURCES`."""
    problems = []
    try:
        relied_on = _relied_on()
    except (ImportError, AttributeError) as exc:
        return ['nova or jsonschema lacks what response validation uses '
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

