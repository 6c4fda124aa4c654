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
import datetime
import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
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
    if value is None or isinstance(value, dict):
        return DictColumn(value)
    return _plain(value)


def parse_filter(text: str) -> tuple[str, str]:
    """``key=value`` from ``--filter``."""
    from nova_cellsched import listing

    key, sep, value = text.partition('=')
    if not sep or not key.strip():
        raise exception.InvalidListRequest(
            'filter', text, 'key=value with key one of %s'
            % ', '.join(sorted(listing.FILTERS)))
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


def pastable_command() -> str:
    """How the user can run ``nova-cellsched`` from their shell.

    ``tools/venv nova-cellsched`` from a checkout whose venv this is, else
    the console script's full path (its venv need not be active).
    """
    prefix = os.path.realpath(sys.prefix)
    here = os.path.realpath(os.getcwd())
    if (os.path.exists(os.path.join(here, 'tools', 'venv'))
            and prefix == os.path.join(here, '.venv')):
        return 'tools/venv nova-cellsched'
    script = os.path.join(os.path.dirname(sys.executable), 'nova-cellsched')
    if os.path.exists(script):
        return shlex.quote(script)
    return '%s -m nova_cellsched.cmd.cellsched' % shlex.quote(
        sys.executable)


class ListInstances(CellschedCommandMixin, lister.Lister):
    """List instances of all cells in nova's global order, timed.

    Every cell is queried at once in its own thread; the sorted results
    are heap-merged. A cell that fails or times out is reported on
    stderr and makes the exit code 1 (its instances are missing); with
    [api] list_records_by_skipping_down_cells = false in nova.conf
    nothing is printed then. When nothing matches, the table is empty
    (-f json prints []) and stderr says so.
    """

    start_up_imports = ('nova_cellsched.listing.lister',)

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
        from nova_cellsched import listing
        from nova_cellsched.listing import sorting

        check_writable('stats', parsed_args.stats)
        check_writable('trace', parsed_args.trace)
        filters = dict(parse_filter(f) for f in parsed_args.filter)
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
        fields = (listing.DETAIL_FIELDS if parsed_args.long
                  else SHORT_FIELDS)
        try:
            result = listing.list_instances(
                listing.admin_context(), cells=parsed_args.cell,
                filters=filters, sort_keys=sort_keys or None,
                sort_dirs=sort_dirs or None,
                limit=parse_limit(parsed_args.limit),
                marker=parsed_args.marker, fields=fields)
        except nova_setup.DB_ERRORS as exc:
            raise exception.ApiDatabaseUnreachable(
                nova_setup.masked_api_url(), exc) from exc
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
        if parsed_args.trace:
            write_json(parsed_args.trace, timing.chrome_trace(result.timings),
                       'trace')

    def _table(self, result: Any, fields: Sequence[str]
               ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        rows = [tuple(_cell(f, record.get(f)) for f in fields)
                for record in result.instances]
        return fields, rows

    def run(self, parsed_args: argparse.Namespace) -> int:
        self._incomplete = False
        code = super().run(parsed_args)
        return code or (1 if self._incomplete else 0)


class Demo(CellschedCommandMixin, lister.Lister):
    """Build demo cell databases with nova's schema and list them.

    Creates (or reuses) an API database, cell0 and N cells with nova's
    migrations, seeds instances shaped as nova writes them (one in twenty
    soft-deleted), writes a nova.conf, then runs the cross-cell listing
    with its timings and a trace file. SQLite files by default;
    --connection takes a database server URL such as
    mysql+pymysql://root@127.0.0.1/. --clean drops the databases a demo
    made instead.
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
        return parser

    def _clean(self, parsed_args: argparse.Namespace, prefix: str
               ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        from nova_cellsched import cells
        from nova_cellsched.demo import world as demo

        err = self.app.stderr
        urls = demo.demo_databases(parsed_args.dir, parsed_args.connection,
                                   prefix)
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
        demo.clean(urls)
        return ('Dropped',), rows

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        from nova_cellsched import cells
        from nova_cellsched.cmd import nova_setup
        from nova_cellsched.demo import world as demo
        from nova_cellsched import listing
        from nova_cellsched.listing import timing

        prefix = parsed_args.prefix or demo.DB_PREFIX
        if not PREFIX_PATTERN.match(prefix):
            raise exception.InvalidListRequest(
                'prefix', prefix, 'a database name prefix: a lowercase '
                'letter, then lowercase letters, digits or _ (at most 40)')
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

        def progress(text: str) -> None:
            if text.split(':')[0] != last[0].split(':')[0]:
                err.write('\n' if last[0] else '')
            last[0] = text
            err.write('\r  %s' % text)
            err.flush()

        world = demo.build(parsed_args.dir, parsed_args.cells,
                           parsed_args.instances, parsed_args.connection,
                           progress, prefix=prefix)
        err.write('\n' if last[0] else '')
        err.write('%s %d cells (cell0 included), %d instances (%d of them '
                  'soft-deleted); nova.conf: %s\n' % (
                      'Reused' if world.reused else 'Built',
                      len(world.cells), world.instances, world.deleted,
                      world.config_file))
        nova_setup.load_config(['--config-file', world.config_file])
        result = listing.list_instances(
            listing.admin_context(), limit=parsed_args.limit,
            fields=listing.DETAIL_FIELDS)
        trace = os.path.join(world.directory, 'trace.json')
        stats = os.path.join(world.directory, 'stats.json')
        write_json(trace, timing.chrome_trace(result.timings))
        write_json(stats, result.timings.as_dict())
        err.write('Listed %d instances across %d cells (limit %d, detail '
                  'fields):\n%s\n' % (
                      len(result.instances), len(result.cells),
                      parsed_args.limit,
                      timing.format_table(result.timings)))
        prog = pastable_command()
        conf = shlex.quote(world.config_file)
        err.write(
            'Trace: %s (open in https://ui.perfetto.dev or '
            'chrome://tracing)\nStats: %s\n\nNext, try:\n'
            '  %s --config-file %s list --limit 20 --timings\n'
            '  %s --config-file %s list --long --limit 5 -f json\n'
            '  %s --config-file %s list --sort display_name:asc --limit 10 '
            '--trace trace.json\n'
            '  %s --config-file %s list --filter deleted=true --limit 5\n'
            '  %s --config-file %s check\n'
            '  %s --config-file %s explain --project %s\n' % (
                trace, stats, prog, conf, prog, conf, prog, conf, prog,
                conf, prog, conf, prog, conf, world.projects[0]))
        rows = [(name, cells.mask_url(url)) for name, url in world.cells]
        return ('Cell', 'Database'), rows
