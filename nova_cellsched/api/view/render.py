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

"""The server list from the cells' rows to the response body.

``GET /servers`` and ``/servers/detail`` answer, server by server, what
nova's ``ViewBuilder.basic`` and ``show`` answer for the request's
microversion, read from the rows the listing fetched (plain dicts of the
instance's columns and joins, :mod:`.rows`), without an ``Instance``
object per server.

How it fits nova's path: when ``[cellsched] api_render_rows`` is on, the
listing (:func:`.instance_list.get_instance_objects_sorted`) keeps its
rows in the request's state (:func:`stash`) and gives nova's
``compute.API.get_all`` an ``Instance`` per row with only its uuid set,
which is all ``get_all`` and ``ServersController._get_servers`` read of
a listed server before the view (the uuid filter, ``fill_faults``, the
next link). The view (:func:`index`, :func:`detail`) then renders each
stashed row; what the listing did not serve (a build request, a down
cell's construct) is rendered by nova's own ``basic`` or ``show``.

The listing reads only the instance columns this module renders
(:data:`ROW_COLUMNS`, and the sort keys). A request this module cannot
answer as nova would gets nova's objects and nova's view:
:func:`materialize` reads the rest of each stashed row from its cell
and builds every stashed server as the listing did before
(``Instance._from_db_object``), and nova's view runs. That is a
request at a microversion newer than :data:`MAX_VERSION`, or a row with
something the renderer does not take (a server without an embedded
flavor, a network cache nova's model would not read, an instance name
template of other fields than the id).

Policies are checked as nova's ``detail`` checks them, once per request,
by nova's rule names through the request context's ``can``.
"""

import collections
import datetime
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import netaddr
from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_cellsched.api.middleware import request_state
from nova_cellsched import counters

#: The newest microversion whose list bodies this module renders. The
#: server list's body last changed at 2.100 (``scheduler_hints``);
#: 2.101 to 2.104 changed no list body. A newer microversion goes
#: through nova's view until the renderer is taught it.
MAX_VERSION = '2.104'

#: Servers whose status shows ``progress`` and ``fault`` (nova's
#: ``ViewBuilder._progress_statuses`` and ``_fault_statuses``).
_PROGRESS = frozenset({'ACTIVE', 'BUILD', 'REBUILD', 'RESIZE',
                       'VERIFY_RESIZE', 'MIGRATING'})
_FAULT = frozenset({'ERROR', 'DELETED'})

#: The instance columns the bodies show or are rendered from, at every
#: microversion up to :data:`MAX_VERSION` (the listing also reads the
#: sort keys, and the joins nova asks for).
ROW_COLUMNS = frozenset({
    'access_ip_v4', 'access_ip_v6', 'auto_disk_config', 'availability_zone',
    'config_drive', 'created_at', 'deleted', 'display_description',
    'display_name', 'host', 'hostname', 'id', 'image_ref', 'kernel_id',
    'key_name', 'launch_index', 'launched_at', 'locked_by', 'node',
    'power_state', 'progress', 'project_id', 'ramdisk_id',
    'reservation_id', 'root_device_name', 'task_state', 'terminated_at',
    'updated_at', 'user_data', 'user_id', 'uuid', 'vm_state'})

LOG = logging.getLogger(__name__)

#: How many requests each way answered, in this process: ``rendered``
#: from the rows, ``nova`` by nova's view after :func:`materialize`.
USED = counters.Counts(('rendered', 'nova'))


# Where nova's releases differ --------------------------------------------

def _nova_major() -> int:
    from nova_cellsched.compat import hashing

    return int(hashing.nova_version().split('.')[0])


class _Gates:
    """What differs in the list bodies between the supported releases.

    :ivar old_key_order: nova 31 and 32 build a detail server's keys
        in the order of :data:`_OLD_ORDER` (``id`` first); nova 33
        reordered ``ViewBuilder.show`` (``accessIPv4`` first).
    :ivar all_image_properties: at 2.98 nova 31 shows every ``image_*``
        system metadata key as an image property; nova 32 on only the
        image properties nova knows, without None values.
    :ivar faults_per_cell: nova 33 on, ``InstanceList.fill_faults``
        asks every cell for the listed servers' faults (which
        :func:`.view.fill_faults` narrows); nova 31 and 32 ask the
        list's own context, one query.
    """

    def __init__(self, major: int) -> None:
        self.old_key_order = major < 33
        self.all_image_properties = major < 32
        self.faults_per_cell = major >= 33


_GATES: list[_Gates] = []


