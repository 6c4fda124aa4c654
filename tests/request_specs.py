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

"""nova ``RequestSpec`` objects as the tests need them, built one way.

:func:`request_spec` is what nova-scheduler's filters get for one
request (a new server, a move pinned to or preferring a cell, a
rebuild); :func:`stored_request_spec` is a spec as nova-api stores it at
boot, every field set. Both are nova's real objects.

``benchmarks/bench_api.py`` seeds its ``request_specs`` rows from
:func:`stored_request_spec` too (the benchmarks import from ``tests``,
the package never does), so the spec the benchmark's view reads is the
one the tests check.
"""

import uuid as uuid_lib

from nova import objects

#: ``move`` values: a new server (None), a same-cell move (the conductor
#: pins the cell), a cross-cell resize (the cell only preferred).
MOVES = (None, 'pinned', 'cross')


def request_spec(project_id, *, instance_uuid=None, move=None, cell=None,
                 rebuild=False, **fields):
    """A RequestSpec of *project_id* for the scheduler.

    :param instance_uuid: the server's uuid (default: a new one).
    :param move: one of :data:`MOVES`; with ``'pinned'`` or ``'cross'``
        ``requested_destination`` names *cell* (a ``CellMapping`` or its
        uuid; None for none) and ``allow_cross_cell_move`` is set for
        ``'cross'``.
    :param rebuild: the scheduler hint nova sets for a rebuild.
    :param fields: any other field of the spec.
    :raises ValueError: *move* is none of :data:`MOVES`.
    """
    if move not in MOVES:
        raise ValueError('move: expected one of %r, got %r' % (MOVES, move))
    spec = objects.RequestSpec(
        project_id=project_id,
        instance_uuid=instance_uuid or str(uuid_lib.uuid4()), **fields)
    if move is not None:
        if isinstance(cell, str):
            cell = objects.CellMapping(uuid=cell)
        spec.requested_destination = objects.Destination(
            cell=cell, allow_cross_cell_move=(move == 'cross'))
    if rebuild:
        spec.scheduler_hints = {'_nova_check_type': ['rebuild']}
    return spec


def stored_request_spec(instance_uuid, **fields):
    """A RequestSpec as nova-api stores it at boot; *fields* override."""
    values = dict(
        instance_uuid=instance_uuid, project_id='p', user_id='u',
        availability_zone='az1', num_instances=1, is_bfv=False,
        scheduler_hints={},
        flavor=objects.Flavor(flavorid='1', name='m1.small',
                              memory_mb=2048, vcpus=1, root_gb=20,
                              ephemeral_gb=0, swap=0, extra_specs={}),
        image=objects.ImageMeta.from_dict({'properties': {}}),
        ignore_hosts=None, force_hosts=None, force_nodes=None,
        pci_requests=objects.InstancePCIRequests(requests=[]),
        security_groups=objects.SecurityGroupList(objects=[]))
    values.update(fields)
    return objects.RequestSpec(**values)
