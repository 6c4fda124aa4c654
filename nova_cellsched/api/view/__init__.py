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

"""The server list's body: from the cells' rows, keyed by microversion.

:mod:`.render` renders a listed page as nova's view does, field by
field; :mod:`.lookups` runs the view's lookups after the listing (faults,
volumes, security groups...) for what nova's own view renders.
"""
