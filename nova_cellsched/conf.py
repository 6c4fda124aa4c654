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
import re
from typing import Any

from oslo_config import cfg
from oslo_config import types

from nova_cellsched import exception

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
database, which it caches. The cache is also reloaded at start, on every
SIGHUP to nova-scheduler (as nova reloads its own cell caches), when the
options change and when a host of a cell it does not know shows up (a
new cell); this age limit catches the rest, such as a cell renamed with
``nova-manage cell_v2 update_cell`` and no SIGHUP sent. Which cells are
disabled for new servers follows nova-scheduler's own view, read at
start and on SIGHUP, not this age. One small query per period per
scheduler worker. This option is mutable: a SIGHUP to nova-scheduler
applies a new value.

Possible values:

* 0: reload only at start, on SIGHUP, on option changes and unknown
  cells.
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

scheduling_opts.append(cfg.FloatOpt(
    'scheduler_cell_timeout',
    default=0.0,
    min=0.0,
    mutable=True,
    help="""
Seconds nova-scheduler waits for a cell database.

Before each scheduling decision nova-scheduler reads the nova-compute
services and compute nodes of every enabled cell and, from nova 34, the
minimum nova-compute version of every cell, and waits for each cell up
to nova's 60 seconds (``nova.context.CELL_TIMEOUT``): one frozen cell
database holds every boot, into any cell, that long. With this set
(and ``ProjectCellFilter`` enabled, which puts the bound in), each cell
is read on nova-cellsched's workers, the cells in parallel, and every
blocking call of a read on a PyMySQL connection ends after this many
seconds without an answer from the database (time nova-scheduler spends
busy is not counted). A cell that does not answer, or refuses the
connection, is left out of that decision, as nova leaves out a cell
that did not respond (its hosts are not candidates; the minimum version
is taken over the cells that answered), and with ``cell_hold_down`` it
is held down: the decisions in the next ``cell_hold_down`` seconds leave
it out at once, while one probe at a time reads it in the background
and ends the hold-down when it answers. The other cells' hosts are
filtered and weighed as ever.

This option is mutable: a SIGHUP to nova-scheduler applies a new value to
its next decision.

Possible values:

* 0 (the default): nova's own reads, 60 seconds a cell.
* A positive number of seconds. It must exceed what a healthy cell's
  read takes at its busiest (a cell of 1,000 compute nodes reads in well
  under a second); 5 to 10 keeps boots going through a database
  failover.

Related options:

* ``[cellsched] cell_hold_down``, ``[cellsched] cell_probe_interval``
* ``[quota] count_usage_from_placement`` (nova's): True keeps quota
  checks of a boot off the cell databases.
"""))

scheduling_opts.append(cfg.StrOpt(
    'placement_prefilter_form',
    default='auto',
    choices=[
        ('auto', 'forbidden when the cells a project not named in '
                 'cells_projects may not use are fewer than those it may '
                 'use, else member_of'),
        ('member_of', 'require the aggregates of the allowed cells '
                      '(member_of=in:)'),
        ('forbidden', 'forbid the aggregates of every other cell '
                      '(member_of=!in:)'),
    ],
    mutable=True,
    help="""
How the placement pre-filter restricts a project not in ``cells_projects``.

Such a project may use the default cells. The pre-filter can say so to
placement as "in one of the default cells' aggregates" (``member_of``) or
as "in none of the other cells' aggregates" (``forbidden``, nova's
``forbidden_aggregates``, as nova's ``isolate_aggregates`` request filter
uses). Both give the same hosts once the aggregates are in sync; the
forbidden form names fewer aggregates when most cells are default cells,
and keeps a compute node not synced yet (in no cell aggregate) as a
candidate, which ``ProjectCellFilter`` then checks. Projects named in
``cells_projects`` always use ``member_of``; same-cell moves always use
the forbidden form.

Possible values:

* auto (default): forbidden when the cells such a project may not use are
  fewer than the default cells, else member_of.
* member_of: always require the default cells' aggregates.
* forbidden: always forbid the other cells' aggregates.

Related options:

* ``[cellsched] placement_prefilter``
* ``[cellsched] cells_default``
"""))