def gates() -> _Gates:
    """The running nova's gates (worked out once)."""
    if not _GATES:
        _GATES.append(_Gates(_nova_major()))
    return _GATES[0]


_EXT = 'OS-EXT-SRV-ATTR:'

#: nova 31 and 32's key order of a detail server (before host_status and
#: security_groups, which ``detail`` adds after).
_OLD_ORDER = (
    'id', 'name', 'status', 'tenant_id', 'user_id', 'metadata', 'hostId',
    'image', 'flavor', 'created', 'updated', 'addresses', 'accessIPv4',
    'accessIPv6', 'links', 'OS-DCF:diskConfig', 'fault', 'progress',
    'OS-EXT-AZ:availability_zone', 'pinned_availability_zone',
    'scheduler_hints', 'config_drive', 'key_name', 'OS-SRV-USG:launched_at',
    'OS-SRV-USG:terminated_at', _EXT + 'host', _EXT + 'instance_name',
    _EXT + 'hypervisor_hostname', _EXT + 'reservation_id',
    _EXT + 'launch_index', _EXT + 'hostname', _EXT + 'kernel_id',
    _EXT + 'ramdisk_id', _EXT + 'root_device_name', _EXT + 'user_data',
    'OS-EXT-STS:task_state', 'OS-EXT-STS:vm_state', 'OS-EXT-STS:power_state',
    'os-extended-volumes:volumes_attached', 'locked', 'locked_reason',
    'description', 'tags', 'trusted_image_certificates')
#: Where nova 31 and 32 put the 2.90 hostname of a server shown without
#: the extended attributes: last.
_OLD_ORDER_NO_EXT = tuple(k for k in _OLD_ORDER if k != _EXT + 'hostname'
                          ) + (_EXT + 'hostname',)


def _in_old_order(server: dict[str, Any], extended: bool
                  ) -> dict[str, Any]:
    order = _OLD_ORDER if extended else _OLD_ORDER_NO_EXT
    return {key: server[key] for key in order if key in server}


class NotRenderable(Exception):
    """A row (or request) this module does not render as nova would."""


# The stash -------------------------------------------------------------

class Stash:
    """The listing's rows of one request, by server uuid.

    :ivar rows: uuid -> the row (:mod:`.rows` dict) the listing read.
    :ivar expected_attrs: what nova asked the listing to load, for
        :func:`materialize`.
    :ivar context: the listing's request context.
    :ivar reread: the rows hold only the columns this module renders;
        :func:`materialize` reads the rest with these joins (nova's
        ``columns_to_join``). None: the rows are whole.
    """

    def __init__(self, context: Any, rows: Sequence[dict[str, Any]],
                 expected_attrs: Sequence[str],
                 reread: Sequence[str] | None = None) -> None:
        self.context = context
        self.rows = {row['uuid']: row for row in rows}
        self.expected_attrs = list(expected_attrs)
        self.reread = reread
        #: ``fill_faults`` left the faults to the renderer.
        self.faults_deferred = False


def will_stash(filters: Any) -> bool:
    """True if a listing with *filters* is for this module to render.

    Only inside a request the filter's middleware serves, with the
    option on, and not for an IP filter (nova's ``get_all`` reads the
    listed servers' network caches for it). Asked before the listing:
    its rows may then hold only :data:`ROW_COLUMNS`.
    """
    import nova.conf

    from nova_cellsched import compat
    from nova_cellsched import conf as conf_mod

    state = request_state.current()
    return (state is not None and state.stash is None and
            compat.is_on('render') and
            nova.conf.CONF[conf_mod.GROUP_NAME].api_render_rows and
            'ip' not in filters and 'ip6' not in filters)


def stash(ctx: Any, db_rows: Sequence[dict[str, Any]],
          expected_attrs: Sequence[str],
          reread: Sequence[str] | None = None) -> Any:
    """An InstanceList of uuid-only servers; the rows go to the state.

    :param reread: the rows hold only :data:`ROW_COLUMNS` and the sort
        keys of the instance's columns, read with these joins (nova's
        ``columns_to_join``); None: whole rows.
    :returns: nova's ``InstanceList``, one ``Instance`` per row with
        its uuid set, in the listing's order.
    """
    from nova import objects

    state = request_state.current()
    if state is None:
        raise RuntimeError('stash() outside a request: call will_stash() '
                           'first')
    state.stash = Stash(ctx, db_rows, expected_attrs, reread)
    servers = []
    for row in db_rows:
        server = objects.Instance()
        server.uuid = row['uuid']
        server._context = ctx
        servers.append(server)
    instance_list = objects.InstanceList(objects=servers)
    instance_list._context = ctx
    instance_list.obj_reset_changes()
    return instance_list


