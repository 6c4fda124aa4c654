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

"""The server-list response validator gives nova's verdict, nova's text.

Generated: every response schema nova 34 attaches to
``ServersController.index`` and ``detail``, valid bodies from nova's
api-samples templates and those bodies mutated one place at a time
(:mod:`tests.fixtures.schema_bodies`); for each (schema, body) pair the
compiled validator must agree with nova's ``_SchemaValidator``. The functional
side (real responses at every microversion, nova-api end to end) is
``tests.functional.test_nova_api_validation``.
"""

import collections
import dataclasses
import datetime

import fixtures
import hypothesis
from hypothesis import strategies as st
import jsonschema
from nova.api.openstack import api_version_request
from nova.api import validation as nova_validation
from nova.api.validation import validators
from nova import exception
from nova.tests.unit.api.openstack import fakes
from testtools.content import text_content

from nova_cellsched.api.validation import schema_compiler
from nova_cellsched.api.validation import validator as validation
from nova_cellsched import compat
from nova_cellsched.compat import core as compat_core
from nova_cellsched.compat import hashing
from tests import base
from tests.fixtures import schema_bodies


def _skip_where_nova_validates_no_list(test_case):
    """Skip *test_case* on a release whose server lists have no schema.

    nova 31 and 32 attach no response schema to
    ``ServersController.index`` and ``detail``: there is no verdict of
    nova's to compare with, and the part stays off (its table says why:
    ``LACKS``). The compiler's own tests run on every release.
    """
    lacks = compat_core.lacking('validation')
    if lacks is not None:
        test_case.skipTest(lacks)


def _number_from_str(value):
    return validators._SchemaValidator._number_from_str(None, value)


def _applies(directory, low, high):
    return api_version_request.APIVersionRequest(
        schema_bodies.version_of(directory)).matches(
            api_version_request.APIVersionRequest(low),
            api_version_request.APIVersionRequest(high))


class _Str(str):
    """A str subclass (json writes it as the plain string)."""


#: A value nova's JSON serializer cannot write.
UNWRITABLE = object()


class TestVerdictEquivalence(base.TestCase):
    """The compiled validator accepts exactly the bodies nova accepts."""

    def _compare_templates(self, counts, mismatches):
        for method in validation.METHODS:
            bodies = schema_bodies.template_bodies(method)
            for schema, low, high in schema_bodies.response_schemas(method):
                own = [b for d, b in bodies.items()
                       if _applies(d, low, high)]
                other = [b for d, b in bodies.items()
                         if not _applies(d, low, high)]
                schema_bodies.verdicts(schema, own, counts, mismatches)
                # The other microversions' bodies, unmutated.
                schema_bodies.verdicts(schema, other, counts, mismatches,
                                       limit_mutations=1,
                                       kind='other-version')

    def test_every_schema_every_mutation_same_verdict_as_nova(self):
        """api-samples bodies and their mutations, every schema: nova's
        verdict on each, from the compiled validator.
        """
        _skip_where_nova_validates_no_list(self)
        counts = schema_bodies.new_counts()
        mismatches = []
        self._compare_templates(counts, mismatches)
        self.assertEqual([], mismatches)
        self.addDetail('verdict-equivalence', text_content(
            'templates: %d (schema, body) pairs: %s'
            % (sum(counts.values()), dict(counts.most_common()))))
        # Every kind of mutation was tried.
        for kind in ('valid', 'required', 'type', 'null', 'format',
                     'extra', 'enum', 'pattern', 'pattern-key', 'length',
                     'minItems', 'maxItems', 'empty-list', 'json-type'):
            self.assertGreater(counts[kind], 0, kind)
        # Every schema of both methods had a template body of its own
        # except detail 2.26-2.46 (nova ships none), checked with the
        # other versions' bodies.
        self.assertGreater(counts['valid'], 16)

    def test_string_numbers_at_and_across_minimum_maximum(self):
        """nova reads string numbers for minimum/maximum (its
        _SchemaValidator): '5', ' 5 ', '1_0', 'nan', True, 4.5... get
        nova's verdict at and across each limit.
        """
        schema = {
            'type': 'object',
            'properties': {
                'count': {'type': ['integer', 'string'], 'minimum': 1,
                          'maximum': 10},
                'any': {'minimum': -3},
                'ratio': {'type': 'number', 'maximum': 2.5},
            },
            'required': ['count'],
            'additionalProperties': False,
        }
        counts = schema_bodies.new_counts()
        mismatches = []
        schema_bodies.verdicts(
            schema, [{'count': 5, 'any': '0', 'ratio': 1.5},
                     {'count': '10', 'any': None}], counts, mismatches)
        self.assertEqual([], mismatches)
        self.addDetail('verdict-equivalence', text_content(
            'string numbers: %d (schema, body) pairs: %s'
            % (sum(counts.values()), dict(counts.most_common()))))
        self.assertGreater(counts['number'], 40)

    def test_a_standard_format_checker_would_disagree(self):
        """The comparison sees a wrong validator: one compiled with
        jsonschema's standard formats disagrees with nova (whose uuid
        format accepts a uuid without dashes).
        """
        _skip_where_nova_validates_no_list(self)
        schema = schema_bodies.response_schemas('detail')[0][0]
        standard = schema_compiler.compile_schema(
            schema, jsonschema.Draft202012Validator.FORMAT_CHECKER,
            _number_from_str)
        body = schema_bodies.template_bodies('detail')['v2.100']
        counts = schema_bodies.new_counts()
        mismatches = []
        schema_bodies.verdicts(schema, [body], counts, mismatches,
                               check=standard)
        self.assertIn(('format', True, False),
                      [m[:3] for m in mismatches])
        mismatches = []
        schema_bodies.verdicts(schema, [body], counts, mismatches)
        self.assertEqual([], mismatches)


