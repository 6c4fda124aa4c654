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

"""The nova-api filter's parts into nova, after checking nova fits them.

nova has no entry point for its instance lister: the replacement swaps
module attributes of a private module, and relies on what nova's
functions do, which only holds while nova's code is code it was tested
with. What is swapped, and what is relied on, is declared once in
:mod:`nova_cellsched.compat` (parts ``lister``, ``keyset``, ``guard``,
``view``, ``validation``); this module is what the paste filter,
``nova-cellsched check --api-paste`` and the tests call.

:func:`check` asks :mod:`nova_cellsched.compat` whether the lister (and
the parts it requires) fits the running nova: each relied-on source
equal to one tested version of it, oslo.db's ``paginate_query`` the
one :mod:`.keyset` stands in for, per-thread state per green thread
under eventlet. :func:`install` installs only if all of it passes; on
any difference it raises :class:`IncompatibleNova`, which names each
one, and changes nothing. The view lookups and the response validation
are then installed each on its own: a part whose nova code changed
stays off alone, with one WARNING.

:func:`install` runs in every nova-api worker before it serves, so it
changes nothing of the process but the parts' declared targets
(:data:`nova_cellsched.compat.parts.PARTS`): the per-release source
sets are the guard there. The self-test (:mod:`.selftest`: both listers
on private in-memory databases, compared object by object), which
changes process-wide state while it runs, is not run here: operators
run it with ``nova-cellsched check --selftest``, in a process of its
own, and the tests run it.
"""

import threading

from oslo_log import log as logging

from nova_cellsched import compat
from nova_cellsched.compat import core as compat_core
from nova_cellsched.compat import hashing

LOG = logging.getLogger(__name__)


class IncompatibleNova(Exception):
    """The running nova is not the one the replacement fits.

    :ivar problems: one line per difference found.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            'nova-cellsched cannot serve nova-api server lists: %s. '
            "nova's own lister stays in use.%s"
            % ('; '.join(problems), compat_core.fix_for(problems)))


def check() -> None:
    """Raise :class:`IncompatibleNova` unless the lister fits this nova.

    The relied-on sources, oslo.db's ``paginate_query``, the thread
    model: what :func:`install` checks (the self-test is
    ``nova-cellsched check --selftest``'s). The other parts' fit:
    :func:`nova_cellsched.compat.check`.
    """
    problems = compat.check(['lister'])['lister']
    if problems:
        raise IncompatibleNova(problems)


#: Serialises install/uninstall (the parts themselves lock compat's).
_LOCK = threading.Lock()


def install() -> bool:
    """Replace nova's instance lister; True if this call installed it.

    Then the view lookups and the response validation, each only if it
    fits (one WARNING for a part that stays off). Idempotent and
    thread-safe. Changes nothing of the process but the declared
    targets of the parts it turns on (no self-test: see the module's
    docstring).

    :raises IncompatibleNova: nothing was changed.
    """
    with _LOCK:
        if compat.is_on('lister'):
            return False
        check()
        found = compat.install(compat.API_PARTS)
        if found['lister']:
            from nova_cellsched.api.hooks import pool

            # A pool started for the lister (the start-up check's) has
            # nothing to serve.
            pool.shutdown()
            raise IncompatibleNova(found['lister'])
        LOG.info('%s', installed_message(
            _lister_on(), hashing.nova_version(), _matched(),
            [name for name, problems in found.items() if not problems]))
        return True


def _matched() -> tuple[int, list[str]]:
    """(sources the nova-api parts rely on, the releases they all equal)."""
    from nova_cellsched.compat import parts as parts_mod

    names = compat_core._with_requirements(compat.API_PARTS)
    sources = {s.name for n in names for s in parts_mod.BY_NAME[n].sources}
    return len(sources), compat_core.releases_matching(['lister'])


def installed_message(lister_on: bool, nova_version: str,
                      matched: tuple[int, list[str]], parts: list[str]
                      ) -> str:
    """The INFO line of an install: what serves nova-api's lists now.

    :param lister_on: ``[cellsched] api_lister``.
    :param matched: (relied-on sources checked, the tested releases
        whose sources the lister's equal).
    :param parts: the parts on (:data:`.compat.API_PARTS` and
        their requirements).
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
    sources, releases = matched
    return ('nova-cellsched %s (nova %s: %d relied-on sources checked, as '
            'tested with nova %s; parts on: %s; '
            'nova.compute.instance_list replaced; %s)'
            % (what, nova_version, sources,
               ' or '.join(releases) or 'no single release', ', '.join(
                   parts), switch))


def _lister_on() -> bool:
    """``[cellsched] api_lister`` as nova-api has it now."""
    import nova.conf

    from nova_cellsched import conf as conf_mod
    return bool(nova.conf.CONF[conf_mod.GROUP_NAME].api_lister)


def uninstall() -> bool:
    """Give nova its own lister back; True if this call removed ours.

    With the lister go the other parts :func:`install` put in (view
    lookups, validation) and those they required (keyset, the I/O
    bound) unless asked for on their own.
    """
    with _LOCK:
        if not compat.is_on('lister'):
            return False
        from nova_cellsched.api.hooks import pool

        compat.restore(compat.API_PARTS)
        pool.shutdown()
        return True


def is_installed() -> bool:
    """Whether the lister is installed in this process."""
    return compat.is_on('lister')
