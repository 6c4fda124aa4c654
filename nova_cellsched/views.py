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
``addresses`` from instance_info_caches, ``metadata``).
"""

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from nova.api.openstack import common as api_common
import sqlalchemy as sa

from nova_cellsched import exception
from nova_cellsched import instance_query

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
    instance_query.INSTANCE_COLUMNS - SECRET_COLUMNS)


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


def needs_details(fields: Sequence[str]) -> bool:
    return any(f in JOINED for f in fields)


def fetch_details(conn: sa.Connection, fields: Sequence[str],
                  uuids: list[str]) -> dict[str, dict[str, Any]]:
    """uuid -> joined values, only the kinds *fields* need."""
    kinds = {JOINED[f] for f in fields if f in JOINED}
    out: dict[str, dict[str, Any]] = {u: {} for u in uuids}
    if 'flavor' in kinds and 'network_info' in kinds:
        flavors, nw_infos = instance_query.fetch_flavors_and_network_info(
            conn, uuids)
        for uuid, flavor in flavors.items():
            out[uuid]['flavor'] = flavor
        for uuid, nw_info in nw_infos.items():
            out[uuid]['network_info'] = nw_info
    elif 'flavor' in kinds:
        for uuid, flavor in instance_query.fetch_flavors(conn,
                                                         uuids).items():
            out[uuid]['flavor'] = flavor
    elif 'network_info' in kinds:
        for uuid, nw_info in instance_query.fetch_network_info(
                conn, uuids).items():
            out[uuid]['network_info'] = nw_info
    if 'metadata' in kinds:
        for uuid, metadata in instance_query.fetch_metadata(conn,
                                                            uuids).items():
            out[uuid]['metadata'] = metadata
    return out


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


def _flavor_summary(flavor: Mapping[str, Any] | None
                    ) -> dict[str, Any] | None:
    if not flavor:
        return None
    return {k: flavor.get(k) for k in (
        'name', 'vcpus', 'memory_mb', 'root_gb', 'ephemeral_gb', 'swap')}


def build_records(rows: Sequence[tuple[str, Sequence[Any]]],
                  columns: Sequence[str], fields: Sequence[str],
                  cell_names: Mapping[str, str | None],
                  details: Mapping[str, Mapping[str, Any]]
                  ) -> list[dict[str, Any]]:
    """The output records: the *fields*, then any other selected column.

    :param rows: ``(cell uuid, row)`` in answer order, each row a tuple of
        *columns* (see :func:`instance_columns`).
    :param details: uuid -> joined values (see :func:`fetch_details`).

    How each field is got is decided once per listing, not per row.
    """
    index = {name: at for at, name in enumerate(columns)}
    empty: Mapping[str, Any] = {}
    status_from_state = api_common.status_from_state
    vm_at, task_at = index.get('vm_state'), index.get('task_state')

    def getter(field: str) -> Any:
        if field == 'cell_uuid':
            return lambda cell, row, joined: cell
        if field == 'cell_name':
            return lambda cell, row, joined: cell_names.get(cell)
        if field == 'status':
            return lambda cell, row, joined: status_from_state(
                row[vm_at], row[task_at])
        if field == 'flavor_name':
            return lambda cell, row, joined: (
                joined.get('flavor') or empty).get('name')
        if field == 'flavor':
            return lambda cell, row, joined: _flavor_summary(
                joined.get('flavor'))
        if field == 'addresses':
            return lambda cell, row, joined: addresses(
                joined.get('network_info') or ())
        if field == 'metadata':
            return lambda cell, row, joined: dict(
                joined.get('metadata') or empty)
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
    uuid_at = index['uuid']
    out = []
    for cell, row in rows:
        joined = details.get(row[uuid_at], empty)
        values = take(row)
        for place, get in computed:
            values.insert(place, get(cell, row, joined))
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
