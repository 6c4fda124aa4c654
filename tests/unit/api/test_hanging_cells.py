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

"""Which of nova-api's later cell calls may skip a cell: guard.given_up.

Only the calls of the request whose listing gave up on the cell; never
another request's (a quota count, a server's own page).
"""

import contextvars
import threading

import testtools

from nova_cellsched.api import guard


class GivenUpTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # Each test in a context of its own: nothing leaks between them.
        self.context = contextvars.Context()

    def run_in_context(self, function, *args):
        return self.context.run(function, *args)

    def test_nothing_is_given_up_by_default(self):
        self.assertEqual(frozenset(),
                         self.run_in_context(guard.given_up, 'req-1'))

    def test_the_same_request_skips_what_its_listing_gave_up_on(self):
        self.run_in_context(guard.remember_given_up, 'req-1', ['c3'])
        self.assertEqual(frozenset({'c3'}),
                         self.run_in_context(guard.given_up, 'req-1'))

    def test_another_request_on_the_same_thread_skips_nothing(self):
        """A worker thread serving the next request asks every cell."""
        self.run_in_context(guard.remember_given_up, 'req-1', ['c3'])
        self.assertEqual(frozenset(),
                         self.run_in_context(guard.given_up, 'req-2'))

    def test_a_request_without_an_id_skips_nothing(self):
        self.run_in_context(guard.remember_given_up, None, ['c3'])
        self.assertEqual(frozenset(),
                         self.run_in_context(guard.given_up, None))

    def test_a_later_listing_replaces_what_was_given_up(self):
        self.run_in_context(guard.remember_given_up, 'req-1', ['c3'])
        self.run_in_context(guard.remember_given_up, 'req-1', [])
        self.assertEqual(frozenset(),
                         self.run_in_context(guard.given_up, 'req-1'))

    def test_other_threads_do_not_see_it(self):
        """A request served concurrently by another thread asks c3."""
        self.run_in_context(guard.remember_given_up, 'req-1', ['c3'])
        seen = []
        thread = threading.Thread(
            target=lambda: seen.append(guard.given_up('req-1')))
        thread.start()
        thread.join()
        self.assertEqual([frozenset()], seen)
