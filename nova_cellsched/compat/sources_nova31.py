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

"""The relied-on sources as tested with nova 31.3.1 (2025.1, SLURP).

Printed by ``python -m nova_cellsched.compat.maintainer``; data only.
Each source whose version here is neither nova 33.0.2's nor 34.0.0's
carries a comment: what differs and why what its part relies on holds
on nova 31, or which function of the adapter (:mod:`.nova31`) follows
it, or that its part is off here (:data:`LACKS`). The others equal a
version of those tables, hash for hash (nova 33's differences from
34 are commented in :mod:`.sources_nova33`).
"""

RELEASE = '31.3.1'
ADAPTER = 'nova31'

#: Part -> what nova 31 lacks that it needs (:func:`.core.lacking`):
#: on a nova whose sources of the part equal these, it stays off and
#: says so at INFO; nova's own behaviour is the tested one.
LACKS: dict[str, str] = {
    'validation': (
        'validates no server-list response (ServersController.index and '
        'detail have no response_body_schema before nova 33): nothing to '
        'validate, and nova answers the lists unvalidated as it does '
        'without nova-cellsched'),
}

#: :attr:`.parts.Source.name` -> :func:`.hashing.source_hash`.
HASHES: dict[str, str] = {
    'nova.db.main.api.instance_get_all_by_filters_sort':
        'cc9ad4d12794367c21afc1842ac42fe5b01f8b65ce6ed9c37003ff83a48d24ef',
    'sqlalchemy.orm.query.Query.join':
        '4609607d9c2b3f684f45777773e95aa3d33d4ff967e36e781264b1cc983b52fb',
    'sqlalchemy.orm.query.Query.options':
        'd8426d758cc84b42a79a7eaf4052935be4a4a109ea97d1c26557c2576ccf54a1',
    'nova.compute.instance_list.get_instance_objects_sorted':
        'e0188ce058858167492c3c9910259157e4b68c503dfeba99c6227acce543cea1',
    'nova.compute.instance_list.get_instances_sorted':
        '2c64a83ae2322f1a510207321d4038dbb15e13e8be09cbf7654794b91ffcd9fa',
    'nova.compute.instance_list.InstanceSortContext':
        'd5a283315a8557f065d392f39343d5c8199b20d5513b947b1259bb0745a69c02',
    'nova.compute.instance_list.InstanceLister':
        '6e2c9c5feaf0b4cd09a4c91e08b8ad4fcfaa18c2a8e43a2ef617a232b1dfcc06',
    # nova 31: no start_time/timeout_expired (34 times out a cell's record
    # stream after CELL_TIMEOUT). Sort keys and directions kept as given,
    # which is all ours reads; ours bounds each cell's time itself.
    'nova.compute.multi_cell_list.RecordSortContext':
        '093806bae928d9c95e00b8da4cdbaf90f81b88b150f5d320fa83ec3b13de5119',
    # nova 31: query_wrapper is a module function without the per-record
    # timeout. Down cells, their error and the cells_* properties nova's
    # callers read are 34's: what ours repeats.
    'nova.compute.multi_cell_list.CrossCellLister':
        '6f4eb5ec9177b77b7bb681981a8a16786ef44352a8727fc77e280f92e5cc100c',
    'nova.compute.api.API.get_all':
        '1209ae91eb0365f572d0200dd51451d6905c79fbaf5343e33bb6cd5c8e8824bc',
    # nova 31: one eventlet green thread per cell and an eventlet Timeout
    # (no executor, no threading mode). Same results: each cell's answer,
    # did_not_respond_sentinel or the exception, which is all ours wraps.
    'nova.context.scatter_gather_cells':
        'c2a8cde0adca964f71396be34a0f16b7100179307394e69ba78900dbff5e64a4',
    'nova.context.target_cell':
        'a4f8c6816f18c80b41af7178eccfdb75e1d31b8ad29f9ac33b53da36bc6eabee',
    # nova 31: a `global CELL_CACHE` statement only; CELL_CACHE is kept as
    # in 34.
    'nova.context.set_target_cell':
        '260c9df27a76e44d5bf6db106a91553e06ea5edc0d0011b9f5ffb57fc62b67cb',
    'nova.context.load_cells':
        '993cc11c51bb2a6a1135a661f74ba7f692e1b34a3027660173b58d04dde1b1d3',
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
    # nova 31: the regexp operator from db.main.api._get_regexp_ops (34:
    # db.utils.get_regexp_ops, the same function; listing.query looks up
    # either) and u'' literals: the same filters.
    'nova.db.main.api._regex_instance_filter':
        '00a547e18286cfff29c176101a884a4865814d7287393ac249cad5c42436374a',
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
        'a7fa6155d9ad35baf3f162af06073fa7cb4ad3238ba6f5b2efd0419637783930',
    'nova.objects.instance.Instance._extra_attributes_from_db_object':
        'fa474ff8c0ed898b2eee0770863dbb5919a73c6949d3560bf42b260e89318d1d',
    'nova.objects.instance_info_cache.InstanceInfoCache._from_db_object':
        '58ee8c7ceeda06f34f0cb496c6be87ea95b27f170d7c7491f48590c9df93faf7',
    'nova.objects.tag.Tag._from_db_object':
        '83cd8ad2980d556eda6a103ea8a138b30f0f2807edaeb6ffc12c3b1772abd6b6',
    'nova.objects.service.Service._from_db_object':
        'c5c6d827bf9eb203e9d11f37aa81dccbd0a1eaa28b1ab794663d2ddf12acf6da',
    'nova.objects.base.obj_make_list':
        'bb498564f165a0d6ff319994c5fbd8a42a37ad23a0c45120a8dcc337bd73c214',
    'nova.utils.instance_meta':
        'b26e0c53c89de23d09c3fe731e0ff263fc2994fc8387d22f0cfce44c57ab37ed',
    'nova.utils.instance_sys_meta':
        'e2e3f0376bce924b872e5eda615e9163a887831a8d5d2dc1f3cc2c16b331471f',
    # nova 31: is_supported(request, min_version=...) spelled with the
    # keyword, the same body: nova31.list_view (34's copy, which passes it
    # positionally, min_version being the second parameter) is its copy.
    'nova.api.openstack.compute.views.servers.ViewBuilder._list_view':
        '767f8eda72e4cbf96d7a44627451cbf38b771f0eaf7a5bf28ff5c408b109734a',
    'nova.api.openstack.compute.views.servers.ViewBuilder.index':
        '5173f9813b3baac0c783739291ae6dab8a0dc35c6d600685b23342ae011724e7',
    # nova 31: is_supported(..., min_version=...) spelled with the keyword;
    # still calls _get_instance_bdms_in_multiple_cells and passes its answer
    # to the view.
    'nova.api.openstack.compute.views.servers.ViewBuilder.detail':
        'bf98c28ce73f984acfa4715b39e72f796f744f8ccfa9166c9fa2665e390f2872',
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_instance_bdms_in_multiple_cells':
        '661e142f714c172b2082386c625a0c8133e3034e7fb8cdfbcef5829c5fb9144b',
    # nova 31: takes add_delete_on_termination instead of the request; reads
    # a mapping's volume_id and delete_on_termination by key, as in 34.
    'nova.api.openstack.compute.views.servers.ViewBuilder._add_volumes_attachments':
        '888be156a43abbb7b4193130641334b1dfdc1152dafd2847d5dd020eccfc1abe',
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_pinned_az':
        '47958534a5c44ce9fe40e11d78d93715da0a5fc4d77483e7085df4654343d936',
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_scheduler_hints':
        '37111da1009039efda28151f55a919ed15684f11cf0a2047ee6316ffccd777a4',
    'nova.objects.block_device.BlockDeviceMappingList.bdms_by_instance_uuid':
        '41456b2caddcca511acd7705a4bd025a15fb8d05a8bc8c5bc2b01ca3b8ab4d44',
    'nova.objects.block_device.BlockDeviceMappingList.get_by_instance_uuids':
        'eb41a7e81cd9a9c69b89ab0c1f0e699ba0789eceaa1399b727a32629d3d1495f',
    'nova.objects.block_device.BlockDeviceMapping._from_db_object':
        'b67cb40615d0e774cab09ae60c9e858555ae3417809220c02de84d0d93f18cf1',
    'nova.db.main.api.block_device_mapping_get_all_by_instance_uuids':
        'f5813657c1bbd27a12954ac722d8d9149c53f7ab3acd3fdbb5b218a798883d36',
    'nova.db.main.api._block_device_mapping_get_query':
        'b00b679347a6dc7780452f60b2868fd833cb122d860c41790d3bbf75d2980421',
    'nova.db.main.models.BlockDeviceMapping':
        '187dd83c799ff8cdbd6ab71cdd8d0abf706aa37a65e0a25e068a937208b5dc81',
    # nova 31: no is_multiattach property, the remotable_classmethod
    # spelling, another import name; fields and _from_db_object unchanged
    # (delete_on_termination a non-nullable boolean).
    'nova.objects.block_device.BlockDeviceMapping':
        'bdd3a020cc7bf5cbf6e4cbc3ef5b816eea958abc3e5b94a8593626795406e6b6',
    'nova.objects.request_spec.RequestSpec.get_by_instance_uuids':
        '10cfa05d1d9147b65a1e1f7a824200b2a295acda286fa0bb852b0b3dd72e45f5',
    'nova.objects.request_spec.RequestSpec._get_by_instance_uuids_from_db':
        'e0e85ed322e3de0257b68735255e6f3e82530468c9ee03dc1eda28d33d627d61',
    'nova.objects.request_spec.RequestSpec._from_db_object':
        '209874ca2d06cf7f17266e19e1659b7f300a550a9c98bde5c84c34e27758d33e',
    # nova 31: typing.Dict/Set hints, the remotable_classmethod spelling,
    # the PCI-in-placement helper without the requested_resources default
    # (scheduler only). VERSION, availability_zone, scheduler_hints as 34.
    'nova.objects.request_spec.RequestSpec':
        'ebdecca3cb0fca6cb0220f9de2eac11116e76955ac269e02fd5002c30f9a68c3',
    'nova.db.api.models.RequestSpec':
        '8a0f14fcca70963832e09711c0d9fa06d9539d6180896379d7072e18c42d038d',
    # nova 31: one InstanceFaultList query through the list's own context,
    # not every cell (nova asks every cell from 33 on). Different behaviour:
    # nova31.fill_faults is nova's own, unchanged (nothing to narrow).
    'nova.objects.instance.InstanceList.fill_faults':
        'f47ad7c2af294495bfafcb508b5c98db07e0be25ac594c32298a3a54bb109a8f',
    'nova.objects.instance_fault.InstanceFaultList.get_latest_by_instance_uuids':
        '67c2f8ec9f7680eaa4102a959aaa730dec4a1e0e4153cbc8575900c4b30645c8',
    'nova.db.main.api.instance_fault_get_by_instance_uuids':
        '2f8a830d352dd57435499b5aafc32b51e6ff41afcfe08a4a919db21fb37a6ec2',
    'nova.context.scatter_gather_all_cells':
        '018012d601be01fe39a908718e5f0b25ef05b7ecf8015abcfc0a9486f023e24d',
    # nova 31: no response_body_schema on the server lists (query schemas
    # only, other names): the validation part lacks what it needs (LACKS).
    'nova.api.openstack.compute.servers.ServersController.index':
        '8a2a767413472af6e6bfab0a6664584822bb7285b6f15cfe68181f33ef6b4f44',
    # nova 31: no response_body_schema on the server lists (query schemas
    # only, other names): the validation part lacks what it needs (LACKS).
    'nova.api.openstack.compute.servers.ServersController.detail':
        'eebfe93cd539dbb1063dd3e1b48f22bc5cc7f748d696952a0109c008d287d2d9',
    # nova 31: typing.Union/Optional hints, api_version module alias; the
    # same decorator. Recorded for the validation part, off here (LACKS).
    'nova.api.openstack.wsgi.expected_errors':
        'f6eef1f739ba5b8efda893a87ba6feced3c4acff2bf7e804c4e190a203fa3b31',
    'nova.api.openstack.wsgi.JSONDictSerializer':
        '9e298b42ca6f8f338afb83c90dea1343b86f29b083499d72f0d0daf4088f4767',
    # nova 31: no relax_additional_properties (legacy v2 decides). Recorded
    # for the validation part, off here (LACKS).
    'nova.api.validation._schema_validation_helper':
        'ab85c85c4568042682da62701d859a77a6d691bfc37b85f2deffc4066edfec21',
    # nova 31: stores one _query_schema, not a Schemas list. Recorded for
    # the validation part, off here (LACKS).
    'nova.api.validation.query_schema':
        'ad8c35463ca68b4eca91c469cb7cb4392418b0423368b0a3c4c338d6f3075c3e',
    # nova 31: stores one _response_schema, not a Schemas list; unused on
    # the server lists. Recorded for the validation part, off here (LACKS).
    'nova.api.validation.response_body_schema':
        '3794d955c892de485beaa4ace39caad665608833f553034b1f77a773b8ae6846',
    # nova 31: format checks without the non-string guard, older soft
    # additionalProperties. Recorded for the validation part, off here
    # (LACKS).
    'nova.api.validation.validators':
        '6680bc71d35673ccc2013bd6670f63114714ae1cbeb3f77c387d338b97f02d34',
    # oslo.serialization 5.7.0 (2025.1): no type hints, the same call.
    # Recorded for the validation part, off here (LACKS).
    'oslo_serialization.jsonutils.dumps':
        'dba88b3b129ca26ee94525482803dc5beddd4dcf4520713538473897358e50b2',
    # oslo.serialization 5.7.0: no IPRange and Decimal branches; the same
    # string for a datetime. Validation part off here (LACKS).
    'oslo_serialization.jsonutils.to_primitive':
        'ad9dc05ddcccce4c101dc331c4278bd02a1fb44085eb3ff46f31853355ecef26',
    'oslo_versionedobjects.fields.CoercedCollectionMixin':
        '0ae591d623d5e44250d1400821aac37b75b8301bbb8386bf191817001716ca83',
    # oslo.versionedobjects 3.6.0: no type hints; a dict subclass
    # serialized as the dict it is. Validation part off here (LACKS).
    'oslo_versionedobjects.fields.CoercedDict':
        'd2418c8078f844a19287bbdd830d5735d3b9269acd36c30c0e4af63bf470155a',
    'oslo_versionedobjects.fields.CoercedList':
        '6033dca2016b0115b4a091c62d61a8dbc285be87d86c041c984e575317fa26ed',
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
    # nova 31: no prog argument, no option dump after loading the pipeline;
    # it still runs _setup_service (our start-up check) before
    # deploy.loadapp.
    'nova.api.openstack.wsgi_app.init_application':
        '4f84e75af787554257830da6a5eae59255d647540ba9ec59e26a2ca77d0f17dd',
    'nova.scheduler.request_filter.process_reqspec':
        '89acc372e1768657e77375bb7673b7579459456366036a7351c4d086490ccb78',
    'nova.scheduler.request_filter.trace_request_filter':
        'db797fd822c2717de9ae519c96cac2dab0e81f02a96f0d8acea881f502a67776',
    'nova.objects.request_spec.Destination':
        '69f50cea9ae4dfb06ea3b401bf836ad41d66ab58ea3ac6e365fe6458d1a515e4',
    'nova.scheduler.host_manager.HostManager.get_host_states_by_uuids':
        'cc5b1e372ec2825e8f7ad3da189a551253e3a7cc2d96b78e4918699fc4e40029',
    'nova.scheduler.host_manager.HostManager._get_computes_for_cells':
        '6536d1fdd70d3b326a336b91a2204c20dcdbbba25875f3b17639742b56589f7e',
    'nova.scheduler.utils.resources_from_request_spec':
        '0b62626a3f32c20a294edbdf791de36d5abb3ba596db8820d304250a816daeb0',
}