sync_opts = [cfg.IntOpt(
    'aggregate_sync_workers',
    default=8,
    min=1,
    help="""
Placement requests ``nova-cellsched sync-aggregates`` keeps in flight.

The sync reads each cell (its compute nodes, its aggregate's members) and
writes each provider whose cell aggregates must change in a pool of this
many threads, each with at most one placement request in flight. Size it
for the placement service: a few requests per placement API worker. The
command's ``--workers`` overrides it.

Possible values:

* A positive integer (default 8).

Related options:

* ``[cellsched] placement_prefilter``
* ``[cellsched] aggregate_sync_interval``: the periodic sync uses it too.
"""), cfg.IntOpt(
    'aggregate_sync_interval',
    default=-1,
    min=-1,
    mutable=True,
    help="""
Seconds between two syncs of the cell aggregates by nova-scheduler.

With a value of 0 or more, every nova-scheduler that loads
``ProjectCellFilter`` runs what ``nova-cellsched sync-aggregates`` does in
a background thread: a compute node added to a cell joins its cell's
placement aggregate within one interval, without an operator; deleted
and moved nodes leave. The thread runs in the process that builds the
filter (the parent process when ``[scheduler] workers`` is more than 1),
so there is one per nova-scheduler host, whatever the number of workers.
Several schedulers syncing at once is safe: they only add a cell's
compute nodes to its aggregate and remove a provider that is not a
compute node of the cell any more (or that the cell database no longer
has), and they converge. A run that fails (placement unreachable or
answering 5xx, a cell database that does not answer) logs an error
naming what failed, starts no write after a placement failure (and no
removal if it came while nodes were being added), leaves an unreadable
cell's aggregate as it is (each cell database is read within
``[cellsched] list_cell_timeout``; one that does not answer is skipped
with a WARNING naming it, the others are synced), and the next run
starts over. A provider
another writer keeps changing is tried 5 times with a growing pause; a
run gives up on further updates once 20 providers gave up. Each run
costs one API database query, one query per cell database and one
placement request per cell when nothing changed.
The first run starts one interval after nova-scheduler started, so that
forking its workers does not wait for it; a worker forked later (one
restarted after it died) waits for a run in progress to end, so that it
never inherits a lock the run holds, at most ``list_cell_timeout`` + 60
seconds. A run never removes past
``[cellsched] aggregate_sync_max_removal``. Same meaning of the values as
nova's ``[scheduler] discover_hosts_in_cells_interval``, with which it
pairs well: host discovery maps a new compute host to its cell, this sync
then puts its node in the cell's aggregate.

This option is mutable: a SIGHUP to nova-scheduler applies a new value
(starting, stopping or re-timing the sync; a waiting sync starts its next
run one new interval after the SIGHUP). A value oslo.config cannot read
(not an integer, below -1) stops nova-scheduler at start with one line
naming this option; on a SIGHUP it is logged and the last good value
stays in force.

Possible values:

* -1 (default): no periodic sync; run ``nova-cellsched sync-aggregates``
  after adding compute nodes.
* 0: a sync every 60 seconds (nova's default periodic interval).
* A positive integer: a sync every that many seconds.

Related options:

* ``[cellsched] placement_prefilter``: the aggregates are only needed by
  the pre-filter.
* ``[cellsched] aggregate_sync_workers``: placement requests in flight.
* ``[scheduler] discover_hosts_in_cells_interval``: nova's periodic host
  discovery.
* ``[cellsched] aggregate_sync_max_removal``: the removal guard.
"""), cfg.FloatOpt(
    'aggregate_sync_max_removal',
    default=0.5,
    min=0.0,
    max=1.0,
    mutable=True,
    help="""
Largest share of a cell aggregate's members one sync removes on its own.

The sync removes from a cell's placement aggregate the providers that the
cell database no longer lists as compute nodes. A cell mapping pointed at
a wrong, empty or restored database lists none (or another cell's), and
the sync would then empty the aggregate, after which the placement
pre-filter finds no host for the projects dedicated to that cell. So a
sync that would remove every member of a cell's aggregate, or more than
this share of them (the members no cell database lists and those
another cell's database lists, which would move there, alike: two cell
mappings pointed at each other's databases hold both cells),
changes nothing in that aggregate (no addition
either) and fails for that cell, naming it and the counts
(``sync-aggregates`` on stderr, exiting 4; the periodic sync in an ERROR
line of nova-scheduler's log); the other cells are synced.
``nova-cellsched check`` reports such a cell. After checking the cell
mapping's database (``nova-manage cell_v2 list_cells --verbose``), an
operator runs ``nova-cellsched sync-aggregates --force --cell CELL`` to
make the removals; the periodic sync (``[cellsched]
aggregate_sync_interval``) never goes past this guard. The default 0.5
lets a cell lose up to half of its nodes in one run (a rack
decommissioned in a big cell) and holds what a wrong database looks
like: all, or most, of the members gone at once.

The command reads the value when it starts; nova-scheduler's periodic
sync reads it at each run, so a SIGHUP applies a new value from the next
run on.

Possible values:

* A number from 0 to 1 (default 0.5): the share of the members one sync
  may remove. 0 holds every removal; 1 holds only the removal of every
  member, which is held whatever the value.

Related options:

* ``[cellsched] aggregate_sync_interval``: the periodic sync, which
  never forces.
* ``[cellsched] placement_prefilter``: what an emptied aggregate breaks.
""")]

