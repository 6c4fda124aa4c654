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

"""Base pieces of the ``nova-cellsched`` commands."""

import argparse
from collections.abc import Iterable
import gc
import importlib
import re
from typing import Any

from oslo_config import cfg

from nova_cellsched import exception
from nova_cellsched.listing.timing import natural_key


#: Seconds the commands give a database to connect and to answer each
#: read: the nova API database (:func:`nova_cellsched.cmd.nova_setup.
#: load_config`), and ``check``'s ``SELECT 1`` on each cell it uses.
DATABASE_TIMEOUT = 5


def cell_order(cell_mappings: Iterable[Any]) -> list[Any]:
    """*cell_mappings* in the order the commands show cells.

    By name in natural order (``cell2`` before ``cell10``; a name without
    a number after the numbered ones of the same stem: ``cell1``,
    ``cell2``, ``cell10``, ``cell-a``), then by uuid for equal names. A
    mapping without a name sorts first.
    """
    return sorted(cell_mappings,
                  key=lambda cm: (natural_key(cm.name or ''), cm.uuid))


#: True while :func:`pause_collector` holds the collector off.
_COLLECTOR_PAUSED = False


def pause_collector() -> None:
    """Start the process without the cyclic garbage collector.

    For the console script only (:func:`nova_cellsched.cmd.cellsched.
    console_main`), never for a process that embeds :func:`main`.
    Importing nova and its libraries makes about a million objects that
    live as long as the process; the collector scanned them three times
    over during start-up (0.2-0.35 s of a 1-2 s command) and found
    nothing to free. :meth:`CellschedCommandMixin.run` turns it back on
    (:func:`resume_collector`) once the command's modules are loaded, so
    the command's own work is collected as usual.
    """
    global _COLLECTOR_PAUSED
    if gc.isenabled():
        gc.disable()
        _COLLECTOR_PAUSED = True


def resume_collector() -> None:
    """Turn the collector back on, without start-up's objects.

    They are moved to the permanent generation (``gc.freeze``), which
    collections do not scan. Does nothing unless
    :func:`pause_collector` paused it.
    """
    global _COLLECTOR_PAUSED
    if _COLLECTOR_PAUSED:
        gc.freeze()
        gc.enable()
        _COLLECTOR_PAUSED = False


class CellschedCommandMixin:
    """Turn :class:`CellschedError` into its message and exit code."""

    app: Any
    #: False for commands that make their own configuration (demo).
    needs_config = True
    #: Modules the command's work imports, loaded before the collector
    #: is turned back on (see :func:`pause_collector`).
    start_up_imports: tuple[str, ...] = ()

    def get_description(self) -> str:
        """The command's docstring, without reStructuredText's literals.

        The docstring is also the command's page in the guide (cliff's
        Sphinx extension), where ````--workers```` is a literal; in
        ``--help`` it reads as ``--workers``.
        """
        text = super().get_description()  # type: ignore[misc]
        return str(text).replace('``', '')

    def get_epilog(self) -> str:
        """The command's epilog and its hooks', as cliff gives them.

        Without cliff's plugin note: to say "This command is provided by
        the X plugin" for commands of another distribution than the
        application's, cliff reads the metadata of every installed
        distribution (``importlib.metadata.packages_distributions``),
        0.14-0.24 s of each call in nova's virtualenv. Every command here
        is the application's own, so the note is never shown
        (``tests/unit/test_cli_app.py`` checks the texts are cliff's).
        """
        parts = [self._epilog or '']  # type: ignore[attr-defined]
        for hook in self._hooks:  # type: ignore[attr-defined]
            if hook.obj is not None:
                text = hook.obj.get_epilog()
                if text is not None:
                    parts.append(text)
        return '\n\n'.join(parts)

    def run(self, parsed_args: argparse.Namespace) -> int:
        try:
            if self.needs_config:
                self.app.raise_config_error()
            for name in self.start_up_imports:
                importlib.import_module(name)
            resume_collector()
            return int(super().run(parsed_args))  # type: ignore[misc]
        except exception.CellschedError as exc:
            # Bad input or an unreachable database: one line and the
            # command's exit code, with --debug too (it is not a bug of
            # ours, a traceback would only hide the line).
            self.app.stderr.write('nova-cellsched: error: %s\n' % exc)
            return exc.exit_code
        except cfg.Error as exc:
            # A value in nova.conf that oslo.config cannot read, found
            # when the command first uses the option.
            self.app.stderr.write('nova-cellsched: error: bad configuration: '
                                  '%s\n' % config_error_text(exc))
            return exception.InvalidConfig.exit_code


_VALUE_ERROR = re.compile(
    r"Value for option (?P<name>\S+) from LocationInfo\(.*?"
    r"detail='(?P<where>[^']*)'\) is not valid: (?P<reason>.*)")


def config_error_text(exc: BaseException) -> str:
    """oslo.config's error *exc* in an operator's words, on one line.

    ``Value for option X from LocationInfo(location=..., detail='F') is
    not valid: R`` becomes ``option X in F is not valid: R``.
    """
    text = ' '.join(str(exc).split())
    found = _VALUE_ERROR.search(text)
    if found is None:
        return text
    return 'option %s in %s is not valid: %s' % (
        found['name'], found['where'] or 'the configuration files',
        found['reason'])
