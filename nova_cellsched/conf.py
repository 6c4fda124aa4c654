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

"""Configuration options of nova-cellsched: the ``[cellsched]`` group.

Every option lives here, registered on an explicit ``ConfigOpts`` by
:func:`register_opts`, and listed for ``oslo-config-generator`` by
:func:`list_opts` (entry point ``oslo.config.opts = nova_cellsched``).

The two scheduling options are also read from CERN's cells v1 group
``[cells]`` as deprecated aliases, so a nova.conf written for the original
``TargetCellProjectFilter`` keeps working unchanged.
"""

import copy

from oslo_config import cfg

GROUP_NAME = 'cellsched'

cellsched_group = cfg.OptGroup(
    GROUP_NAME,
    title='Project-to-cell scheduling and cross-cell listing',
    help="""
Options of the nova-cellsched plugin.

``ProjectCellFilter`` (enabled in ``[filter_scheduler] enabled_filters``)
sends the new servers of each project to the cells named for it here, and
keeps new servers out of cells named nowhere. The ``list_*`` options tune
``nova-cellsched list``, the parallel cross-cell instance lister, and
the ``api_*`` options its use by nova-api (the ``cellsched`` paste
filter).
""")

scheduling_opts = [
    cfg.ListOpt(
        'cells_default',
        default=[],
        mutable=True,
        deprecated_group='cells',
        help="""
Cells that receive the new servers of every project not named in
``[cellsched] cells_projects``.

A cell is named by its cell mapping name (as shown by ``nova-manage cell_v2
list_cells``) or by its uuid. Cell names are not unique in nova: a name that
matches several cell mappings is ignored and reported, so name such cells by
uuid. A cell named in neither ``cells_default`` nor ``cells_projects`` is
disabled for new servers: servers already in it keep working (reboot,
resize, migrate, evacuate, delete stay in their cell), but nothing new is
scheduled there.

When both options are empty the filter lets every host pass, so installing
the plugin without configuring it changes nothing.

This option is mutable: a SIGHUP to nova-scheduler applies a new value to
the next scheduling request. A malformed new value is rejected with an
error in the log and the last good value stays in force.

Possible values:

* An empty list (default): unmapped projects are not restricted when
  ``cells_projects`` is empty too, and get no host otherwise.
* A comma separated list of cell names or uuids, for example
  ``cell1,cell2`` or ``cell1,4cf0a6c4-1d5e-4e4a-9a6c-0a1ecf7d7b14``.

Related options:

* ``[cellsched] cells_projects``
* ``[filter_scheduler] enabled_filters``: must contain ``ProjectCellFilter``.
"""),
    cfg.StrOpt(
        'cells_projects',
        default='',
        mutable=True,
        deprecated_group='cells',
        help="""
Cells dedicated to projects, as ``cell:project;project,cell:project``.

Each comma separated pair names one cell (by cell mapping name or uuid)
and, after a colon, the semicolon separated ids of the projects whose new
servers go to that cell. A project may be listed under several cells; its
new servers then go to any of them. A project named here never uses the
``[cellsched] cells_default`` cells, and a project whose cells are all
unknown gets no host rather than falling back to the default cells.

The value is checked strictly: a pair without a colon, an empty cell or
project, or a project id containing whitespace or a colon is an error
that quotes the bad part. At scheduler start the error stops the filter
from loading; on a SIGHUP reload the last good value is kept and the error
is logged. Project ids that look like uuids match with or without dashes.

This option is mutable: a SIGHUP to nova-scheduler applies a new value to
the next scheduling request.

Possible values:

* An empty string (default): no project has dedicated cells.
* ``cellE:0d5e63a0e3e84e1e9d4f7e06ad7eb6b2;ops,cellF:5b1e0a9f2c8d4e8f``

Related options:

* ``[cellsched] cells_default``
"""),
]

scheduling_opts.append(cfg.IntOpt(
    'cell_cache_ttl',
    default=300,
    min=0,
    mutable=True,
    help="""
Seconds after which ProjectCellFilter reads the cell mappings again.

The filter resolves the cell names of ``[cellsched] cells_default`` and
``cells_projects`` to cell uuids through the cell mappings of the API
database, which it caches. The cache is also reloaded when the options
change and when a host of a cell it does not know shows up (a new cell);
this age limit catches the rest, such as a renamed cell or one disabled
with ``nova-manage cell_v2 update_cell``. One small query per period per
scheduler worker.

Possible values:

* 0: reload only on option changes and unknown cells.
* A positive number of seconds (default 300).

Related options:

* ``[cellsched] cells_default``
* ``[cellsched] cells_projects``
"""))

