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

"""Public path of the scheduler host filter, as written in nova.conf.

``[filter_scheduler] available_filters =
nova_cellsched.filters.ProjectCellFilter`` stays valid; the filter lives
in :mod:`nova_cellsched.scheduler.host_filter`.
"""

import warnings

with warnings.catch_warnings():
    # nova imports futurist, which imports eventlet, whose import warns in
    # 7 lines that eventlet is deprecated: noise for whoever imports the
    # filter (nova-scheduler runs without eventlet since 2026.1). Only
    # that warning, only during this import.
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    from nova_cellsched.scheduler.host_filter import ProjectCellFilter

__all__ = ['ProjectCellFilter']
