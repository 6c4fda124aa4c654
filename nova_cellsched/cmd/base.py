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
from typing import Any

from oslo_config import cfg

from nova_cellsched import exception


class CellschedCommandMixin:
    """Turn :class:`CellschedError` into its message and exit code."""

    app: Any
    #: False for commands that make their own configuration (demo).
    needs_config = True

    def get_epilog(self) -> str:
        """The command's epilog and its hooks', as cliff gives them.

        Without cliff's plugin note: to say "This command is provided by
        the X plugin" for commands of another distribution than the
        application's, cliff reads the metadata of every installed
        distribution (``importlib.metadata.packages_distributions``),
        0.14-0.24 s of each call in nova's virtualenv. Every command here
        is the application's own, so the note is never shown
        (``tests/unit/test_cli.py`` checks the texts are cliff's).
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
            return int(super().run(parsed_args))  # type: ignore[misc]
        except exception.CellschedError as exc:
            if self.app.options.debug:
                raise
            self.app.stderr.write('nova-cellsched: error: %s\n' % exc)
            return exc.exit_code
        except cfg.Error as exc:
            # A value in nova.conf that oslo.config cannot read, found
            # when the command first uses the option.
            if self.app.options.debug:
                raise
            self.app.stderr.write('nova-cellsched: error: bad configuration: '
                                  '%s\n' % exc)
            return exception.InvalidConfig.exit_code