scheduling_opts.append(cfg.BoolOpt(
    'placement_prefilter',
    default=False,
    mutable=True,
    help="""
Ask placement only for compute nodes in the cells a request may use.

nova-scheduler asks placement for at most ``[scheduler]
max_placement_results`` candidates and never looks at a host placement
left out, so ``ProjectCellFilter``, which runs after placement, cannot
help a project whose cells are a small part of the cloud: it gets
NoValidHost while its cells have room. With this option the scheduler
adds a ``member_of`` requirement for the aggregates of the allowed cells
(aggregate uuid = cell mapping uuid) to the placement query, with the
same rules as ``ProjectCellFilter``. The aggregates are kept by
``nova-cellsched sync-aggregates``: a compute node added after the last
sync is invisible to restricted requests until the next one.

The pre-filter is registered when nova-scheduler loads
``nova_cellsched.filters.ProjectCellFilter``. Read on every request: a
SIGHUP applies a new value.

Possible values:

* False (default): placement is asked as without the plugin.
* True: restricted requests ask placement for their cells' aggregates.

Related options:

* ``[cellsched] cells_default``
* ``[cellsched] cells_projects``
* ``[scheduler] max_placement_results``
"""))

listing_opts = [
    cfg.FloatOpt(
        'list_cell_timeout',
        default=60.0,
        min=0.1,
        help="""
Seconds a cell database may take to answer one cross-cell listing.

The deadline is enforced on each cell's worker futures, for the first
batch and for every further batch together: a cell that has not answered
by then is reported as timed out and the listing returns without it (or
fails, see ``[api] list_records_by_skipping_down_cells``). MySQL
connections also get this value as their connect, read and write
timeout, so a worker blocked on a hung server ends on its own. nova's
own lister uses a fixed 60 seconds (``nova.context.CELL_TIMEOUT``).

Possible values:

* A number of seconds, at least 0.1.

Related options:

* ``[cellsched] list_max_workers``
* ``[api] list_records_by_skipping_down_cells``: whether a listing that
  lost a cell still returns the others (nova's option, honoured here).
"""),
    cfg.IntOpt(
        'list_max_workers',
        default=32,
        min=1,
        help="""
Largest number of threads one cross-cell listing queries cells with.

Each cell's batch runs in its own worker thread while the others run;
with more cells than workers the rest wait for a free worker (shown as
``wait`` in the timings). The threads exist only for one listing.

Possible values:

* A positive integer. The number of cells is used when it is smaller.

Related options:

* ``[cellsched] list_cell_timeout``
"""),
    cfg.BoolOpt(
        'list_prefer_mysqldb',
        default=False,
        help="""
Use the mysqlclient driver for cell databases configured with PyMySQL.

A cell ``database_connection`` of ``mysql+pymysql://`` is opened as
``mysql+mysqldb://`` when the ``MySQLdb`` module (PyPI package
``mysqlclient``) can be imported. mysqlclient is written in C and reads
large result sets several times faster than PyMySQL. When the module is
missing the URL is used as configured.

Possible values:

* False (default): use each URL as configured.
* True: upgrade ``mysql+pymysql`` URLs when mysqlclient is installed.

Related options:

* None
"""),
]

api_opts = [
    cfg.BoolOpt(
        'api_lister',
        default=True,
        mutable=True,
        help="""
Serve nova-api's server lists with nova-cellsched's parallel lister.

Only has an effect where the ``cellsched`` filter is in nova-api's
``api-paste.ini`` pipelines: the filter then replaces nova's private
``nova.compute.instance_list.get_instance_objects_sorted`` (used by
``GET /servers`` and ``GET /servers/detail``) with an implementation
that queries the cells in parallel under ``[cellsched]
list_cell_timeout``, sorts NULL values without failing, and pages
correctly after a marker. The answers keep nova's contract (the same
servers, fields, order, errors and down-cell handling).

This option is read on every request and is mutable: set it to False
and send nova-api a SIGHUP to go back to nova's own lister without
editing ``api-paste.ini`` or restarting.

Possible values:

* True (default): the filter's lister serves the lists.
* False: nova's own lister serves them, as without the filter.

Related options:

* ``[cellsched] list_cell_timeout``: how long one cell may take.
* ``[cellsched] api_stuck_queries_per_cell``
* ``[api] list_records_by_skipping_down_cells``, ``[api]
  instance_list_per_project_cells``, ``[api]
  instance_list_cells_batch_strategy``: nova's options, honoured.
"""),
    cfg.IntOpt(
        'api_stuck_queries_per_cell',
        default=2,
        min=1,
        mutable=True,
        help="""
Queries to one cell that nova-api may leave running after their deadline.

A cell database that stops answering (a frozen server, a lost network
path) leaves the query that was waiting for it running after the
listing gave up on the cell. Once this many such queries of one cell
are still running in an API worker, the next listings report the cell
as down at once, without sending it another query, until one of them
ends (by the driver's read timeout, or when the cell answers again).
This bounds the threads and connections a frozen cell can hold in
each API worker, whatever the request rate.

Possible values:

* A positive integer (default 2).

Related options:

* ``[cellsched] list_cell_timeout``: the deadline, and the read and
  write timeout given to PyMySQL connections while they list.
* ``[cellsched] api_lister``
"""),
]

ALL_OPTS = scheduling_opts + listing_opts + api_opts


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the ``[cellsched]`` group and its options on *conf*.

    Registering twice is harmless: oslo.config ignores an identical option.
    """
    conf.register_group(cellsched_group)
    conf.register_opts(ALL_OPTS, group=cellsched_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    """Return the options for ``oslo-config-generator``.

    Deep copies, so the generator can never alter the registered options.
    """
    return [(cellsched_group, copy.deepcopy(ALL_OPTS))]
