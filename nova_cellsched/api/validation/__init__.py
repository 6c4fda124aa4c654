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

"""Response validation of the server lists, once per request.

:mod:`.validator` validates ``GET /servers`` and ``/servers/detail`` as
nova does, with nova's schemas compiled to Python
(:mod:`.schema_compiler`) and nova's decorator stack found and rebuilt
(:mod:`.response_stack`).
"""
