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

"""Time the response validation of GET /servers/detail: nova's and ours.

::

    python benchmarks/bench_validation.py --servers 1000 --repeat 5

The body is nova's api-samples ``servers-details-resp`` template of the
microversion, repeated with a new server uuid each time (so ids and
links differ per server, as in a real listing). Timed, best of
``--repeat``:

- ``nova``: nova's own stack of ``response_body_schema`` decorators of
  ``ServersController.detail`` (the schemas read from nova's stack,
  applied by nova's decorator to a view returning the body): every
  decorator serializes and parses the body, the one whose range
  applies builds a validator and validates;
- ``nova validate only``: that one ``_SchemaValidator`` validation;
- ``ours cold`` / ``ours warm``: :func:`validate_response` with the
  compiled validator, its remembered format verdicts empty (first
  listing of these servers) and filled (the same servers listed again);
- ``jsonschema-rs``, when installed: its Draft 2020-12 validator with
  nova's format checks as Python callbacks, on the parsed body.

One JSON line per microversion is printed; ``--json PATH`` and ``--out
DIR`` (``validation.json``, ``validation.md``) write the run as every
benchmark does (``benchmarks/reporting.py``).
"""

# The suite's package first: it applies nova's concurrency mode (native
# threads, nova-api's default) before nova is imported.
import tests  # noqa: F401 isort: skip

import argparse
import json
import os
import sys
import time

from nova.api import validation as nova_validation
from nova.api.validation import validators
from nova.tests.unit.api.openstack import fakes
from oslo_serialization import jsonutils

from nova_cellsched.api.validation import schema_compiler
from nova_cellsched.api.validation import validator as validation
from nova_cellsched import compat
from tests.fixtures import schema_bodies

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import reporting  # noqa: E402
import runinfo  # noqa: E402


def best(function, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def body_of(version, servers):
    directory = 'v' + version if version != '2.1' else 'v2.1'
    template = schema_bodies.template_bodies('detail')[directory]
    one = json.dumps(template['servers'][0])
    listed = []
    for n in range(servers):
        server = json.loads(one)
        server_uuid = '%08x-0000-4000-8000-%012x' % (n, n)
        for link in server['links']:
            link['href'] = link['href'].replace(server['id'], server_uuid)
        server['id'] = server_uuid
        listed.append(server)
    return {'servers': listed}


def rs_validator(schema):
    try:
        import jsonschema_rs
    except ImportError:
        return None
    formats = {}
    for name, (func, raises) in validators._FORMAT_CHECKER.checkers.items():
        def check(value, func=func, raises=raises):
            try:
                return bool(func(value))
            except raises:
                return False
        formats[name] = check
    return jsonschema_rs.Draft202012Validator(
        schema, formats=formats, validate_formats=True)


def run(version, servers, repeat):
    schemas = schema_bodies.response_schemas('detail')
    body = body_of(version, servers)
    req = fakes.HTTPRequest.blank('/v2.1/servers/detail', version=version)
    applying = next(s for s in schemas
                    if validation._Schema(*s).applies(req))

    def view(self, req):
        return body
    for schema, low, high in reversed(schemas):
        view = nova_validation.response_body_schema(schema, low, high)(view)
    ours = [validation._Schema(*s) for s in schemas]

    def validate_ours():
        validation.validate_response(ours, body, (None, req), {})

    def cold():
        for results in schema_compiler._FORMAT_RESULTS.values():
            results.clear()
        validate_ours()

    parsed = jsonutils.loads(jsonutils.dumps(body))
    result = {
        'version': version, 'servers': servers,
        'body_mb': round(len(jsonutils.dumps(body)) / 1e6, 2),
        'nova': best(lambda: view(None, req), repeat),
        'nova validate only': best(
            lambda: validators._SchemaValidator(applying[0]).validate(
                parsed), repeat),
        'ours cold': best(cold, repeat),
        'ours warm': best(validate_ours, repeat),
    }
    before = validation.validated()['fast']
    validate_ours()
    assert validation.validated()['fast'] == before + 1, 'not fast'
    rs = rs_validator(applying[0])
    if rs is not None:
        assert rs.is_valid(parsed)
        result['jsonschema-rs'] = best(lambda: rs.is_valid(parsed), repeat)
    return result


def render(report):
    """The Markdown of a run: best of --repeat, ms per body."""
    names = ['nova', 'nova validate only', 'ours cold', 'ours warm',
             'jsonschema-rs']
    lines = ['# Response validation of GET /servers/detail: nova and ours',
             '', '`%s` on %s, nova %s, Python %s, best of %d.' % (
                 report['command'], report['date'][:16], report['nova'],
                 report['python'], report['repeat']), '',
             '| microversion | servers | body MB | %s |' % ' | '.join(
                 '%s ms' % name for name in names),
             '|---|---|---|%s' % ('---|' * len(names))]
    for row in report['results']:
        lines.append('| %s | %d | %s | %s |' % (
            row['version'], row['servers'], row['body_mb'], ' | '.join(
                '%.1f' % (row[name] * 1000) if name in row else '-'
                for name in names)))
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--servers', type=int, default=1000)
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument('--versions', default='2.1,2.100')
    reporting.add_output_arguments(parser, name='validation')
    args = parser.parse_args(argv)
    if args.render:
        return reporting.rerender(args.render, reporting.text_writer(render))
    info = runinfo.run_info('bench_validation.py', argv)
    compat.install(['validation'])
    import nova.conf
    nova.conf.CONF.set_override('response_validation', 'warn', 'api')
    results = []
    for version in args.versions.split(','):
        result = run(version, args.servers, args.repeat)
        results.append(result)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v
                          for k, v in result.items()}))
    report = dict(info, servers=args.servers, repeat=args.repeat,
                  results=results)
    reporting.write_results(report, name=args.name, out=args.out,
                            json_path=args.json, render=render,
                            say=print)
    return 0

if __name__ == '__main__':
    sys.exit(main())
