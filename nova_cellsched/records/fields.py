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

"""Record fields of a listing: what they need and how they are built.

A record is a plain dict. Most fields are columns of nova's ``instances``
table; a few are derived (``status``, ``cell_*``) or joined from other
tables for the surviving rows only (``flavor*`` from instance_extra,
``addresses`` from instance_info_caches, ``metadata``): the blobs come
with each batch, LEFT JOINed, and are parsed only for the rows that
survive the merge.
"""

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from oslo_log import log as logging

from nova_cellsched import exception
from nova_cellsched.listing import order
from nova_cellsched.records import codec
from nova_cellsched.records import query as instance_query

LOG = logging.getLogger(__name__)

_RESIZE = {'resize_prep': 'RESIZE', 'resize_migrating': 'RESIZE',
           'resize_migrated': 'RESIZE', 'resize_finish': 'RESIZE'}
_REBUILD = {'rebuilding': 'REBUILD', 'rebuild_block_device_mapping':
            'REBUILD', 'rebuild_spawning': 'REBUILD'}

#: vm_state -> task_state -> API status, as nova's API shows it
#: (``nova.api.openstack.common._STATE_MAP``), spelled out so that a
#: listing need not import nova's API (over a second at start-up); a unit
#: test keeps it equal to nova's.
STATE_MAP: Mapping[str, Mapping[str, str]] = {
    'active': {
        'default': 'ACTIVE',
        'rebooting': 'REBOOT', 'reboot_pending': 'REBOOT',
        'reboot_started': 'REBOOT',
        'rebooting_hard': 'HARD_REBOOT',
        'reboot_pending_hard': 'HARD_REBOOT',
        'reboot_started_hard': 'HARD_REBOOT',
        'updating_password': 'PASSWORD',
        'migrating': 'MIGRATING',
        **_REBUILD, **_RESIZE},
    'building': {'default': 'BUILD'},
    'stopped': {'default': 'SHUTOFF', **_RESIZE, **_REBUILD},
    'resized': {'default': 'VERIFY_RESIZE',
                'resize_reverting': 'REVERT_RESIZE'},
    'paused': {'default': 'PAUSED', 'migrating': 'MIGRATING'},
    'suspended': {'default': 'SUSPENDED'},
    'rescued': {'default': 'RESCUE'},
    'error': {'default': 'ERROR', **_REBUILD},
    'deleted': {'default': 'DELETED'},
    'soft-delete': {'default': 'SOFT_DELETED'},
    'shelved': {'default': 'SHELVED'},
    'shelved_offloaded': {'default': 'SHELVED_OFFLOADED'},
}
_UNKNOWN = {'default': 'UNKNOWN'}


def status_from_state(vm_state: str | None,
                      task_state: str | None = 'default') -> str:
    """The API status of *vm_state* and *task_state*, as nova computes it.

    An unknown vm_state gives ``UNKNOWN``, logged as an error as nova
    does (a bad upgrade or a corrupted database).
    """
    task_map = STATE_MAP.get(vm_state, _UNKNOWN)  # type: ignore[arg-type]
    status = task_map.get(task_state, task_map['default'])  # type: ignore
    if status == 'UNKNOWN':
        LOG.error('status is UNKNOWN from vm_state=%(vm_state)s '
                  'task_state=%(task_state)s. Bad upgrade or db '
                  'corrupted?',
                  {'vm_state': vm_state, 'task_state': task_state})
    return status

BASE_FIELDS: tuple[str, ...] = (
    'uuid', 'display_name', 'project_id', 'user_id', 'vm_state',
    'task_state', 'power_state', 'host', 'node', 'cell_uuid', 'cell_name',
    'created_at', 'updated_at', 'launched_at', 'flavor_name')

DETAIL_FIELDS: tuple[str, ...] = BASE_FIELDS + (
    'status', 'availability_zone', 'image_ref', 'key_name', 'hostname',
    'locked', 'addresses', 'metadata', 'flavor', 'access_ip_v4',
    'access_ip_v6', 'config_drive', 'progress', 'terminated_at')

#: Fields that are not instance columns, with the columns they need.
DERIVED: Mapping[str, tuple[str, ...]] = {
    'status': ('vm_state', 'task_state'),
    'cell_uuid': (), 'cell_name': (),
}
#: Joined fields, by the detail query that provides them.
JOINED: Mapping[str, str] = {
    'flavor_name': 'flavor', 'flavor': 'flavor',
    'addresses': 'network_info', 'metadata': 'metadata',
}

#: Instance columns that may hold secrets and are never listed.
SECRET_COLUMNS = frozenset({'user_data', 'key_data'})

ALL_FIELDS = frozenset(DETAIL_FIELDS) | (
    order.INSTANCE_COLUMNS - SECRET_COLUMNS)


def check_fields(fields: Sequence[str] | None) -> tuple[str, ...]:
    """Validate *fields*; default :data:`BASE_FIELDS`.

    :raises InvalidListRequest: an unknown or secret field.
    """
    if fields is None:
        return BASE_FIELDS
    out: dict[str, None] = {}
    for field in fields:
        if field not in ALL_FIELDS:
            raise exception.InvalidListRequest(
                'field', field, 'one of %s' % ', '.join(sorted(ALL_FIELDS)))
        out.setdefault(field, None)
    if 'uuid' not in out:
        out = {'uuid': None, **out}
    return tuple(out)


def instance_columns(fields: Sequence[str],
                     sort_keys: Sequence[str]) -> tuple[str, ...]:
    """The instance columns to select for *fields* and the sort."""
    columns: dict[str, None] = {'uuid': None}
    for key in sort_keys:
        columns.setdefault(key, None)
    for field in fields:
        if field in DERIVED:
            for column in DERIVED[field]:
                columns.setdefault(column, None)
        elif field not in JOINED:
            columns.setdefault(field, None)
    return tuple(columns)


