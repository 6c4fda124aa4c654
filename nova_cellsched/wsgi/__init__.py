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

"""WSGI entry points: nova's applications, made the way nova-cellsched needs.

Each module builds its application when imported, as nova's own
``nova.wsgi`` modules do, so that uwsgi (``module =``) and mod_wsgi
(``WSGIScriptAlias`` to a script that imports it) load it alike.
"""