listing_opts = [
    cfg.FloatOpt(
        'list_cell_timeout',
        default=60.0,
        min=0.1,
        help="""
Seconds a cell database may keep one cross-cell listing waiting.

Each cell's own queries in one listing (the marker's read, the first
batch, every further batch) may keep it waiting this long in all: a
cell that has not answered by then is reported as timed out and the
listing returns without it (or fails, see ``[api]
list_records_by_skipping_down_cells``), and it is not asked again in
that request. A cell is charged only the time its own queries waited
on it. On Linux (x86_64, aarch64), where the kernel tells what a thread
waits on, that is the time a query's thread slept in a read, write or
poll on the cell's connection with nothing coming, in waits longer than
0.1 seconds (the sampling interval); time spent reading rows, waiting
for a CPU or for Python's GIL in a busy process, or waiting for a free
worker, is never charged. Elsewhere, and where queries run on green
threads (eventlet), the wall time each query ran is charged. So one hung
cell does not use up the others' time, and a cell is reported down only
when its own database did not answer or failed, never because nova-api
was busy.

A request waits for the process's workers at most twice this value in
all (its marker, every round and, in nova-api, the faults and volume
lookups after the listing): each call waits for a worker at most this
value or what is left of that, whichever is less, and a query still
waiting then runs at once on a thread of its own. So, beyond the time
the answering cells' queries take, a request waits at most 2 x this
value for a busy process plus this value (and up to 0.2 seconds: a
silence is seen and counted up to one 0.1 s look late) for each cell
that stops answering (each such cell once). A cell frozen
from the start costs a listing this value once. In nova-api, every
blocking call made on a PyMySQL database connection for the listing
(connect, pre-ping, query, fetch, rollback, close), the API database's
request specs included, ends after twice this value without an answer,
and once a listing gave a cell up the calls that follow end at once,
so a thread blocked on a hung server ends on its own. nova's own lister
uses a fixed 60 seconds (``nova.context.CELL_TIMEOUT``) and no bound on
a query. nova-api's start-up check of nova-compute versions through
``nova_cellsched.wsgi.osapi_compute`` does not use this value: it gives
each cell nova's 60 seconds, as nova's check does, so that a cell that
answers later than this still counts (a too old nova-compute there still
stops nova-api from starting), and bounds its I/O by the same 60 seconds.
The sync of the cell aggregates (``nova-cellsched sync-aggregates``,
``check`` and nova-scheduler's periodic sync) gives each cell database
this long, and bounds the PyMySQL I/O of its read by it: a cell that
does not answer in time is skipped and left as it is, the others are
synced. The commands read it when they start; nova-scheduler reads it at
start (it is not mutable: a new value needs a restart).

Possible values:

* A number of seconds, at least 0.1.

Related options:

* ``[cellsched] list_max_workers``
* ``[api] list_records_by_skipping_down_cells``: whether a listing that
  lost a cell still returns the others (nova's option, honoured here).
* ``[cellsched] aggregate_sync_interval``: the periodic sync, which
  reads each cell within this value.
"""),
    cfg.IntOpt(
        'list_max_workers',
        default=32,
        min=1,
        help="""
Largest number of threads that query cells for listings.

Each cell's batch runs in its own worker thread while the others run;
with more cells than workers the rest wait for a free worker (shown as
``wait`` in the timings). That wait is never charged to the cell: a
query still waiting for a worker after ``list_cell_timeout`` (or what is
left of the request's 2 x ``list_cell_timeout``) runs at once on a
thread of its own, so a pool too small costs time, never rows.
The command line uses a pool of its own for each listing. In nova-api,
one pool serves every listing of an API worker process (green threads
under eventlet), sized when it first lists: under uwsgi with native
threads, cells x (uwsgi ``threads`` + ``api_stuck_queries_per_cell``),
so that no task waits for a worker even while frozen cells hold their
stuck queries, but at most this; under eventlet or another server, this.
A pool capped below what the process needs is logged once (a WARNING
with the value to set). A change takes effect in nova-api when its
workers reload (uwsgi) or restart; in the command line at the next
call. Threads start only when tasks need them.

Possible values:

* A positive integer. The command line uses the number of cells when it
  is smaller.

Related options:

* ``[cellsched] list_cell_timeout``
* ``[cellsched] api_stuck_queries_per_cell``: the stuck queries a cell
  may hold workers with, counted in nova-api's pool size.
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

Read on every request. To go back to nova's own lister without
editing ``api-paste.ini``, set it to False and reload nova-api's
workers: under uwsgi a SIGHUP to the uwsgi master (a graceful reload),
under Apache mod_wsgi a graceful restart (``apachectl graceful``); each
new worker reads nova.conf again. nova-api under uwsgi or mod_wsgi has
no oslo.service and runs no oslo.config mutate hooks, so nothing
changes the value inside a running worker.

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
    cfg.BoolOpt(
        'api_server_timing',
        default=True,
        help="""
Send a Server-Timing header with the server lists nova-api serves.

A ``GET /servers`` or ``GET /servers/detail`` answered by the
nova-cellsched lister carries a W3C ``Server-Timing`` response header:
``total``, ``gather``, ``merge``, ``objects``, ``view``, ``validation``
(when the fast response validation ran) and ``other`` (the rest of
nova-api's work), in milliseconds. Browsers' developer tools and ``curl
-i`` show it. nova's policy decides who gets it: the policy rule
``os_compute_api:servers:cellsched:server_timing`` (default ``@``, any
caller nova let list), and whose ``gather`` names the slowest cell, its
time and the cells reported down:
``os_compute_api:servers:cellsched:server_timing:cells`` (default
``rule:context_is_admin``, admins only). nova-api re-reads its policy
file when the file changes: a rule changed there applies from the next
request. A change of this option takes effect when nova-api's workers
are reloaded (under uwsgi a SIGHUP to the master; under mod_wsgi a
graceful restart); nova-api runs no mutate hooks.

Possible values:

* True (default): send the header on served lists, to whom the policy
  rules allow.
* False: send no header to anyone (the log line is still written).

Related options:

* ``[cellsched] api_log_timings``
* ``[cellsched] api_lister``
* ``[oslo_policy] policy_file``: nova's policy file, where the two rules
  can be changed.
"""),
    cfg.BoolOpt(
        'api_log_timings',
        default=False,
        help="""
Log the timings of every server list nova-api serves at INFO.

Each list served by the nova-cellsched lister writes one log line with
the figures of the ``Server-Timing`` header, the time each cell's
queries took and the cells that were down. At DEBUG by default; at INFO
with this option, for deployments that keep INFO logs.

A change takes effect when nova-api's workers are reloaded (under uwsgi
a SIGHUP to the master; under mod_wsgi a graceful restart); nova-api
runs no mutate hooks.

Possible values:

* False (default): the line is logged at DEBUG.
* True: the line is logged at INFO.

Related options:

* ``[cellsched] api_server_timing``
"""),
    cfg.IntOpt(
        'api_stuck_queries_per_cell',
        default=2,
        min=1,
        help="""
Queries to one cell that nova-api may leave running after their deadline.

A cell database that stops answering (a frozen server, a lost network
path) leaves the query that was waiting for it running after the
listing gave up on the cell. Once this many such queries of one cell
are still running in an API worker, the next listings report the cell
as down at once, without sending it another query, until one of them
ends (at its I/O timeout, twice ``list_cell_timeout``, or when the cell
answers again).
This bounds the threads and connections a frozen cell can hold in
each API worker, whatever the request rate.

A change takes effect when nova-api's workers are reloaded (under uwsgi
a SIGHUP to the master; under mod_wsgi a graceful restart); nova-api
runs no mutate hooks.

Possible values:

* A positive integer (default 2).

Related options:

* ``[cellsched] list_cell_timeout``: the deadline; twice it bounds a
  worker's I/O on PyMySQL connections.
* ``[cellsched] api_lister``
* ``[cellsched] cell_hold_down``: a cell that did not answer is not
  asked at all for a while.
"""),
    cfg.FloatOpt(
        'cell_hold_down',
        default=0.0,
        min=0.0,
        help="""
Seconds a cell that did not answer is held down in a process.

A cell whose query in a listing did not answer within
``list_cell_timeout`` (or whose database refused the connection) is held
down for this long in the process that found it: its later listings,
and the faults and volume lookups after them, report the cell down at
once instead of waiting ``list_cell_timeout`` for it again (at 2.1 its
servers are left out, from 2.69 on they are shown as ``UNKNOWN``, as for
any cell that did not answer), and the minimum service version asked
before a boot counts the cell with the answer it last gave the process
without asking it. Meanwhile one probe at a time reads the
cell in the background, about every ``cell_probe_interval`` seconds; the
first probe that answers ends the hold-down at once, so the cell's
servers are back in the next listing. A probe that does not answer
extends the hold-down. Each nova-api worker process keeps its own; its
log says when a cell is held down and when it answers again, and an
admin's ``Server-Timing`` header names the held cells. nova-scheduler,
with ``scheduler_cell_timeout`` set, holds down a cell whose compute
nodes did not come within that timeout the same way, per process.

A change takes effect when nova-api's workers are reloaded (under uwsgi
a SIGHUP to the master; under mod_wsgi a graceful restart), and when
nova-scheduler restarts.