def _take(instances: Iterable[Any]) -> Stash | None:
    """This request's stash, if it holds a row of *instances*."""
    state = request_state.current()
    found: Stash | None = None if state is None else state.stash
    if found is None or not any(i.uuid in found.rows for i in instances):
        return None
    return found


def defer_faults(instance_list: Any) -> bool:
    """True if the renderer will read the faults of *instance_list*.

    :func:`.view.fill_faults` asks, from nova 33; the renderer then reads
    the faults of the servers whose status shows one (and
    :func:`materialize`, if nova's view renders after all, reads them as
    ``fill_faults`` would have).
    """
    found = _take(instance_list)
    if found is None:
        return False
    found.faults_deferred = True
    return True


def materialize(found: Stash, instances: Iterable[Any]) -> None:
    """Make each stashed server of *instances* nova's whole object.

    In place, from the same row, as the listing builds it otherwise
    (``Instance._from_db_object`` with the attributes nova asked for);
    a fault that ``fill_faults`` set is kept, and the faults it left to
    the renderer are read as it reads them. Partial rows are first
    completed from their cells (:func:`.view.whole_rows`).

    :raises nova_cellsched.exception.RowsNotReread: a cell did not
        give its rows again.
    """
    from nova import objects

    from nova_cellsched.api.view import lookups as view_lookups

    expected = [a for a in found.expected_attrs if a != 'fault']
    todo = [instance for instance in instances
            if instance.uuid in found.rows and
            not instance.obj_attr_is_set('vm_state')]
    if found.reread is not None and todo:
        whole = view_lookups.whole_rows(
            found.context, [instance.uuid for instance in todo],
            found.reread)
        for instance in todo:
            found.rows[instance.uuid].update(whole[instance.uuid])
    for instance in todo:
        objects.Instance._from_db_object(
            found.context, instance, found.rows[instance.uuid],
            expected_attrs=expected)
    state = request_state.current()
    if state is not None:
        state.stash = None
    if found.faults_deferred:
        view_lookups.fill_faults(instances)


# The request's constants ------------------------------------------------

class _Request:
    """What a list request renders with, worked out once."""

    def __init__(self, view: Any, request: Any, coll_name: str) -> None:
        from nova.api.openstack import api_version_request

        self.view = view
        self.request = request
        self.context = request.environ['nova.context']
        version = api_version_request.is_supported
        self.at = {v: version(request, v) for v in (
            '2.3', '2.9', '2.16', '2.19', '2.26', '2.47', '2.63', '2.73',
            '2.90', '2.96', '2.98', '2.100')}
        # nova's _get_href_link and _get_bookmark_link, with an empty
        # identifier: url_join then ends the prefix with '/'.
        self.href = view._get_href_link(request, '', coll_name.split('/')[0])
        self.bookmark = view._get_bookmark_link(
            request, '', coll_name.split('/')[0])
        self._flavor_links: dict[str, str] = {}
        # NOTE: an image id is the last segment of its href (nova's
        # get_id_from_href): never a '/' for url_join to strip.
        self._image_prefix: str = view._image_builder._get_bookmark_link(
            request, '', 'images')
        self._flavors: dict[str, Any] = {}
        self._std_image_fields: frozenset[str] | None = None
        self._host_ids: dict[tuple[Any, str], str] = {}
        self._zones: dict[tuple[Any, Any], Any] = {}
        #: uuid -> the server's ``addresses`` (:func:`_check` reads them).
        self.addresses: dict[str, Any] = {}

    def host_id(self, host: Any, project_id: Any) -> str:
        """``hostId``: nova's ``generate_hostid``, once a host and project."""
        from nova import utils

        key = (host, str(project_id))
        found = self._host_ids.get(key)
        if found is None:
            found = str(utils.generate_hostid(*key))
            self._host_ids[key] = found
        return found

    def zone(self, row: dict[str, Any]) -> Any:
        """nova's ``get_instance_availability_zone``, once per host and zone.

        It reads only the server's host and availability zone (and
        nova's zone cache, which a request reads once per host here).
        """
        from nova import availability_zones as avail_zone

        key = (row['host'], row['availability_zone'])
        if key not in self._zones:
            self._zones[key] = avail_zone.get_instance_availability_zone(
                self.context, _AzView(row))
        return self._zones[key]

    def links(self, uuid: str) -> list[dict[str, str]]:
        return [{'rel': 'self', 'href': self.href + uuid},
                {'rel': 'bookmark', 'href': self.bookmark + uuid}]

    def flavor_link(self, flavor_id: str) -> str:
        link = self._flavor_links.get(flavor_id)
        if link is None:
            link = self.view._flavor_builder._get_bookmark_link(
                self.request, flavor_id, 'flavors')
            self._flavor_links[flavor_id] = link
        return link

    def image_link(self, image_id: str) -> str:
        return self._image_prefix + image_id

    def flavor(self, text: Any) -> dict[str, Any]:
        """The current flavor's fields from instance_extra's JSON."""
        found = self._flavors.get(text)
        if found is None:
            found = _flavor_fields(text)
            self._flavors[text] = found
        return found

    def std_image_fields(self) -> frozenset[str]:
        """The image properties nova shows at 2.98 (its ``_get_image``)."""
        if self._std_image_fields is None:
            from nova import objects
            self._std_image_fields = frozenset(itertools.chain(
                objects.ImageMetaProps.fields.keys(),
                objects.ImageMetaProps._legacy_property_map.keys()))
        return self._std_image_fields


