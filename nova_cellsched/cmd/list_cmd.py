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

"""``nova-cellsched list`` and ``nova-cellsched demo``.

nova and the lister are imported inside the commands, after the command
line chose native threads (see :func:`nova_cellsched.cmd.cellsched.main`).
"""

import argparse
import contextlib
import datetime
import json
import os
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from cliff import columns
from cliff import lister

from nova_cellsched.cmd.base import CellschedCommandMixin
from nova_cellsched import exception

#: Columns of the default listing (``--long`` shows DETAIL_FIELDS).
SHORT_FIELDS = ('uuid', 'display_name', 'status', 'project_id', 'host',
                'cell_name', 'flavor_name', 'created_at')
#: Columns of ``--long`` as a table, like ``openstack server list --long``;
#: the other formats (and ``-c``) get every detail field.
LONG_TABLE_FIELDS = ('uuid', 'display_name', 'status', 'task_state',
                     'power_state', 'addresses', 'image_ref', 'flavor_name',
                     'availability_zone', 'host', 'cell_name', 'project_id',
                     'created_at')
#: uwsgi worker processes of ``demo --api`` (devstack's API_WORKERS is
#: the number of CPUs; two show the workers sharing the load).
API_PROCESSES = 2
#: Where a trace file (``--trace``, the demo's trace.json) opens.
TRACE_VIEWERS = 'https://ui.perfetto.dev or chrome://tracing'
#: Names ``demo --prefix`` accepts: they become database names.
PREFIX_PATTERN = re.compile(r'^[a-z][a-z0-9_]{0,39}$')


class DictColumn(columns.FormattableColumn[Any]):
    """A dict: ``k=v, ...`` in tables, the dict itself in JSON/YAML.

    Also a missing value: empty in tables (as nova's CLI shows it), null in
    JSON/YAML.
    """

    def human_readable(self) -> str:
        value = self._value
        if isinstance(value, dict):
            return ', '.join('%s=%s' % (k, _human(v))
                             for k, v in sorted(value.items()))
        return _human(value)

    def machine_readable(self) -> Any:
        return self._value


class AddressesColumn(DictColumn):
    """Addresses: ``net=ip, ip; net2=ip`` in tables."""

    def human_readable(self) -> str:
        return '; '.join(
            '%s=%s' % (net, ', '.join(a.get('addr') or '' for a in addrs))
            for net, addrs in sorted((self._value or {}).items()))


#: nova's power states (``nova.compute.power_state``) as ``openstack server
#: list --long`` names them; JSON and YAML keep nova's numbers, as nova's
#: API gives them (``OS-EXT-STS:power_state``).
POWER_STATES = {0: 'NOSTATE', 1: 'Running', 3: 'Paused', 4: 'Shutdown',
                6: 'Crashed', 7: 'Suspended'}


class PowerStateColumn(columns.FormattableColumn[Any]):
    """nova's power state: its name in tables, its number in JSON/YAML."""

    def human_readable(self) -> str:
        if self._value is None:
            return ''
        return POWER_STATES.get(self._value, str(self._value))

    def machine_readable(self) -> Any:
        return self._value


def _human(value: Any) -> str:
    if isinstance(value, dict):
        return '{%s}' % ', '.join('%s=%s' % kv for kv in sorted(
            value.items()))
    return '' if value is None else str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return value


def _cell(field: str, value: Any) -> Any:
    if field == 'addresses':
        return AddressesColumn(value)
    if field == 'power_state':
        return PowerStateColumn(value)
    if value is None or isinstance(value, dict):
        return DictColumn(value)
    return _plain(value)


def parse_filter(text: str) -> tuple[str, str]:
    """``key=value`` from ``--filter``."""
    from nova_cellsched import records

    key, sep, value = text.partition('=')
    if not sep or not key.strip():
        raise exception.InvalidListRequest(
            'filter', text, 'key=value with key one of %s'
            % ', '.join(sorted(records.FILTERS)))
    if not value.strip():
        # An empty value is a slip, not a query: in nova it matches no
        # instance (or every one, for the regular expression filters).
        raise exception.InvalidListRequest(
            'filter', text, 'a value after "=", e.g. %s=VALUE'
            % key.strip())
    return key.strip(), value.strip()


