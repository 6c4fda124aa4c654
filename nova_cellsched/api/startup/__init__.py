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

"""nova-api's start: the filter's parts put into nova, and its checks.

:mod:`.install` checks nova and puts the parts in, :mod:`.service_versions`
is nova-api's start-up check of nova-compute service versions, bounded,
and :mod:`.selftest` the self-test of both listers on a throw-away
database (``nova-cellsched check --selftest``).
"""
