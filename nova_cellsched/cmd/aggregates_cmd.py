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

"""``nova-cellsched sync-aggregates``, and the placement parts of
``check`` and ``explain``."""

import argparse
from collections.abc import Iterable, Sequence
from typing import Any

from cliff import lister

from nova_cellsched.cmd.base import cell_order
from nova_cellsched.cmd.base import CellschedCommandMixin
from nova_cellsched.cmd.base import natural_key
from nova_cellsched import exception
from nova_cellsched.scheduler import decision

SYNC_COLUMNS = ('Cell', 'Aggregate', 'Provider', 'Action', 'Result')
#: ``sync-aggregates``'s exit status when the removal guard held a cell
#: (and placement did not fail): the sync needs an operator's decision.
HELD_EXIT = 4
#: Action of a held cell's row (``aggregate_sync.HOLD``, without
#: importing nova here).
HOLD = 'hold cell'


def placement_configured(conf: Any) -> str | None:
    """None when ``[placement]`` names an auth plugin, else why not."""
    try:
        auth_type = conf.placement.auth_type
    except Exception:  # noqa: BLE001 - options not registered: no nova
        auth_type = None
    if not auth_type:
        return ('[placement] auth_type is not set in nova.conf, so the cell '
                'aggregates in placement were not checked')
    return None


def select_cells(cell_mappings: Sequence[Any], ref: str | None) -> list[Any]:
    """The cell mappings a sync covers: all but cell0, or the one *ref*.

    :raises InvalidListRequest: *ref* names no cell, several, or cell0.
    """
    cells = [cm for cm in cell_mappings if cm.uuid != decision.CELL0_UUID]
    if ref is None:
        return cells
    found = [cm for cm in cells if ref in (cm.uuid, cm.name)]
    if len(found) != 1:
        names = ', '.join('%s (%s)' % (cm.name, cm.uuid)
                          for cm in cell_order(cells))
        raise exception.InvalidListRequest(
            '--cell', ref, 'the name or uuid of exactly one cell other '
            'than cell0 (%s); %s' % (
                names, 'several cells have this name, give the uuid'
                if found else 'none matches'))
    return found