def _flavor_fields(text: Any) -> dict[str, Any]:
    """The fields of the current flavor, coerced by nova's Flavor fields.

    :raises NotRenderable: no embedded flavor (nova looks it up) or
        one nova's object would not take.
    """
    from nova import objects

    if not text:
        raise NotRenderable('no embedded flavor')
    try:
        primitive = jsonutils.loads(text)['cur']
        if primitive.get('nova_object.name') != 'Flavor':
            raise NotRenderable('not a Flavor')
        data = primitive['nova_object.data']
        fields = objects.Flavor.fields
        found = {name: fields[name].coerce(None, name, data[name])
                 for name in ('flavorid', 'vcpus', 'memory_mb', 'root_gb',
                              'ephemeral_gb', 'swap', 'name')}
        found['extra_specs'] = fields['extra_specs'].coerce(
            None, 'extra_specs', data['extra_specs'])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NotRenderable('flavor: %s' % exc)
    return found


# Field by field ---------------------------------------------------------

def _ip(value: Any) -> str:
    """``accessIPv4``/``v6``: nova's IPAddress field, as a string."""
    if value is None:
        return ''
    return str(netaddr.IPAddress(value))


def addresses(network_info: Any, extend: bool = True) -> dict[str, Any]:
    """``addresses`` from an info cache's ``network_info`` JSON.

    What nova's ``get_networks_for_instance_from_nw_info`` of the
    hydrated ``NetworkInfo`` and the ips view's ``index`` answer.

    :raises NotRenderable: a cache nova's network model would read
        otherwise (or fail on).
    """
    if network_info is None:
        raise NotRenderable('network_info is NULL')
    try:
        vifs = jsonutils.loads(network_info) if isinstance(
            network_info, str) else network_info
        networks: dict[str, tuple[list[Any], list[Any]]] = (
            collections.OrderedDict())
        for vif in vifs:
            mac = vif.get('address')
            network = vif['network']
            label = network.get('label')
            fixed, floating = networks.setdefault(label, ([], []))
            for subnet in network.get('subnets') or ():
                for ip in subnet.get('ips') or ():
                    fixed.append(_address(ip, ip.get('type') or 'fixed',
                                          mac, extend))
            for subnet in network.get('subnets') or ():
                for ip in subnet.get('ips') or ():
                    for floater in ip.get('floating_ips') or ():
                        floating.append(_address(
                            floater, floater.get('type'), mac, extend))
    except (KeyError, TypeError, AttributeError, ValueError,
            netaddr.AddrFormatError) as exc:
        raise NotRenderable('network_info: %r' % exc)
    out: dict[str, Any] = collections.OrderedDict()
    for label, (fixed, floating) in networks.items():
        out[label] = fixed + floating
    return out


#: A network cache for :func:`addresses_check`: two ports on one
#: network label and one on another, fixed and floating addresses, IPv4
#: and IPv6, an address without its version, one without its type.
_SAMPLE_NETWORK_INFO = jsonutils.dumps([
    {'address': 'fa:16:3e:00:00:01', 'network': {'label': 'private',
     'subnets': [{'cidr': '10.0.0.0/24', 'ips': [
         {'address': '10.0.0.5', 'version': 4, 'type': 'fixed',
          'floating_ips': [{'address': '172.24.4.9', 'type': 'floating',
                            'version': 4}]},
         {'address': '10.0.0.6'}]},
                 {'cidr': '2001:db8::/64', 'ips': [
                     {'address': '2001:db8::5', 'version': 6,
                      'type': 'fixed'}]}]}},
    {'address': 'fa:16:3e:00:00:02', 'network': {'label': 'public',
     'subnets': [{'ips': [{'address': '172.24.4.20', 'version': 4}]}]}},
    {'address': 'fa:16:3e:00:00:03', 'network': {'label': 'private',
     'subnets': [{'ips': [{'address': '10.0.0.7', 'version': 4,
                           'floating_ips': [{'address': '172.24.4.10',
                                             'version': 4}]}]}]}},
])