def joined_kinds(fields: Sequence[str]) -> frozenset[str]:
    """What *fields* need from other tables.

    ``flavor``, ``network_info`` and ``metadata``, which a batch carries
    as text after its columns (see :data:`instance_query.JOINABLE`).
    """
    return frozenset(JOINED[f] for f in fields if f in JOINED)


def addresses(network_info: Sequence[Mapping[str, Any]]
              ) -> dict[str, list[dict[str, Any]]]:
    """Addresses by network label, as nova's server view shows them."""
    out: dict[str, list[dict[str, Any]]] = {}
    for vif in network_info or ():
        network = vif.get('network') or {}
        label = network.get('label') or network.get('id') or ''
        entries = out.setdefault(label, [])
        for subnet in network.get('subnets') or ():
            for ip in subnet.get('ips') or ():
                version = ip.get('version') or subnet.get('version')
                entries.append({'addr': ip.get('address'),
                                'version': version,
                                'OS-EXT-IPS:type': ip.get('type', 'fixed'),
                                'OS-EXT-IPS-MAC:mac_addr':
                                    vif.get('address')})
                for fip in ip.get('floating_ips') or ():
                    entries.append({'addr': fip.get('address'),
                                    'version': version,
                                    'OS-EXT-IPS:type': 'floating',
                                    'OS-EXT-IPS-MAC:mac_addr':
                                        vif.get('address')})
    return out


#: The flavor fields of a record's ``flavor``, as nova's view shows them.
FLAVOR_SUMMARY = ('name', 'vcpus', 'memory_mb', 'root_gb', 'ephemeral_gb',
                  'swap')


def _flavor_summaries() -> Callable[[str | None], dict[str, Any] | None]:
    """``blob -> summary`` of instance_extra.flavor blobs, for one listing.

    Instances of one flavor carry the same blob text: each distinct blob
    is parsed once. The summaries are shared; callers copy them.
    """
    cache: dict[str, dict[str, Any] | None] = {}

    def summary(blob: str | None) -> dict[str, Any] | None:
        if not blob:
            return None
        try:
            return cache[blob]
        except KeyError:
            flavor = instance_query.flavor_of(blob)
            found = cache[blob] = ({k: flavor.get(k) for k in FLAVOR_SUMMARY}
                                   if flavor else None)
            return found

    return summary


def build_records(rows: Sequence[tuple[str, Sequence[Any]]],
                  columns: Sequence[str], fields: Sequence[str],
                  cell_names: Mapping[str, str | None],
                  joined_at: Mapping[str, int]
                  ) -> list[dict[str, Any]]:
    """The output records: the *fields*, then any other selected column.

    :param rows: ``(cell uuid, row)`` in answer order, each row a tuple of
        *columns* (see :func:`instance_columns`) followed by the joined
        data.
    :param joined_at: joined kind (``flavor``, ``network_info``,
        ``metadata``) -> its position in a row.

    How each field is got is decided once per listing, not per row. A
    network info blob is parsed just before its record is built and
    dropped right after: a thousand parsed trees alive at once made the
    garbage collector walk the whole process several times per listing.
    """
    index = {name: at for at, name in enumerate(columns)}
    vm_at, task_at = index.get('vm_state'), index.get('task_state')
    flavor_at = joined_at.get('flavor')
    network_at = joined_at.get('network_info')
    metadata_at = joined_at.get('metadata')
    summary = _flavor_summaries()
    loads = codec.loads

    def flavor_name(cell: str, row: Sequence[Any]) -> Any:
        found = summary(row[flavor_at])  # type: ignore[index]
        return found['name'] if found else None

    def flavor(cell: str, row: Sequence[Any]) -> Any:
        found = summary(row[flavor_at])  # type: ignore[index]
        return dict(found) if found else None

    def addresses_of(cell: str, row: Sequence[Any]) -> Any:
        blob = row[network_at]  # type: ignore[index]
        return addresses(loads(blob)) if blob else {}

    def metadata_of(cell: str, row: Sequence[Any]) -> Any:
        text = row[metadata_at]  # type: ignore[index]
        return loads(text) if text else {}

    def getter(field: str) -> Any:
        if field == 'cell_uuid':
            return lambda cell, row: cell
        if field == 'cell_name':
            return lambda cell, row: cell_names.get(cell)
        if field == 'status':
            return lambda cell, row: status_from_state(row[vm_at],
                                                       row[task_at])
        if field == 'flavor_name':
            return flavor_name
        if field == 'flavor':
            return flavor
        if field == 'addresses':
            return addresses_of
        if field == 'metadata':
            return metadata_of
        return index[field]

    # Output order: the fields, then columns selected for the sort only
    # (e.g. id). Column values are taken in one C call per row; the few
    # computed fields are put in their places.
    wanted = set(fields)
    names = list(fields) + [c for c in columns if c not in wanted]
    computed = []
    column_at = []
    for place, name in enumerate(names):
        get = getter(name)
        if isinstance(get, int):
            column_at.append(get)
        else:
            computed.append((place, get))
    take = _taker(column_at)
    out = []
    for cell, row in rows:
        values = take(row)
        for place, get in computed:
            values.insert(place, get(cell, row))
        out.append(dict(zip(names, values)))
    return out


def _taker(positions: Sequence[int]) -> Any:
    """``row -> list`` of the values at *positions*, in that order."""
    if not positions:
        return lambda row: []
    if len(positions) == 1:
        at = positions[0]
        return lambda row: [row[at]]
    get = operator.itemgetter(*positions)
    return lambda row: list(get(row))
