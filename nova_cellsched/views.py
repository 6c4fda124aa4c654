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

from collections.abc import Mapping, Sequence
from typing import Any

from nova.api.openstack import common as api_common
import sqlalchemy as sa

from nova_cellsched import exception
from nova_cellsched import instance_query

#: Key of the cell uuid in the rows between query and view.
CELL_KEY = '_cell_uuid'

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
    if 'flavor' in kinds:
        for uuid, flavor in instance_query.fetch_flavors(conn,
                                                         uuids).items():
            out[uuid]['flavor'] = flavor
    if 'network_info' in kinds:
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


def build_record(row: Mapping[str, Any], fields: Sequence[str],
                 cell_names: Mapping[str, str | None],
                 details: Mapping[str, Mapping[str, Any]]
                 ) -> dict[str, Any]:
    """One output record: the *fields*, then any other sort values."""
    joined = details.get(row['uuid'], {})
    record: dict[str, Any] = {}
    for field in fields:
        if field == 'cell_uuid':
            record[field] = row[CELL_KEY]
        elif field == 'cell_name':
            record[field] = cell_names.get(row[CELL_KEY])
        elif field == 'status':
            record[field] = api_common.status_from_state(
                row['vm_state'], row['task_state'])
        elif field == 'flavor_name':
            record[field] = (joined.get('flavor') or {}).get('name')
        elif field == 'flavor':
            record[field] = _flavor_summary(joined.get('flavor'))
        elif field == 'addresses':
            record[field] = addresses(joined.get('network_info') or [])
        elif field == 'metadata':
            record[field] = dict(joined.get('metadata') or {})
        else:
            record[field] = row[field]
    for key, value in row.items():
        if key != CELL_KEY and key not in record:
            record[key] = value
    return record