def addresses_builder() -> Any:
    """nova's addresses view builder, as the server view builder makes it.

    ``views.ips`` from nova 32 on, ``views.addresses`` before (the same
    class under another module name).
    """
    try:
        from nova.api.openstack.compute.views import ips
    except ImportError:
        from nova.api.openstack.compute.views import addresses as ips
    return ips.ViewBuilder()


def addresses_check() -> list[str]:
    """Problems if nova's view shows a network cache otherwise.

    The check of the part ``render`` (``nova_cellsched.compat.parts``):
    :func:`addresses` of a sample cache against nova's network model,
    ``get_networks_for_instance_from_nw_info`` and the server view's
    addresses builder, both ways extended.
    """
    from nova.api.openstack import common
    from nova.network import model as network_model

    ips = addresses_builder()
    nw_info = network_model.NetworkInfo.hydrate(_SAMPLE_NETWORK_INFO)
    for extend in (True, False):
        nova_answer = ips.index(
            None, common.get_networks_for_instance_from_nw_info(nw_info),
            extend)['addresses']
        ours = addresses(_SAMPLE_NETWORK_INFO, extend)
        if jsonutils.dumps(nova_answer) != jsonutils.dumps(ours):
            return ["nova's server view shows a network cache's addresses "
                    'as %s, the renderer as %s'
                    % (jsonutils.dumps(nova_answer), jsonutils.dumps(ours))]
    return []


def _address(ip: dict[str, Any], kind: Any, mac: Any,
             extend: bool) -> dict[str, Any]:
    address = ip.get('address')
    version = ip.get('version')
    if address and not version:
        version = netaddr.IPAddress(address).version
    found = {'version': version, 'addr': address}
    if extend:
        found['OS-EXT-IPS:type'] = kind
        found['OS-EXT-IPS-MAC:mac_addr'] = mac
    return found


def _isotime(value: datetime.datetime | None) -> str:
    from nova import utils
    return str(utils.isotime(value))


def _naive(value: datetime.datetime | None) -> datetime.datetime | None:
    return value.replace(tzinfo=None) if value else None


class _AzView:
    """What ``get_instance_availability_zone`` reads of a server."""

    __slots__ = ('host', 'availability_zone')

    def __init__(self, row: dict[str, Any]) -> None:
        self.host = row['host']
        self.availability_zone = row['availability_zone']

    def __contains__(self, name: str) -> bool:
        return True

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)


def _instance_name(row: dict[str, Any]) -> str:
    """``Instance.name``: the template of the id.

    :raises NotRenderable: a template of other fields (nova fills it
        from every field the object has set).
    """
    import nova.conf

    try:
        return str(nova.conf.CONF.instance_name_template % row['id'])
    except (TypeError, KeyError, ValueError):
        raise NotRenderable('instance_name_template is not of the id')


def _status(row: dict[str, Any]) -> str:
    from nova.api.openstack import common

    if row['deleted'] and row['deleted'] == row['id']:
        return 'DELETED'
    return str(common.status_from_state(row['vm_state'], row['task_state']))