class SyncAggregates(CellschedCommandMixin, lister.Lister):
    """Keep one placement aggregate per cell, holding its compute nodes.

    For every cell but cell0 the aggregate whose uuid is the cell
    mapping's uuid gets the resource providers of the cell's compute
    nodes, and loses providers that are not compute nodes of the cell any
    more. Other aggregates of a provider are kept. Lists what changed;
    nothing to do prints an empty table. A cell whose database cannot be
    read, or does not answer within ``[cellsched] list_cell_timeout``, is
    listed as a failure (exit 1) and its aggregate left as it is; the
    other cells are synced. A cell whose database would take every member
    out of its aggregate, or more than ``[cellsched]
    aggregate_sync_max_removal`` of them, gone or moved to another cell
    (a cell mapping pointed at a wrong, empty or restored database, or two
    pointed at each other's databases), is held:
    listed as a failure, nothing changed in its aggregate, exit 4;
    ``--force`` makes its changes. ``--remove-stale`` also empties the
    aggregates deleted cell mappings left behind (an aggregate nova does
    not know whose members are all compute node providers of no cell).
    Placement unreachable or failing (5xx) stops the sync with exit 3:
    nothing is written when it fails while the aggregates are read, and
    no write is started after the failure (removals come after every
    addition succeeded). At most --workers placement requests are in
    flight.
    """

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument('--dry-run', action='store_true',
                            help='List the changes without making them.')
        parser.add_argument('--cell', metavar='NAME_OR_UUID',
                            help='Only this cell\'s aggregate.')
        parser.add_argument(
            '--force', action='store_true',
            help='Also change the aggregates of the cells the removal '
                 'guard holds: cells whose database would remove every '
                 'member of their aggregate, or more than [cellsched] '
                 'aggregate_sync_max_removal of them. Check the cell '
                 'mapping\'s database first.')
        parser.add_argument(
            '--remove-stale', action='store_true',
            help='Also empty the placement aggregates that deleted cell '
                 'mappings left behind (those "check" reports), whatever '
                 '--cell.')
        parser.add_argument('--workers', metavar='N', type=_positive,
                            help='Placement requests kept in flight '
                            '(default: [cellsched] aggregate_sync_workers, '
                            '8).')
        return parser

    def take_action(self, parsed_args: argparse.Namespace
                    ) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        from nova_cellsched.cmd import nova_setup
        from nova_cellsched.scheduler import aggregate_sync

        every = nova_setup.cell_mappings()
        cells = select_cells(every, parsed_args.cell)
        only = None
        if parsed_args.cell is not None:
            # Every cell is read, only this one changed: the removal
            # guard tells a node moved to another cell from one gone.
            only = {cm.uuid for cm in cells}
            cells = select_cells(every, None)
        workers = parsed_args.workers or \
            nova_setup.conf().cellsched.aggregate_sync_workers
        timeout = nova_setup.conf().cellsched.list_cell_timeout
        placement = aggregate_sync.Placement()
        aggregate_sync.bound_cell_io()
        rows: list[Any] = []
        try:
            rows = aggregate_sync.sync(
                placement, cells, dry_run=parsed_args.dry_run,
                workers=workers, force=parsed_args.force, only=only,
                max_removal=nova_setup.conf().cellsched
                .aggregate_sync_max_removal, timeout=timeout)
            if parsed_args.remove_stale:
                rows += _remove_stale(placement, every, workers,
                                      parsed_args.dry_run, timeout)
        except aggregate_sync.SyncFailed as exc:
            # The table shows how far it went; the error is the last line.
            self._fault = exc
            rows = rows + exc.rows
        self._failures = [row for row in rows if row.failed]
        for row in self._failures:
            self.app.stderr.write('%s (cell %s%s)\n' % (
                row.result, row.cell,
                ', provider %s' % row.provider if row.provider else ''))
        # The sync lists by cell uuid; show cells in natural name order
        # (a stable sort keeps each cell's providers in their order).
        rows = sorted(rows, key=lambda r: natural_key(r.cell))
        return SYNC_COLUMNS, [(r.cell, r.aggregate, r.provider, r.action,
                               r.result) for r in rows]

    def run(self, parsed_args: argparse.Namespace) -> int:
        self._failures = []
        self._fault: exception.CellschedError | None = None
        result = super().run(parsed_args)
        if self._fault is not None:
            self.app.stderr.write('nova-cellsched: error: %s\n'
                                  % self._fault)
            return result or self._fault.exit_code
        if result:
            return result
        if any(row.action == HOLD for row in self._failures):
            return HELD_EXIT
        return 1 if self._failures else 0


def _remove_stale(placement: Any, cell_mappings: Sequence[Any],
                  workers: int, dry_run: bool,
                  timeout: float | None = None) -> list[Any]:
    """Rows of ``--remove-stale``: every cell is read to tell which
    compute node providers belong to no cell; a cell that cannot be read
    makes it a failure (nothing removed).
    """
    from nova_cellsched.scheduler import aggregate_sync

    state = aggregate_sync.read_cells(
        placement, select_cells(cell_mappings, None), workers=workers,
        timeout=timeout)
    stale = aggregate_sync.find_stale(
        placement, state, known_aggregates(cell_mappings), workers)
    if stale is None:
        return [aggregate_sync.SyncRow(
            aggregate_sync.STALE_CELL, '', '', aggregate_sync.REMOVE_STALE,
            'failed: the aggregates of deleted cell mappings were not '
            'looked for: cannot read the compute nodes of cell(s) %s, '
            'whose nodes would look like a deleted cell\'s; run again '
            'once they answer' % ', '.join(
                state.labels[c] for c in sorted(state.unreadable)))]
    return aggregate_sync.remove_stale(placement, stale, dry_run=dry_run,
                                       workers=workers)


