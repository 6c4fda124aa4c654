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

"""nova-api integration: server lists served by the parallel lister.

Entry points: :func:`filter_factory` (the paste filter named in nova's
``api-paste.ini``), :func:`install` / :func:`uninstall` (what the filter
does, for tests and tools), :func:`served` (how many listings each
lister answered). The subpackages, in a request's order:
:mod:`.startup` checks nova and puts the parts in (at start),
:mod:`.hooks` replaces nova's listing functions and runs them on the
listing engine, :mod:`.view` renders the body, :mod:`.validation`
validates it, and :mod:`.middleware` keeps the request's state and adds
the ``Server-Timing`` header.
"""

from collections.abc import Callable, Mapping
from typing import Any

from oslo_log import log as logging

from nova_cellsched.api.middleware import server_timing
from nova_cellsched.api.startup.install import IncompatibleNova
from nova_cellsched.api.startup.install import install
from nova_cellsched.api.startup.install import is_installed
from nova_cellsched.api.startup.install import uninstall

__all__ = ['IncompatibleNova', 'filter_factory', 'install', 'is_installed',
           'served', 'uninstall']

LOG = logging.getLogger(__name__)

WsgiApp = Callable[..., Any]


def filter_factory(global_conf: Mapping[str, Any],
                   **local_conf: Any) -> Callable[[WsgiApp], WsgiApp]:
    """paste.deploy filter factory: install, then time served lists.

    Requests pass through to nova unchanged, each in a request state of
    its own (:mod:`.request_state`, what the lister leaves for the rest
    of the request); a server list the
    replacement lister served gets a ``Server-Timing`` header, for the
    callers nova's policy lets see it and naming cells only for those it
    lets see cells (:mod:`.policies`), and a log line
    (:mod:`.server_timing`). On a nova this was not built for, logs
    one error saying why and leaves nova untouched: nova-api starts and
    serves with its own lister, and the filter passes requests through.
    """
    try:
        installed = install() or is_installed()
    except IncompatibleNova as exc:
        LOG.error('%s', exc)
        installed = False

    def timed(app: WsgiApp) -> WsgiApp:
        if not installed:
            return app
        return server_timing.Middleware(app, _timing_options, _log_timings,
                                        _timing_audience)

    return timed


def _timing_options() -> tuple[bool, bool]:
    import nova.conf

    from nova_cellsched import conf as conf_mod
    group = nova.conf.CONF[conf_mod.GROUP_NAME]
    return group.api_server_timing, group.api_log_timings


def _timing_audience(environ: dict[str, Any]) -> tuple[bool, bool]:
    from nova_cellsched.api.middleware import policies
    return policies.audience(environ.get('nova.context'))


def _log_timings(info: bool, fmt: str, args: dict[str, Any]) -> None:
    LOG.log(logging.INFO if info else logging.DEBUG, fmt, args)


def served() -> dict[str, int]:
    """``{'cellsched': n, 'nova': m}``: listings each lister answered.

    Counts the listings of this process since it started.
    """
    from nova_cellsched.api.hooks import instance_list
    return instance_list.SERVED.snapshot()