def show_row(req: _Request, row: dict[str, Any], fault: Any,
             show_extra_specs: bool, show_extended_attr: bool,
             bdms: dict[str, Any], zone: Any, hints: Any) -> dict[str, Any]:
    """One server of ``/servers/detail``: nova's ``ViewBuilder.show``.

    Key for key in nova's order (the body is serialized in it).
    """
    at = req.at
    uuid = row['uuid']
    extra = row.get('extra') or {}
    cache = row.get('info_cache')
    if row['vm_state'] == 'building':
        shown_addresses: dict[str, Any] = {}
    elif cache is None:
        shown_addresses = collections.OrderedDict()
    elif uuid in req.addresses:
        shown_addresses = req.addresses[uuid]
    else:
        shown_addresses = addresses(cache['network_info'])
    flavor = req.flavor(extra.get('flavor'))
    if at['2.47']:
        shown_flavor = {
            'vcpus': flavor['vcpus'], 'ram': flavor['memory_mb'],
            'disk': flavor['root_gb'], 'ephemeral': flavor['ephemeral_gb'],
            'swap': flavor['swap'], 'original_name': flavor['name']}
        if show_extra_specs:
            shown_flavor['extra_specs'] = flavor['extra_specs']
    else:
        shown_flavor = {'id': str(flavor['flavorid']), 'links': [
            {'rel': 'bookmark',
             'href': req.flavor_link(flavor['flavorid'])}]}
    status = _status(row)
    server: dict[str, Any] = {
        'accessIPv4': _ip(row['access_ip_v4']),
        'accessIPv6': _ip(row['access_ip_v6']),
        'addresses': shown_addresses,
        'created': _isotime(row['created_at']),
        'flavor': shown_flavor,
        'hostId': req.host_id(row['host'], row['project_id']),
        'id': uuid,
        'image': _image(req, row),
        'links': req.links(uuid),
        'metadata': row.get('metadata') or {},
        'name': row['display_name'],
        'status': status,
        'tenant_id': row['project_id'] or '',
        'user_id': row['user_id'] or '',
        'updated': _isotime(row['updated_at']),
        'OS-DCF:diskConfig': 'AUTO' if row['auto_disk_config'] else 'MANUAL',
    }
    if status in _FAULT:
        shown_fault = req.view._get_fault(req.request, fault)
        if shown_fault:
            server['fault'] = shown_fault
    if status in _PROGRESS:
        server['progress'] = row['progress']
    server['OS-EXT-AZ:availability_zone'] = req.zone(row) or ''
    server['config_drive'] = row['config_drive']
    server['key_name'] = row['key_name']
    server['OS-SRV-USG:launched_at'] = _naive(row['launched_at'])
    server['OS-SRV-USG:terminated_at'] = _naive(row['terminated_at'])
    if show_extended_attr:
        server['OS-EXT-SRV-ATTR:host'] = row['host']
        server['OS-EXT-SRV-ATTR:instance_name'] = _instance_name(row)
        server['OS-EXT-SRV-ATTR:hypervisor_hostname'] = row['node']
        if at['2.3']:
            for name in ('hostname', 'kernel_id', 'launch_index',
                         'ramdisk_id', 'reservation_id', 'root_device_name',
                         'user_data'):
                server['OS-EXT-SRV-ATTR:' + name] = row[name]
    server['OS-EXT-STS:task_state'] = row['task_state']
    server['OS-EXT-STS:vm_state'] = row['vm_state']
    server['OS-EXT-STS:power_state'] = row['power_state']
    attached = []
    for bdm in bdms.get(uuid, ()):
        if bdm.get('volume_id'):
            volume = {'id': bdm['volume_id']}
            if at['2.3']:
                volume['delete_on_termination'] = bdm[
                    'delete_on_termination']
            attached.append(volume)
    server['os-extended-volumes:volumes_attached'] = attached
    if at['2.9']:
        server['locked'] = bool(row['locked_by'])
    if at['2.19']:
        server['description'] = row['display_description']
    if at['2.26']:
        server['tags'] = [tag['tag'] for tag in row['tags']]
    if at['2.63']:
        server['trusted_image_certificates'] = _trusted_certs(
            extra.get('trusted_certs'))
    if at['2.73']:
        server['locked_reason'] = row['system_metadata'].get(
            'locked_reason')
    if at['2.90'] and not show_extended_attr:
        server['OS-EXT-SRV-ATTR:hostname'] = row['hostname']
    if at['2.96']:
        server['pinned_availability_zone'] = zone
    if at['2.100']:
        server['scheduler_hints'] = hints
    if gates().old_key_order:
        return _in_old_order(server, show_extended_attr)
    return server


def _trusted_certs(text: str | None) -> Any:
    if text is None:
        return None
    from nova import objects
    return objects.TrustedCerts.obj_from_primitive(
        jsonutils.loads(text)).ids


def _image(req: _Request, row: dict[str, Any]) -> Any:
    """nova's ``_get_image`` of a row."""
    from nova.api.openstack import common
    from nova import utils

    image_ref = row['image_ref']
    if not image_ref:
        return ''
    image_id = str(common.get_id_from_href(image_ref))
    image: dict[str, Any] = {'id': image_id, 'links': [
        {'rel': 'bookmark', 'href': req.image_link(image_id)}]}
    if req.at['2.98']:
        prefix = utils.SM_IMAGE_PROP_PREFIX
        cut = len(prefix)
        if gates().all_image_properties:
            image['properties'] = {
                key[cut:]: value
                for key, value in row['system_metadata'].items()
                if key.startswith(prefix)}
        else:
            std = req.std_image_fields()
            image['properties'] = {
                key[cut:]: value
                for key, value in row['system_metadata'].items()
                if (key.startswith(prefix) and key[cut:] in std and
                    value is not None)}
    return image


