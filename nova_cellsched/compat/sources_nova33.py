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

"""The relied-on sources as tested with nova 33.0.2 (2026.1, SLURP).

Printed by ``python -m nova_cellsched.compat.maintainer``; data only.
Each source whose version here is not nova 34.0.0's carries a comment:
what differs and why what its part relies on holds on nova 33 (or
which function of the adapter, :mod:`.nova33`, follows it). The others
are nova 34.0.0's, hash for hash.
"""

RELEASE = '33.0.2'
ADAPTER = 'nova33'

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
    'nova.compute.multi_cell_list.RecordSortContext':
        'be81efd3239e9bb9928f0ccbf157614bfeb35ec881fb1d4439054e77f4c8470c',
    'nova.compute.multi_cell_list.CrossCellLister':
        'bb98fef02972aa1b091e11bdef745fde43b6ae073aed63b5e0ad69f053a48fe6',
    'nova.compute.api.API.get_all':
        '1209ae91eb0365f572d0200dd51451d6905c79fbaf5343e33bb6cd5c8e8824bc',
    # nova 33: each cell's call runs on utils.get_scatter_gather_executor()
    # through utils.spawn_on (34: thread_pool_factory's SCATTER_GATHER pool).
    # Same results (did_not_respond_sentinel, exceptions) and timeout, which
    # is all ours wraps; the self-test finds and stops that pool through
    # nova33.nova_pools/reset_nova_pools.
    'nova.context.scatter_gather_cells':
        'a5d536638d8bcfabc0164d91807caeafcd2c0ebda39d670dd9eea4bc9fd3cdf8',
    'nova.context.target_cell':
        'a4f8c6816f18c80b41af7178eccfdb75e1d31b8ad29f9ac33b53da36bc6eabee',
    'nova.context.set_target_cell':
        '18f55ae53ddd2d252247a888d7048650c13a0ed1450c62ada9b6742ef4da0e85',
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
    # nova 33: passes each list's item class to obj_make_list (34 lets it
    # derive it). The same keys are read, security_groups is still an empty
    # list, never the join: what the lister relies on.
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
    # nova 33: takes item_cls as a required argument (34 derives it from the
    # list's field and deprecates it). Both call item_cls._from_db_object on
    # each dict as given; the plugin never calls it itself.
    'nova.objects.base.obj_make_list':
        'bb498564f165a0d6ff319994c5fbd8a42a37ad23a0c45120a8dcc337bd73c214',
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
    # nova 33: @base.remotable_classmethod (34: @classmethod over
    # @base.remotable) and an explicit item class: the same query, the same
    # objects.
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
    # nova 33: the remotable_classmethod spelling on three single-volume
    # getters the view never calls; fields and _from_db_object unchanged
    # (delete_on_termination a non-nullable boolean).
    'nova.objects.block_device.BlockDeviceMapping':
        '59ef3c90faa90710889a9d6190b5aeeaab7502c95bf2ebcbd77d0491e33f06bc',
    # nova 33: the remotable_classmethod spelling only; one _from_db_object
    # per row, as in 34.
    'nova.objects.request_spec.RequestSpec.get_by_instance_uuids':
        '10cfa05d1d9147b65a1e1f7a824200b2a295acda286fa0bb852b0b3dd72e45f5',
    'nova.objects.request_spec.RequestSpec._get_by_instance_uuids_from_db':
        'e0e85ed322e3de0257b68735255e6f3e82530468c9ee03dc1eda28d33d627d61',
    'nova.objects.request_spec.RequestSpec._from_db_object':
        '209874ca2d06cf7f17266e19e1659b7f300a550a9c98bde5c84c34e27758d33e',
    # nova 33: the remotable_classmethod spelling, and its PCI-in-placement
    # helper does not default requested_resources (scheduler only). VERSION
    # and the availability_zone and scheduler_hints fields are 34's.
    'nova.objects.request_spec.RequestSpec':
        '55205d4c73f8b181cfe81db8492f4d83591787d18a92941ed46d93334abe9b1d',
    'nova.db.api.models.RequestSpec':
        '8a0f14fcca70963832e09711c0d9fa06d9539d6180896379d7072e18c42d038d',
    'nova.objects.instance.InstanceList.fill_faults':
        'cb6597916a6352244cb3ae387c4a9f38993bb78549da695207a2252e99b36a04',
    # nova 33: the remotable_classmethod spelling and an explicit item class;
    # the same query (latest=True), the same objects.
    'nova.objects.instance_fault.InstanceFaultList.get_latest_by_instance_uuids':
        '67c2f8ec9f7680eaa4102a959aaa730dec4a1e0e4153cbc8575900c4b30645c8',
    'nova.db.main.api.instance_fault_get_by_instance_uuids':
        '2f8a830d352dd57435499b5aafc32b51e6ff41afcfe08a4a919db21fb37a6ec2',
    'nova.context.scatter_gather_all_cells':
        '018012d601be01fe39a908718e5f0b25ef05b7ecf8015abcfc0a9486f023e24d',
    'nova.api.openstack.compute.servers.ServersController.index':
        'f46ce1d36e6b273ac4420b1fea822686959cd4292244636d066c3caace9d4fe7',
    'nova.api.openstack.compute.servers.ServersController.detail':
        'df5a51ee907a7af9d0215691bda719b3464de42f1d9b9995e0aee4a48c8a71e1',
    'nova.api.openstack.wsgi.expected_errors':
        '6e63db5cf8ec5d98ae1c891a3220f96532347816759c1766ace96a9495c838b9',
    'nova.api.openstack.wsgi.JSONDictSerializer':
        '9e298b42ca6f8f338afb83c90dea1343b86f29b083499d72f0d0daf4088f4767',
    'nova.api.validation._schema_validation_helper':
        '37285f4c7a960d8e545601a0b853622e0656e768cd4f93f344db33e4d3141686',
    'nova.api.validation.query_schema':
        '612ef7f6dd537be1f3469427785abc822fa077b365b0b1cacc6be30da73ae96f',
    'nova.api.validation.response_body_schema':
        '25d13f3920d7d14d2c8ee6fc090bc2d00c5dc9eb2459be60c4b912ee1707938a',
    'nova.api.validation.validators':
        '55428eb93028b10b2e40667785446ff650bbc87bf7860bf5c9a300ba59591f7d',
    'oslo_serialization.jsonutils.dumps':
        'a9ccb626ab435089c8f0b0d9b8efcd68f9d62893f4a6731d621ecc1a6ee13b1f',
    # oslo.serialization 5.9.1 (2026.1): no netaddr.IPRange and
    # decimal.Decimal branches. The compiler asks it for datetimes only,
    # which both turn into the same string; neither type is in a view.
    'oslo_serialization.jsonutils.to_primitive':
        '0678bbd1ba5d220bd1f54e266a7e55901c79b7c96d489dcead91b4cfda8561f0',
    # oslo.versionedobjects 3.9.0 (2026.1): the same code without type hints
    # and Generic; the compiler matches these classes by identity only.
    'oslo_versionedobjects.fields.CoercedCollectionMixin':
        '0ae591d623d5e44250d1400821aac37b75b8301bbb8386bf191817001716ca83',
    # oslo.versionedobjects 3.9.0: the same code without type hints; a dict
    # subclass that serializes as the dict it is.
    'oslo_versionedobjects.fields.CoercedDict':
        'dfd51f991c1cf58b66dfbd05500110db9acb936cec58bbaba38ed7602356e0d5',
    # oslo.versionedobjects 3.9.0: no __add__ (34 keeps coercing on +) and
    # no type hints; a list subclass that serializes as the list it is, and
    # the views never add to one.
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
    'nova.api.openstack.wsgi_app.init_application':
        '2be4aa7ad82b96693de29fbd3dff016df1b182e9bfdd44fdc719a4487ff4cfcc',
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
