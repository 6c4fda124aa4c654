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
module attributes of a private module, which only holds while nova's
code is the code it was built and tested for. :func:`check` compares
the running nova with that (version 34.x, the signatures of every
function replaced or called); :func:`install` refuses on any difference
with :class:`IncompatibleNova`, which names each one, and changes
nothing.
"""

from collections.abc import Callable
import importlib.metadata
import inspect
import threading
from typing import Any

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: The nova release series this was built and tested for.
NOVA_SERIES = '34.'

#: (module, attribute) -> the signature it must have.
SIGNATURES = {
    ('nova.compute.instance_list', 'get_instance_objects_sorted'):
        '(ctx, filters, limit, marker, expected_attrs, sort_keys, '
        'sort_dirs, cell_down_support=False)',
    ('nova.compute.instance_list', 'get_instances_sorted'):
        '(ctx, filters, limit, marker, columns_to_join, sort_keys, '
        'sort_dirs, cell_mappings=None, batch_size=None, '
        'cell_down_support=False)',
    ('nova.db.main.api', 'instance_get_all_by_filters_sort'):
        '(context, filters, limit=None, marker=None, columns_to_join=None, '
        'sort_keys=None, sort_dirs=None)',
    ('nova.db.main.api', 'instance_get_by_uuid'):
        '(context, uuid, columns_to_join=None)',
    ('nova.db.main.api', '_instance_metadata_get_multi'):
        '(context, instance_uuids)',
    ('nova.db.main.api', '_instance_system_metadata_get_multi'):
        '(context, instance_uuids)',
    ('oslo_db.sqlalchemy.utils', 'paginate_query'):
        '(query, model, limit, sort_keys, marker=None, sort_dir=None, '
        'sort_dirs=None)',
    ('nova.db.utils', 'process_sort_params'):
        "(sort_keys, sort_dirs, default_keys=['created_at', 'id'], "
        "default_dir='asc')",
    ('nova.objects.instance', '_make_instance_list'):
        '(context, inst_list, db_inst_list, expected_attrs)',
    ('nova.objects.instance', '_expected_cols'): '(expected_attrs)',
    ('nova.context', 'scatter_gather_cells'):
        '(context, cell_mappings, timeout, fn, *args, **kwargs)',
}


class IncompatibleNova(Exception):
    """The running nova is not the one the replacement fits.

    :ivar problems: one line per difference found.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            'nova-cellsched cannot serve nova-api server lists: %s. '
            "nova's own lister stays in use. Install the nova-cellsched "
            'release built for this nova, or remove the cellsched filter '
            'from api-paste.ini.' % '; '.join(problems))


def _signature(function: Callable[..., Any]) -> str:
    # Decorated DB API functions keep the original in __wrapped__.
    return str(inspect.signature(inspect.unwrap(function)))


def check() -> None:
    """Raise :class:`IncompatibleNova` unless nova is what this fits."""
    problems = []
    try:
        version = importlib.metadata.version('nova')
    except importlib.metadata.PackageNotFoundError:
        version = 'unknown'
    if not version.startswith(NOVA_SERIES):
        problems.append('expected nova %sx, found nova %s'
                        % (NOVA_SERIES, version))
    for (module_name, name), expected in SIGNATURES.items():
        where = '%s.%s' % (module_name, name)
        try:
            module = importlib.import_module(module_name)
            function = getattr(module, name)
        except (ImportError, AttributeError) as exc:
            problems.append('%s is missing (%s)' % (where, exc))
            continue
        found = _signature(function)
        if found != expected:
            problems.append('%s%s was expected to be %s%s'
                            % (where, found, where, expected))
    from nova.db.main import api as db_api
    from oslo_db.sqlalchemy import utils as oslo_utils
    if getattr(db_api, 'sqlalchemyutils', None) is not oslo_utils:
        from nova_cellsched.api import keyset
        if not keyset.installed():
            problems.append('nova.db.main.api.sqlalchemyutils is not '
                            "oslo.db's sqlalchemy.utils")
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

        from nova import context as nova_context
        for name, replacement in instance_list.REPLACEMENTS.items():
            _SAVED[name] = getattr(nova_instance_list, name)
            setattr(nova_instance_list, name, replacement)
        for name, replacement in instance_list.CONTEXT_REPLACEMENTS.items():
            _SAVED_CONTEXT[name] = getattr(nova_context, name)
            setattr(nova_context, name, replacement)
        keyset.install()
        guard.install()
        LOG.info('nova-cellsched serves nova-api server lists '
                 '(nova.compute.instance_list replaced; [cellsched] '
                 'api_lister = False goes back to nova\'s lister)')
        return True


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
        instance_list.shutdown()
        return True


def is_installed() -> bool:
    with _LOCK:
        return bool(_SAVED)
