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

"""The nova the replacement was tested with: versions and source hashes.

The replacement (:mod:`.instance_list`, :mod:`.rows`, :mod:`.keyset`)
relies on more than the signatures of nova's functions: on what their
bodies do (``instance_get_all_by_filters_sort`` only calls ``.all()`` on
what ``paginate_query`` returns, ``_from_db_object`` never reads the
security groups join, the relationship names on ``models.Instance``...).
:data:`RELIED_ON` lists every nova function, class and value whose body
or shape it relies on, and why; :data:`TESTED_NOVA` the nova releases it
was tested with and, per release, the SHA-256 of each one's source
(:func:`source_hash`). :func:`problems` compares the running nova with
that table.

Maintainers, for a new nova release: install it, run::

    python -m nova_cellsched.api.fingerprint

read what it says changed (the listed functions' new source against what
the replacement assumes), run the tests, and paste the printed block into
:data:`TESTED_NOVA`.
"""

import ast
from collections.abc import Callable, Sequence
import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import linecache
import sys
import textwrap
import tokenize
from typing import Any

#: (module, attribute path, what the replacement relies on). The
#: attribute path may name a class's attribute (``Instance._from_db_object``).
RELIED_ON: tuple[tuple[str, str, str], ...] = (
    ('nova.compute.instance_list', 'get_instance_objects_sorted',
     'replaced: ours keeps its cells, batch, joins, fault handling and '
     '(InstanceList, down cells) answer'),
    ('nova.compute.instance_list', 'get_instances_sorted',
     'replaced: ours answers (lister, rows) as it does'),
    ('nova.compute.instance_list', 'InstanceSortContext',
     'the default order and uuid appended (sort_order)'),
    ('nova.compute.instance_list', 'InstanceLister',
     'its marker lookup, which ours repeats'),
    ('nova.compute.multi_cell_list', 'RecordSortContext',
     'keeps the sort keys and directions as given'),
    ('nova.compute.multi_cell_list', 'CrossCellLister',
     "down cells and their error, which ours repeats; the cells_* "
     'properties its callers read'),
    ('nova.compute.api', 'API.get_all',
     'calls get_instance_objects_sorted through the module attribute'),
    ('nova.context', 'scatter_gather_cells',
     'wrapped: its results (did_not_respond_sentinel, exceptions)'),
    ('nova.context', 'target_cell',
     'the targeted copy stays usable after the block'),
    ('nova.context', 'set_target_cell',
     "CELL_CACHE: each cell's engine, kept by nova"),
    ('nova.context', 'load_cells', 'fills CELLS'),
    ('nova.db.main.api', 'instance_get_all_by_filters_sort',
     'reaches paginate_query through sqlalchemyutils, calls only .all() '
     'on its answer, then _instances_fill_metadata'),
    ('nova.db.main.api', '_instances_fill_metadata',
     'without manual joins, only copies each row into a dict'),
    ('nova.db.main.api', '_manual_join_columns',
     'the joins nova makes by hand'),
    ('nova.db.main.api', '_instance_metadata_get_multi',
     'the query the rows loader reads metadata with'),
    ('nova.db.main.api', '_instance_system_metadata_get_multi',
     'the query the rows loader reads system metadata with'),
    ('nova.db.main.api', '_exact_instance_filter',
     'filters of the query the rows loader re-selects columns from'),
    ('nova.db.main.api', '_regex_instance_filter',
     'filters of the query the rows loader re-selects columns from'),
    ('nova.db.main.api', 'instance_get_by_uuid', 'reads the marker row'),
    ('nova.db.main.api', '_instance_get_by_uuid', 'reads the marker row'),
    ('nova.db.utils', 'process_sort_params',
     'the order every batch is read in'),
    ('nova.db.main.models', 'Instance',
     'columns (sort keys), relationships info_cache, services, tags, '
     'extra and their joins'),
    ('nova.db.main.models', 'InstanceExtra',
     'columns, which are deferred'),
    ('nova.db.main.models', 'InstanceInfoCache', 'columns'),
    ('nova.db.main.models', 'Tag', 'columns'),
    ('nova.db.main.models', 'Service', 'columns'),
    ('nova.db.main.models', 'InstanceMetadata', 'columns'),
    ('nova.db.main.models', 'InstanceSystemMetadata', 'columns'),
    ('nova.objects.instance', '_expected_cols', 'the joins asked for'),
    ('nova.objects.instance', '_INSTANCE_OPTIONAL_JOINED_FIELDS',
     'the joins rows.supports knows'),
    ('nova.objects.instance', '_INSTANCE_EXTRA_FIELDS',
     'the extra.<column> joins'),
    ('nova.objects.instance', '_make_instance_list',
     'builds the objects from rows or dicts'),
    ('nova.objects.instance', 'Instance._from_db_object',
     'reads only keys; never reads the security_groups join'),
    ('nova.objects.instance', 'Instance._extra_attributes_from_db_object',
     'reads instance_extra from a dict'),
    ('nova.objects.instance_info_cache', 'InstanceInfoCache._from_db_object',
     'reads a dict'),
    ('nova.objects.tag', 'Tag._from_db_object', 'reads a dict'),
    ('nova.objects.service', 'Service._from_db_object', 'reads a dict'),
    ('nova.objects.base', 'obj_make_list', 'builds lists from dicts'),
    ('nova.utils', 'instance_meta', 'takes a dict as it is'),
    ('nova.utils', 'instance_sys_meta', 'takes a dict as it is'),
    # The view's lookups (.view).
    ('nova.api.openstack.compute.views.servers', 'ViewBuilder._list_view',
     "view.list_view is its copy, but for the request specs' fields"),
    ('nova.api.openstack.compute.views.servers', 'ViewBuilder.index',
     'timed as the view phase; calls _list_view'),
    ('nova.api.openstack.compute.views.servers', 'ViewBuilder.detail',
     'timed as the view phase; calls _get_instance_bdms_in_multiple_cells '
     'and passes its answer to the view'),
    ('nova.api.openstack.compute.views.servers',
     'ViewBuilder._get_instance_bdms_in_multiple_cells',
     'replaced: asks the cells of the servers for their mappings, logs a '
     'failed cell'),
    ('nova.api.openstack.compute.views.servers',
     'ViewBuilder._add_volumes_attachments',
     "reads only a mapping's volume_id and delete_on_termination, by key"),
    ('nova.api.openstack.compute.views.servers', 'ViewBuilder._get_pinned_az',
     'takes the prefetched zone, AZ_NOT_IN_REQUEST_SPEC for none'),
    ('nova.api.openstack.compute.views.servers',
     'ViewBuilder._get_scheduler_hints',
     'takes the prefetched hints, SCHED_HINTS_NOT_IN_REQUEST_SPEC for none'),
    ('nova.objects.block_device',
     'BlockDeviceMappingList.bdms_by_instance_uuid',
     'groups get_by_instance_uuids by instance, in query order'),
    ('nova.objects.block_device',
     'BlockDeviceMappingList.get_by_instance_uuids',
     "nova's block device mapping query, unchanged"),
    ('nova.objects.block_device', 'BlockDeviceMapping._from_db_object',
     'copies the columns (writes a uuid where none)'),
    ('nova.db.main.api', 'block_device_mapping_get_all_by_instance_uuids',
     "the query view._bdm_rows repeats for three columns"),
    ('nova.db.main.api', '_block_device_mapping_get_query',
     "model_query with the context's deleted filter, no joins"),
    ('nova.db.main.models', 'BlockDeviceMapping',
     'instance_uuid, volume_id, delete_on_termination'),
    ('nova.objects.block_device', 'BlockDeviceMapping',
     'delete_on_termination is a non-nullable boolean'),
    ('nova.objects.request_spec', 'RequestSpec.get_by_instance_uuids',
     'one _from_db_object per row of _get_by_instance_uuids_from_db'),
    ('nova.objects.request_spec', 'RequestSpec._get_by_instance_uuids_from_db',
     "the query view._spec_rows repeats for three columns"),
    ('nova.objects.request_spec', 'RequestSpec._from_db_object',
     "availability_zone and scheduler_hints are the primitive's, but for "
     'a server group (looked up, may pop the group hint)'),
    ('nova.objects.request_spec', 'RequestSpec',
     'VERSION and the availability_zone and scheduler_hints fields'),
    ('nova.db.api.models', 'RequestSpec', 'id, instance_uuid, spec'),
    ('nova.objects.instance', 'InstanceList.fill_faults',
     'replaced: view.fill_faults is its copy but for the cells asked'),
    ('nova.objects.instance_fault',
     'InstanceFaultList.get_latest_by_instance_uuids',
     "a cell's latest fault per server, whatever else is asked"),
    ('nova.db.main.api', 'instance_fault_get_by_instance_uuids',
     'the latest fault of each server, server by server'),
    ('nova.context', 'scatter_gather_all_cells',
     'every cell, with CELL_TIMEOUT'),
    # SQLAlchemy's, not nova's: keyset.one_row_per_instance reads two
    # attributes of the legacy Query that have no public reader; these
    # are their only writers (nova's tag filters join, its eager loads
    # are options). The self-test's tags-any case runs it.
    ('sqlalchemy.orm.query', 'Query.join',
     'appends each join() to Query._setup_joins '
     '(keyset.one_row_per_instance reads it)'),
    ('sqlalchemy.orm.query', 'Query.options',
     'appends the loader options to Query._with_options '
     '(keyset.one_row_per_instance reads it)'),
)

