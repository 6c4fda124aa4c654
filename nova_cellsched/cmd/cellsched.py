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

"""``nova-cellsched``: the operator command.

It reads nova.conf the way nova-manage does (``--config-file``,
``--config-dir``, else nova's default locations) and talks to the nova API
database named by ``[api_database] connection``.

Commands::

    nova-cellsched --config-file /etc/nova/nova.conf check
    nova-cellsched check --api-paste /etc/nova/api-paste.ini
    nova-cellsched --config-file /etc/nova/nova.conf check --selftest
    nova-cellsched --config-file /etc/nova/nova.conf explain --project P
    nova-cellsched --config-file /etc/nova/nova.conf list [options]
    nova-cellsched --config-file /etc/nova/nova.conf sync-aggregates \
        [--dry-run] [--cell NAME_OR_UUID] [--force] [--remove-stale]
    nova-cellsched demo [--cells 10] [--instances 10000] [--dir DIR]

Output is a table by default; ``-f json``, ``-f csv``, ``-f value`` and
``-f yaml`` are cliff's formatters.

Exit codes (each command's are in doc/source/cli/nova-cellsched.rst):

=====  ==============================================================
0      success; ``check`` found nothing to fix; ``list`` heard from
       every cell
1      ``check`` found problems (unknown or ambiguous cell names,
       projects without a usable cell, cell aggregates out of sync,
       a server-list pipeline of ``--api-paste`` without the filter,
       a nova the filter refuses, a ``--selftest`` difference, ...);
       ``explain`` found such names among the project's cells;
       ``sync-aggregates`` failed for some cells or providers
       (listed); ``list`` lost cells (failed or timed out: the rest is
       printed, or nothing with ``[api]
       list_records_by_skipping_down_cells = false``);
       other unexpected errors
2      bad configuration (malformed ``[cellsched]`` options, no
       ``[api_database] connection``) or bad command line input (a
       missing or malformed ``--api-paste`` file, ``--selftest`` with
       ``--api-paste`` or without ``[database] connection``)
3      the nova API database cannot be reached (``sync-aggregates``:
       or the placement API)
4      ``sync-aggregates``: the removal guard held a cell (its database
       would empty its aggregate; ``--force`` after checking it)
=====  ==============================================================

Database passwords never appear in the output: every connection URL is
shown with its password masked.
"""

import argparse
import gc
import logging
import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from cliff import app
from cliff import command
from cliff import commandmanager
from cliff import lister

from nova_cellsched.cmd import aggregates_cmd
from nova_cellsched.cmd import base
from nova_cellsched.cmd.base import CellschedCommandMixin
from nova_cellsched.cmd import list_cmd
from nova_cellsched import exception
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler import mapping as mapping_mod

NOISY_LOGGERS = ('nova', 'oslo_service', 'oslo_db', 'oslo.privsep',
                 'stevedore', 'alembic')
CHECK_COLUMNS = ('Cell', 'UUID', 'Role', 'Disabled in nova', 'Database',
                 'Problems')
API_PASTE_COLUMNS = ('Section', 'Key', 'Served at', 'Pipeline', 'Filter',
                     'Position', 'Result')
EXPLAIN_COLUMNS = ('Cell', 'UUID', 'New servers', 'Why')


def _load_state() -> tuple[mapping_mod.CellsMapping, list[Any],
                           decision.Policy]:
    """Parse the options, read the cell mappings and resolve the policy."""
    from nova_cellsched.cmd import nova_setup

    conf = nova_setup.conf()
    group = conf.cellsched
    mapping = mapping_mod.parse(list(group.cells_default),
                                group.cells_projects)
    cell_mappings = nova_setup.cell_mappings()
    from nova_cellsched.scheduler import state

    policy = decision.resolve(
        mapping, [state.to_cell_info(cm) for cm in cell_mappings])
    return mapping, cell_mappings, policy


def _role(policy: decision.Policy, cell_uuid: str) -> str:
    if cell_uuid == decision.CELL0_UUID:
        return 'cell0 (failed builds only)'
    if not policy.restricted:
        return 'any project (filter not configured)'
    roles = []
    if cell_uuid in policy.default_cells:
        roles.append('default')
    dedicated = policy.projects_of_cell(cell_uuid)
    if dedicated:
        roles.append('dedicated to %d project(s)' % len(dedicated))
    return ', '.join(roles) or 'disabled here'


