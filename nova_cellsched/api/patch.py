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

"""Put the replacements into nova, after checking nova is what they fit.

nova has no entry point for its instance lister: the replacement swaps
module attributes of a private module, and relies on what nova's
functions do, which only holds while nova's code is the code it was
built and tested for. :func:`check` compares the running nova with that
statically: the exact nova release and the source of every function,
class and value relied on (:mod:`.fingerprint`), the ``paginate_query``
that :mod:`.keyset` stands in for, and that its per-thread state is per
green thread under eventlet. :func:`install` then runs the self-test
(:mod:`.selftest`: both listers on a private in-memory database, compared
object by object) and installs only if all of it passes; on any
difference it raises :class:`IncompatibleNova`, which names each one,
and changes nothing.
"""

from collections.abc import Callable
import inspect
import threading
from typing import Any

from oslo_log import log as logging

from nova_cellsched.api import fingerprint

LOG = logging.getLogger(__name__)


class IncompatibleNova(Exception):
    """The running nova is not the one the replacement fits.

    :ivar problems: one line per difference found.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            'nova-cellsched cannot serve nova-api server lists: %s. '
            "nova's own lister stays in use. To fix: %s."
            % ('; '.join(problems), fingerprint.HOW_TO_FIX))


def _parameters(function: Callable[..., Any]) -> str:
    """The parameters (names, kinds, defaults) without annotations."""
    signature = inspect.signature(inspect.unwrap(function))
    return str(signature.replace(
        parameters=[p.replace(annotation=p.empty)
                    for p in signature.parameters.values()],
        return_annotation=signature.empty))


def _keyset_problems() -> list[str]:
    """What :mod:`.keyset` needs from oslo.db and the thread model."""
    from nova.db.main import api as db_api
    from oslo_db.sqlalchemy import utils as oslo_utils

    from nova_cellsched.api import keyset

    problems = []
    ours = _parameters(keyset.paginate_query)
    theirs = _parameters(oslo_utils.paginate_query)
    if ours != theirs:
        problems.append(
            'oslo_db.sqlalchemy.utils.paginate_query%s was expected to be '
            'paginate_query%s (nova.db.main.api reaches it through '
            "nova-cellsched's stand-in)" % (theirs, ours))
    module = getattr(db_api, 'sqlalchemyutils', None)
    if module is not oslo_utils and not keyset.installed():
        problems.append("nova.db.main.api.sqlalchemyutils is not oslo.db's "
                        'sqlalchemy.utils (found %r)' % (module,))
    # Paging is scoped to the worker by a thread-local: under eventlet
    # it must be green-thread-local, or another request's query running
    # in the same OS thread would be paged too.
    from nova_cellsched.api import guard
    locals_ = {'keyset': keyset.local_state(),
               'guard': getattr(guard, '_local', None)}
    for name, local in locals_.items():
        if local is not None and not isinstance(local, threading.local):
            problems.append(
                'the per-thread state of nova_cellsched.api.%s was made '
                'before threading was monkey-patched (import nova, and '
                'patch, before nova_cellsched)' % name)
    return problems


def check() -> None:
    """Raise :class:`IncompatibleNova` unless nova is what this fits.

    The static part: nova's release and sources, oslo.db's
    ``paginate_query``, the thread model. :func:`install` also runs the
    self-test.
    """
    problems = fingerprint.problems() + _keyset_problems()
    if problems:
        raise IncompatibleNova(problems)


_LOCK = threading.Lock()
_SAVED: dict[str, Callable[..., Any]] = {}
_SAVED_CONTEXT: dict[str, Callable[..., Any]] = {}


def install() -> bool:
    """Replace nova's instance lister; True if this call installed it.

    Idempotent and thread-safe.

    :raises IncompatibleNova: nothing was changed.
    """
    with _LOCK:
        if _SAVED:
            return False
        check()
        from nova.compute import instance_list as nova_instance_list

        from nova_cellsched.api import guard
        from nova_cellsched.api import instance_list
        from nova_cellsched.api import keyset
        from nova_cellsched.api import selftest

        from nova import context as nova_context
        problems, seconds = selftest.run(
            instance_list.REPLACEMENTS['get_instances_sorted'])
        if problems:
            # The self-test's listings started the worker pool; nothing
            # else uses it while the lister is not installed.
            instance_list.shutdown()
            raise IncompatibleNova(problems)
        for name, replacement in instance_list.REPLACEMENTS.items():
            _SAVED[name] = getattr(nova_instance_list, name)
            setattr(nova_instance_list, name, replacement)
        for name, replacement in instance_list.CONTEXT_REPLACEMENTS.items():
            _SAVED_CONTEXT[name] = getattr(nova_context, name)
            setattr(nova_context, name, replacement)
        keyset.install()
        guard.install()
        _install_validation()
        LOG.info('%s', installed_message(
            _lister_on(), fingerprint.nova_version(),
            len(fingerprint.RELIED_ON), seconds))
        return True


def installed_message(lister_on: bool, nova_version: str, sources: int,
                      seconds: float) -> str:
    """The INFO line of an install: what serves nova-api's lists now.

    :param lister_on: ``[cellsched] api_lister``.
    """
    if lister_on:
        what = 'serves nova-api server lists'
        switch = "[cellsched] api_lister = False goes back to nova's lister"
    else:
        what = ("is installed in nova-api but nova's own lister serves the "
                'server lists: [cellsched] api_lister = False')
        switch = ('[cellsched] api_lister = True and a reload of '
                  "nova-api's workers (uwsgi: SIGHUP to the master) make "
                  'nova-cellsched serve them')
    return ('nova-cellsched %s (nova %s as tested: %d relied-on sources '
            'checked; self-test passed in %.3f s; '
            'nova.compute.instance_list replaced; %s)'
            % (what, nova_version, sources, seconds, switch))


def _lister_on() -> bool:
    """``[cellsched] api_lister`` as nova-api has it now."""
    import nova.conf

    from nova_cellsched import conf as conf_mod
    return bool(nova.conf.CONF[conf_mod.GROUP_NAME].api_lister)


def uninstall() -> bool:
    """Give nova its own lister back; True if this call removed ours."""
    with _LOCK:
        if not _SAVED:
            return False
        from nova.compute import instance_list as nova_instance_list

        from nova_cellsched.api import guard
        from nova_cellsched.api import instance_list
        from nova_cellsched.api import keyset

        from nova import context as nova_context
        for name, original in _SAVED.items():
            if getattr(nova_instance_list, name) is (
                    instance_list.REPLACEMENTS[name]):
                setattr(nova_instance_list, name, original)
        for name, original in _SAVED_CONTEXT.items():
            if getattr(nova_context, name) is (
                    instance_list.CONTEXT_REPLACEMENTS[name]):
                setattr(nova_context, name, original)
        _SAVED.clear()
        _SAVED_CONTEXT.clear()
        keyset.uninstall()
        guard.uninstall()
        _uninstall_validation()
        instance_list.shutdown()
        return True


# Response validation of the server lists (nova_cellsched.api.validation):
# checked and installed on its own. A difference there leaves nova's
# validation in place and the lister installed.

def _install_validation() -> None:
    from nova_cellsched.api import validation
    from nova_cellsched.api import view
    validation.install()
    # The view's lookups (.view): their nova code is in RELIED_ON, which
    # check() has verified.
    view.install()


def _uninstall_validation() -> None:
    from nova_cellsched.api import validation
    from nova_cellsched.api import view
    validation.uninstall()
    view.uninstall()


def is_installed() -> bool:
    with _LOCK:
        return bool(_SAVED)