#: What nova-api's bounded start-up check (:mod:`.startup`) relies on;
#: checked when that check runs, not when the lister installs.
START_UP_RELIED_ON: tuple[tuple[str, str, str], ...] = (
    ('nova.utils', 'raise_if_old_compute',
     'replaced while nova-api builds its application: ours keeps its '
     'scope, its zero for no compute and its TooOldComputeService'),
    ('nova.objects.service', 'get_minimum_version_all_cells',
     "its minimum: zero and None versions, and cells that do not answer, "
     'left out'),
    ('nova.objects.service', 'Service._db_service_get_minimum_version',
     "the per-cell query ours runs"),
    ('nova.db.main.api', 'service_get_minimum_version',
     'the oldest version per binary of services not deleted, not forced '
     'down'),
    ('nova.api.openstack.wsgi_app', '_setup_service',
     'calls utils.raise_if_old_compute (looked up when called) and '
     'handles TooOldComputeService'),
    ('nova.api.openstack.wsgi_app', 'init_application',
     'runs _setup_service before it loads the paste pipeline'),
)

#: Every source the maintainers' tool prints a hash for.
ALL_RELIED_ON = RELIED_ON + START_UP_RELIED_ON

#: nova release -> {``module.attribute``: SHA-256 of its source}: the
#: releases the replacement was tested with. Printed by
#: ``python -m nova_cellsched.api.fingerprint``.
TESTED_NOVA: dict[str, dict[str, str]] = {
    '34.0.0': {
        'nova.compute.instance_list.get_instance_objects_sorted':
            'e0188ce058858167492c3c9910259157e4b68c503dfeba99c6227acce543cea1',
        'nova.compute.instance_list.get_instances_sorted':
            '2c64a83ae2322f1a510207321d4038dbb15e13e8be09cbf7654794b91ffcd9fa',
        'nova.compute.instance_list.InstanceSortContext':
            'd5a283315a8557f065d392f39343d5c8199b20d5513b947b1259bb0745a69c02',
        'nova.compute.instance_list.InstanceLister':
            '6e2c9c5feaf0b4cd09a4c91e08b8ad4fcfaa18c2a8e43a2ef617a232b1dfcc06',
        'nova.compute.multi_cell_list.RecordSortContext':
            'be81efd3239e9bb9928f0ccbf157614bfeb35ec881fb1d4439054e77f4c8470c',
        'nova.compute.multi_cell_list.CrossCellLister':
            'bb98fef02972aa1b091e11bdef745fde43b6ae073aed63b5e0ad69f053a48fe6',
        'nova.compute.api.API.get_all':
            '1209ae91eb0365f572d0200dd51451d6905c79fbaf5343e33bb6cd5c8e8824bc',
        'nova.context.scatter_gather_cells':
            'f7d97ec047bdb684426f4754d77777800a62456bb6266d57134623ee36bd4c7d',
        'nova.context.target_cell':
            'a4f8c6816f18c80b41af7178eccfdb75e1d31b8ad29f9ac33b53da36bc6eabee',
        'nova.context.set_target_cell':
            '18f55ae53ddd2d252247a888d7048650c13a0ed1450c62ada9b6742ef4da0e85',
        'nova.context.load_cells':
            '993cc11c51bb2a6a1135a661f74ba7f692e1b34a3027660173b58d04dde1b1d3',
        'nova.db.main.api.instance_get_all_by_filters_sort':
            'cc9ad4d12794367c21afc1842ac42fe5b01f8b65ce6ed9c37003ff83a48d24ef',
        'nova.db.main.api._instances_fill_metadata':
            'cbae58a5d666d5e59a1222a7e7844d715ebd625cd194471ba903ae4afb4fc655',
        'nova.db.main.api._manual_join_columns':
            '54dee9d433f47a04bfbb035a5e18c43b1f4525cfbfe234bc3d8e6bc29fa19132',
        'nova.db.main.api._instance_metadata_get_multi':
            '35e195c8340d10cc6f7e8192f846653c9f6ccff5155bb11a7818fd9cfdbd16f7',
        'nova.db.main.api._instance_system_metadata_get_multi':
            '287f6280b7e879ac4d0b59a8c499d4797e15aeba50693a969da38112e24ff0d0',
        'nova.db.main.api._exact_instance_filter':
            '631211d1634553a32587605a5c6b3ece93938470d026972492810b520a66a74f',
        'nova.db.main.api._regex_instance_filter':
            'a41635571d8644ec3c0d929d8569f822b208994458af1e094139ddb77e271d22',
        'nova.db.main.api.instance_get_by_uuid':
            '3143adcfd05ff9de743b6abb450db6a86d7829b9475b14edc1dde6c136c8b56f',
        'nova.db.main.api._instance_get_by_uuid':
            '01e378560b7818f51eef98bc478d476f58dd174cd1e51186af5e5fd65450eef1',
        'nova.db.utils.process_sort_params':
            '0cd2d8e374a43236e47658c8cdfd17673d7fc2ae49ece8ff7e295b750017b712',
        'nova.db.main.models.Instance':
            'eca3fa60ffa91081f190f04fb9da203c1ed4b0033f1f6c32bf1ffcbcad6ac6be',
        'nova.db.main.models.InstanceExtra':
            '7133908c5751d272fbb4099c18067bf3b6798e0ef5e04ce89f71e1f3a71a3704',
        'nova.db.main.models.InstanceInfoCache':
            'ed00083be7c9b3e8511cc1bfef1652944f90cb69f2b87ac32816c0b0ed1207a9',
        'nova.db.main.models.Tag':
            '3aa528944b8a0699f88c959afcb209a5853f6b0979120135f096edd3bfe1ea82',
        'nova.db.main.models.Service':
            'b623a82b130713ad73be48cc7e65712e1906790f55558fbd0cb2ed28d997f824',
        'nova.db.main.models.InstanceMetadata':
            '69394806daf462c4fe2ff499db918da709a09838c5e85188df0f1fd2d20164a4',
        'nova.db.main.models.InstanceSystemMetadata':
            '00a1690b46f9977aad052f3c159cb889cd5682a12d05fed433766ee5f09de082',
        'nova.objects.instance._expected_cols':
            'f5d428fcb0e8595598658248726bc5e996243ed111b5ec19a49279723d386fde',
        'nova.objects.instance._INSTANCE_OPTIONAL_JOINED_FIELDS':
            '1b83dbabcba7f962ae3a26280aa50e51fe9557b8b21fb1baa838d3828b460b59',
        'nova.objects.instance._INSTANCE_EXTRA_FIELDS':
            '8932407740cf5a1e40eba9a454ee5acaef119dc2ae79e42d84505651357e9e4f',
        'nova.objects.instance._make_instance_list':
            '324a3b6a2cce755464ce248305a2fb427742e548ad8e2fe4afd8619747cab946',
        'nova.objects.instance.Instance._from_db_object':
            '0f703d2bd373565fcb23795151e35f6053b87428de18addaa17218dc16d839b2',
        'nova.objects.instance.Instance._extra_attributes_from_db_object':
            'fa474ff8c0ed898b2eee0770863dbb5919a73c6949d3560bf42b260e89318d1d',
        'nova.objects.instance_info_cache.InstanceInfoCache._from_db_object':
            '58ee8c7ceeda06f34f0cb496c6be87ea95b27f170d7c7491f48590c9df93faf7',
        'nova.objects.tag.Tag._from_db_object':
            '83cd8ad2980d556eda6a103ea8a138b30f0f2807edaeb6ffc12c3b1772abd6b6',
        'nova.objects.service.Service._from_db_object':
            'c5c6d827bf9eb203e9d11f37aa81dccbd0a1eaa28b1ab794663d2ddf12acf6da',
        'nova.objects.base.obj_make_list':
            'ca2d55c3779d3931fe5ea46827da1643b1e4031713d22509ddf0f48cefc59462',
        'nova.utils.instance_meta':
            'b26e0c53c89de23d09c3fe731e0ff263fc2994fc8387d22f0cfce44c57ab37ed',
        'nova.utils.instance_sys_meta':
            'e2e3f0376bce924b872e5eda615e9163a887831a8d5d2dc1f3cc2c16b331471f',
        'nova.api.openstack.compute.views.servers.ViewBuilder._list_view':
            'd8447358a76a444b2a9ba67836720e4c08271ce145fa44abe31c30135773fbf6',
        'nova.api.openstack.compute.views.servers.ViewBuilder.index':
            '5173f9813b3baac0c783739291ae6dab8a0dc35c6d600685b23342ae011724e7',
        'nova.api.openstack.compute.views.servers.ViewBuilder.detail':
            'ab877d0bcd2a29e4a525fc526d2f706326d2dc9c57e1925c5d498d8e12757545',
        'nova.api.openstack.compute.views.servers.ViewBuilder._get_instance_bdms_in_multiple_cells':
            '661e142f714c172b2082386c625a0c8133e3034e7fb8cdfbcef5829c5fb9144b',
        'nova.api.openstack.compute.views.servers.ViewBuilder._add_volumes_attachments':
            '6458deb9d57326516bbac5b5be5da216a664912f5acaa81a340d8104987da13a',
        'nova.api.openstack.compute.views.servers.ViewBuilder._get_pinned_az':
            '47958534a5c44ce9fe40e11d78d93715da0a5fc4d77483e7085df4654343d936',
        'nova.api.openstack.compute.views.servers.ViewBuilder._get_scheduler_hints':
            '37111da1009039efda28151f55a919ed15684f11cf0a2047ee6316ffccd777a4',
        'nova.objects.block_device.BlockDeviceMappingList.bdms_by_instance_uuid':
            '41456b2caddcca511acd7705a4bd025a15fb8d05a8bc8c5bc2b01ca3b8ab4d44',
        'nova.objects.block_device.BlockDeviceMappingList.get_by_instance_uuids':
            '479186784034c596c2dcd577179ffc607f51c498a7f5db93f3755f01a8e0adbe',
        'nova.objects.block_device.BlockDeviceMapping._from_db_object':
            'b67cb40615d0e774cab09ae60c9e858555ae3417809220c02de84d0d93f18cf1',
        'nova.db.main.api.block_device_mapping_get_all_by_instance_uuids':
            'f5813657c1bbd27a12954ac722d8d9149c53f7ab3acd3fdbb5b218a798883d36',
        'nova.db.main.api._block_device_mapping_get_query':
            'b00b679347a6dc7780452f60b2868fd833cb122d860c41790d3bbf75d2980421',
        'nova.db.main.models.BlockDeviceMapping':
            '187dd83c799ff8cdbd6ab71cdd8d0abf706aa37a65e0a25e068a937208b5dc81',
        'nova.objects.block_device.BlockDeviceMapping':
            'ff4904f4412716dbccc417f8cd0899b165a54f03649d6caf994fe38a278a537b',
        'nova.objects.request_spec.RequestSpec.get_by_instance_uuids':
            '2b578669f67baeea5f2d9b0c7d35b44500007fb2595955273f6cf62c3e9d9f1b',
        'nova.objects.request_spec.RequestSpec._get_by_instance_uuids_from_db':
            'e0e85ed322e3de0257b68735255e6f3e82530468c9ee03dc1eda28d33d627d61',
        'nova.objects.request_spec.RequestSpec._from_db_object':
            '209874ca2d06cf7f17266e19e1659b7f300a550a9c98bde5c84c34e27758d33e',
        'nova.objects.request_spec.RequestSpec':
            'f3fccdbf886074252386ea12edd0744de343b3892b8a39acfbb710cecaad9b34',
        'nova.db.api.models.RequestSpec':
            '8a0f14fcca70963832e09711c0d9fa06d9539d6180896379d7072e18c42d038d',
        'nova.objects.instance.InstanceList.fill_faults':
            'cb6597916a6352244cb3ae387c4a9f38993bb78549da695207a2252e99b36a04',
        'nova.objects.instance_fault.InstanceFaultList.get_latest_by_instance_uuids':
            'fb5f2be6cf4d9aa0bd8c58cc366bac258a0263de41d5cf2a1837a1d07936666f',
        'nova.db.main.api.instance_fault_get_by_instance_uuids':
            '2f8a830d352dd57435499b5aafc32b51e6ff41afcfe08a4a919db21fb37a6ec2',
        'nova.context.scatter_gather_all_cells':
            '018012d601be01fe39a908718e5f0b25ef05b7ecf8015abcfc0a9486f023e24d',
        'sqlalchemy.orm.query.Query.join':
            '4609607d9c2b3f684f45777773e95aa3d33d4ff967e36e781264b1cc983b52fb',
        'sqlalchemy.orm.query.Query.options':
            'd8426d758cc84b42a79a7eaf4052935be4a4a109ea97d1c26557c2576ccf54a1',
        'nova.utils.raise_if_old_compute':
            '044f8a33aeccc9f29586a55bb0be35be5c8b2e8d9a936b6578a740e99c65f344',
        'nova.objects.service.get_minimum_version_all_cells':
            '9a5b2ee216a0b7436278751856be0e57ba592e7995ff34b6b2fda01ebb1ecba2',
        'nova.objects.service.Service._db_service_get_minimum_version':
            'b8e25c4fcc2ef721143373aff674b5543a12dae125d608634e4d0c6e7d04c12f',
        'nova.db.main.api.service_get_minimum_version':
            'd228050f5675cf11663e539ea1d31276bf95fcbf8ece9c9c649898eb2f247cc2',
        'nova.api.openstack.wsgi_app._setup_service':
            'cefb7a3a9e95b074ef1c49ceb685db43428f792d964452e766bb7dedac09a882',
        'nova.api.openstack.wsgi_app.init_application':
            '2be4aa7ad82b96693de29fbd3dff016df1b182e9bfdd44fdc719a4487ff4cfcc',
    },
}