Possible values:

* 0 (the default): never hold a cell down; every listing waits for
  every cell.
* A positive number of seconds; 30 covers a database failover.

Related options:

* ``[cellsched] cell_probe_interval``
* ``[cellsched] list_cell_timeout``: what a listing waits for a cell
  that is not held down, and what a probe waits for at most.
* ``[cellsched] scheduler_cell_timeout``: the same in nova-scheduler.
"""),
    cfg.FloatOpt(
        'cell_probe_interval',
        default=1.0,
        min=0.1,
        help="""
Seconds between the probes of a held-down cell, about.

Each probe is one bounded read of the cell in the background (a
listing's first row); the interval is jittered by half of it either
way, so that the API workers of a region do not probe in step. The
first probe that answers ends the cell's hold-down.

A change takes effect when nova-api's workers are reloaded (under uwsgi
a SIGHUP to the master; under mod_wsgi a graceful restart).

Possible values:

* A number of seconds, at least 0.1 (default 1).

Related options:

* ``[cellsched] cell_hold_down``
"""),
    cfg.BoolOpt(
        'api_fast_validation',
        default=True,
        help="""
Validate the responses of nova-api's server lists once, with a faster
validator that gives nova's verdict.

Only has an effect where the ``cellsched`` filter is in nova-api's
``api-paste.ini`` pipelines. nova checks the body of ``GET /servers``
and ``GET /servers/detail`` against the response schema of the
request's microversion (``[api] response_validation``); its decorators
serialize and parse the whole body once per schema defined for the
method (14 times for ``/servers/detail``) and validate it with
jsonschema's pure-Python validator, about one second per request of
1,000 servers. With this option the filter validates each body once,
with a validator compiled once per schema from nova's schemas, nova's
format checks and nova's string-number ``minimum``/``maximum``. A body
it does not accept at once (or a schema it cannot compile) is
serialized and handed to nova's own validator, so a body nova rejects
is logged (``warn``) or refused (``error``) with nova's own message,
and ``[api] response_validation = ignore`` still skips validation.