class TestValidateResponse(base.TestCase):
    """One request's validation: nova's schema, nova's text, nova's modes."""

    def setUp(self):
        super().setUp()
        _skip_where_nova_validates_no_list(self)
        self.schemas = schema_bodies.response_schemas('detail')
        self.ours = [validation._Schema(*s) for s in self.schemas]
        self.body = schema_bodies.template_bodies('detail')['v2.100']
        self.req = fakes.HTTPRequest.blank('/v2.1/servers/detail',
                                           version='2.100')

    def _nova(self, body):
        """nova's own stack of response decorators on *body*."""
        def view(self, req):
            return body
        for schema, low, high in reversed(self.schemas):
            view = nova_validation.response_body_schema(
                schema, low, high)(view)
        return view(None, self.req)

    def _result_of(self, run):
        """(raised text or None, logged text) of *run*."""
        logger = self.useFixture(fixtures.FakeLogger(
            name='nova.api.validation', level='WARNING'))
        try:
            run()
        except exception.ValidationError as exc:
            return str(exc), logger.output
        except ValueError as exc:
            # nova's serializer refusing a value.
            return 'ValueError: %s' % exc, logger.output
        return None, logger.output

    def _both(self, body):
        nova = self._result_of(lambda: self._nova(body))
        ours = self._result_of(lambda: validation.validate_response(
            self.ours, body, (None, self.req), {}))
        return nova, ours

    def test_error_raises_novas_validation_error(self):
        self.flags(response_validation='error', group='api')
        body = schema_bodies.apply(self.body, ('servers', 0, 'status'),
                                   'BOGUS')
        before = validation.validated()
        nova, ours = self._both(body)
        self.assertIsNotNone(nova[0])
        self.assertEqual(nova, ours)
        self.assertEqual(before['nova_rejected'] + 1,
                         validation.validated()['nova_rejected'])

    def test_warn_logs_novas_message_and_returns(self):
        self.flags(response_validation='warn', group='api')
        body = schema_bodies.apply(self.body, ('servers', 0, 'id'), 'x')
        nova, ours = self._both(body)
        self.assertIsNone(ours[0])
        self.assertIn('Schema failed to validate', ours[1])
        # Same lines but the traceback's frames.
        self.assertEqual(nova[1].splitlines()[0], ours[1].splitlines()[0])
        self.assertEqual(nova[1].splitlines()[-1], ours[1].splitlines()[-1])

    def test_ignore_validates_nothing(self):
        self.flags(response_validation='ignore', group='api')
        before = validation.validated()
        body = schema_bodies.apply(self.body, ('servers',), 'nonsense')
        self.assertEqual((None, ''), self._both(body)[1])
        self.assertEqual(before['none'] + 1, validation.validated()['none'])

    def test_valid_body_validated_fast(self):
        self.flags(response_validation='error', group='api')
        before = validation.validated()
        self.assertEqual(((None, ''), (None, '')), self._both(self.body))
        self.assertEqual(before['fast'] + 1, validation.validated()['fast'])

    def test_values_json_changes_get_novas_verdict(self):
        """Values that are not plain JSON types (datetime, tuple, str
        subclass, int key, dict subclass) are judged on the body as
        serialized, as nova does.
        """
        self.flags(response_validation='error', group='api')
        moment = datetime.datetime(2026, 11, 24, 10, 0, 0)
        cases = [
            (('servers', 0, 'created'), moment),
            (('servers', 0, 'OS-SRV-USG:launched_at'), moment),
            (('servers', 0, 'links'), tuple(self.body['servers'][0]['links'])),
            (('servers', 0, 'name'), _Str('a name')),
            (('servers', 0, 'metadata'), {1: 'one'}),
            (('servers', 0, 'metadata'), collections.OrderedDict(a='b')),
            (('servers', 0, 'scheduler_hints'), {'group': ('a',)}),
            (('servers', 0, 'progress'), 1.5),
            # Where no keyword looks: a set (written as a list), and a
            # value nova's serializer refuses (nova's request fails).
            (('servers', 0, 'scheduler_hints'), {'query': {'a': {1, 2}}}),
            (('servers', 0, 'scheduler_hints'), {'foo': UNWRITABLE}),
        ]
        outcomes = []
        for path, value in cases:
            body = schema_bodies.apply(self.body, path, value)
            nova, ours = self._both(body)
            self.assertEqual(nova, ours, (path, value))
            outcomes.append(ours[0])
        self.assertTrue(outcomes[-1].startswith('ValueError: Cannot '
                                                'convert'), outcomes[-1])

    def test_legacy_v2_no_schema_applies(self):
        self.flags(response_validation='error', group='api')
        self.req.environ['openstack.legacy_v2'] = True
        self.assertTrue(self.req.is_legacy_v2())
        before = validation.validated()
        body = schema_bodies.apply(self.body, ('servers', 0, 'id'), 'x')
        nova, ours = self._both(body)
        self.assertEqual((None, ''), ours)
        self.assertEqual(nova, ours)
        self.assertEqual(before['none'] + 1, validation.validated()['none'])


