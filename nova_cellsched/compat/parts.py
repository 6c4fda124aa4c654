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

"""What nova-cellsched replaces in nova, and what of nova it relies on.

The one declarative list (:data:`PARTS`). Each :class:`Part` names

- its **targets**: every attribute of nova (or listener of SQLAlchemy,
  or entry of a nova list) it puts something of its own into, and what;
- its **sources**: every nova function, class or value whose code it
  relies on beyond the signature, and why. The hashes of their tested
  versions are in :mod:`.sources`; a part is on only if each of its
  sources equals one tested version, all of one tested release. What
  it relies on of a library is a behaviour check (``checks``,
  :data:`.checks.LIBRARY_CHECKS`), never a source;
- the parts it **requires** (off with them), its extra **checks**, and
  what nova does while it is **off**.

:mod:`.core` reads this list and nothing else to check, install and
restore; ``tests/unit/compat`` proves it complete (every attribute of
nova that changes on install is declared here). A replacement named
``adapter:NAME`` is ``NAME`` of :mod:`.adapter`, where what differs
between nova releases is gated; a new release is a new
set of versions in :mod:`.sources` and, where it does otherwise, a gate
there.

Importing this module imports neither nova nor the replacements.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Source:
    """A nova function, class, value or module relied on.

    :ivar module: its module, e.g. ``nova.context``.
    :ivar path: the attribute path in it (``API.get_all``); empty for
        the module itself.
    :ivar why: what the part relies on it doing.
    """

    module: str
    path: str
    why: str

    @property
    def name(self) -> str:
        """``module.path``: its key in :data:`.sources.HASHES`."""
        return '%s.%s' % (self.module, self.path) if self.path else (
            self.module)


@dataclasses.dataclass(frozen=True)
class Swap:
    """``owner.attribute`` is *replacement* while the part is on.

    :ivar owner: ``module`` or ``module:Class`` (a class of it).
    :ivar replacement: ``module:name`` of ours, or ``adapter:name``
        (of :mod:`.adapter`).
    :ivar wraps: *replacement* is a factory, called once at install
        with (attribute, nova's original) and answering what is put in.
    :ivar static: put in as a ``staticmethod``.
    """

    owner: str
    attribute: str
    replacement: str
    wraps: bool = False
    static: bool = False

    @property
    def name(self) -> str:
        """``module.Class.attribute``, as a :class:`Source` names it."""
        return '%s.%s' % (self.owner.replace(':', '.'), self.attribute)


@dataclasses.dataclass(frozen=True)
class Listen:
    """*listener* listens to *event* of *target* while the part is on.

    ``sqlalchemy.event.listen(target, event, listener)``: SQLAlchemy's
    own hook, so nothing of nova changes.
    """

    target: str
    event: str
    listener: str

    @property
    def name(self) -> str:
        return '%s %s event' % (self.target.replace(':', '.'), self.event)


@dataclasses.dataclass(frozen=True)
class Append:
    """*replacement* is an entry of the list ``owner.attribute`` while on.

    An entry of the same module and name (left by an earlier import of
    ours) is replaced in place, not added again.
    """

    owner: str
    attribute: str
    replacement: str

    @property
    def name(self) -> str:
        return '%s.%s' % (self.owner.replace(':', '.'), self.attribute)


Target = Swap | Listen | Append


@dataclasses.dataclass(frozen=True)
class Part:
    """One thing nova-cellsched does inside a nova service.

    :ivar name: how logs, ``check --api-paste`` and the code name it.
    :ivar what: what it does, one line.
    :ivar off: what nova does while it is off, one line.
    :ivar service: the nova service it runs in.
    :ivar targets: what it puts into nova (:class:`Swap`,
        :class:`Listen`, :class:`Append`).
    :ivar sources: what of nova it relies on.
    :ivar requires: parts it needs on (installed before it).
    :ivar checks: ``module:function`` answering a list of problems
        beyond the sources (a signature, the thread model); run by
        every check.
    :ivar on_install: ``module:function`` called with no arguments each
        time the part turns on, after its targets are in (a failure
        takes them out again and keeps the part off). Changes nothing
        of nova's own.
    """

    name: str
    what: str
    off: str
    service: str
    targets: tuple[Target, ...]
    sources: tuple[Source, ...]
    requires: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    on_install: tuple[str, ...] = ()


_VIEWS = 'nova.api.openstack.compute.views.servers'
_SERVERS = 'nova.api.openstack.compute.servers'


PARTS: tuple[Part, ...] = (
    Part(
        name='guard',
        what='bounds the I/O of PyMySQL connections (guard.io_timeout)',
        off='connections wait as long as the driver lets them',
        service='nova-api',
        targets=(
            Listen('sqlalchemy.engine:Engine', 'do_connect',
                   'nova_cellsched.guard:_on_do_connect'),
        ),
        sources=(),
        checks=('nova_cellsched.compat.checks:guard_state',),
        # Connections pooled before are PyMySQL's own class: closed, so
        # each is made anew through _on_do_connect.
        on_install=('nova_cellsched.guard:'
                    '_close_idle_cell_connections',),
    ),
    Part(
        name='keyset',
        what="pages nova's instance query by sort values (api.hooks.keyset)",
        off="nova's instance query pages as oslo.db does",
        service='nova-api',
        targets=(
            Swap('nova.db.main.api', 'sqlalchemyutils',
                 'nova_cellsched.api.hooks.keyset:_PROXY'),
        ),
        sources=(
            Source('nova.db.main.api', 'instance_get_all_by_filters_sort',
                   'reaches paginate_query through sqlalchemyutils, calls '
                   'only .all() on its answer, then '
                   '_instances_fill_metadata'),
        ),
        # SQLAlchemy's Query._setup_joins and _with_options, which
        # keyset.one_row_per_instance reads, are checked by what they do
        # (keyset_sqlalchemy), not pinned by source: nova runs with any
        # SQLAlchemy its requirements allow.
        checks=('nova_cellsched.api.hooks.keyset:fits',
                'nova_cellsched.compat.checks:keyset_sqlalchemy'),
    ),
    Part(
        name='lister',
        what='lists servers for nova-api (api.hooks.instance_list)',
        off="nova's own lister serves the server lists",
        service='nova-api',
        targets=(
            Swap('nova.compute.instance_list', 'get_instance_objects_sorted',
                 'nova_cellsched.api.hooks.instance_list:'
                 'get_instance_objects_sorted'),
            Swap('nova.compute.instance_list', 'get_instances_sorted',
                 'nova_cellsched.api.hooks.instance_list:get_instances_sorted'),
            Swap('nova.context', 'scatter_gather_cells',
                 'nova_cellsched.api.hooks.pool:scatter_gather_cells'),
        ),
        requires=('guard', 'keyset'),
        # oslo.versionedobjects' obj_make_list (nova.objects.base's), which
        # builds the rows' tag, service and PCI device lists, is checked
        # by what it does, not pinned by source.
        checks=('nova_cellsched.compat.checks:lister_object_lists',),
        sources=(
            Source('nova.compute.instance_list',
                   'get_instance_objects_sorted',
                   'replaced: ours keeps its cells, batch, joins, fault '
                   'handling and (InstanceList, down cells) answer'),
            Source('nova.compute.instance_list', 'get_instances_sorted',
                   'replaced: ours answers (lister, rows) as it does'),
            Source('nova.compute.instance_list', 'InstanceSortContext',
                   'the default order and uuid appended (sort_order)'),
            Source('nova.compute.instance_list', 'InstanceLister',
                   'its marker lookup and batch read, which ours repeats '
                   '(adapter.marker_row, batch)'),
            Source('nova.compute.multi_cell_list', 'RecordSortContext',
                   'keeps the sort keys and directions as given'),
            Source('nova.compute.multi_cell_list', 'CrossCellLister',
                   'down cells and their error, which ours repeats '
                   '(adapter.not_responding); the cells_* properties its '
                   'callers read'),
            Source('nova.compute.api', 'API.get_all',
                   'calls get_instance_objects_sorted through the module '
                   'attribute'),
            Source('nova.context', 'scatter_gather_cells',
                   'wrapped: its results (did_not_respond_sentinel, '
                   'exceptions)'),
            Source('nova.context', 'target_cell',
                   'the targeted copy stays usable after the block'),
            Source('nova.context', 'set_target_cell',
                   "CELL_CACHE: each cell's engine, kept by nova"),
            Source('nova.context', 'load_cells', 'fills CELLS'),
            Source('nova.db.main.api', '_instances_fill_metadata',
                   'without manual joins, only copies each row into a '
                   'dict'),
            Source('nova.db.main.api', '_manual_join_columns',
                   'the joins nova makes by hand'),
            Source('nova.db.main.api', '_instance_metadata_get_multi',
                   'the query the rows loader reads metadata with'),
            Source('nova.db.main.api', '_instance_system_metadata_get_multi',
                   'the query the rows loader reads system metadata with'),
            Source('nova.db.main.api', '_exact_instance_filter',
                   'filters of the query the rows loader re-selects '
                   'columns from'),
            Source('nova.db.main.api', '_regex_instance_filter',
                   'filters of the query the rows loader re-selects '
                   'columns from'),
            Source('nova.db.main.api', 'instance_get_by_uuid',
                   'reads the marker row'),
            Source('nova.db.main.api', '_instance_get_by_uuid',
                   'reads the marker row'),
            Source('nova.db.utils', 'process_sort_params',
                   'the order every batch is read in'),
            Source('nova.db.main.models', 'Instance',
                   'columns (sort keys), relationships info_cache, '
                   'services, tags, extra and their joins'),
            Source('nova.db.main.models', 'InstanceExtra',
                   'columns, which are deferred'),
            Source('nova.db.main.models', 'InstanceInfoCache', 'columns'),
            Source('nova.db.main.models', 'Tag', 'columns'),
            Source('nova.db.main.models', 'Service', 'columns'),
            Source('nova.db.main.models', 'InstanceMetadata', 'columns'),
            Source('nova.db.main.models', 'InstanceSystemMetadata',
                   'columns'),
            Source('nova.objects.instance', '_expected_cols',
                   'the joins asked for'),
            Source('nova.objects.instance',
                   '_INSTANCE_OPTIONAL_JOINED_FIELDS',
                   'the joins rows.supports knows'),
            Source('nova.objects.instance', '_INSTANCE_EXTRA_FIELDS',
                   'the extra.<column> joins'),
            Source('nova.objects.instance', '_make_instance_list',
                   'builds the objects from rows or dicts'),
            Source('nova.objects.instance', 'Instance._from_db_object',
                   'reads only keys; never reads the security_groups join'),
            Source('nova.objects.instance',
                   'Instance._extra_attributes_from_db_object',
                   'reads instance_extra from a dict'),
            Source('nova.objects.instance_info_cache',
                   'InstanceInfoCache._from_db_object', 'reads a dict'),
            Source('nova.objects.tag', 'Tag._from_db_object',
                   'reads a dict'),
            Source('nova.objects.service', 'Service._from_db_object',
                   'reads a dict'),
            Source('nova.utils', 'instance_meta', 'takes a dict as it is'),
            Source('nova.utils', 'instance_sys_meta',
                   'takes a dict as it is'),
        ),
    ),
    Part(
        name='view',
        what="reads what the server list's view shows from the listed "
             'cells only (api.view.lookups)',
        off="nova's view builder reads faults, volumes and request specs "
            'from every cell',
        service='nova-api',
        targets=(
            Swap(_VIEWS + ':ViewBuilder',
                 '_get_instance_bdms_in_multiple_cells',
                 'nova_cellsched.api.view.lookups:get_instance_bdms_in_multiple_cells',
                 static=True),
            Swap(_VIEWS + ':ViewBuilder', 'index',
                 'nova_cellsched.api.view.lookups:timed', wraps=True),
            Swap(_VIEWS + ':ViewBuilder', 'detail',
                 'nova_cellsched.api.view.lookups:timed', wraps=True),
            Swap('nova.objects.instance:InstanceList', 'fill_faults',
                 'nova_cellsched.api.view.lookups:fill_faults'),
        ),
        requires=('lister',),
        sources=(
            Source(_VIEWS, 'ViewBuilder.index',
                   'timed as the view phase; calls _list_view'),
            Source(_VIEWS, 'ViewBuilder.detail',
                   'timed as the view phase; calls '
                   '_get_instance_bdms_in_multiple_cells and passes its '
                   'answer to the view'),
            Source(_VIEWS, 'ViewBuilder._get_instance_bdms_in_multiple_cells',
                   'replaced: asks the cells of the servers for their '
                   "mappings, on the listing's workers, logs a failed "
                   'cell'),
            Source(_VIEWS, 'ViewBuilder._add_volumes_attachments',
                   "reads only a mapping's volume_id and "
                   'delete_on_termination, by key'),
            Source(_VIEWS, 'ViewBuilder._get_pinned_az',
                   'takes the prefetched zone, AZ_NOT_IN_REQUEST_SPEC for '
                   'none'),
            Source(_VIEWS, 'ViewBuilder._get_scheduler_hints',
                   'takes the prefetched hints, '
                   'SCHED_HINTS_NOT_IN_REQUEST_SPEC for none'),
            Source('nova.objects.block_device',
                   'BlockDeviceMappingList.bdms_by_instance_uuid',
                   'groups get_by_instance_uuids by instance, in query '
                   'order'),
            Source('nova.objects.block_device',
                   'BlockDeviceMappingList.get_by_instance_uuids',
                   "nova's block device mapping query, unchanged"),
            Source('nova.objects.block_device',
                   'BlockDeviceMapping._from_db_object',
                   'copies the columns (writes a uuid where none)'),
            Source('nova.db.main.api',
                   'block_device_mapping_get_all_by_instance_uuids',
                   'the query view._bdm_rows repeats for three columns'),
            Source('nova.db.main.api', '_block_device_mapping_get_query',
                   "model_query with the context's deleted filter, no "
                   'joins'),
            Source('nova.db.main.models', 'BlockDeviceMapping',
                   'instance_uuid, volume_id, delete_on_termination'),
            Source('nova.objects.block_device', 'BlockDeviceMapping',
                   'delete_on_termination is a non-nullable boolean'),
            Source('nova.objects.request_spec',
                   'RequestSpec.get_by_instance_uuids',
                   'one _from_db_object per row of '
                   '_get_by_instance_uuids_from_db'),
            Source('nova.objects.request_spec',
                   'RequestSpec._get_by_instance_uuids_from_db',
                   'the query view._spec_rows repeats for three columns'),
            Source('nova.objects.request_spec', 'RequestSpec._from_db_object',
                   "availability_zone and scheduler_hints are the "
                   "primitive's, but for a server group (looked up, may "
                   'pop the group hint)'),
            Source('nova.objects.request_spec', 'RequestSpec',
                   'VERSION and the availability_zone and scheduler_hints '
                   'fields'),
            Source('nova.db.api.models', 'RequestSpec',
                   'id, instance_uuid, spec'),
            Source('nova.objects.instance', 'InstanceList.fill_faults',
                   'replaced: from nova 33 it asks every cell for the '
                   "faults, which ours narrows to each listed server's "
                   'own cell; before, ours calls it; it reads only the '
                   "servers' uuids and sets each one's fault"),
            Source('nova.objects.instance_fault',
                   'InstanceFaultList.get_latest_by_instance_uuids',
                   "a cell's latest fault per server, whatever else is "
                   'asked'),
            Source('nova.db.main.api', 'instance_fault_get_by_instance_uuids',
                   'the latest fault of each server, server by server'),
            Source('nova.context', 'scatter_gather_all_cells',
                   'every cell, with CELL_TIMEOUT'),
        ),
    ),
    Part(
        name='render',
        what='renders served server lists from the listed rows '
             '(api.view.render)',
        off="nova builds an Instance object per listed server and its "
            'view builder renders them',
        service='nova-api',
        # Put in through the lister's and the view's targets; on or off
        # it changes nothing of nova's own.
        targets=(),
        requires=('lister', 'view'),
        # The addresses view (views.ips from nova 32, views.addresses
        # before) is checked by what it answers, not pinned by source.
        checks=('nova_cellsched.api.view.render:addresses_check',),
        sources=(
            Source('nova.api.openstack.compute.servers',
                   'ServersController._get_servers',
                   'reads nothing of a listed server between get_all and '
                   'the view but through fill_faults; detail and index '
                   'are called with the list'),
            Source('nova.compute.api', 'API.get_all',
                   'reads only the uuid of a listed server but for an IP '
                   'filter (which is not rendered)'),
            Source(_VIEWS, 'ViewBuilder.show',
                   'the detail body, key for key, per microversion'),
            Source(_VIEWS, 'ViewBuilder.basic', 'the index body'),
            Source(_VIEWS, 'ViewBuilder._get_addresses',
                   'no addresses while building; the network cache'),
            Source(_VIEWS, 'ViewBuilder._get_flavor',
                   'the flavor by microversion (2.47)'),
            Source(_VIEWS, 'ViewBuilder._get_flavor_dict',
                   'the embedded flavor, extra specs by policy'),
            Source(_VIEWS, 'ViewBuilder._get_image',
                   'the image link; properties from 2.98'),
            Source(_VIEWS, 'ViewBuilder._get_metadata', 'the metadata'),
            Source(_VIEWS, 'ViewBuilder._get_vm_status',
                   'DELETED, else status_from_state'),
            Source(_VIEWS, 'ViewBuilder._get_host_id', 'generate_hostid'),
            Source(_VIEWS, 'ViewBuilder._get_fault',
                   "called with an object whose 'fault' is set"),
            Source(_VIEWS, 'ViewBuilder._add_host_status',
                   "called with objects of host, uuid and services"),
            Source(_VIEWS, 'ViewBuilder._add_security_grps',
                   'reads only the server dicts'),
            Source('nova.api.openstack.common', 'ViewBuilder',
                   'links: the href and bookmark prefixes end in /'),
            Source('nova.api.openstack.common', 'url_join',
                   'an empty last part ends the URL with /'),
            Source('nova.api.openstack.common',
                   'get_networks_for_instance_from_nw_info',
                   "the addresses by network label: a label's fixed "
                   'then floating addresses'),
            Source('nova.network.model', 'IP',
                   'the version from the address where none'),
            Source('nova.network.model', 'FixedIP',
                   "type 'fixed' where none; floating addresses"),
            Source('nova.network.model', 'NetworkInfo',
                   'hydrated from the JSON list'),
            Source('nova.network.model', 'VIF', 'address and network'),
            Source('nova.network.model', 'Network', 'label and subnets'),
            Source('nova.network.model', 'Subnet', 'ips'),
            Source('nova.objects.instance', 'Instance._flavor_from_db',
                   "the current flavor is extra.flavor's 'cur'"),
            Source('nova.objects.instance', 'Instance.get_network_info',
                   'no info cache: no addresses'),
            Source('nova.objects.instance', 'Instance.name.fget',
                   'instance_name_template of the id'),
            Source('nova.objects.instance', 'Instance._load_trusted_certs',
                   "extra.trusted_certs's TrustedCerts primitive"),
            Source('nova.compute.api', 'API.get_instances_host_statuses',
                   'reads host, uuid and services'),
            Source('nova.compute.api', 'API.get_instance_host_status',
                   'reads host and services'),
            Source('nova.availability_zones',
                   'get_instance_availability_zone',
                   "reads 'host' in, .host and .get('availability_zone')"),
            Source('nova.utils', 'generate_hostid', 'hostId'),
            Source('nova.utils', 'isotime', 'created, updated'),
        ),
    ),
    Part(
        name='validation',
        what='validates each server-list response once, compiled '
             '(api.validation.validator)',
        off='nova validates server lists with its own decorators',
        service='nova-api',
        targets=(
            Swap(_SERVERS + ':ServersController', 'index',
                 'nova_cellsched.api.validation.validator:_served',
                 wraps=True),
            Swap(_SERVERS + ':ServersController', 'detail',
                 'nova_cellsched.api.validation.validator:_served',
                 wraps=True),
        ),
        # The libraries (jsonschema's public API, oslo.serialization's
        # JSON, oslo.versionedobjects' collections) are checked by what
        # they do, not pinned by source.
        checks=('nova_cellsched.api.validation.validator:stack_check',
                'nova_cellsched.compat.checks:jsonschema_problems',
                'nova_cellsched.compat.checks:validation_serialization'),
        sources=(
            Source(_SERVERS, 'ServersController.index',
                   "rebuilt: nova's decorators found in its stack, one "
                   'validation for the response decorators'),
            Source(_SERVERS, 'ServersController.detail',
                   "rebuilt: nova's decorators found in its stack, one "
                   'validation for the response decorators'),
            Source('nova.api.openstack.wsgi', 'expected_errors',
                   'applied again with the arguments of its stack'),
            Source('nova.api.openstack.wsgi', 'JSONDictSerializer',
                   'how nova serializes the body it validates'),
            Source('nova.api.validation', '_schema_validation_helper',
                   "decides whatever the compiled validator does not "
                   'accept'),
            Source('nova.api.validation', 'query_schema',
                   'applied again with the arguments of its stack'),
            Source('nova.api.validation', 'response_body_schema',
                   "its range, its serialize-and-parse and its verdict, "
                   'which the compiled one repeats'),
            Source('nova.api.validation.validators', '',
                   '_SchemaValidator and the format checks, whose '
                   'verdicts on a string are remembered'),
        ),
    ),
    Part(
        name='startup',
        what="nova-api's start-up check of compute versions, cells in "
             'parallel, I/O bounded (api.startup.service_versions)',
        off="nova-api's start-up check is nova's own (each cell may take "
            "nova's CELL_TIMEOUT, and a frozen cell's thread stays in "
            "oslo.db's retries)",
        service='nova-api',
        targets=(
            Swap('nova.utils', 'raise_if_old_compute',
                 'nova_cellsched.api.startup.service_versions:raise_if_old_compute'),
        ),
        requires=('guard',),
        sources=(
            Source('nova.utils', 'raise_if_old_compute',
                   'replaced while nova-api builds its application: ours '
                   'keeps its scope, its zero for no compute and its '
                   'TooOldComputeService (adapter.raise_if_too_old)'),
            Source('nova.objects.service', 'get_minimum_version_all_cells',
                   'its minimum: zero and None versions, and cells that do '
                   'not answer, left out'),
            Source('nova.objects.service',
                   'Service._db_service_get_minimum_version',
                   'the per-cell query ours runs'),
            Source('nova.db.main.api', 'service_get_minimum_version',
                   'the oldest version per binary of services not deleted, '
                   'not forced down'),
            Source('nova.api.openstack.wsgi_app', '_setup_service',
                   'calls utils.raise_if_old_compute (looked up when '
                   'called) and handles TooOldComputeService'),
            Source('nova.api.openstack.wsgi_app', 'init_application',
                   'runs _setup_service before it loads the paste '
                   'pipeline'),
        ),
    ),
    Part(
        name='min_version',
        what="bounds nova's minimum service version over all cells "
             '(api.hooks.min_version)',
        off='every cell is asked for its minimum service version with '
            "nova's 60 s CELL_TIMEOUT before a boot",
        service='nova-api',
        targets=(
            Swap('nova.objects.service', 'get_minimum_version_all_cells',
                 'nova_cellsched.api.hooks.min_version:wrap', wraps=True),
        ),
        requires=('lister',),
        sources=(
            Source('nova.objects.service', 'get_minimum_version_all_cells',
                   'reads every cell through scatter_gather_all_cells, '
                   'called once; with require_all False leaves out a cell '
                   'whose answer is did_not_respond_sentinel or an '
                   'exception'),
            Source('nova.context', 'scatter_gather_all_cells',
                   'calls scatter_gather_cells through the module '
                   'attribute'),
        ),
    ),
    Part(
        name='request_filter',
        what='the placement pre-filter of the cells a request may use '
             '(scheduler.request_filter)',
        off='the [cellsched] placement pre-filter is not registered: '
            'placement is asked as without the plugin, ProjectCellFilter '
            'still filters the hosts',
        service='nova-scheduler',
        targets=(
            Append('nova.scheduler.request_filter', 'ALL_REQUEST_FILTERS',
                   'nova_cellsched.scheduler.request_filter:nova_entry'),
        ),
        sources=(
            Source('nova.scheduler.request_filter', 'process_reqspec',
                   'calls every entry of ALL_REQUEST_FILTERS, in order, '
                   'before placement is asked'),
            Source('nova.scheduler.request_filter', 'trace_request_filter',
                   'decorates ours (scheduler.request_filter.nova_entry): '
                   'logs and times it as it does nova\'s'),
            Source('nova.objects.request_spec', 'Destination',
                   'require_aggregates, append_forbidden_aggregates, cell, '
                   'allow_cross_cell_move'),
            Source('nova.scheduler.host_manager',
                   'HostManager.get_host_states_by_uuids',
                   'reads the hosts of requested_destination.cell only '
                   '(without allow_cross_cell_move), so naming the one '
                   'allowed cell reads one cell database'),
            Source('nova.scheduler.host_manager',
                   'HostManager._get_computes_for_cells',
                   'reads the services and compute nodes of the cells it '
                   'is given'),
            Source('nova.scheduler.utils', 'resources_from_request_spec',
                   'reads destination.cell only for a named host, which '
                   'the pre-filter never sees'),
        ),
    ),
    Part(
        name='bounded_reads',
        what="bounds nova-scheduler's reads of every cell: compute nodes "
             'and the minimum service version (scheduler.bounded_reads)',
        off='each scheduling decision waits for every cell with '
            "nova's 60 s CELL_TIMEOUT",
        service='nova-scheduler',
        targets=(
            Swap('nova.scheduler.host_manager:HostManager',
                 '_get_computes_for_cells',
                 'nova_cellsched.scheduler.bounded_reads:wrap_computes',
                 wraps=True),
            Swap('nova.context', 'scatter_gather_all_cells',
                 'nova_cellsched.scheduler.bounded_reads:wrap_all_cells',
                 wraps=True),
        ),
        requires=('guard',),
        sources=(
            Source('nova.scheduler.host_manager',
                   'HostManager._get_computes_for_cells',
                   "answers (cell uuid -> compute nodes, host -> service) "
                   "from each cell's ServiceList.get_by_binary("
                   "'nova-compute', include_disabled=True) and "
                   'ComputeNodeList.get_all or get_all_by_uuids, leaving '
                   'out a cell that fails or does not respond'),
            Source('nova.scheduler.host_manager',
                   'HostManager.get_host_states_by_uuids',
                   'builds the host states of the cells '
                   '_get_computes_for_cells answered for'),
            Source('nova.context', 'scatter_gather_all_cells',
                   'load_cells(), then scatter_gather_cells over CELLS '
                   'with CELL_TIMEOUT: per cell, the result, the '
                   'exception raised or did_not_respond_sentinel'),
            Source('nova.context', 'load_cells',
                   'fills the module global CELLS with every cell '
                   'mapping, once'),
        ),
    ),
)

#: Parts by name.
BY_NAME: dict[str, Part] = {part.name: part for part in PARTS}

#: The parts the nova-api paste filter asks for.
API_PARTS = ('lister', 'view', 'render', 'validation', 'min_version')


def all_sources() -> tuple[Source, ...]:
    """Every relied-on source once, in declaration order."""
    seen: dict[str, Source] = {}
    for part in PARTS:
        for source in part.sources:
            seen.setdefault(source.name, source)
    return tuple(seen.values())