# The two views ---------------------------------------------------------

def _collection(req: _Request, instances: Sequence[Any],
                servers: list[dict[str, Any]], coll_name: str
                ) -> dict[str, Any]:
    links = req.view._get_collection_links(req.request, instances,
                                           coll_name)
    body: dict[str, Any] = {'servers': servers}
    if links:
        body['servers_links'] = links
    return body


def _renderable(request: Any) -> bool:
    from nova.api.openstack import api_version_request

    return not api_version_request.is_supported(
        request, _next_version(MAX_VERSION))


def _next_version(version: str) -> str:
    major, minor = version.split('.')
    return '%s.%d' % (major, int(minor) + 1)


def _rendered(body: Callable[..., dict[str, Any]], view: Any, request: Any,
              instances: Sequence[Any], cell_down_support: bool,
              nova_view: Callable[..., Any]) -> dict[str, Any]:
    """*body* of a list whose rows were stashed, else *nova_view*'s.

    nova's view renders (from nova's objects of the same rows, built by
    :func:`materialize`) a microversion newer than :data:`MAX_VERSION`
    and a list *body* raises :class:`NotRenderable` for.
    """
    found = _take(instances)
    if found is not None:
        if _renderable(request):
            try:
                answer = body(found, view, request, instances,
                              cell_down_support)
                USED.count('rendered')
                return answer
            except NotRenderable as exc:
                LOG.debug('Server list rendered by nova: %s', exc)
        materialize(found, instances)
        USED.count('nova')
    nova_answer: dict[str, Any] = nova_view(
        view, request, instances, cell_down_support=cell_down_support)
    return nova_answer


def index(view: Any, request: Any, instances: Sequence[Any],
          cell_down_support: bool,
          nova_index: Callable[..., Any]) -> dict[str, Any]:
    """nova's ``ViewBuilder.index`` (*nova_index*), rendered from rows."""
    return _rendered(_index, view, request, instances, cell_down_support,
                     nova_index)


def detail(view: Any, request: Any, instances: Sequence[Any],
           cell_down_support: bool,
           nova_detail: Callable[..., Any]) -> dict[str, Any]:
    """nova's ``ViewBuilder.detail`` (*nova_detail*), rendered from rows."""
    return _rendered(_detail, view, request, instances, cell_down_support,
                     nova_detail)


def _index(found: Stash, view: Any, request: Any,
           instances: Sequence[Any], cell_down_support: bool
           ) -> dict[str, Any]:
    from nova.objects import virtual_interface

    req = _Request(view, request, 'servers')
    servers = []
    for instance in instances:
        if instance.uuid == virtual_interface.FAKE_UUID:
            continue
        row = found.rows.get(instance.uuid)
        if row is None:
            servers.append(view.basic(
                request, instance,
                cell_down_support=cell_down_support)['server'])
        else:
            servers.append({'id': row['uuid'], 'name': row['display_name'],
                            'links': req.links(row['uuid'])})
    return _collection(req, instances, servers, 'servers')


