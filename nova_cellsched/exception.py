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

"""Exceptions of nova-cellsched.

Every exception carries the data it talks about as attributes, and its
message says what was expected, what was got and how to fix it::

    CellschedError
     +-- InvalidConfig           nova.conf cannot be used
     |    +-- InvalidCellsMapping     [cellsched] cells_default/projects
     +-- InvalidListRequest      a listing argument is not acceptable
     +-- ApiDatabaseUnreachable  the nova API database did not answer
     +-- DemoServerUnreachable   demo --connection: the server did not answer
     +-- PlacementUnreachable    the placement API did not answer
     +-- CellsFailed             a listing that may not skip down cells
                                 lost one or more cells
     +-- CannotServeApi          demo --api: no uwsgi (or nova's paste)

``exit_code`` is the ``nova-cellsched`` exit status for the error (see
:mod:`nova_cellsched.cmd.cellsched`).
"""

from collections.abc import Mapping


class CellschedError(Exception):
    """Base class for nova-cellsched errors."""

    exit_code = 1


class InvalidConfig(CellschedError):
    """The configuration cannot be used; the message says what to fix."""

    exit_code = 2


class InvalidCellsMapping(InvalidConfig):
    """``[cellsched] cells_default`` or ``cells_projects`` is malformed.

    :ivar option: the option name, e.g. ``cells_projects``.
    :ivar value: the whole raw value that was rejected.
    :ivar token: the part of the value that is wrong.
    :ivar reason: what is wrong with ``token`` and how to fix it.
    """

    exit_code = 2

    def __init__(self, option: str, value: str, token: str,
                 reason: str) -> None:
        self.option = option
        self.value = value
        self.token = token
        self.reason = reason
        super().__init__(
            '[cellsched] %s: %r: %s (whole value: %r)'
            % (option, token, reason, value))


class InvalidListRequest(CellschedError):
    """An argument of a listing is not one the lister accepts.

    :ivar argument: the argument name, e.g. ``sort_key``.
    :ivar value: the rejected value.
    :ivar expected: what would have been accepted.
    """

    exit_code = 2

    def __init__(self, argument: str, value: object, expected: str) -> None:
        self.argument = argument
        self.value = value
        self.expected = expected
        # One line, whatever the value or a library's message contain.
        super().__init__('invalid %s %r: expected %s'
                         % (argument, value, ' '.join(expected.split())))


class MarkerNotFound(InvalidListRequest):
    """The marker is not an instance a listing can start after.

    No InstanceMapping names it, or its mapping has no cell yet (a
    server still being scheduled). nova-api's lister answers nova's
    ``MarkerNotFound``.
    """

    def __init__(self, marker: object, scheduling: bool = False) -> None:
        expected = ('the uuid of an existing instance (the last one of the '
                    'previous page)')
        if scheduling:
            expected += ', not a server still being scheduled'
        super().__init__('marker', marker, expected)


class DatabaseUnreachable(CellschedError):
    """A database the command needs did not answer (exit 3).

    :ivar url: the connection URL, password masked.
    :ivar cause: the original exception (also ``__cause__``).
    """

    exit_code = 3
    #: The message, from the masked URL and the driver's reason.
    template = 'cannot reach the database at %s: %s'

    def __init__(self, url: str, cause: BaseException) -> None:
        self.url = url
        self.cause = cause
        super().__init__(self.template % (url, driver_reason(cause)))


class ApiDatabaseUnreachable(DatabaseUnreachable):
    """The nova API database could not be queried."""

    template = ('cannot read the nova API database at %s: %s; check '
                '[api_database] connection in the nova.conf given with '
                '--config-file and that the database server is running')


def driver_reason(cause: BaseException) -> str:
    """``Type: first line`` of the driver's error under *cause*.

    SQLAlchemy wraps the driver's exception (``orig``) and appends the
    statement and a "Background on this error" link; only the driver's
    own first line is kept.
    """
    inner = getattr(cause, 'orig', None)
    shown = inner if isinstance(inner, BaseException) else cause
    reason = (str(shown).strip().splitlines() or [''])[0]
    return '%s: %s' % (type(shown).__name__, reason)


class DemoServerUnreachable(DatabaseUnreachable):
    """``demo --connection``: the database server did not answer."""

    template = ('cannot reach the database server of --connection %s: %s; '
                'check the URL and that the server is running, or leave '
                '--connection out for SQLite files in --dir')


class CellsFailed(CellschedError):
    """A listing that may not skip cells lost one or more cells.

    :ivar failures: cell uuid -> human readable reason.
    """

    exit_code = 1

    def __init__(self, failures: Mapping[str, str]) -> None:
        self.failures = dict(failures)
        super().__init__(
            'listing incomplete, %d cell(s) failed: %s; fix the cells or '
            'list with down cells skipped'
            % (len(self.failures),
               '; '.join('%s: %s' % kv for kv in sorted(
                   self.failures.items()))))


class RowsNotReread(CellschedError):
    """nova-api: a cell did not give listed servers' rows a second time.

    The listing reads only the columns the list body shows; a request
    left to nova's view reads the rest from the servers' cells
    (``nova_cellsched.api.view.render.materialize``), and one of them failed.

    :ivar cell: the cell's uuid.
    """

    def __init__(self, cell: str, reason: str) -> None:
        self.cell = cell
        super().__init__(
            'expected the rows of the listed servers of cell %s for '
            "nova's server view, got %s; the list is not answered, the "
            'next request lists the cell again' % (cell, reason))


class PlacementUnreachable(CellschedError):
    """The placement API could not be reached through ``[placement]``.

    :ivar cause: the keystoneauth exception (also ``__cause__``).
    """

    exit_code = 3

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        reason = (str(cause).strip().splitlines() or [''])[0]
        super().__init__(
            'cannot reach the placement API: %s: %s; check the [placement] '
            'options (auth_url, credentials, region_name, valid_interfaces) '
            'in the nova.conf given with --config-file and that placement '
            'is running' % (type(cause).__name__, reason))


class CannotServeApi(CellschedError):
    """``demo --api`` cannot serve nova-api here (no uwsgi, no nova file).

    :ivar problem: one line saying what is missing and how to install it.
    """

    exit_code = 2

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__('cannot serve nova-api: %s'
                         % ' '.join(problem.split()))
