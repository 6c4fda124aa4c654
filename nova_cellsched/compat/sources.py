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

"""The relied-on sources, as tested with each nova release; data only.

One table for every tested release: per relied-on source
(:attr:`.parts.Source.name`), the hash of each tested version of it
(:func:`.hashing.source_hash`) and the releases that have that version
(``'later'``: and every later release, :func:`.core.releases_having`).
A version that is not the newest release's says above it what differs
and why what its part relies on holds there (or which gate of
:mod:`.adapter` follows it, or that its part is off there,
:data:`LACKS`). A new release changes no entry whose version it shares
with the newest release (``'later'``); where it differs, the old
version's run closes at the release before it and a commented hash of
its own is added: ``python -m cellsched_tools.maintainer --table``
writes that.
"""

#: The tested releases, oldest first: the newest point release of each
#: series.
RELEASES: tuple[str, ...] = ('31.3.1', '32.2.1', '33.0.2', '34.0.0')

#: Release -> part -> what that release lacks that the part needs
#: (:func:`.core.lacking`): on a nova whose sources of the part equal
#: only such releases' versions, it stays off and says so at INFO;
#: nova's own behaviour is the tested one.
LACKS: dict[str, dict[str, str]] = {
    '31.3.1': {'validation': (
        'validates no server-list response (ServersController.index and '
        'detail have no response_body_schema before nova 33): nothing to '
        'validate, and nova answers the lists unvalidated as it does '
        'without nova-cellsched')},
    '32.2.1': {'validation': (
        'validates no server-list response (ServersController.index and '
        'detail have no response_body_schema before nova 33): nothing to '
        'validate, and nova answers the lists unvalidated as it does '
        'without nova-cellsched')},
}

