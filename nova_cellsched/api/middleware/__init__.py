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

"""What the paste filter adds around a request.

:mod:`.request_state` is what one request's listing leaves for the rest
of it, :mod:`.server_timing` the ``Server-Timing`` header and log line,
:mod:`.policies` who may see them, by nova's policy engine.
"""
