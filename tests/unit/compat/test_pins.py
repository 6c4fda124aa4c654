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

"""A release's pin file from upper-constraints: the pure parts.

(``tests/functional/test_release_pins.py`` runs the command against git
repositories of openstack/requirements.)
"""

import os
import re


from cellsched_tools import pins

from tests import base

SNAPSHOT = pins.Snapshot(
    branch='stable/2027.1', commit='c' * 40, date='2027-03-01',
    text='Routes===2.5.1\n'
         'oslo.db===19.0.0\n'
         'microversion_parse===2.2.0\n'
         "numpy===2.0.0;python_version=='3.9'\n"
         "numpy===2.3.0;python_version>='3.10'\n")

TEMPLATE = """\
# nova 34.x (2026.2 Hibiscus): the old header,
# whatever it said.

nova==34.0.0
openstack-placement==16.0.0

# a section
oslo.db==18.1.0  # upper-constraints says 18.0.0 (see above)
microversion-parse==2.1.0
numpy==2.2.6
"""


class SeriesTest(base.TestCase):

    def test_two_releases_a_year_the_first_slurp(self):
        self.assertEqual(['2025.1', '2025.2', '2026.1', '2026.2', '2027.1'],
                         [pins.series(major) for major in range(31, 36)])
        self.assertEqual('2023.1', pins.series(27))
        self.assertEqual(17, pins.placement_major(35))
        self.assertEqual('2026.1 Gazpacho, SLURP', pins.series_title(33))
        self.assertEqual('2026.2 Hibiscus', pins.series_title(34))
        self.assertEqual('2027.1, SLURP', pins.series_title(35))
        self.assertEqual('2027.2 Juniper', pins.series_title(36, 'Juniper'))


class UpperConstraintsTest(base.TestCase):

    def test_names_as_pip_compares_them_and_this_pythons_pin(self):
        self.assertEqual(
            {'routes': '2.5.1', 'oslo-db': '19.0.0',
             'microversion-parse': '2.2.0', 'numpy': '2.3.0'},
            pins.upper_constraints(SNAPSHOT.text))


class RenderTest(base.TestCase):

    def test_the_templates_libraries_at_upper_constraints_versions(self):
        text, unpinned = pins.render(35, TEMPLATE, SNAPSHOT, '35.0.0',
                                     '17.0.0')
        self.assertEqual([], unpinned)
        header, body = text.split('\n\n', 1)
        self.assertEqual(pins.HEADER.format(
            major=35, series='2027.1, SLURP', nova='35.0.0',
            branch='stable/2027.1', commit='c' * 40, date='2027-03-01'),
            header + '\n')
        # The template's spelling and sections; its comments on a pin
        # were about its own release.
        self.assertEqual('nova==35.0.0\n'
                         'openstack-placement==17.0.0\n'
                         '\n'
                         '# a section\n'
                         'oslo.db==19.0.0\n'
                         'microversion-parse==2.2.0\n'
                         'numpy==2.3.0\n', body)

    def test_a_library_upper_constraints_lacks_says_so(self):
        template = TEMPLATE + 'oslo.gone==1.0.0\n'
        text, unpinned = pins.render(35, template, SNAPSHOT, '35.0.0',
                                     '17.0.0')
        self.assertEqual(['oslo.gone'], unpinned)
        self.assertTrue(text.endswith(
            '# oslo.gone: not in upper-constraints at cccccccccccc (pin it '
            'by hand, saying why, or drop it)\n'))

    def test_the_header_is_each_pin_files(self):
        """Every pin file starts with the header the command writes."""
        for name in sorted(os.listdir(pins.releases_dir())):
            match = re.match(r'^nova(\d+)\.txt$', name)
            if not match:
                continue
            with open(os.path.join(pins.releases_dir(), name)) as handle:
                kept = handle.read()
            where = re.search(r'^# upper-constraints: (\S+) (\S+) '
                              r'\((\S+)\)$', kept, re.M)
            header = pins.HEADER.format(
                major=int(match.group(1)),
                series=pins.series_title(int(match.group(1))),
                nova=re.search(r'^nova==(\S+)$', kept, re.M).group(1),
                branch=where.group(1), commit=where.group(2),
                date=where.group(3))
            self.assertTrue(kept.startswith(header), name)