class TestFaults(base.TestCase):
    """A schema the compiler refuses, a validator that raises: nova's."""

    def setUp(self):
        super().setUp()
        self.flags(response_validation='error', group='api')
        self.req = fakes.HTTPRequest.blank('/v2.1/servers', version='2.1')
        self.logger = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.api.validation.validator', level='WARNING'))

    def test_uncompilable_schema_is_validated_by_nova(self):
        schema = {'type': 'object', '$ref': '#/$defs/x',
                  '$defs': {'x': {'required': ['a']}}}
        self.assertRaises(schema_compiler.Unsupported,
                          schema_compiler.compile_schema, schema,
                          validators._FORMAT_CHECKER, _number_from_str)
        ours = [validation._Schema(schema, None, None)]
        before = validation.validated()
        ex = self.assertRaises(
            exception.ValidationError, validation.validate_response, ours,
            {'b': 1}, (None, self.req), {})
        self.assertEqual("'a' is a required property", str(ex))
        validation.validate_response(ours, {'a': 1}, (None, self.req), {})
        after = validation.validated()
        self.assertEqual(before['nova_rejected'] + 1, after['nova_rejected'])
        self.assertEqual(before['nova_accepted'] + 1, after['nova_accepted'])
        self.assertEqual(1, self.logger.output.count('cannot compile'))

    def test_raising_validator_falls_back_to_nova_logged_once(self):
        schema = {'type': 'object', 'properties': {},
                  'additionalProperties': False}
        ours = [validation._Schema(schema, None, None)]

        def broken(body):
            raise RuntimeError('compiled validator bug')

        validation.VALIDATORS._compiled[id(schema)] = (schema, broken)
        self.addCleanup(validation.VALIDATORS._compiled.pop, id(schema))
        for _ in range(3):
            validation.validate_response(ours, {}, (None, self.req), {})
            self.assertRaises(exception.ValidationError,
                              validation.validate_response, ours,
                              {'x': 1}, (None, self.req), {})
        self.assertEqual(1, self.logger.output.count('compiled validator '
                                                     'bug'))
        self.assertIsNone(validation.VALIDATORS.get(schema))


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3),
    st.floats(-3, 3).filter(lambda f: f == f), st.sampled_from(
        ['', 'a', '1', 'true', 'null']))
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=2),
                    st.dictionaries(st.sampled_from(['a', '1']), _SCALARS,
                                    max_size=2))