Read on every request: set it to False and reload nova-api's workers
(under uwsgi a SIGHUP to the master; under mod_wsgi a graceful restart;
nova-api runs no mutate hooks) to go back to nova's own validation. When
the filter finds nova's validation code different from the code it was
built for, it logs an error and nova validates as before, whatever
this option says.

Possible values:

* True (default): each server list is validated once, fast.
* False: nova's own response validation, as without the filter.

Related options:

* ``[api] response_validation``: nova's option, honoured.
* ``[cellsched] api_lister``
"""),
    cfg.BoolOpt(
        'api_view_bdms',
        default=True,
        help="""
Read the attached volumes of a served ``/servers/detail`` from each
server's own cell, for the columns the view shows.

Only has an effect where the ``cellsched`` filter is in nova-api's
``api-paste.ini`` pipelines, and on lists its lister served. nova's
view looks up every listed server's cell mapping in the API database,
then asks every one of those cells for the block device mappings of all
the listed servers and builds an object per mapping. With this option
each cell is asked only for its own listed servers (the listing knows
their cells), with nova's query, for the volume id and
``delete_on_termination``; the response is the same. Not done: nova's
write of a uuid into a mapping that has none (an online data migration
``nova-manage db online_data_migrations`` also does).

Read on every request: set it to False and reload nova-api's workers
(under uwsgi a SIGHUP to the master; under mod_wsgi a graceful restart;
nova-api runs no mutate hooks) to go back to nova's lookup.