def _positive(value: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(
            'expected a positive integer (placement requests in flight), '
            'got %r' % value)
    return number


def known_aggregates(cell_mappings: Sequence[Any]) -> frozenset[str]:
    """The aggregates nova knows: every cell mapping's uuid (cell0's
    included) and nova's host aggregates.

    :raises ApiDatabaseUnreachable: the API database did not answer.
    """
    from nova_cellsched.cmd import nova_setup
    from nova_cellsched.scheduler import aggregate_sync

    try:
        hosts = aggregate_sync.read_host_aggregates()
    except nova_setup.DB_ERRORS as exc:
        raise exception.ApiDatabaseUnreachable(nova_setup.masked_api_url(),
                                               exc) from exc
    return hosts | {cm.uuid for cm in cell_mappings}


def check_aggregates(conf: Any, cell_mappings: Sequence[Any],
                     stderr: Any) -> int:
    """Write ``check``'s lines about the cell aggregates; count problems.

    Placement not configured or unreachable is a note, or a problem when
    ``[cellsched] placement_prefilter`` is on.
    """
    from nova_cellsched.scheduler import aggregate_sync

    prefilter = bool(conf.cellsched.placement_prefilter)
    why_not = placement_configured(conf)
    found: list[str] = []
    if why_not is None:
        try:
            placement = aggregate_sync.Placement()
            aggregate_sync.bound_cell_io()
            found = aggregate_sync.problems(
                placement, select_cells(cell_mappings, None),
                workers=conf.cellsched.aggregate_sync_workers,
                max_removal=conf.cellsched.aggregate_sync_max_removal,
                known=known_aggregates(cell_mappings),
                timeout=conf.cellsched.list_cell_timeout)
        except exception.CellschedError as exc:
            why_not = 'the cell aggregates were not checked: %s' % exc
    if why_not is not None:
        if prefilter:
            found = ['[cellsched] placement_prefilter is on but %s'
                     % why_not]
        else:
            stderr.write('note: %s\n' % why_not)
    for line in found:
        stderr.write('problem: %s\n' % line)
    return len(found)


def explain_aggregates(conf: Any, allowed: frozenset[str] | None,
                       stderr: Any, policy: Any = None,
                       project: str | None = None) -> None:
    """Write the aggregates the pre-filter requires for a project.

    :param policy: the resolved :class:`~.decision.Policy`; with *project*,
        the form ``[cellsched] placement_prefilter_form`` picks for a
        project not in ``cells_projects`` is shown, else ``member_of``.
    """
    state = 'on' if conf.cellsched.placement_prefilter else \
        'off ([cellsched] placement_prefilter)'
    form = conf.cellsched.placement_prefilter_form
    others: frozenset[str] | None = None
    if (allowed and policy is not None and project is not None and
            not policy.is_dedicated(project)):
        rest = frozenset(policy.cells) - allowed - {decision.CELL0_UUID}
        if decision.forbidden_form(form, allowed, rest):
            others = rest
    if allowed is None:
        stderr.write('placement pre-filter %s: requires no aggregate (the '
                     'mapping is empty)\n' % state)
    elif others is not None:
        stderr.write('placement pre-filter %s: new servers require %s '
                     '([cellsched] placement_prefilter_form = %s)\n'
                     % (state, 'member_of=!in:%s' % ','.join(sorted(others))
                        if others else 'no aggregate (every cell is a '
                        'default cell)', form))
    elif allowed:
        stderr.write('placement pre-filter %s: new servers require '
                     'member_of=in:%s\n' % (state, ','.join(sorted(allowed))))
    else:
        stderr.write('placement pre-filter %s: fails the request before '
                     'asking placement\n' % state)