class Check(CellschedCommandMixin, lister.Lister):
    """Compare the [cellsched] mapping with the cells nova knows.

    Lists every cell with its role for new servers (default, dedicated to
    N projects, disabled here) and whether nova itself disabled it, then
    the names in the options that match no cell or several. Problems are
    also printed to stderr, one per line, and make the exit code 1.

    With --api-paste FILE, checks nova-api instead (no nova.conf or
    database needed): lists every server-list pipeline of that
    api-paste.ini with whether the cellsched filter is in it and where,
    and whether the installed nova is one the filter fits. A pipeline
    nova-api serves without the filter, or a nova the filter refuses,
    makes the exit code 1; a missing or malformed file, 2.

    With --selftest, runs in this process the static check of the
    installed nova that nova-api's filter makes at start (its release
    and relied-on sources) and then the self-test, which nova-api never
    runs: both listers on private in-memory databases, compared object
    by object, with nova.conf's ``[database] connection`` scheme, so
    that an operator can run it after an upgrade before reloading
    nova-api. The self-test changes process-wide state while it runs
    (the garbage collector, a class attribute of nova's
    ``InstanceMapping``, an option override, nova's cell cache): here
    in a process of its own. Any difference makes the exit code 1.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--api-paste', metavar='FILE',
            help="Check nova-api's api-paste.ini (e.g. "
                 '/etc/nova/api-paste.ini) and the installed nova for the '
                 'cellsched paste filter, instead of the cell mapping.')
        parser.add_argument(
            '--selftest', action='store_true',
            help='Check the installed nova and run the self-test of the '
                 "nova-api lister (nova's and ours on private in-memory "
                 'databases, compared), instead of the cell mapping. '
                 'Run it after installing or upgrading nova or '
                 'nova-cellsched.')
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        if parsed_args.api_paste is not None:
            if parsed_args.selftest:
                raise exception.InvalidConfig(
                    '--selftest and --api-paste are two checks: give one')
            return self._check_api_paste(parsed_args.api_paste)
        if parsed_args.selftest:
            return self._selftest()
        from nova_cellsched import cells

        _mapping, cell_mappings, policy = _load_state()
        problems_by_cell: dict[str, list[str]] = {}
        rows = []
        ref_rows = []
        for problem in policy.problems:
            self.app.stderr.write('problem: %s\n' % problem)
            cell = next((c for c in policy.cells.values()
                         if problem.ref in (c.uuid, c.name)), None)
            if cell is not None and problem.kind not in (
                    decision.ProblemKind.AMBIGUOUS,):
                problems_by_cell.setdefault(cell.uuid, []).append(
                    problem.kind.value)
            elif problem.kind in (decision.ProblemKind.UNKNOWN,
                                  decision.ProblemKind.AMBIGUOUS):
                ref_rows.append((problem.ref, '',
                                 problem.kind.value, '', '',
                                 problem.detail))
        for cm in base.cell_order(cell_mappings):
            rows.append((cm.name or '', cm.uuid, _role(policy, cm.uuid),
                         bool(cm.disabled),
                         cells.mask_url(cm.database_connection),
                         '; '.join(problems_by_cell.get(cm.uuid, []))))
        self._problems = len(policy.problems)
        warn_unreachable_cells(policy, cell_mappings, self.app.stderr)
        from nova_cellsched.cmd import nova_setup
        self._problems += aggregates_cmd.check_aggregates(
            nova_setup.conf(), cell_mappings, self.app.stderr)
        note = quota_note(nova_setup.conf())
        if note is not None:
            self.app.stderr.write('note: %s\n' % note)
        return CHECK_COLUMNS, rows + ref_rows

    def _check_api_paste(self, path: str
                         ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        from nova_cellsched.cmd import paste_check

        report = paste_check.inspect(path, _auth_keys())
        rows: list[tuple[str, ...]] = []
        for pipeline in report.pipelines:
            if pipeline.problem:
                result = 'problem: filter missing'
            elif not pipeline.used:
                result = 'not used by nova-api'
            else:
                result = 'ok'
            rows.append((pipeline.section, pipeline.key,
                         pipeline.served_at, ' '.join(pipeline.names),
                         'no' if pipeline.filter_at is None else 'yes',
                         pipeline.position, result))
        problems = list(report.problems)
        nova_problems = _nova_check()
        problems += ['installed nova: %s' % line for line in nova_problems]
        for name, result in _parts_check():
            rows.append(('(part %s)' % name, '', '', '', '', '', result))
            if result != 'fits' and not nova_problems:
                # The lister fits: this part alone stays off; a note
                # where this nova release lacks what it needs (nova's
                # behaviour is the tested one), else a warning.
                self.app.stderr.write('%s: part %s %s\n' % (
                    'note' if _lacking(name) else 'warning', name, result))
        rows.append(('(installed nova)', '', '', 'nova %s' % _nova_version(),
                     '', '', 'problem: ' + '; '.join(nova_problems)
                     if nova_problems else 'ok'))
        for note in report.notes:
            self.app.stderr.write('note: %s\n' % note)
        for problem in problems:
            self.app.stderr.write('problem: %s\n' % problem)
        self._problems = len(problems)
        return API_PASTE_COLUMNS, rows

    def _selftest(self) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        import nova.conf

        from nova_cellsched.api.startup import selftest

        if not nova.conf.CONF.database.connection:
            raise exception.InvalidConfig(
                "--selftest needs nova.conf's [database] connection (nova's "
                'instance queries pick their operators by its scheme); got '
                'none: give the nova-api nova.conf with --config-file')
        nova_problems = _nova_check()
        rows: list[tuple[str, str, str]] = [(
            'installed nova', 'nova %s' % _nova_version(),
            'problem: ' + '; '.join(nova_problems) if nova_problems
            else 'ok')]
        problems = ['installed nova: %s' % p for p in nova_problems]
        if not nova_problems:
            found, seconds = selftest.run()
            rows.append(('self-test', '%.3f s' % seconds,
                         'problem: ' + '; '.join(found) if found else 'ok'))
            problems += found
        for problem in problems:
            self.app.stderr.write('problem: %s\n' % problem)
        self._problems = len(problems)
        return SELFTEST_COLUMNS, rows

    def run(self, parsed_args: argparse.Namespace) -> int:
        self._problems = 0
        if getattr(parsed_args, 'api_paste', None) is not None:
            # Reads the file and the installed nova, not nova.conf.
            self.needs_config = False
        result = super().run(parsed_args)
        return result or (1 if self._problems else 0)


#: nova's quota driver that counts usage in the cells (its default).
DB_QUOTA_DRIVER = 'nova.quota.DbQuotaDriver'


def quota_note(conf_obj: Any) -> str | None:
    """Why a boot's quota count waits for a cell that does not answer.

    nova's ``DbQuotaDriver`` with ``[quota] count_usage_from_placement =
    False`` counts a project's instances, cores and ram in the cell
    databases at every boot (nova-api, and the conductor's recheck), with
    nova's 60 s ``CELL_TIMEOUT`` per cell; a cell that does not answer is
    then left out of the count. Placement counting reads the API database
    and placement only; unified limits always do.

    :returns: the note ``check`` prints, or None when no cell is asked.
    """
    quota = conf_obj.quota
    if quota.driver != DB_QUOTA_DRIVER or quota.count_usage_from_placement:
        return None
    return ('[quota] count_usage_from_placement is False: each boot counts '
            "the project's instances, cores and ram in the cell databases "
            "and waits up to nova's 60 s for a cell that does not answer "
            '(whose servers are then not counted); True counts them from '
            'placement and the API database and asks no cell (run '
            'nova-manage db online_data_migrations first)')


#: Seconds ``check`` gives a cell database to answer ``SELECT 1``.
CELL_PROBE_TIMEOUT = float(base.DATABASE_TIMEOUT)


def probe_cell_database(url: str, timeout: float = CELL_PROBE_TIMEOUT
                        ) -> str | None:
    """Why the cell database at *url* does not answer; None if it does.

    One connection and ``SELECT 1``, with the driver's connect and read
    timeouts at *timeout* (the listing's engine,
    :func:`nova_cellsched.records.query.create_engine`). A SQLite file
    that does not exist is reported, not created. The reason is the
    driver's first line, never the URL.
    """
    import sqlalchemy as sa
    from sqlalchemy.engine import url as sa_url

    from nova_cellsched.records import query

    try:
        parsed = sa_url.make_url(url)
    except Exception:  # noqa: BLE001 - any parse error is the answer
        return 'its database_connection is not a URL SQLAlchemy reads'
    if (parsed.get_backend_name() == 'sqlite' and parsed.database and
            parsed.database != ':memory:' and
            not os.path.exists(parsed.database)):
        return 'its SQLite file does not exist'
    try:
        engine = query.create_engine(url, io_timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - a driver that is missing...
        from nova_cellsched.api.hooks import driver_advice

        advice = driver_advice.missing_module_advice(exc)
        return exception.driver_reason(exc) + (
            '; %s' % advice if advice else '')
    try:
        with engine.connect() as conn:
            conn.execute(sa.text('SELECT 1'))
    except Exception as exc:  # noqa: BLE001 - whatever the driver raises
        return exception.driver_reason(exc)
    finally:
        engine.dispose()
    return None


def warn_unreachable_cells(policy: decision.Policy,
                           cell_mappings: Sequence[Any], stderr: Any,
                           timeout: float = CELL_PROBE_TIMEOUT) -> list[str]:
    """Write a ``warning:`` line per used cell whose database is down.

    The cells of ``cells_default`` and ``cells_projects`` are probed in
    parallel (:func:`probe_cell_database`); a probe still running after
    *timeout* plus one second is reported as not answering in time, and
    the command does not wait for it. Cells are named by name and uuid,
    never by URL. A warning does not change the exit code: nova-scheduler
    starts, and the cell's hosts are missing until the database answers.

    :returns: the warning lines written, without the prefix.
    """
    import concurrent.futures

    used = {cm.uuid: cm for cm in cell_mappings
            if cm.uuid in policy.usable_cells and
            cm.uuid != decision.CELL0_UUID}
    if not used:
        return []
    pool = concurrent.futures.ThreadPoolExecutor(
        max_workers=min(8, len(used)), thread_name_prefix='cell-probe')
    futures = {uuid: pool.submit(probe_cell_database,
                                 cm.database_connection, timeout)
               for uuid, cm in used.items()}
    concurrent.futures.wait(futures.values(), timeout=timeout + 1)
    pool.shutdown(wait=False, cancel_futures=True)
    lines = []
    for cm in base.cell_order(used.values()):
        future = futures[cm.uuid]
        if not future.done():
            reason = 'no answer within %g seconds' % timeout
        else:
            reason = future.result()
        if reason is not None:
            lines.append('cell %s (%s) is used by [cellsched] '
                         'cells_default or cells_projects but its database '
                         'does not answer: %s' % (cm.name or '', cm.uuid,
                                                  reason))
    for line in lines:
        stderr.write('warning: %s\n' % line)
    return lines


#: Columns of ``check --selftest``.
SELFTEST_COLUMNS = ('Check', 'Detail', 'Result')


def _nova_check() -> list[str]:
    """The problems ``api.startup.install.check`` finds; [] if none."""
    from nova_cellsched.api.startup import install as patch

    try:
        patch.check()
    except patch.IncompatibleNova as exc:
        return list(exc.problems)
    return []


def _parts_check() -> list[tuple[str, str]]:
    """Per part of the nova-api filter: would it be on with this nova.

    ``fits`` or ``off: why`` (:func:`nova_cellsched.compat.check`), for
    the filter's parts, those they require and the start-up check.
    """
    from nova_cellsched import compat

    found = compat.check(list(compat.API_PARTS) + ['startup'])
    return [(name, 'off: ' + '; '.join(problems) if problems else 'fits')
            for name, problems in found.items()]


def _lacking(name: str) -> bool:
    """Whether part *name* is off because this nova release lacks it."""
    from nova_cellsched.compat import core

    return core.lacking(name) is not None


def _auth_keys() -> tuple[tuple[str, ...], str]:
    """The keys nova's ``pipeline_factory_v21`` composites read here.

    nova 31 reads the one ``[api] auth_strategy`` names (``keystone``
    or the deprecated ``noauth2``); nova 32 and later have no such
    option and read ``keystone`` only.
    """
    import nova.conf
    from oslo_config import cfg

    from nova_cellsched.cmd import paste_check

    try:
        strategy = nova.conf.CONF.api.auth_strategy
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return (paste_check.AUTH_KEYS_USED,
                'nova %s builds this composite from its keystone pipeline '
                'only' % _nova_version())
    return ((str(strategy),),
            "nova %s builds this composite from the pipeline nova.conf's "
            '[api] auth_strategy names (%s)' % (_nova_version(), strategy))


def _nova_version() -> str:
    from importlib import metadata
    try:
        return metadata.version('nova')
    except metadata.PackageNotFoundError:
        return '(not installed)'


class Explain(CellschedCommandMixin, lister.Lister):
    """Show which cells a new server of a project may use, and why.

    A cell the options name for the project that matches no cell
    mapping, or several, is a row of its own and a ``problem:`` line on
    stderr, and makes the exit code 1, as do the other problems of the
    project's cells (cell0 named, a cell disabled in nova).
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument('--project', required=True, metavar='PROJECT_ID',
                            help='Project (tenant) id to explain.')
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        project = parsed_args.project
        if not project.strip():
            raise exception.InvalidListRequest(
                'project', project, 'a project id, e.g. --project '
                '$(openstack project show -f value -c id NAME)')
        mapping, cell_mappings, policy = _load_state()
        allowed = policy.allowed_cells(project)
        dedicated = policy.is_dedicated(project)
        rows = []
        for cm in base.cell_order(cell_mappings):
            ok, why = _explain_cell(policy, project, cm, allowed, dedicated)
            rows.append((cm.name or '', cm.uuid, 'yes' if ok else 'no', why))
        problems = project_problems(mapping, policy, project)
        for problem in problems:
            self.app.stderr.write('problem: %s\n' % problem)
            if problem.kind in (decision.ProblemKind.UNKNOWN,
                                decision.ProblemKind.AMBIGUOUS):
                rows.append((problem.ref, '', 'no', '%s: %s' % (
                    problem.kind.value, problem.detail)))
        self._problems = len(problems)
        if allowed is not None and not allowed:
            self.app.stderr.write(
                'project %s may use no cell: its new servers fail with '
                'NoValidHost\n' % project)
        from nova_cellsched.cmd import nova_setup
        aggregates_cmd.explain_aggregates(nova_setup.conf(), allowed,
                                          self.app.stderr, policy, project)
        return EXPLAIN_COLUMNS, rows

    def run(self, parsed_args: argparse.Namespace) -> int:
        self._problems = 0
        result = super().run(parsed_args)
        return result or (1 if self._problems else 0)


def project_problems(mapping: mapping_mod.CellsMapping,
                     policy: decision.Policy,
                     project: str) -> list[decision.Problem]:
    """The problems of *policy* that decide *project*'s cells.

    Those of the references that apply to it (its ``cells_projects``
    entries if it has any, else ``cells_default``): unknown, ambiguous,
    cell0, disabled in nova; and its having no usable cell among its
    dedicated ones. In *policy*'s order.
    """
    key = mapping_mod.normalize_project_id(project)
    if policy.is_dedicated(project):
        refs = {ref for ref, projects in mapping.projects
                if key in projects}
    else:
        refs = set(mapping.default)
    kinds = (decision.ProblemKind.UNKNOWN,
             decision.ProblemKind.AMBIGUOUS,
             decision.ProblemKind.CELL0,
             decision.ProblemKind.DISABLED_IN_NOVA)
    return [p for p in policy.problems
            if (p.kind in kinds and p.ref in refs) or
            (p.kind is decision.ProblemKind.NO_CELLS_FOR_PROJECT and
             p.ref == key)]


def _explain_cell(policy: decision.Policy, project: str, cm: Any,
                  allowed: frozenset[str] | None,
                  dedicated: bool) -> tuple[bool, str]:
    if cm.uuid == decision.CELL0_UUID:
        return False, 'cell0 has no hosts; it keeps servers that failed ' \
            'to schedule'
    if cm.disabled:
        return False, 'disabled in nova (nova-manage cell_v2 update_cell ' \
            '--enable to use it)'
    if allowed is None:
        return True, 'cells_default and cells_projects are empty: the ' \
            'filter lets every cell pass'
    if cm.uuid in allowed:
        if dedicated:
            return True, 'dedicated to the project in cells_projects'
        return True, 'in cells_default, and the project is not named in ' \
            'cells_projects'
    if dedicated:
        return False, 'the project is named in cells_projects and this ' \
            'cell is not one of its cells'
    if cm.uuid in policy.usable_cells:
        return False, 'dedicated to other projects in cells_projects'
    return False, 'disabled here: named in neither cells_default nor ' \
        'cells_projects'


class CellschedApp(app.App):
    """The cliff application behind ``nova-cellsched``."""

    #: Python warnings met before the options were read (:func:`main`),
    #: shown by :meth:`configure_logging` with ``-v``.
    early_warnings: Sequence[warnings.WarningMessage] = ()

    def __init__(self) -> None:
        manager = commandmanager.CommandManager('nova_cellsched.cli')
        for name, cls in COMMANDS.items():
            manager.add_command(name, cls)
        super().__init__(
            description='Project-to-cell scheduling and cross-cell listing '
                        'for nova cells v2.',
            version=_version(),
            command_manager=manager,
            deferred_help=True)

    def build_option_parser(self, description: str | None, version: str,
                            argparse_kwargs: dict[str, Any] | None = None
                            ) -> argparse.ArgumentParser:
        parser = super().build_option_parser(description, version,
                                             argparse_kwargs)
        parser.add_argument(
            '--config-file', action='append', default=[],
            metavar='PATH',
            help='nova.conf to read; may be repeated. Default: nova\'s '
                 'default locations, as for nova-manage.')
        parser.add_argument(
            '--config-dir', action='append', default=[], metavar='DIR',
            help='Directory of files ending in .conf to read after '
                 '--config-file.')
        return parser

    def run(self, argv: list[str]) -> int:
        """cliff's run, without its interactive shell.

        No command (``nova-cellsched``, ``nova-cellsched --config-file
        F``) prints the usage and the commands on stderr and exits 2, as
        nova-manage does; an unknown command is one ``nova-cellsched:
        error:`` line naming the commands, exit 2.
        """
        self._no_command = False
        code = super().run(argv)
        return 2 if self._no_command else code

    def interact(self) -> None:
        """No command given: say which there are (not cliff's shell)."""
        self._no_command = True
        self.parser.prog = 'nova-cellsched'  # also under python -m
        self.stderr.write(self.parser.format_usage())
        self.stderr.write('\nCommands:\n')
        for name, cls in sorted(COMMANDS.items()):
            summary = (cls.__doc__ or '').strip().splitlines()[:1]
            self.stderr.write('  %-16s %s\n' % (name, ''.join(summary)))
        self.stderr.write('  %-16s %s\n' % ('help COMMAND',
                                              "That command's options."))
        self.stderr.write('nova-cellsched: error: a command is required '
                          '(nova-cellsched --help shows every option)\n')

    def run_subcommand(self, argv: list[str]) -> int:
        try:
            self.command_manager.find_command(argv)
        except ValueError:
            self.stderr.write(
                'nova-cellsched: error: unknown command %r (expected one '
                'of %s; nova-cellsched --help describes them)\n' % (
                    argv[0], ', '.join(sorted(COMMANDS))))
            return 2
        return int(super().run_subcommand(argv))

    def configure_logging(self) -> None:
        try:
            super().configure_logging()
        except OSError as exc:
            # cliff opens --log-file here; its own handler would print the
            # bare "[Errno 2] ..." and exit 1.
            self.stderr.write(
                'nova-cellsched: error: cannot open the log file %s given '
                'with --log-file: %s; give a file in a directory that '
                'exists and that you may write\n'
                % (self.options.log_file, exc.strerror or exc))
            raise SystemExit(exception.InvalidConfig.exit_code) from exc
        if self.options.verbose_level < 2:
            # The libraries' INFO lines (backend loading, ...) are noise for
            # an operator; -vv shows them.
            for name in NOISY_LOGGERS:
                logging.getLogger(name).setLevel(logging.WARNING)
            # keystoneauth's warning that version discovery failed comes
            # before our error line, which says it with how to fix it.
            logging.getLogger('keystoneauth').setLevel(logging.ERROR)
        if self.options.verbose_level >= 2:
            # The libraries' Python warnings, each once per place, those
            # of start-up first; without -v, none (main()). Not with
            # --debug alone: it adds tracebacks, nothing else.
            warnings.simplefilter('default')
            for found in self.early_warnings:
                warnings.showwarning(found.message, found.category,
                                     found.filename, found.lineno,
                                     line=found.line)
        self.early_warnings = ()

    def initialize_app(self, argv: list[str]) -> None:
        if not argv or argv[0] in ('help', 'complete', 'demo'):
            return
        from nova_cellsched.cmd import nova_setup

        args = []
        for path in self.options.config_file:
            args += ['--config-file', path]
        for path in self.options.config_dir:
            args += ['--config-dir', path]
        self._config_error = None
        try:
            nova_setup.load_config(args)
        except exception.CellschedError as exc:
            self._config_error = exc

    def raise_config_error(self) -> None:
        """Raise the error met while reading nova.conf, if any."""
        error = getattr(self, '_config_error', None)
        if error is not None:
            raise error


def _version() -> str:
    try:
        from importlib import metadata
        return metadata.version('nova-cellsched')
    except Exception:  # noqa: BLE001 - not installed: run from a checkout
        return 'unknown'


COMMANDS: dict[str, type[command.Command]] = {
    'check': Check,
    'explain': Explain,
    'list': list_cmd.ListInstances,
    'demo': list_cmd.Demo,
    'sync-aggregates': aggregates_cmd.SyncAggregates,
}


class _NotAService(logging.Filter):
    """Drops nova's warnings about the concurrency mode of a *service*.

    nova 32 and 33 log that a service runs in native threading mode as a
    WARNING (nova 32.2.1 ``nova/monkey_patch.py:101``, 33.0.2 ``:120``:
    "This is currently experimental. Do not use it in production ..."),
    nova 34 as INFO (34.0.0 ``:180``); nova 34 warns that the eventlet
    mode is deprecated when ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` asks
    for it (``:160``). Before the command configures logging, Python
    prints such a warning on stderr, first line of every command's output;
    the command is not a nova service, and its threads are its own
    workers, not nova's.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith((
            'Service is starting with native threading',
            'Eventlet based concurrency mode is deprecated'))


def _use_native_threads() -> None:
    """Choose nova's native threading mode, once per process.

    nova 31 has no ``monkey_patch.patch()``: importing ``nova.monkey_patch``
    patches eventlet unless ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` says not
    to (nova 31.3.1 ``nova/monkey_patch.py:76-78``), so the variable is set
    before that import unless the embedding process imported it already
    (and so chose).
    """
    if 'nova.monkey_patch' not in sys.modules:
        os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
    from nova import monkey_patch

    if not hasattr(monkey_patch, 'patch'):
        return  # nova 31: the import chose
    if monkey_patch.is_patched() or any(
            type(finder).__name__ == 'PoisonEventletImport'
            for finder in sys.meta_path):
        return  # the embedding process chose already
    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
    if 'eventlet' not in sys.modules:
        quiet = _NotAService()
        nova_log = logging.getLogger('nova.monkey_patch')
        nova_log.addFilter(quiet)
        try:
            monkey_patch.patch()
        finally:
            nova_log.removeFilter(quiet)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``nova-cellsched``; return its exit code.

    The command prints its own lines only: Python warnings of the
    libraries it imports are not printed, unless ``-v`` is given (then
    each once per place, as ``-W default`` prints them).
    """
    # NOTE(cellsched): recorded, not printed, until the options say:
    # choosing the threading mode imports eventlet on nova 32 and 33
    # (oslo.concurrency), whose 8-line deprecation warning (shown by
    # default from eventlet 0.41) came before every command's output.
    with warnings.catch_warnings(record=True) as early:
        warnings.simplefilter('default')
        # Like nova-api and nova-scheduler since 2026.1: native threads,
        # no eventlet. The lister's workers are real threads.
        _use_native_threads()
    warnings.simplefilter('ignore')
    cli = CellschedApp()
    cli.early_warnings = early
    try:
        return cli.run(list(sys.argv[1:] if argv is None else argv))
    except exception.CellschedError as exc:
        sys.stderr.write('nova-cellsched: error: %s\n' % exc)
        return exc.exit_code


def console_main() -> int:
    """The ``nova-cellsched`` console script: :func:`main` as a process.

    Start-up runs without the cyclic garbage collector
    (:func:`nova_cellsched.cmd.base.pause_collector`), and whatever is
    left when the command ends is frozen (``gc.freeze``) so that the
    interpreter's exit does not scan it: with nova imported, that final
    collection took 0.5 s of every call. Nothing is lost: files the
    commands write are closed by then, the standard streams and the
    logging handlers are flushed at exit as usual, and objects are
    still freed by reference counting; only objects in reference cycles
    are left to the operating system.
    """
    base.pause_collector()
    try:
        return main()
    finally:
        base.resume_collector()
        gc.freeze()


if __name__ == '__main__':
    sys.exit(console_main())