Possible values:

* True (default): each cell is asked for its own servers' volumes.
* False: nova's lookup, as without the filter.

Related options:

* ``[cellsched] api_lister``: the lists this applies to.
* ``[cellsched] api_view_request_specs``
"""),
    cfg.BoolOpt(
        'api_render_rows',
        default=True,
        help="""
Render a served ``/servers`` and ``/servers/detail`` from the listed
rows, without an Instance object per server.

Only has an effect where the ``cellsched`` filter is in nova-api's
``api-paste.ini`` pipelines, and on lists its lister served. nova builds
a whole Instance object per listed server (its flavor, network cache,
metadata, tags, services...) and its view builder reads them back
field by field. With this option each server's body is built from the
row the listing read, key for key as nova's view builds it at the
request's microversion, with nova's policy checks once per request and
nova's own calls for the availability zone, host status and security
groups. A request at a microversion newer than the renderer knows
(2.104), with an IP filter, or with a server the renderer does not take
as nova would (no embedded flavor, an unreadable network cache, an
``instance_name_template`` of other fields than the id) is rendered by
nova's view, from nova's objects. The response is the same.

Read on every request: set it to False and reload nova-api's workers
(under uwsgi a SIGHUP to the master; under mod_wsgi a graceful restart;
nova-api runs no mutate hooks) to go back to nova's objects and view.