class TestJsonEqual(base.TestCase):
    """enum and const compare as jsonschema's public validator does."""

    @hypothesis.settings(max_examples=400, deadline=None)
    @hypothesis.given(_SCALARS, _VALUES)
    def test_same_verdict_as_draft_2020_12_enum_and_const(self, one, two):
        for schema in ({'enum': [one]}, {'const': one}):
            expected = jsonschema.Draft202012Validator(schema).is_valid(two)
            self.assertEqual(expected,
                             schema_compiler.compile_schema(
                                 schema, validators._FORMAT_CHECKER,
                                 _number_from_str)(two),
                             '%r against %r' % (two, schema))

    def test_booleans_are_not_numbers(self):
        self.assertFalse(schema_compiler.json_equal(True, 1))
        self.assertFalse(schema_compiler.json_equal(0, False))
        self.assertTrue(schema_compiler.json_equal(1, 1.0))
        self.assertTrue(schema_compiler.json_equal(False, False))


class TestInstall(base.TestCase):
    """Installed only on the nova it was built for; removed cleanly."""

    def setUp(self):
        super().setUp()
        _skip_where_nova_validates_no_list(self)
        from nova.api.openstack.compute import servers
        self.controller = servers.ServersController
        self.original = {name: self.controller.__dict__[name]
                         for name in validation.METHODS}
        self.addCleanup(compat.restore, ['validation'])

    def test_check_finds_nothing_on_this_nova(self):
        self.assertEqual([], compat.check(['validation'])['validation'])

    def test_changed_source_leaves_nova_alone(self):
        (release,) = [r for r in compat.tested()
                      if r.version == hashing.nova_version()]
        hashes = dict(release.hashes)
        hashes['nova.api.validation.response_body_schema'] = '0' * 64
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.compat.core.tested',
            lambda: (dataclasses.replace(release, hashes=hashes),)))
        logger = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.compat.core'))
        self.assertTrue(compat.install(['validation'])['validation'])
        self.assertRegex(logger.output,
                         r"nova-cellsched's part validation, which .*, is "
                         r'off: nova\.api\.validation\.response_body_schema'
                         r'\(.*\): source differs from the tested ones')
        self.assertFalse(compat.is_on('validation'))
        for name, method in self.original.items():
            self.assertIs(method, self.controller.__dict__[name])

    def test_changed_private_jsonschema_code_keeps_the_fast_path(self):
        """Only jsonschema's public API is relied on: a release whose
        private keyword functions differ (here: replaced) installs.
        """
        from jsonschema import _keywords

        def enum(validator, enums, instance, schema):
            """A different private implementation."""
            return _ORIGINAL_ENUM(validator, enums, instance, schema)

        _ORIGINAL_ENUM = _keywords.enum
        self.useFixture(fixtures.MonkeyPatch(
            'jsonschema._keywords.enum', enum))
        self.assertEqual([], compat.check(['validation'])['validation'])
        self.assertEqual({'validation': []}, compat.install(['validation']))
        self.assertTrue(compat.is_on('validation'))

    def test_format_checker_not_jsonschemas_leaves_nova_alone(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.api.validation.validators._FORMAT_CHECKER', object()))
        logger = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched.compat.core'))
        self.assertEqual(
            ["nova's _FORMAT_CHECKER is not a jsonschema.FormatChecker "
             'with a checkers mapping'],
            compat.install(['validation'])['validation'])
        self.assertIn("nova's _FORMAT_CHECKER is not a "
                      'jsonschema.FormatChecker', logger.output)
        self.assertFalse(compat.is_on('validation'))
        for name, method in self.original.items():
            self.assertIs(method, self.controller.__dict__[name])

    def test_install_keeps_novas_decorators_uninstall_restores(self):
        self.assertEqual({'validation': []}, compat.install(['validation']))
        self.assertEqual({'validation': []}, compat.install(['validation']))
        for name, method in self.original.items():
            ours = self.controller.__dict__[name]
            self.assertIsNot(method, ours)
            self.assertEqual(
                [(s[1], s[2]) for s in method.request_query_schemas._schemas],
                [(s[1], s[2]) for s in ours.request_query_schemas._schemas])
            self.assertIs(method.response_body_schemas,
                          ours.response_body_schemas)
            self.assertIs(inspect_unwrap(method), inspect_unwrap(ours))
        self.assertEqual(['validation'], compat.restore(['validation']))
        for name, method in self.original.items():
            self.assertIs(method, self.controller.__dict__[name])


def inspect_unwrap(function):
    import inspect
    return inspect.unwrap(function)