HOW_TO_FIX = ('install the nova-cellsched release built for this nova, or '
              'remove the cellsched filter from api-paste.ini')


def nova_version() -> str:
    """The installed nova's version, or ``unknown``."""
    try:
        return importlib.metadata.version('nova')
    except importlib.metadata.PackageNotFoundError:
        return 'unknown'


def resolve(module_name: str, path: str) -> Any:
    """``module.path`` (dotted through attributes).

    :raises ImportError, AttributeError: it is missing.
    """
    found: Any = importlib.import_module(module_name)
    for part in path.split('.'):
        found = getattr(found, part)
    return found


def normalise(source: str) -> str:
    """*source* without indentation, blank lines and comment lines.

    So that moving a function, reindenting it or editing a comment on a
    line of its own does not count as a change; any other edit does.
    """
    lines = (line.strip() for line in textwrap.dedent(source).splitlines())
    return '\n'.join(line for line in lines
                     if line and not line.startswith('#'))


@functools.lru_cache(maxsize=16)
def _classes_in(filename: str) -> dict[str, tuple[int, int]]:
    """Top-level classes of a source file: name -> (first, last) line.

    What ``inspect.getsource`` finds for a class (decorators included),
    with the file parsed once rather than once per class.
    """
    with tokenize.open(filename) as handle:
        tree = ast.parse(handle.read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            first = min([node.lineno] +
                        [d.lineno for d in node.decorator_list])
            found[node.name] = (first, node.end_lineno)
    return found


def _class_source(cls: type) -> str:
    filename = inspect.getsourcefile(cls)
    span = _classes_in(filename).get(cls.__name__) if filename else None
    if filename is None or span is None or cls.__qualname__ != cls.__name__:
        return inspect.getsource(cls)
    lines = linecache.getlines(filename)
    return ''.join(lines[span[0] - 1:span[1]])


def source_text(value: Any) -> str:
    """What :func:`source_hash` hashes: source, or repr for a value.

    Functions are unwrapped (nova's DB API decorators keep the original
    in ``__wrapped__``); their source starts at their decorators.

    :raises OSError: the source is not installed (``.pyc`` only).
    :raises TypeError: neither code nor a plain value.
    """
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if inspect.isclass(value):
        return normalise(_class_source(value))
    if callable(value):
        return normalise(inspect.getsource(inspect.unwrap(value)))
    if isinstance(value, (list, tuple, str, int, frozenset, set, dict)):
        if isinstance(value, (set, frozenset)):
            return repr(sorted(value))
        return repr(value)
    raise TypeError('cannot fingerprint %r' % (value,))


def source_hash(value: Any) -> str:
    """SHA-256 (hex) of :func:`source_text`."""
    return hashlib.sha256(source_text(value).encode('utf-8')).hexdigest()


def _signature(value: Any) -> str:
    try:
        return str(inspect.signature(inspect.unwrap(value)))
    except (TypeError, ValueError):
        return '(unknown)'


def current(relied_on: Sequence[tuple[str, str, str]] = RELIED_ON
            ) -> tuple[dict[str, str], list[str]]:
    """The running nova's hashes, and what could not be hashed.

    :returns: ({``module.attribute``: hash}, problems).
    """
    hashes = {}
    problems = []
    for module_name, path, _why in relied_on:
        where = '%s.%s' % (module_name, path)
        try:
            value = resolve(module_name, path)
        except (ImportError, AttributeError) as exc:
            problems.append('%s is missing (%s)' % (where, exc))
            continue
        try:
            hashes[where] = source_hash(value)
        except (OSError, TypeError) as exc:
            problems.append('the source of %s cannot be read (%s)'
                            % (where, exc))
    return hashes, problems


def problems(tested: dict[str, dict[str, str]] | None = None,
             relied_on: Sequence[tuple[str, str, str]] = RELIED_ON
             ) -> list[str]:
    """What differs between the running nova and a tested one.

    One line per difference: an untested nova version, a relied-on
    function missing or whose source is not the tested one's (expected
    and found hash, and its signature).
    """
    tested = TESTED_NOVA if tested is None else tested
    version = nova_version()
    found: list[str] = []
    expected = tested.get(version)
    if expected is None:
        found.append('nova %s is not a release this was tested with '
                     '(tested: %s)' % (version, ', '.join(sorted(tested))
                                       or 'none'))
        # Against the newest tested release: says how far off it is.
        newest = _newest(tested)
        expected = tested[newest] if newest else {}
    hashes, unreadable = current(relied_on)
    found.extend(unreadable)
    why = {'%s.%s' % (m, p): w for m, p, w in relied_on}
    changed = []
    for where, digest in hashes.items():
        want = expected.get(where)
        if want is None:
            changed.append('%s has no tested hash' % where)
        elif want != digest:
            value = _lookup(where, relied_on)
            signature = (_signature(value) if inspect.isfunction(value)
                         else '')
            changed.append(
                '%s%s: source differs from the tested one (sha256 '
                'expected %s, found %s; relied on: %s)'
                % (where, signature, want[:16], digest[:16], why[where]))
    if version not in tested and len(changed) > 3:
        found.append('%d relied-on nova functions differ from nova %s '
                     "(python -m nova_cellsched.api.fingerprint lists "
                     'them)' % (len(changed), _newest(tested)))
    else:
        found.extend(changed)
    return found


def _newest(tested: dict[str, dict[str, str]]) -> str | None:
    """The highest release in *tested* (34.10.0 after 34.9.0)."""
    def key(version: str) -> tuple[int, ...]:
        return tuple(int(part) if part.isdigit() else -1
                     for part in version.split('.'))
    return max(tested, key=key) if tested else None


def _lookup(where: str, relied_on: Sequence[tuple[str, str, str]]) -> Any:
    for module_name, path, _why in relied_on:
        if '%s.%s' % (module_name, path) == where:
            return resolve(module_name, path)
    raise KeyError(where)


def table(version: str, hashes: dict[str, str]) -> str:
    """The :data:`TESTED_NOVA` entry for *version*, as Python source."""
    lines = ['    %r: {' % version]
    for where, digest in hashes.items():
        lines.append('        %r:' % where)
        lines.append('            %r,' % digest)
    lines.append('    },')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None,
         write: Callable[[str], Any] = sys.stdout.write) -> int:
    """Print the running nova's table entry and what changed.

    Exit 0 if the running nova is a tested release with the tested
    sources, 1 otherwise.
    """
    version = nova_version()
    hashes, unreadable = current(ALL_RELIED_ON)
    for line in unreadable:
        write('ERROR: %s\n' % line)
    known = TESTED_NOVA.get(version)
    against = version if known is not None else _newest(TESTED_NOVA)
    if against is not None:
        reference = TESTED_NOVA[against]
        why = {'%s.%s' % (m, p): w for m, p, w in ALL_RELIED_ON}
        changed = [w for w in hashes if reference.get(w) != hashes[w]]
        write('# nova %s against tested nova %s: %d of %d relied-on '
              'sources differ\n' % (version, against, len(changed),
                                    len(hashes)))
        for where in changed:
            write('#   %s (relied on: %s)\n' % (where, why[where]))
    write('# Paste into TESTED_NOVA in nova_cellsched/api/fingerprint.py '
          'once the tests pass:\n')
    write(table(version, hashes) + '\n')
    return 0 if not unreadable and known == hashes else 1


if __name__ == '__main__':
    sys.exit(main())