#: Source -> {hash of a tested version: the releases that have it}; a
#: list ending with ``'later'`` goes on to the newest release (and a new
#: release with the same version changes nothing here).
HASHES: dict[str, dict[str, tuple[str, ...]]] = {
    'nova.db.main.api.instance_get_all_by_filters_sort': {
        '65e56b40aeb6b9baf6c39feea53e667b1537c97ee071e51771a87a5f4516ab63':
            ('31.3.1', 'later'),
    },
    'nova.compute.instance_list.get_instance_objects_sorted': {
        'a5e04068580215f624534942655fb1d342df6a287108ace5432713ab689647d6':
            ('31.3.1', 'later'),
    },
    'nova.compute.instance_list.get_instances_sorted': {
        '52ebf26d7e805cbfb1057182fb81ed988cab9c5a169cba4996bf0620ad196aee':
            ('31.3.1', 'later'),
    },
    'nova.compute.instance_list.InstanceSortContext': {
        'c3abb2cc9d4b9a78e51c2106bf5c0f29f2107271dfe5679e8165823b09fb2f0f':
            ('31.3.1', 'later'),
    },
    'nova.compute.instance_list.InstanceLister': {
        '40eeefbd99aa1fbaf0c1a8eac21b7aa2ac3faf8a508014e7dc2bf9c41d1e559d':
            ('31.3.1', 'later'),
    },
    'nova.compute.multi_cell_list.RecordSortContext': {
        # nova 31, 32: no start_time/timeout_expired (34 times out a cell's
        # record stream after CELL_TIMEOUT). Sort keys and directions kept as
        # given, which is all ours reads; ours bounds each cell's time itself.
        '3940d5c59b8c0a3fecebe568b992945ae6be565853a2e41e5bf30fce18f2e58f':
            ('31.3.1', '32.2.1'),
        '2e8f1cb6a0c872fde89cca8e33d86b67a08f7bc7ebfcaeeb248a660d7194a431':
            ('33.0.2', 'later'),
    },
    'nova.compute.multi_cell_list.CrossCellLister': {
        # nova 31, 32: query_wrapper is a module function without the per-
        # record timeout. Down cells, their error and the cells_* properties
        # nova's callers read are 34's: what ours repeats.
        '346808679e16dbe9b66041a0f84bf0d3c29cce516867577d2b962b6ff2c2d778':
            ('31.3.1', '32.2.1'),
        '793483c7609d2c8e5cd8f59c826a4a70b48e952165beb49367c303f4d60841d7':
            ('33.0.2', 'later'),
    },
    'nova.compute.api.API.get_all': {
        'aa2bdc1d7cef0117b57f26adcacc9aafe4de643f601d5c1a956ef7e3d8a8f6ef':
            ('31.3.1', 'later'),
    },
    'nova.context.scatter_gather_cells': {
        # nova 31: one eventlet green thread per cell and an eventlet Timeout
        # (no executor, no threading mode). Same results: each cell's answer,
        # did_not_respond_sentinel or the exception, which is all ours wraps.
        '145b9a57a6f09fa10c858d5501ae8e97fd491ce45a766faf7bdaf4db5ec65404':
            ('31.3.1',),
        # nova 33: each cell's call runs on utils.get_scatter_gather_executor()
        # through utils.spawn_on (34: thread_pool_factory's SCATTER_GATHER
        # pool). Same results (did_not_respond_sentinel, exceptions) and
        # timeout, which is all ours wraps; the self-test finds and stops that
        # pool through adapter.nova_pools and reset_nova_pools.
        'ac302f971b1a6ce7e1fac221c97eaa960246218bb54fdc46b43229b1b7e105f2':
            ('32.2.1', '33.0.2'),
        'da46ec3419b451227fff47efbcdb23e8b3f23b12b1f55ff11821ab12bce2934b':
            ('34.0.0', 'later'),
    },
    'nova.context.target_cell': {
        'f587809359554e0bda331e01bd864c11ae03ea6c70c6d53f2e6e5da7b18d1ba8':
            ('31.3.1', 'later'),
    },
    'nova.context.set_target_cell': {
        # nova 31, 32: a `global CELL_CACHE` statement only; CELL_CACHE is kept
        # as in 34.
        '233a27d5abf250b63ac5b621b637270e755a135edd4c568949fdc563d8e6456a':
            ('31.3.1', '32.2.1'),
        'f604d79c5608d181d8a06cd0c490c5370cf3c5373ac040788a6eda94b48fd68c':
            ('33.0.2', 'later'),
    },
    'nova.context.load_cells': {
        '3cef825e36ee688b6d77438a4ebb41154aecfc806109d97031eab1f9caaccbfe':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._instances_fill_metadata': {
        '59e6d9948800e808c098379f13e48232f4a536a2e812e3b8370fc3b9454d43b2':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._manual_join_columns': {
        '685ee4690bdc6a2fb88b5fb26cce26f4290159f6cd975e9b3461ab0b76e97fa0':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._instance_metadata_get_multi': {
        'c777ab77f79b7117d60cff6c98a4e19fd20a7020a7fbebcb7988c350523fa82a':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._instance_system_metadata_get_multi': {
        'f92b65e1d203b1ced4cb836611823a7a8e0afa44c4b898660e3e7403298521d9':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._exact_instance_filter': {
        '969c24f5201f5b9d747cecec4acf48115a2489459f52815659bd9466845237da':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._regex_instance_filter': {
        # nova 31, 32: the regexp operator from db.main.api._get_regexp_ops
        # (34: db.utils.get_regexp_ops, the same function; records.query looks
        # up either) and u'' literals: the same filters.
        'de976a4214097763b5e72c3c0779042ffa8a8b67b01eab330ba9abae173d2d7d':
            ('31.3.1', '32.2.1'),
        'e5272556bd7bb62965df02c935cd3d35039e0295b9d07626d2cb71f2b86937dd':
            ('33.0.2', 'later'),
    },
    'nova.db.main.api.instance_get_by_uuid': {
        '04c2f427d1b53f89da0f09486fd76081bb2f10b091d438192af9988a299b0efc':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._instance_get_by_uuid': {
        '1ac6765c28161a1928471500aed0017c6c383c36109bcc3ccf7997738b066bf8':
            ('31.3.1', 'later'),
    },
    'nova.db.utils.process_sort_params': {
        '2362dca6aea031ed20813928dc19675dab96e5b28d2f72d67b089a2b358b6ef6':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.Instance': {
        '56f7562c1009e0b5d21626bdbc3e4a74516ea75576f33b640da93cb1c1300036':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.InstanceExtra': {
        '11ad24d31aa7cb193fdc09f5f82a72f25f27bf2e492f85d8f862984c62682a9f':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.InstanceInfoCache': {
        '8a5070e0addf77f78350a50f6e06c37f60e0845ea14f78d27797cc3c292649ae':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.Tag': {
        'ca3fd6f50102b0cdec641a6fe0fa8811207b1d35409d78ec2c88dd13e36e30a4':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.Service': {
        'be5ca5c82d9e5ccc3699c86056cdab7773589b0ef8627d279a43a0c102b49460':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.InstanceMetadata': {
        'bd6d12b29497652b477464b35e9755fc7b960d5dfddef39a9e18e86f36390260':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.InstanceSystemMetadata': {
        '69ababa9ac19bc4e74fe81e07a031531659d43bd021a51fd10f11af50dd585cf':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance._expected_cols': {
        'ba3e423831d5bf9e9117a9a05595a49da2b74c2454b5fde8054c078dcb752859':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance._INSTANCE_OPTIONAL_JOINED_FIELDS': {
        '1b83dbabcba7f962ae3a26280aa50e51fe9557b8b21fb1baa838d3828b460b59':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance._INSTANCE_EXTRA_FIELDS': {
        '8932407740cf5a1e40eba9a454ee5acaef119dc2ae79e42d84505651357e9e4f':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance._make_instance_list': {
        '4c914eb8f90dffde90d6b5da1fba16dccf0d98f7acc015be4a840f03d40c2f18':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance.Instance._from_db_object': {
        # nova 33: passes each list's item class to obj_make_list (34 lets it
        # derive it). The same keys are read, security_groups is still an empty
        # list, never the join: what the lister relies on.
        'bf05c118192db29e9f0bc0f1d223ec21dccbfb8e627fb33248d3af36117031f9':
            ('31.3.1', '32.2.1', '33.0.2'),
        'c9aed20ea55656c93d13256b4a557f6d484aa4a531c01f66bfd86e72c5c94e4e':
            ('34.0.0', 'later'),
    },
    'nova.objects.instance.Instance._extra_attributes_from_db_object': {
        '50950f57d5abab03300211dbfc3f82cebeaee5454e4bdeb401a9173d26481655':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance_info_cache.InstanceInfoCache._from_db_object': {
        '2b8b435cd276e6f32f1d2a4d00ea0218ab96c645952228f8acb15b28ccc3a5de':
            ('31.3.1', 'later'),
    },
    'nova.objects.tag.Tag._from_db_object': {
        '7eb87f51109c03ad445d2d5dc967e51ce48d5b7a5d192daa99fe8941023dea70':
            ('31.3.1', 'later'),
    },
    'nova.objects.service.Service._from_db_object': {
        'dcb7cf4283fb03806c798382b661de6cabcf61ccbe9769f433ff18e2b539519f':
            ('31.3.1', 'later'),
    },
    'nova.utils.instance_meta': {
        'e7b0f045d4d137604bd5b75153809baabfc5d3c080b1953ba24d2d660ccf35bb':
            ('31.3.1', 'later'),
    },
    'nova.utils.instance_sys_meta': {
        '4db787143d646859b9bf701b3db353efae433235cc3ded069c8b8d05c54bd658':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder.index': {
        '1f6ff88f77576632c736c1425199c383fb7630adad8488ab0b21de9c39618750':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder.detail': {
        # nova 31: is_supported(..., min_version=...) spelled with the keyword;
        # still calls _get_instance_bdms_in_multiple_cells and passes its
        # answer to the view.
        '61974a1a1dc7df77ab7832d31eaae969c50fd1b7d976c3e960286a257252df36':
            ('31.3.1',),
        '312e7f3717c2804fd05d7a58900de377364bdcc76871287bd0f159add7f9e238':
            ('32.2.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_instance_bdms_in_multiple_cells': {  # noqa: E501
        '93d67314634333fa660aaa0caa4b6faefb062aba90501f41b43cd521fe83cf62':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._add_volumes_attachments': {  # noqa: E501
        # nova 31, 32: takes add_delete_on_termination instead of the request;
        # reads a mapping's volume_id and delete_on_termination by key, as in
        # 34.
        'a0bcce2dcd5a6f3abdf832f9e99d5e1783656b78b694369591700951e18ac09f':
            ('31.3.1', '32.2.1'),
        '28ff45acb090eb2424246c62b2626cb4b2c2449bce1585694768dbc8b28fa24d':
            ('33.0.2', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_pinned_az': {
        '3496e9839fb2d042eaac61b5286aaaf74a7051ddfcb554216cb129df2683e1bb':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_scheduler_hints': {  # noqa: E501
        '697dbd8dfb0531d72a58941b576fa2c7b164b5040ff24eed2669180066b37e2c':
            ('31.3.1', 'later'),
    },
    'nova.objects.block_device.BlockDeviceMappingList.bdms_by_instance_uuid': {
        'e10c292a07b3ad60978aba25f4dc1c1d00ca17e457dea9449829a8b5f6d8efae':
            ('31.3.1', 'later'),
    },
    'nova.objects.block_device.BlockDeviceMappingList.get_by_instance_uuids': {
        # nova 33: @base.remotable_classmethod (34: @classmethod over
        # @base.remotable) and an explicit item class: the same query, the same
        # objects.
        '09796b6a6e07fea4490271274cdf27a2941a09b900dcd3bb4a9617959271c96a':
            ('31.3.1', '32.2.1', '33.0.2'),
        'd08cda43d9fb0939c7079c1e35b7417864c8dbebb1c99b840ba1d6e2d581e75b':
            ('34.0.0', 'later'),
    },
    'nova.objects.block_device.BlockDeviceMapping._from_db_object': {
        '4a505e0bb7ef833f43b98821629bc1d5b7600e398d1033de68dbc15d71d8b501':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api.block_device_mapping_get_all_by_instance_uuids': {
        '98a04a9c3e79927c8b0e76c858c253524f5f19862e5ac381db4e606734c3d5fe':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api._block_device_mapping_get_query': {
        'd0f31e238e57feab72223663346f7bf21555bf3b224191fe3ea7204270c1f1e4':
            ('31.3.1', 'later'),
    },
    'nova.db.main.models.BlockDeviceMapping': {
        'aaaa188c892cbce6f40867de7aaab7512092d5c5f2b53874ba858fbdafe9a357':
            ('31.3.1', 'later'),
    },
    'nova.objects.block_device.BlockDeviceMapping': {
        # nova 31, 32: no is_multiattach property, the remotable_classmethod
        # spelling, another import name; fields and _from_db_object unchanged
        # (delete_on_termination a non-nullable boolean).
        '39a40033550361eea6619654b2eba55b4e3d8140556a932ca1e8677a6ed1c521':
            ('31.3.1', '32.2.1'),
        # nova 33: the remotable_classmethod spelling on three single-volume
        # getters the view never calls; fields and _from_db_object unchanged
        # (delete_on_termination a non-nullable boolean).
        'b92723de09955b681a82676caaefe7a6b9f552bfdec5b883d83e54e33366f28e':
            ('33.0.2',),
        '5e916245bcaa0a5fc3f9dd5b742f91c9df57533299811cffb118e8f8c9f8168a':
            ('34.0.0', 'later'),
    },
    'nova.objects.request_spec.RequestSpec.get_by_instance_uuids': {
        # nova 33: the remotable_classmethod spelling only; one _from_db_object
        # per row, as in 34.
        '8f1904efa83cb683882cc92bda8667346bc6fde13d5db1903539a59e87b887f2':
            ('31.3.1', '32.2.1', '33.0.2'),
        '84dc1204df4014ce50e6cc0aabc7a7fb2741c249c20a4c4f31640bde06f6bc95':
            ('34.0.0', 'later'),
    },
    'nova.objects.request_spec.RequestSpec._get_by_instance_uuids_from_db': {
        '7f3b71c60a9377b5c7ca603364851d33420828f277f8c4c88df5c4a73b860ab6':
            ('31.3.1', 'later'),
    },
    'nova.objects.request_spec.RequestSpec._from_db_object': {
        '9147b4a04f574a6b16a1bc2419f325705f4644fe933890b9372cef5b2c76a22d':
            ('31.3.1', 'later'),
    },
    'nova.objects.request_spec.RequestSpec': {
        # nova 31, 32: typing.Dict/Set hints, the remotable_classmethod
        # spelling, the PCI-in-placement helper without the requested_resources
        # default (scheduler only). VERSION, availability_zone, scheduler_hints
        # as 34.
        '4d465433dac42c3abe0737e83c554afe24b4e8501d4f24aafa4cb16d7f422fa4':
            ('31.3.1', '32.2.1'),
        # nova 33: the remotable_classmethod spelling, and its PCI-in-placement
        # helper does not default requested_resources (scheduler only). VERSION
        # and the availability_zone and scheduler_hints fields are 34's.
        'a296b93c630d9dc499303db77d40c46f88d87a5f191fce22671f1c8862a6724f':
            ('33.0.2',),
        'cdda2d7cc82a5f801c3d76823a9180fabef617a2f26a1750bf0c0464db95b744':
            ('34.0.0', 'later'),
    },
    'nova.db.api.models.RequestSpec': {
        '897f6135786505651a1476679754b9352e3c865d561ebd47cc0bc3897efcb7cf':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance.InstanceList.fill_faults': {
        # nova 31, 32: one InstanceFaultList query through the list's own
        # context, not every cell (nova asks every cell from 33 on). Different
        # behaviour: api.view.fill_faults calls nova's own (nothing to narrow).
        '03c3d50af608bd4416060fdf7c7bc8c1034a91a998a269b815c5074d953d5f7d':
            ('31.3.1', '32.2.1'),
        '29eeb25c250421e2102137828f595b40ded2190c3f59c6ed206e8223f7069cda':
            ('33.0.2', 'later'),
    },
    'nova.objects.instance_fault.InstanceFaultList.get_latest_by_instance_uuids': {  # noqa: E501
        # nova 33: the remotable_classmethod spelling and an explicit item
        # class; the same query (latest=True), the same objects.
        '21760d14e6e8ac42dd8721429629046abb3026ae3e717cb3d8b2ab3ffd03bd8b':
            ('31.3.1', '32.2.1', '33.0.2'),
        'f5a94909d404554cbb1acc009a0f0d04e05b7afcaa34200337d6d7d5abbab37a':
            ('34.0.0', 'later'),
    },
    'nova.db.main.api.instance_fault_get_by_instance_uuids': {
        '9919dfed716cc029fe21f5f5a89f9a32df4d4adc1be5537c720058afedb3de70':
            ('31.3.1', 'later'),
    },
    'nova.context.scatter_gather_all_cells': {
        '5500c7fac7ea81a7a8c2f2fec2cc5f3a60225a06effeaed248cf794f042a8826':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.servers.ServersController._get_servers': {
        # nova 31: is_supported(..., min_version=...) spelled with the keyword;
        # the same path from get_all to fill_faults and the view.
        '13bac8d52c15f5614be0572317bc08989d065cabde73b255587e6c4f33ae78f4':
            ('31.3.1',),
        '3fe7f5f13e7f1d91af9ce5601dd8f33288ce529f3d465e7ef028ab451731503e':
            ('32.2.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder.show': {
        # nova 31: the detail body's keys in the old order (id first), gated in
        # api.render (_Gates.old_key_order); the same fields.
        '5c33ca512713d314a27962c3b257a88e29a28f67272b88f1f37a8800035d2ff4':
            ('31.3.1',),
        # nova 32: the detail body's keys in the old order (id first), gated in
        # api.render (_Gates.old_key_order); the same fields.
        'e162b83ddbcfb4c8f27926b87a2c048553a0a9f0a1928c068da75bd7e6539e22':
            ('32.2.1',),
        '70ccb10b6cd967e8316e5618bd9c185ccf4c7eaa508f000ea12c9a6ce45aeed1':
            ('33.0.2', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder.basic': {
        '13c19885d2aa2ccec5222751cc4f5393580aabaeaaa33b02438c7d2c0fb43836':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_addresses': {
        # nova 31: the addresses builder is views.addresses' (the same class as
        # 32's views.ips; api.render.addresses_check checks what it shows).
        '94ebd1de916f3b76bd194f7ab02dcb5b6cafd7e82c5fd669da9f97a944670eb2':
            ('31.3.1',),
        '6da043ed7441f9a331a2deb47953a6b3298c26621e9d8ab5e87dce9ca8a34d1c':
            ('32.2.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_flavor': {
        # nova 31: is_supported(..., min_version=...) spelled with the keyword.
        'ef74a4b062b6df7e218e3af4f3388402b453e7d16838524ef3fbdf5364e70d9c':
            ('31.3.1',),
        'fc1897de264bf5608c321c48b6c432b70058d5fa934ab92dc94cf99dac2ee1dc':
            ('32.2.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_flavor_dict': {
        'b284feb52875921bb2e1eb6694f41ca7452ff40c72ba4581e95ce91a02ca0aa4':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_image': {
        # nova 31: at 2.98 every image_* system metadata key, unfiltered, gated
        # in api.render (_Gates.all_image_properties).
        'd1520a795edfcfb57301e17bded604c926fca280dfedd4c97fd2e9c4ff451040':
            ('31.3.1',),
        '551eab5f9e0764b58716cffe5801df9efd76b0b3479ce334d64ac6e0b100c7cc':
            ('32.2.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_metadata': {
        'ec9e6ffe6e83e6f16dc0673b433a031f8d58214706b15279063643f487b0e1e3':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_vm_status': {
        'b2628a5cb63274715ed01e6387a6ed0c405da55f4ea316629a4e62c7453d30b9':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_host_id': {
        '77461c00eddc5dc45ba9d63b90a8a217e09128a789f2968c2b95967f988620d3':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._get_fault': {
        '9ace1c380b0a2324b805f93014122fc3d783d4c0967826f0152b8dde7e57a959':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._add_host_status': {
        '8655d09c892993ebe286d5f55250467a5a619b65de254e8df65d3787d31cf5f6':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.views.servers.ViewBuilder._add_security_grps': {  # noqa: E501
        # nova 31, 32: a create_request branch for POST; the list's branch
        # reads only the server dicts, as in 34.
        'ee8c10be3fc8e83fb462d886679acc9e691519d877ec03d5b402812716dac22a':
            ('31.3.1', '32.2.1'),
        '40bd39639809894d11e6c3ffa4b084495924622cebed3cf26fea4914f7472a33':
            ('33.0.2', 'later'),
    },
    'nova.api.openstack.common.ViewBuilder': {
        'e2de69db234240f6512f0bf37cb0227fddeb44dd4ef9462d6f8787ce0e48dcc8':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.common.url_join': {
        'a29511137cd4d0fbb57198e9d251a5914009c8877a945df603bfaf11b72322f5':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.common.get_networks_for_instance_from_nw_info': {
        '3525a5dec6d2fded0a08f6eaf1c19cee08ff6bf17fa594177e59ac94c456667e':
            ('31.3.1', 'later'),
    },
    'nova.network.model.IP': {
        '6c512ba99876d18b8d314df9da0e7b0ca02ebe603533d593b3bfe3c547636872':
            ('31.3.1', 'later'),
    },
    'nova.network.model.FixedIP': {
        '4a29229d066bdbe5c6aa846926763b7751cb90cd088de639d5213e3eaa59a217':
            ('31.3.1', 'later'),
    },
    'nova.network.model.NetworkInfo': {
        # nova 31: one more method (live migration plug-time events); hydrate
        # as in 34.
        'b66db56ea5cbdca53d234b260473b44c83266486dada476355a13009ca7676b6':
            ('31.3.1',),
        'e0dcf353dd8076821f5aa47bfbb57c59b4f31bdec1c362a50b86b91ff6268e56':
            ('32.2.1', 'later'),
    },
    'nova.network.model.VIF': {
        # nova 31: one more property (live migration plug-time event); its
        # address and network as in 34.
        'd91d7600310481d84ae17c7afc0c4923d304e2457d81a39e6671b1a5aed47b71':
            ('31.3.1',),
        'eaeb4c325672786e46078b6dcbfa6aa064aef99c00f6395579bef56217219389':
            ('32.2.1', 'later'),
    },
    'nova.network.model.Network': {
        '7109cf4edb9d9159f652000b27910e35d5af9cf92017c3162326e5ae62f7587a':
            ('31.3.1', 'later'),
    },
    'nova.network.model.Subnet': {
        '5ffdaeb204f95219e6840d59cdf716dc018b5c7ff6747392062565656f0ca916':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance.Instance._flavor_from_db': {
        '8b3712a422675ef1a78e33c0485ae8ca647c634f825322e139837298a08d30fc':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance.Instance.get_network_info': {
        '4e4454538a6c57c6b2c22671e4268e9de5264cb685fd069b1fc20ab47769128e':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance.Instance.name.fget': {
        '994343c9d95c42579f01ff1e45e3f01de44beb3842044c44ca5f22a61b98a5ed':
            ('31.3.1', 'later'),
    },
    'nova.objects.instance.Instance._load_trusted_certs': {
        '5d54a465041eb662bd207fd3bc1a6c670484169c88cfea335e1628bb361bcb59':
            ('31.3.1', 'later'),
    },
    'nova.compute.api.API.get_instances_host_statuses': {
        '3f77a1ebd47b832b6fb2456665608821afe1752fd60eba58dd8e299377d28c1b':
            ('31.3.1', 'later'),
    },
    'nova.compute.api.API.get_instance_host_status': {
        '5549645b8c2366a539aa33a917d3fabad7c84de138efce26df6e97390390ae17':
            ('31.3.1', 'later'),
    },
    'nova.availability_zones.get_instance_availability_zone': {
        'd54170fd454ae9e57219a4a487d1b9d04c4da429d5c9820c10118579734cced5':
            ('31.3.1', 'later'),
    },
    'nova.utils.generate_hostid': {
        '164e8cedd4a107ce62ffb2157291ddc85d127471b17aba97a96b94d6b88fbb15':
            ('31.3.1', 'later'),
    },
    'nova.utils.isotime': {
        '0d2c3b4279fd04d992a346a5c747d50c94610cedf4676d5756f85335100343ff':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.compute.servers.ServersController.index': {
        # nova 31, 32: no response_body_schema on the server lists (query
        # schemas only, other names): the validation part lacks what it needs
        # (LACKS).
        '611d67bbdf78a194a91cf6a10acff1bb99e69512fc81c72d3451612bc6f36c6b':
            ('31.3.1', '32.2.1'),
        '1742579ada35f3e1c732561c0e647e60a1948e2d28a3456912d4d441db42e7a4':
            ('33.0.2', 'later'),
    },
    'nova.api.openstack.compute.servers.ServersController.detail': {
        # nova 31, 32: no response_body_schema on the server lists (query
        # schemas only, other names): the validation part lacks what it needs
        # (LACKS).
        '9911e7e969a6697b5305fa9c3cf9fa17f92061312eafcb8220b1c5521db405f8':
            ('31.3.1', '32.2.1'),
        'c3ed549886b0326370e4100d951f77b372dfef3fc68d13d3b0f28a2039e925ce':
            ('33.0.2', 'later'),
    },
    'nova.api.openstack.wsgi.expected_errors': {
        # nova 31: typing.Union/Optional hints, api_version module alias; the
        # same decorator. Recorded for the validation part, off here (LACKS).
        '4462fd660bf3dda8773fda86162910b6bd846a2d894fd143d3128de3105c1b12':
            ('31.3.1',),
        # nova 32: typing.Union/Optional hints only; the same decorator.
        # Recorded for the validation part, off here (LACKS).
        '6806c99d19a4aa75684d487e055b9522893ae70da292c589704cb3145fb10230':
            ('32.2.1',),
        '8cdb2638c3bbe7dc5356f99c1bbb7aed72e840dca965e12869629fc15784f964':
            ('33.0.2', 'later'),
    },
    'nova.api.openstack.wsgi.JSONDictSerializer': {
        '288620d5f7314b55b9d99292851503b4950ed2a5a53c6b82402332b94261e136':
            ('31.3.1', 'later'),
    },
    'nova.api.validation._schema_validation_helper': {
        # nova 31: no relax_additional_properties (legacy v2 decides). Recorded
        # for the validation part, off here (LACKS).
        '8fbb59773e9f8fc57a4a19c31d4df1f721bde68721b9a5572b03d9c919fd1759':
            ('31.3.1',),
        '8d760eae85f6a4fc9cfb983dd08c0c769de00a4aafb75122984b57feea8eee66':
            ('32.2.1', 'later'),
    },
    'nova.api.validation.query_schema': {
        # nova 31: stores one _query_schema, not a Schemas list. Recorded for
        # the validation part, off here (LACKS).
        '5b8712494b3ed1a6c93405518d2580755ac592720154159eebf6266b75c12cf3':
            ('31.3.1',),
        # nova 32: sets request_query_schemas directly, no 2.102 assertion.
        # Recorded for the validation part, off here (LACKS).
        '07ec399435b1d6c8d802e680b2d3d30f12f46f9d4f1eacfc46d76a9c3a782f46':
            ('32.2.1',),
        '708bf6ce0641a9c495a410a7b702550d620cdc5cedfef6fe3582046512f45a80':
            ('33.0.2', 'later'),
    },
    'nova.api.validation.response_body_schema': {
        # nova 31: stores one _response_schema, not a Schemas list; unused on
        # the server lists. Recorded for the validation part, off here (LACKS).
        '7396f24fbbc7fa1923b03bfec80b678179c1bcbb28146c8826e9f1650c84e97b':
            ('31.3.1',),
        # nova 32: typing hints, sets response_body_schemas directly; unused on
        # the server lists. Validation part off here (LACKS).
        '46f90bb9265b0695d4d409886cb66a1c6e322036f914efc308608e8df3229cde':
            ('32.2.1',),
        '9f660f44a3fbc53c1d8222671693c68601ddc5fa8f28b1c727acd903a0dbb0dc':
            ('33.0.2', 'later'),
    },
    'nova.api.validation.validators': {
        # nova 31: format checks without the non-string guard, older soft
        # additionalProperties. Recorded for the validation part, off here
        # (LACKS).
        '4dede858a3001b83b28b242fd34b84dc128de13ee73a6a52acd58f367ca7e9b8':
            ('31.3.1',),
        # nova 32: the older soft additionalProperties (no oneOf hack).
        # Recorded for the validation part, off here (LACKS).
        'fefd96ce0c19087ed7012409c5b817c65ecc34100da53c3e2a29cbe1699c196d':
            ('32.2.1',),
        '148c5598fe531cbc84a5b5ebb50d011947627176d3d90dcccf20d4e953dda6c8':
            ('33.0.2', 'later'),
    },
    'nova.utils.raise_if_old_compute': {
        '122e06b93202052dbc364c166d8732196568e4a90c4ecb3461652f02a817e4c2':
            ('31.3.1', 'later'),
    },
    'nova.objects.service.get_minimum_version_all_cells': {
        '71c64038fb71f7f81b650c81c5728b69816eef2c26e0a2bb862edf580247d8e3':
            ('31.3.1', 'later'),
    },
    'nova.objects.service.Service._db_service_get_minimum_version': {
        '95fcce273f41c39e01911190c482acddd97546a4fb7cf85a237387ec12182c95':
            ('31.3.1', 'later'),
    },
    'nova.db.main.api.service_get_minimum_version': {
        '4ce546369624675cbc265e20cf78fa1c67332fe0152bace12df499b34caa1721':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.wsgi_app._setup_service': {
        '9c7339034632251517b9d23501696bb6e8c3e99ac6b4f6213583c84e90c01afd':
            ('31.3.1', 'later'),
    },
    'nova.api.openstack.wsgi_app.init_application': {
        # nova 31, 32: no prog argument, no option dump after loading the
        # pipeline; it still runs _setup_service (our start-up check) before
        # deploy.loadapp.
        'ae0c22cae784c9c133d9c1d69cad54c5ece498a7d30460398b182ec80edbe884':
            ('31.3.1', '32.2.1'),
        '4a849ba397d8519f78b483279bd082cbfc45af36bf5fb475c213e51f0262060d':
            ('33.0.2', 'later'),
    },
    'nova.scheduler.request_filter.process_reqspec': {
        'dea7e0a7293e65bb5e2afed0b6cb78554e30027274de446296c25621aa873791':
            ('31.3.1', 'later'),
    },
    'nova.scheduler.request_filter.trace_request_filter': {
        'a12106743c9b9d3b7b7cf3a270ae40f102654d77040227f3bbb751b8a15edb52':
            ('31.3.1', 'later'),
    },
    'nova.objects.request_spec.Destination': {
        '0c9fd5ad75c427a55f65e303c7c8232c28f70598b9601415431a4f6e1ce58fb4':
            ('31.3.1', 'later'),
    },
    'nova.scheduler.host_manager.HostManager.get_host_states_by_uuids': {
        'b380becf2119beff869f324317d48454bd8215465f3f19288ef8540165ecd356':
            ('31.3.1', 'later'),
    },
    'nova.scheduler.host_manager.HostManager._get_computes_for_cells': {
        '72ad797b5c12307815a92cbc72a463af54f6d4e61845928e1453da574d48fd0a':
            ('31.3.1', 'later'),
    },
    'nova.scheduler.utils.resources_from_request_spec': {
        '288bf56d35df668677faad8d4adeffb37567b7e1995c8db05070027799aee1ca':
            ('31.3.1', 'later'),
    },
}
