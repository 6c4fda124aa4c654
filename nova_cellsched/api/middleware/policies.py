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

"""Who sees the Server-Timing header, by nova's own policy engine.

Two rules, registered into nova's policy enforcer (``nova.policy``) and
overridable in the operator's ``policy.yaml`` like any of nova's:

``os_compute_api:servers:cellsched:server_timing`` (default
    ``rule:context_is_admin``)
    Who gets the ``Server-Timing`` header on the server lists the
    filter's lister serves: the phase durations (total, gather, merge,
    objects, view, validation, other). A debugging aid, admin-only by
    default as nova's own (``os_compute_api:os-server-diagnostics``);
    an operator opens it to readers in ``policy.yaml``.
``os_compute_api:servers:cellsched:server_timing:cells`` (default
    ``rule:context_is_admin``)
    Whose header also names cells: the slowest cell with its time and
    the cells reported down. nova shows cell identity to admins only.

:func:`audience` evaluates both for one request's context;
:func:`list_rules` and :func:`get_enforcer` are the ``oslo.policy``
entry points (``--namespace nova-cellsched`` of the oslopolicy tools).
"""

# Annotations unevaluated: oslo.policy 4.x (nova 31, 32) has no
# policy.Operation, which only the type checker needs.
from __future__ import annotations

import threading

from nova import context as nova_context
from nova.policies import base
from nova import policy as nova_policy
from oslo_policy import policy

#: Who gets the header (its phase durations).
SERVER_TIMING = 'os_compute_api:servers:cellsched:server_timing'
#: Whose header names cells (slowest cell and its time, down cells).
SERVER_TIMING_CELLS = SERVER_TIMING + ':cells'

_LISTS: list[policy.Operation] = [
    {'method': 'GET', 'path': '/servers'},
    {'method': 'GET', 'path': '/servers/detail'}]

rules = [
    policy.DocumentedRuleDefault(
        name=SERVER_TIMING,
        # NOTE: admin-only like nova's other debugging data (server
        # diagnostics, host_status). No deprecated_rule for the former
        # "@": oslo.policy would OR it back in wherever [oslo_policy]
        # enforce_new_defaults is false, and no release shipped it.
        check_str=base.ADMIN,
        description=(
            'Send the Server-Timing response header (the phase durations: '
            'total, gather, merge, objects, view, validation, other) with '
            'the server lists nova-cellsched serves. A debugging aid, for '
            'admins by default as nova\'s server diagnostics are; '
            '"rule:project_reader_or_admin" opens it to every project '
            'reader. Applies only to callers nova allowed to list; '
            '"[cellsched] api_server_timing = false" turns the header off '
            'for everyone.'),
        operations=_LISTS,
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=SERVER_TIMING_CELLS,
        check_str=base.ADMIN,
        description=(
            'Name cells in the Server-Timing header of the server lists '
            'nova-cellsched serves: the slowest cell with its time, and '
            'the cells reported down. Only for callers who get the header '
            '(os_compute_api:servers:cellsched:server_timing). Cell names '
            'tell the cloud\'s layout: nova shows them to admins only.'),
        operations=_LISTS,
        scope_types=['project']),
]

_REGISTER_LOCK = threading.Lock()


def list_rules() -> list[policy.DocumentedRuleDefault]:
    """The rules (``oslo.policy.policies`` entry point ``nova-cellsched``)."""
    return rules


def register(enforcer: policy.Enforcer) -> None:
    """Register :data:`rules` into *enforcer*, unless they already are.

    Safe to call from several threads and for every request: a dict
    lookup once registered. Registered defaults enter the enforcer's
    rules at its next ``load_rules`` (every check runs one), below any
    rule of the same name in the policy file.
    """
    if SERVER_TIMING_CELLS in enforcer.registered_rules:
        return
    with _REGISTER_LOCK:
        if SERVER_TIMING_CELLS not in enforcer.registered_rules:
            enforcer.register_defaults(rules)


def _nova_enforcer() -> policy.Enforcer | None:
    """nova's enforcer, built as nova builds it, with our rules in it.

    nova makes its enforcer on first use and drops it on
    ``nova.policy.reset()`` (tests do, between cases): registering on
    each use keeps the rules in whichever enforcer is current. None if
    nova has none after ``init`` (only where a test replaced it).
    """
    nova_policy.init()
    enforcer: policy.Enforcer | None = nova_policy._ENFORCER
    if enforcer is not None:
        register(enforcer)
    return enforcer


def audience(context: nova_context.RequestContext | None
             ) -> tuple[bool, bool]:
    """(send the header, name cells in it) for the caller of *context*.

    The two rules checked through nova's enforcer against the caller's
    own project (as nova checks ``servers:index``), the cell rule only
    when the header is sent. No context (a pipeline without nova's auth
    middleware, or no nova enforcer): neither. A token of a scope the
    rules do not allow, or rules missing from the enforcer (nova's
    tests setting rules without the policy file): not allowed.
    """
    if context is None or _nova_enforcer() is None:
        return False, False
    target = {'project_id': context.project_id,
              'user_id': context.user_id}
    if not context.can(SERVER_TIMING, target, fatal=False):
        return False, False
    return True, bool(context.can(SERVER_TIMING_CELLS, target, fatal=False))


def get_enforcer() -> policy.Enforcer:
    """nova's enforcer with these rules (``oslo.policy.enforcer``).

    For ``oslopolicy-policy-generator``, ``oslopolicy-checker``,
    ``oslopolicy-validator`` and ``oslopolicy-list-redundant`` with
    ``--namespace nova-cellsched``: nova's rules and these, with the
    overrides of nova's policy file. Parses nova's configuration files,
    as ``nova.policy.get_enforcer`` does: for those tools only.
    """
    enforcer: policy.Enforcer = nova_policy.get_enforcer()
    register(enforcer)
    enforcer.load_rules()
    return enforcer