def parse_limit(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        raise exception.InvalidListRequest('limit', text,
                                           'a positive integer')
    return limit


def check_writable(option: str, path: str | None) -> None:
    """Fail before any work if the file *path* of *option* cannot be
    written.

    :raises InvalidListRequest: its directory does not exist or cannot be
        written, or *path* is a directory or a read-only file.
    """
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        problem = 'directory %s does not exist' % directory
    elif os.path.isdir(path):
        problem = '%s is a directory' % path
    elif os.path.exists(path) and not os.access(path, os.W_OK):
        problem = '%s is not writable' % path
    elif not os.access(directory, os.W_OK):
        problem = 'directory %s is not writable' % directory
    else:
        return
    raise exception.InvalidListRequest(
        option, path, 'a file that can be written (%s)' % problem)


def write_json(path: str, data: Any, option: str = 'file') -> None:
    """Write *data* as JSON to *path*.

    :raises InvalidListRequest: the file cannot be written.
    """
    try:
        with open(path, 'w') as handle:
            json.dump(data, handle, indent=1, default=str)
            handle.write('\n')
    except OSError as exc:
        raise exception.InvalidListRequest(
            option, path, 'a file that can be written (%s)'
            % (exc.strerror or exc)) from exc


def pastable_command(name: str = 'nova-cellsched') -> str:
    """How the user can run *name*, a script of this venv, from a shell.

    ``tools/venv NAME`` from a checkout whose venv this is, else the
    script's full path (its venv need not be active); for
    ``nova-cellsched`` without its script, ``python -m``; else the bare
    *name* (found on the user's PATH, if at all).
    """
    prefix = os.path.realpath(sys.prefix)
    here = os.path.realpath(os.getcwd())
    if (os.path.exists(os.path.join(here, 'tools', 'venv'))
            and prefix == os.path.join(here, '.venv')):
        return 'tools/venv %s' % name
    script = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(script):
        return shlex.quote(script)
    if name == 'nova-cellsched':
        return '%s -m nova_cellsched.cmd.cellsched' % shlex.quote(
            sys.executable)
    return name


def api_commands(url: str, openstack: str, token: str) -> tuple[str, str]:
    """The ``curl`` and ``openstack`` command lines for nova-api at *url*.

    *url* is the compute endpoint (``http://127.0.0.1:PORT/v2.1``),
    *openstack* how to run python-openstackclient (see
    :func:`pastable_command`), *token* the noauth stand-in's. Both list
    five servers of every project, and run as printed from a POSIX shell
    (or split with :func:`shlex.split` and run as they are).

    keystoneauth's ``admin_token`` plugin takes its ``--os-endpoint`` for
    every service, but ``openstack server list`` first wants an identity
    client of version 3 (it calls it only for ``--project``), and a
    ``/v2.1`` endpoint makes that version 2: ``--os-endpoint`` names an
    identity v3 path on the same server, never called, and the compute
    endpoint is an override, which openstackclient reads only from the
    environment (``OS_COMPUTE_ENDPOINT_OVERRIDE``: no option for it),
    hence ``env``.
    """
    base = url.rsplit('/', 1)[0]
    curl = ('curl -i -H %s -H %s %s' % (
        shlex.quote('X-Auth-Token: %s' % token),
        shlex.quote('OpenStack-API-Version: compute latest'),
        shlex.quote(url + '/servers/detail?all_tenants=1&limit=5')))
    openstack_line = (
        'env OS_COMPUTE_ENDPOINT_OVERRIDE=%s %s --os-auth-type admin_token '
        '--os-token %s --os-endpoint %s server list --all-projects '
        '--limit 5' % (shlex.quote(url), openstack, shlex.quote(token),
                       shlex.quote(base + '/identity/v3')))
    return curl, openstack_line


class ListInstances(CellschedCommandMixin, lister.Lister):
    """List instances of all cells in nova's global order, timed.

    Every cell is queried at once in its own thread; the sorted results
    are heap-merged. A cell that fails or times out is reported on
    stderr and makes the exit code 1 (its instances are missing); with
    [api] list_records_by_skipping_down_cells = false in nova.conf
    nothing is printed then. When nothing matches, the table is empty
    (-f json prints []) and stderr says so.
    """

    start_up_imports = ('nova_cellsched.records.lister',)

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        # An empty listing is an empty table, not a blank line.
        parser.set_defaults(print_empty=True)
        who = parser.add_mutually_exclusive_group()
        who.add_argument('--project', metavar='PROJECT_ID',
                         help='Only instances of this project.')
        who.add_argument('--all-projects', action='store_true',
                         help='Instances of every project (the default).')
        parser.add_argument('--limit', metavar='N',
                            help='At most N instances (default: all).')
        parser.add_argument('--marker', metavar='UUID',
                            help='Start after this instance (the last of '
                                 'the previous page).')
        parser.add_argument('--sort', action='append', default=[],
                            metavar='KEY[:asc|desc]',
                            help='Sort key and direction (a nova API sort '
                                 'key such as created_at, display_name, '
                                 'host); repeat for more keys. Default: '
                                 'created_at:desc, newest first (then '
                                 'nova\'s internal row id). uuid:asc always '
                                 'ends the order. The database sorts, '
                                 'across all cells; --sort-column only '
                                 're-sorts the rows printed.')
        parser.add_argument('--cell', action='append', default=None,
                            metavar='NAME_OR_UUID',
                            help='Only this cell; repeat for more. '
                                 'Default: every cell, cell0 included.')
        parser.add_argument('--filter', action='append', default=[],
                            metavar='KEY=VALUE',
                            help='Filter, e.g. host=compute1, '
                                 'vm_state=active,error, deleted=true, '
                                 'display_name=^web- (a regular '
                                 'expression, as in nova), '
                                 'changes-since=2026-01-01T00:00:00Z.')
        parser.add_argument('--long', action='store_true',
                            help='Show the detail fields: as a table the '
                                 'columns of openstack server list --long '
                                 '(and cell, project); -f json/yaml/csv, '
                                 'or -c, get every field (metadata, '
                                 'flavor, ...).')
        parser.add_argument('--timings', action='store_true',
                            help='Print where the time went on stderr.')
        parser.add_argument('--stats', metavar='FILE',
                            help='Write the timings as JSON to FILE.')
        parser.add_argument('--trace', metavar='FILE',
                            help='Write a Chrome trace-event file (open it '
                                 'in Perfetto or chrome://tracing).')
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        from nova_cellsched.cmd import nova_setup
        from nova_cellsched.listing import sorting
        from nova_cellsched import records

        check_writable('stats', parsed_args.stats)
        check_writable('trace', parsed_args.trace)
        filters = dict(parse_filter(f) for f in parsed_args.filter)
        if parsed_args.project is not None and not (
                parsed_args.project.strip()):
            # Not "every project": an empty id is a slip.
            raise exception.InvalidListRequest(
                'project', parsed_args.project,
                'a project id (--all-projects for every project)')
        if parsed_args.project:
            filters['project_id'] = parsed_args.project
        sort_keys, sort_dirs = [], []
        for text in parsed_args.sort:
            key, direction = sorting.parse_sort_argument(text)
            sort_keys.append(key)
            if direction is None and sort_dirs:
                raise exception.InvalidListRequest(
                    'sort', text, 'a direction for every key once one '
                    'key has one (key:asc or key:desc)')
            if direction is not None:
                if len(sort_dirs) != len(sort_keys) - 1:
                    raise exception.InvalidListRequest(
                        'sort', text, 'directions on every key or on '
                        'none')
                sort_dirs.append(direction)
        fields = (records.DETAIL_FIELDS if parsed_args.long
                  else SHORT_FIELDS)
        try:
            result = records.list_instances(
                records.admin_context(), cells=parsed_args.cell,
                filters=filters, sort_keys=sort_keys or None,
                sort_dirs=sort_dirs or None,
                limit=parse_limit(parsed_args.limit),
                marker=parsed_args.marker, fields=fields)
        except nova_setup.DB_ERRORS as exc:
            raise nova_setup.api_database_error(exc) from exc
        self._report(result, parsed_args)
        if not result.instances:
            self.app.stderr.write('No instance matched.\n')
        if (parsed_args.long and parsed_args.formatter == 'table'
                and not parsed_args.columns):
            fields = LONG_TABLE_FIELDS
        return self._table(result, fields)

    def _report(self, result: Any, parsed_args: argparse.Namespace) -> None:
        from nova_cellsched.listing import timing

        # Each failed cell was logged as a warning by list_instances.
        self._incomplete = not result.complete
        if parsed_args.timings:
            self.app.stderr.write(timing.format_table(result.timings)
                                  + '\n')
        if parsed_args.stats:
            stats = result.timings.as_dict()
            stats['instances'] = len(result.instances)
            stats['complete'] = result.complete
            write_json(parsed_args.stats, stats, 'stats')
            self.app.stderr.write('Stats: %s\n'
                                  % os.path.abspath(parsed_args.stats))
        if parsed_args.trace:
            write_json(parsed_args.trace, timing.chrome_trace(result.timings),
                       'trace')
            self.app.stderr.write('Trace: %s (open in %s)\n' % (
                os.path.abspath(parsed_args.trace), TRACE_VIEWERS))

    def _table(self, result: Any, fields: Sequence[str]
               ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        rows = [tuple(_cell(f, record.get(f)) for f in fields)
                for record in result.instances]
        return fields, rows

    def run(self, parsed_args: argparse.Namespace) -> int:
        self._incomplete = False
        code = super().run(parsed_args)
        return code or (1 if self._incomplete else 0)


@contextlib.contextmanager
def _demo_server(connection: str | None, err: Any = None,
                 last: list[str] | None = None) -> Iterator[None]:
    """Turn the ``--connection`` server not answering into one line.

    :raises DemoServerUnreachable: a database error while the block
        talked to *connection* (exit 3, URL masked); without
        ``--connection`` (SQLite files) errors go on unchanged.
    :param err: with *last*, where the progress line was being written:
        it is ended first, so the error line starts a line of its own.
    """
    from oslo_db import exception as db_exc
    from sqlalchemy import exc as sa_exc

    from nova_cellsched import cells

    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError,
            db_exc.DBConnectionError) as exc:
        if connection is None:
            raise
        if err is not None and last and last[0]:
            err.write('\n')
            last[0] = ''
        raise exception.DemoServerUnreachable(
            cells.mask_url(connection), exc) from exc


class Demo(CellschedCommandMixin, lister.Lister):
    """Build demo cell databases with nova's schema and list them.

    Creates (or reuses) an API database, cell0 and N cells with nova's
    migrations, seeds instances shaped as nova writes them (one in twenty
    soft-deleted), writes a nova.conf, then runs the cross-cell listing
    with its timings and a trace file. SQLite files by default;
    --connection takes a database server URL such as
    mysql+pymysql://root@127.0.0.1/. --clean drops the databases a demo
    made instead.

    With --api, then serves nova-api itself on the demo world: nova 34's
    WSGI application under uwsgi on 127.0.0.1, with the cellsched filter
    in its pipeline, until Ctrl-C (or SIGTERM). For trying it out only:
    it authenticates nobody.
    """

    needs_config = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument('--cells', type=int, default=10,
                            help='Number of cells besides cell0 '
                                 '(default 10).')
        parser.add_argument('--instances', type=int, default=10000,
                            help='Instances over all cells (default '
                                 '10000).')
        parser.add_argument('--dir', default='./cellsched-demo',
                            help='Where the files go (default '
                                 './cellsched-demo).')
        parser.add_argument('--connection', metavar='URL',
                            help='Database server for the demo databases '
                                 'instead of SQLite files.')
        parser.add_argument('--limit', type=int, default=1000,
                            help='Limit of the demo listing (default '
                                 '1000).')
        parser.add_argument('--prefix', default=None,
                            help='Name prefix of the demo databases '
                                 '(default cellsched_demo): PREFIX_api, '
                                 'PREFIX_cell0, ... Choose one on a shared '
                                 'database server.')
        parser.add_argument('--clean', action='store_true',
                            help='Drop the demo databases of --prefix '
                                 '(in --dir, or on --connection) instead '
                                 'of building: only PREFIX_api and '
                                 'PREFIX_cellN, after listing them and '
                                 'asking.')
        parser.add_argument('--yes', action='store_true',
                            help='With --clean: do not ask.')
        parser.add_argument('--api', action='store_true',
                            help='Then serve nova-api on the demo world '
                                 'until Ctrl-C: nova\'s own WSGI '
                                 'application under uwsgi (installed in '
                                 'the venv by tools/venv) on 127.0.0.1, '
                                 'with the cellsched filter in its '
                                 'pipeline, and print a curl and an '
                                 'openstack command to try against it '
                                 '(the response header Server-Timing says '
                                 'where the time went). For trying it out '
                                 'only: no authentication, anyone who can '
                                 'reach the port is an admin. nova-api\'s '
                                 'log: nova-api.log, next to the demo\'s '
                                 'nova.conf.')
        parser.add_argument('--port', type=int, default=None,
                            help='With --api: the port on 127.0.0.1 '
                                 '(default: a free one).')
        parser.add_argument('--processes', type=int, default=None,
                            metavar='N',
                            help='With --api: uwsgi worker processes '
                                 '(default %d).' % API_PROCESSES)
        return parser

    def _check_api_options(self, parsed_args: argparse.Namespace) -> None:
        """Refuse --port/--processes without --api, bad values, no uwsgi.

        Before anything is built: a missing uwsgi is one line, exit 2.
        """
        from nova_cellsched.demo import api as demo_api

        if not parsed_args.api:
            for name in ('port', 'processes'):
                if getattr(parsed_args, name) is not None:
                    raise exception.InvalidListRequest(
                        name, getattr(parsed_args, name),
                        'it only with --api (which serves nova-api)')
            return
        if parsed_args.clean:
            raise exception.InvalidListRequest(
                'api', '--clean', '--api or --clean, not both')
        if parsed_args.port is not None and not (
                0 < parsed_args.port < 65536):
            raise exception.InvalidListRequest('port', parsed_args.port,
                                               'a TCP port, 1 to 65535')
        if parsed_args.processes is not None and parsed_args.processes < 1:
            raise exception.InvalidListRequest(
                'processes', parsed_args.processes, 'a positive integer')
        problem = demo_api.uwsgi_missing()
        if problem:
            raise exception.CannotServeApi(problem)

    def _clean(self, parsed_args: argparse.Namespace, prefix: str
               ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        from nova_cellsched import cells
        from nova_cellsched.demo import world as demo

        err = self.app.stderr
        with _demo_server(parsed_args.connection):
            urls = demo.demo_databases(parsed_args.dir,
                                       parsed_args.connection, prefix)
        rows = [(cells.mask_url(url),) for url in urls]
        if not urls:
            err.write('No demo database named %s_* found.\n' % prefix)
            return ('Dropped',), rows
        err.write('Demo databases to drop:\n%s\n' % '\n'.join(
            '  %s' % row[0] for row in rows))
        if not parsed_args.yes:
            err.write('Drop these %d databases? [y/N] ' % len(urls))
            err.flush()
            answer = self.app.stdin.readline().strip().lower()
            if answer not in ('y', 'yes'):
                err.write('Nothing dropped.\n')
                return ('Dropped',), []
        with _demo_server(parsed_args.connection):
            demo.clean(urls)
        stale = demo.remove_stale_config(parsed_args.dir, urls)
        if stale:
            err.write('Removed %s (it named the dropped databases).\n'
                      % stale)
        return ('Dropped',), rows

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        from nova_cellsched import cells
        from nova_cellsched.cmd import nova_setup
        from nova_cellsched.demo import world as demo
        from nova_cellsched.listing import timing
        from nova_cellsched import records

        prefix = parsed_args.prefix or demo.DB_PREFIX
        if not PREFIX_PATTERN.match(prefix):
            raise exception.InvalidListRequest(
                'prefix', prefix, 'a database name prefix: a lowercase '
                'letter, then lowercase letters, digits or _ (at most 40)')
        self._check_api_options(parsed_args)
        if parsed_args.clean:
            return self._clean(parsed_args, prefix)
        if parsed_args.cells < 1 or parsed_args.instances < 1:
            raise exception.InvalidListRequest(
                'size', '%d cells, %d instances' % (
                    parsed_args.cells, parsed_args.instances),
                'at least one cell and one instance')
        err = self.app.stderr
        err.write('Building the demo in %s ...\n' % os.path.abspath(
            parsed_args.dir))
        last: list[str] = ['']
        # On a terminal each step's line is rewritten in place (\r); in a
        # file or a pipe each step is one line, with its last count.
        terminal = _isatty(err)

        def progress(text: str) -> None:
            new_step = text.split(':')[0] != last[0].split(':')[0]
            if terminal:
                if new_step:
                    err.write('\n' if last[0] else '')
                err.write('\r  %s' % text)
                err.flush()
            elif new_step and last[0]:
                err.write('  %s\n' % last[0])
            last[0] = text

        # Only a line being rewritten in place (a terminal) needs ending
        # before an error line.
        with _demo_server(parsed_args.connection,
                          err if terminal else None, last):
            world = demo.build(parsed_args.dir, parsed_args.cells,
                               parsed_args.instances, parsed_args.connection,
                               progress, prefix=prefix)
        if last[0]:
            err.write('\n' if terminal else '  %s\n' % last[0])
        out = self._output_stream(parsed_args)
        out.write('%s %d cells (cell0 included), %d instances (%d of them '
                  'soft-deleted); nova.conf: %s\n' % (
                      'Reused' if world.reused else 'Built',
                      len(world.cells), world.instances, world.deleted,
                      world.config_file))
        nova_setup.load_config(['--config-file', world.config_file])
        result = records.list_instances(
            records.admin_context(), limit=parsed_args.limit,
            fields=records.DETAIL_FIELDS)
        trace = os.path.join(world.directory, 'trace.json')
        stats = os.path.join(world.directory, 'stats.json')
        write_json(trace, timing.chrome_trace(result.timings))
        write_json(stats, result.timings.as_dict())
        self._after_table = (
            '\nListed %d instances across %d cells (limit %d, detail '
            'fields):\n%s\n' % (
                len(result.instances), len(result.cells),
                parsed_args.limit, timing.format_table(result.timings)))
        prog = pastable_command()
        conf = shlex.quote(world.config_file)
        self._after_table += (
            'Trace: %s (open in %s)\nStats: %s\n\nNext, try:\n'
            '  %s --config-file %s list --limit 20 --timings\n'
            '  %s --config-file %s list --long --limit 5 -f json\n'
            '  %s --config-file %s list --sort display_name:asc --limit 10 '
            '--trace trace.json\n'
            '  %s --config-file %s list --filter deleted=true --limit 5\n'
            '  %s --config-file %s check\n'
            '  %s --config-file %s explain --project %s\n' % (
                trace, TRACE_VIEWERS, stats, prog, conf, prog, conf, prog,
                conf, prog, conf, prog, conf, prog, conf,
                world.projects[0]))
        self._world = world
        rows = [(name, cells.mask_url(url)) for name, url in world.cells]
        return ('Cell', 'Database'), rows

    def _output_stream(self, parsed_args: argparse.Namespace) -> Any:
        """Where the demo's own lines go: stdout, with the table.

        The summary, the listing's timings, the files and the next
        steps are the demo's output, as its table is: on stdout, in
        order. With ``-f json`` (or any format for programs), stdout
        holds the formatted rows alone and these lines go to stderr.
        """
        if getattr(parsed_args, 'formatter', 'table') == 'table':
            return self.app.stdout
        return self.app.stderr

    def run(self, parsed_args: argparse.Namespace) -> int:
        """Build and list; with --api, then serve until Ctrl-C/SIGTERM."""
        self._world: Any = None
        self._after_table = ''
        code = super().run(parsed_args)
        if self._after_table:
            out = self._output_stream(parsed_args)
            out.write(self._after_table)
            out.flush()
        if code or not parsed_args.api or self._world is None:
            return code
        self.app.stdout.flush()
        return serve_api(self._world, self.app.stdout,
                         port=parsed_args.port,
                         processes=parsed_args.processes or API_PROCESSES,
                         err=self.app.stderr)


def serve_api(world: Any, out: Any, port: int | None = None,
              processes: int = 2, err: Any = None) -> int:
    """Serve nova-api with the cellsched filter on *world* until a signal.

    Starts the neutron stand-in and nova-api under uwsgi
    (:mod:`nova_cellsched.demo.api`), writes to *out* where it serves
    (its URL, its port and how to keep that port: a free one changes
    every run) and a ``curl`` and an ``openstack`` command that work as
    printed, then waits for SIGINT (Ctrl-C), SIGTERM or SIGHUP (its
    terminal closed). Progress (starting, stopping) and errors go to
    *err* (*out* if None). Whatever happens, uwsgi (all of its
    processes) and the stand-in are stopped and the temp dir of
    nova-api's files is removed before it returns; *world*'s directory
    stays, with ``nova-api.log`` in it. Should this process die without
    returning (SIGKILL, a crash), the kernel stops uwsgi
    (:func:`nova_cellsched.demo.api.die_with_parent`): no
    unauthenticated nova-api outlives it.

    :returns: the exit code: 0 when stopped by a signal, 1 when nova-api
        did not start or uwsgi exited by itself (the log says why).
    """
    from nova_cellsched.demo import api as demo_api

    err = out if err is None else err
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {number: signal.signal(number, on_signal)
                for number in (signal.SIGINT, signal.SIGTERM,
                               signal.SIGHUP)}
    log = os.path.join(world.directory, 'nova-api.log')
    neutron = demo_api.NeutronStandIn()
    # nova-api's own [database]: a cell's (nova reads its scheme).
    server = demo_api.UwsgiNovaApi(
        world.api_url, world.cells[1][1], '', processes=processes,
        port=port, log=log, nova_conf={'DEFAULT': {'debug': 'false'}})
    try:
        neutron.start()
        server.neutron_url = neutron.url
        err.write('\nStarting nova-api (nova_cellsched.wsgi.osapi_compute '
                  'under uwsgi, %d worker%s) with the cellsched filter, on '
                  'the demo world ...\n' % (processes,
                                           '' if processes == 1 else 's'))
        err.flush()
        start = time.monotonic()
        try:
            server.launch(stop.is_set)
        except demo_api.Interrupted:
            err.write('Stopped before nova-api was ready.\n')
            return 0
        except (demo_api.UwsgiError, OSError, ValueError) as exc:
            err.write('nova-cellsched: error: nova-api did not start: %s\n'
                      'Its log: %s\n' % (_first_line(exc), log))
            return 1
        curl, openstack = api_commands(server.url,
                                       pastable_command('openstack'),
                                       demo_api.TOKEN)
        out.write(
            'nova-api serves %s (ready in %.1f s); its log: %s\n'
            '%s\n'
            'For trying it out only: no authentication, anyone who can '
            'reach the port is an admin (X-Auth-Token: user:project).\n\n'
            'Try, from another terminal (Server-Timing: where the time of '
            'the list went):\n  %s\n  %s\n\nCtrl-C stops nova-api.\n' % (
                server.url, time.monotonic() - start, log,
                port_line(server.port, port), curl, openstack))
        out.flush()
        while not stop.wait(0.5):
            if server.process is not None and (
                    server.process.poll() is not None):
                err.write('nova-cellsched: error: uwsgi exited by itself '
                          '(status %s); its log: %s\n'
                          % (server.process.returncode, log))
                return 1
        err.write('Stopping nova-api ...\n')
        err.flush()
        return 0
    finally:
        server.shutdown()
        neutron.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)
        if stop.is_set():
            err.write('Stopped.\n')
            err.flush()


def port_line(port: int, requested: int | None) -> str:
    """The line of ``demo --api``'s output that names its *port*.

    A port the demo chose (no ``--port``) is a free one, another each
    run: the line says how to ask for it again.
    """
    if requested is not None:
        return 'Port: %d (--port %d).' % (port, requested)
    return ('Port: %d, a free one chosen for this run (another each run): '
            '--port %d asks for this one again.' % (port, port))


def _isatty(stream: Any) -> bool:
    """Whether *stream* is a terminal (False for what has no isatty)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _first_line(exc: BaseException) -> str:
    """The first line of *exc*'s message (uwsgi's log tail follows it)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
