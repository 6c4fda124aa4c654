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

"""The renderer's fields against nova's own code for the same data.

Each field the renderer reads from a row's JSON (the network cache's
addresses, the embedded flavor) is compared with what nova's objects and
view make of the same JSON: hypothesis makes the network caches.
Whole bodies are compared with nova's in the differential test
(``tests/functional/test_nova_api.py``).
"""

import fixtures
import hypothesis
from hypothesis import strategies as st
from nova.api.openstack import common
from nova.network import model as network_model
from nova import objects
from oslo_serialization import jsonutils

from nova_cellsched.api.view import render
from tests import base

objects.register_all()

_V4 = st.builds('{}.{}.{}.{}'.format, *[st.integers(0, 255)] * 4)
_V6 = st.builds('2001:db8::{:x}'.format, st.integers(1, 0xffff))
_ADDRESS = st.one_of(_V4, _V6)


def _ip(floating: bool) -> st.SearchStrategy:
    fields = {'address': _ADDRESS}
    optional = {'version': st.sampled_from([4, 6, None]),
                'type': st.sampled_from(['fixed', 'floating', None]),
                'meta': st.just({})}
    if not floating:
        optional['floating_ips'] = st.lists(_ip(True), max_size=2)
    return st.fixed_dictionaries(fields, optional=optional)


_SUBNET = st.fixed_dictionaries(
    {'cidr': st.sampled_from(['10.0.0.0/24', '2001:db8::/64', None])},
    optional={'ips': st.lists(_ip(False), max_size=3)})
_NETWORK = st.fixed_dictionaries(
    {'label': st.sampled_from(['private', 'public', 'tenant'])},
    optional={'subnets': st.lists(_SUBNET, max_size=2),
              'id': st.just('net')})
_VIF = st.fixed_dictionaries(
    {'network': _NETWORK},
    optional={'address': st.sampled_from(['fa:16:3e:00:00:01',
                                          'fa:16:3e:00:00:02']),
              'id': st.just('port')})
NETWORK_INFO = st.lists(_VIF, max_size=4)


def nova_addresses(text, extend=True):
    """What nova's view shows of a network cache's JSON."""
    nw_info = network_model.NetworkInfo.hydrate(text)
    networks = common.get_networks_for_instance_from_nw_info(nw_info)
    return render.addresses_builder().index(None, networks,
                                            extend)['addresses']


class AddressesTest(base.TestCase):
    """``addresses``: nova's ``get_networks_for_instance`` and ips view."""

    @hypothesis.settings(max_examples=150, deadline=None)
    @hypothesis.given(NETWORK_INFO, st.booleans())
    def test_the_same_as_nova(self, vifs, extend):
        text = jsonutils.dumps(vifs)
        self.assertEqual(jsonutils.dumps(nova_addresses(text, extend)),
                         jsonutils.dumps(render.addresses(text, extend)))

    def test_the_parts_check_passes_on_this_nova(self):
        self.assertEqual([], render.addresses_check())

    def test_the_parts_check_names_a_difference(self):
        self.useFixture(fixtures.MockPatchObject(
            render, 'addresses', lambda text, extend=True: {}))
        problems = render.addresses_check()
        self.assertEqual(1, len(problems))
        self.assertIn("shows a network cache's addresses as", problems[0])

    def test_an_empty_cache_has_no_addresses(self):
        self.assertEqual({}, render.addresses('[]'))

    def test_a_null_cache_is_left_to_nova(self):
        self.assertRaises(render.NotRenderable, render.addresses, None)

    def test_a_cache_nova_cannot_read_is_left_to_nova(self):
        for text in ('[{"network": null}]', '[{"address": "x"}]',
                     '[{"network": {"label": "a", "subnets": [{"ips": '
                     '[{"address": "not-an-ip"}]}]}}]'):
            self.assertRaises(render.NotRenderable, render.addresses, text)


class FlavorTest(base.TestCase):
    """The embedded flavor's fields, as nova's Flavor object holds them."""

    def _text(self, **data):
        flavor = objects.Flavor(
            flavorid='42', vcpus=2, memory_mb=2048, root_gb=20,
            ephemeral_gb=0, swap=0, name='m1.small',
            extra_specs={'hw:cpu_policy': 'dedicated', 'a': 'b'}, **data)
        return jsonutils.dumps({'cur': flavor.obj_to_primitive(),
                                'old': None, 'new': None})

    def test_fields_as_nova_reads_them(self):
        found = render._flavor_fields(self._text())
        self.assertEqual(
            {'flavorid': '42', 'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
             'ephemeral_gb': 0, 'swap': 0, 'name': 'm1.small',
             'extra_specs': {'hw:cpu_policy': 'dedicated', 'a': 'b'}},
            found)
        # In the order nova's JSON serializer writes them.
        self.assertEqual(['hw:cpu_policy', 'a'], list(found['extra_specs']))

    def test_no_embedded_flavor_is_left_to_nova(self):
        # nova looks the flavor up by the instance's type id.
        self.assertRaises(render.NotRenderable, render._flavor_fields, None)

    def test_a_flavor_without_a_field_is_left_to_nova(self):
        primitive = jsonutils.loads(self._text())
        del primitive['cur']['nova_object.data']['extra_specs']
        self.assertRaises(render.NotRenderable, render._flavor_fields,
                          jsonutils.dumps(primitive))


class InstanceNameTest(base.TestCase):
    """``OS-EXT-SRV-ATTR:instance_name``: nova's template of the id."""

    def test_the_template_of_the_id(self):
        self.assertEqual('instance-0000002a',
                         render._instance_name({'id': 42}))

    def test_a_template_of_other_fields_is_left_to_nova(self):
        import nova.conf
        conf = nova.conf.CONF
        conf.set_override('instance_name_template', 'vm-%(uuid)s')
        self.addCleanup(conf.clear_override, 'instance_name_template')
        self.assertRaises(render.NotRenderable, render._instance_name,
                          {'id': 42, 'uuid': 'u'})


class LinksTest(base.TestCase):
    """The request's links, as nova's view builders make them."""

    @hypothesis.given(st.one_of(
        st.just(''), st.uuids().map(str),
        st.text(st.characters(blacklist_characters='/',
                              blacklist_categories=('Cs',)))))
    @hypothesis.settings(max_examples=50, deadline=None)
    def test_image_links_are_novas(self, image_id):
        from nova.api.openstack.compute.views import images
        from nova.tests.unit.api.openstack import fakes

        class View(common.ViewBuilder):
            """What the request reads of the servers' view builder."""

            def __init__(self):
                self._image_builder = images.ViewBuilder()

        for path in ('/v2.1/servers/detail',
                     '/v2.1/6f70656e737461636b20342065766572/servers'):
            request = fakes.HTTPRequest.blank(path)
            view = View()
            req = render._Request(view, request, 'servers/detail')
            self.assertEqual(
                view._image_builder._get_bookmark_link(
                    request, common.get_id_from_href(image_id), 'images'),
                req.image_link(common.get_id_from_href(image_id)))