def _detail(found: Stash, view: Any, request: Any,
            instances: Sequence[Any], cell_down_support: bool
            ) -> dict[str, Any]:
    from nova.api.openstack.compute.views import servers as views
    from nova.objects import virtual_interface
    from nova.policies import extended_server_attributes as esa_policies
    from nova.policies import servers as servers_policies

    req = _Request(view, request, 'servers/detail')
    context = req.context
    at = req.at
    if at['2.47']:
        show_extra_specs = context.can(
            servers_policies.SERVERS % 'show:flavor-extra-specs',
            fatal=False)
    else:
        show_extra_specs = False
    show_extended_attr = context.can(esa_policies.BASE_POLICY_NAME,
                                     fatal=False)
    uuids = [inst.uuid for inst in instances]
    # The name template is the same for every row: checked once.
    _instance_name({'id': 0})
    # Every row is checked before any lookup: a row nova must render
    # costs no lookup twice.
    for instance in instances:
        row = found.rows.get(instance.uuid)
        if row is not None:
            _check(req, row)
    faults = _faults(found, instances)
    bdms = view._get_instance_bdms_in_multiple_cells(context, uuids)
    zones: dict[str, Any] = {}
    sched_hints: dict[str, Any] = {}
    if at['2.96']:
        zones, sched_hints = _request_spec_fields(context, uuids,
                                                  at['2.100'])
    servers = []
    for instance in instances:
        uuid = instance.uuid
        if uuid == virtual_interface.FAKE_UUID:
            continue
        row = found.rows.get(uuid)
        if row is None:
            servers.append(view.show(
                request, instance, show_extra_specs=show_extra_specs,
                show_extended_attr=show_extended_attr,
                show_host_status=False, show_sec_grp=False, bdms=bdms,
                cell_down_support=cell_down_support,
                provided_az=zones.get(uuid, views.AZ_NOT_IN_REQUEST_SPEC),
                provided_sched_hints=sched_hints.get(
                    uuid, views.SCHED_HINTS_NOT_IN_REQUEST_SPEC)
            )['server'])
        else:
            if found.faults_deferred:
                fault = faults.get(uuid)
            else:
                fault = instance.fault if 'fault' in instance else None
            servers.append(show_row(
                req, row, _Fault(fault), show_extra_specs,
                show_extended_attr, bdms, zones.get(uuid),
                sched_hints.get(uuid)))
    body = _collection(req, instances, servers, 'servers/detail')
    if at['2.16']:
        unknown_only = view._get_host_status_unknown_only(context)
        if unknown_only is not None:
            view._add_host_status(
                list(body['servers']),
                [_host_view(found, instance) for instance in instances],
                unknown_only=unknown_only)
    view._add_security_grps(request, list(body['servers']), instances)
    return body


def _faults(found: Stash, instances: Sequence[Any]) -> dict[str, Any]:
    """The faults ``fill_faults`` left to the renderer: uuid -> fault.

    Read only for the servers whose status shows one (ERROR, DELETED),
    from each one's own cell. A server the listing did not serve has
    none read here: nova's view reads its fault itself (``_load_fault``).
    """
    from nova_cellsched.api.view import lookups as view_lookups

    if not found.faults_deferred:
        return {}
    rows = found.rows
    wanted = [i.uuid for i in instances
              if i.uuid in rows and _status(rows[i.uuid]) in _FAULT]
    if not wanted:
        return {}
    cells = view_lookups._listed(found.context, wanted)
    if cells is None:
        return {}
    return view_lookups.faults_in_cells(found.context, cells, wanted)


def _check(req: _Request, row: dict[str, Any]) -> None:
    """Raise NotRenderable for a row nova would render otherwise."""
    extra = row.get('extra')
    if extra is None:
        raise NotRenderable('no instance_extra row')
    req.flavor(extra.get('flavor'))
    cache = row.get('info_cache')
    if cache is not None and row['vm_state'] != 'building':
        req.addresses[row['uuid']] = addresses(cache['network_info'])
    if req.at['2.26'] and 'tags' not in row:
        raise NotRenderable('tags were not read')


class _Fault:
    """The one thing ``ViewBuilder._get_fault`` reads of an instance."""

    __slots__ = ('fault',)

    def __init__(self, fault: Any) -> None:
        self.fault = fault

    def __contains__(self, name: str) -> bool:
        return name == 'fault'


def _request_spec_fields(context: Any, uuids: list[str], hints: bool
                         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Zones and hints from the request specs, as ``_list_view``."""
    from nova_cellsched.api.view import lookups as view_lookups

    if view_lookups._options()[1]:
        return view_lookups.request_spec_fields(context, uuids, hints)
    from nova import objects

    specs = objects.RequestSpec.get_by_instance_uuids(context, uuids)
    zones = {spec.instance_uuid: spec.availability_zone for spec in specs
             if spec.availability_zone is not None}
    found = ({spec.instance_uuid: spec.scheduler_hints for spec in specs
              if spec.scheduler_hints is not None} if hints else {})
    return zones, found


class _HostView:
    """What ``compute.API.get_instances_host_statuses`` reads of a server.

    Its ``services`` are nova's Service objects of the row's services
    join, built only when nova reads them (once per host).
    """

    def __init__(self, context: Any, row: dict[str, Any]) -> None:
        self._context = context
        self._row = row
        self.uuid = row['uuid']
        self.host = row['host']

    def __contains__(self, name: str) -> bool:
        return name in ('host', 'uuid', 'services')

    @property
    def services(self) -> Any:
        from nova import objects
        from nova.objects import base

        return base.obj_make_list(
            self._context, objects.ServiceList(self._context),
            objects.Service, self._row.get('services') or [])


def _host_view(found: Stash, instance: Any) -> Any:
    row = found.rows.get(instance.uuid)
    return instance if row is None else _HostView(found.context, row)