Possible values:

* True (default): bodies from the rows.
* False: nova's objects and view, as without the filter.

Related options:

* ``[cellsched] api_lister``: the lists this applies to.
* ``[cellsched] api_view_bdms``, ``api_view_faults``,
  ``api_view_request_specs``: the lookups both ways use.
"""),
    cfg.BoolOpt(
        'api_view_faults',
        default=True,
        help="""
Read the faults of a served server list from each server's own cell.

Only has an effect where the ``cellsched`` filter is in nova-api's
``api-paste.ini`` pipelines, and on lists its lister served. After the
listing nova-api reads the latest fault of every listed server (shown
for servers in ERROR): from nova 33 nova asks every cell, cell0
included, for the faults of all the listed servers. With this option
only the cells of the listed servers are asked, each for its own
servers (for a list rendered from the rows, only for the servers whose
status shows a fault), with nova's own query and objects; the response
is the same. nova 31 and 32 read the faults through the request's own
context, one query: nova's lookup runs there either way.

Read on every request: set it to False and reload nova-api's workers
(under uwsgi a SIGHUP to the master; under mod_wsgi a graceful restart;
nova-api runs no mutate hooks) to go back to nova's lookup.

Possible values:

* True (default): each cell is asked for its own servers' faults.
* False: nova's lookup, as without the filter.

Related options:

* ``[cellsched] api_lister``: the lists this applies to.
* ``[cellsched] api_view_bdms``
"""),
    cfg.BoolOpt(
        'api_view_request_specs',
        default=True,
        help="""
Read the pinned availability zone and scheduler hints of a served
server list without building whole RequestSpec objects.

Only has an effect where the ``cellsched`` filter is in nova-api's
``api-paste.ini`` pipelines, on lists rendered from the rows
(``[cellsched] api_render_rows``), at microversion 2.96 or later
(``pinned_availability_zone``; 2.100 adds ``scheduler_hints``). nova
deserializes every listed server's whole
request spec (flavor, image, NUMA topology, PCI requests...) into
objects for these one or two fields. With this option the fields are
read from the spec's JSON through the RequestSpec fields' own
conversions; a spec whose object version differs from this nova's, or
that has a server group (which nova looks up, and may drop from the
hints), is built by nova as before. The response is the same. Not
done: nova's save of a spec whose legacy NUMA topology it migrates on
read.

Read on every request: set it to False and reload nova-api's workers
(under uwsgi a SIGHUP to the master; under mod_wsgi a graceful restart;
nova-api runs no mutate hooks) to go back to nova's lookup.

Possible values:

* True (default): the two fields are read from the spec's JSON.
* False: nova's RequestSpec objects, as without the filter.

Related options:

* ``[cellsched] api_lister``: the lists this applies to.
* ``[cellsched] api_render_rows``: the lists this applies to.
* ``[cellsched] api_view_bdms``
"""),
]

ALL_OPTS = scheduling_opts + sync_opts + listing_opts + api_opts


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


#: What :func:`allowed_values` says for options whose type alone would
#: not say what the values mean.
ALLOWED_TEXT = {
    'aggregate_sync_interval': '-1 (off, the default), 0 (every 60 '
                               'seconds) or a positive number of seconds',
}

_OPTS_BY_NAME = {opt.dest: opt for opt in ALL_OPTS}
_LOCATION_DETAIL = re.compile(r"detail='([^']*)'")


def allowed_values(opt: cfg.Opt) -> str:
    """What *opt* accepts, in words, from its oslo.config type."""
    if opt.dest in ALLOWED_TEXT:
        return ALLOWED_TEXT[opt.dest]
    kind = opt.type
    if isinstance(kind, types.Boolean):
        return 'true or false'
    if getattr(kind, 'choices', None):
        return 'one of %s' % ', '.join(str(c) for c in kind.choices)
    if isinstance(kind, (types.Integer, types.Float)):
        noun = ('an integer' if isinstance(kind, types.Integer)
                else 'a number')
        low, high = kind.min, kind.max
        if low is not None and high is not None:
            return '%s from %s to %s' % (noun, low, high)
        if low is not None:
            return '%s of at least %s' % (noun, low)
        if high is not None:
            return '%s of at most %s' % (noun, high)
        return noun
    if isinstance(kind, types.List):
        return 'a comma separated list'
    return 'a string ("$$" for a literal "$")'


def _raw_value(conf_obj: cfg.ConfigOpts, name: str
               ) -> tuple[str | None, str | None]:
    """The text *name* has in the files and the file, as far as known.

    oslo.config keeps them in its private namespace; a version that
    moved them gives ``(None, None)`` and the message goes without.
    """
    opt = _OPTS_BY_NAME[name]
    names = [(GROUP_NAME, name)] + [
        (d.group or GROUP_NAME, d.name or name)
        for d in getattr(opt, 'deprecated_opts', [])]
    try:
        value, loc = conf_obj._namespace._get_file_value(names)
    except Exception:  # noqa: BLE001 - private API, or not in a file
        return None, None
    where = getattr(loc, 'detail', None) or None
    if isinstance(value, list) and value:
        value = value[-1]
    return (None if value is None else str(value)), where


def invalid_option(conf_obj: cfg.ConfigOpts, name: str,
                   exc: Exception) -> exception.InvalidConfig:
    """The one-line error for ``[cellsched]`` *name*, refused with *exc*.

    ``[cellsched] NAME = 'VALUE' in FILE is not valid: REASON; expected
    ALLOWED``: the option, the value as written, the file, oslo.config's
    reason and what the option accepts.
    """
    text = (str(exc).strip().splitlines() or [''])[0]
    reason = text.split(' is not valid: ', 1)[-1]
    value, where = _raw_value(conf_obj, name)
    if where is None:
        found = _LOCATION_DETAIL.search(text)
        where = found.group(1) if found else None
    return exception.InvalidConfig(
        '[%s] %s%s%s is not valid: %s; expected %s' % (
            GROUP_NAME, name,
            '' if value is None else ' = %r' % value,
            ' in %s' % where if where else '', reason,
            allowed_values(_OPTS_BY_NAME[name])))


def read_option(conf_obj: cfg.ConfigOpts, name: str) -> Any:
    """``[cellsched]`` *name* as *conf_obj* has it now.

    The one reading of an option shared by the services and ``nova-
    cellsched check``: oslo.config's own conversion and bounds.

    :raises InvalidConfig: oslo.config refuses the value; one line, see
        :func:`invalid_option`.
    """
    try:
        return conf_obj[GROUP_NAME][name]
    except (cfg.Error, ValueError) as exc:
        raise invalid_option(conf_obj, name, exc) from exc


def invalid_options(conf_obj: cfg.ConfigOpts) -> list[exception.InvalidConfig]:
    """Every ``[cellsched]`` option *conf_obj* cannot give, as errors.

    Reads each option as the services do (:func:`read_option`); the
    syntax of ``cells_default``/``cells_projects`` is the mapping
    parser's to check (:mod:`nova_cellsched.scheduler.mapping`).
    """
    register_opts(conf_obj)
    errors = []
    for opt in ALL_OPTS:
        try:
            read_option(conf_obj, opt.dest)
        except exception.InvalidConfig as exc:
            errors.append(exc)
    return errors
