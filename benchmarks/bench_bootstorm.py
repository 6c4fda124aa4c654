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

"""A boot storm: POST /servers to ACTIVE under concurrency, and its waits.

Not a test: a script that prints (and with ``--out DIR`` saves as
``bootstorm.json`` and ``bootstorm.md``) numbers::

    python benchmarks/bench_bootstorm.py --out benchmarks/results/ \\
        --trace benchmarks/results/bootstorm_trace.json.gz
    python benchmarks/bench_bootstorm.py --quick
    python benchmarks/bench_bootstorm.py \\
        --render benchmarks/results/bootstorm.json

It borrows nova's functional machinery (``nova.test.TestCase`` with
``NUMBER_OF_CELLS`` cell databases, nova's in-process placement fixture,
the API through nova's ``OSAPIFixture``, conductor, scheduler and fake
computes started as nova's functional tests start them, with
``start_service`` and ``_start_compute``), in nova's native threading
mode (``OS_NOVA_DISABLE_EVENTLET_PATCHING=1``, as this project's test
suite runs nova), one world per storm:

* ``--cells`` cells (at least 5) of ``--hosts-per-cell`` fake computes
  (``fake.MediumFakeDriver``): the last cell is named in neither option
  (disabled for new servers), the one before it is dedicated to project
  DEDICATED in ``cells_projects``, the others are ``cells_default``;
* ``--clients`` threads boot ``--servers`` servers between them, each
  ``POST /servers`` (m1.tiny, no network) then ``GET /servers/{id}``
  every ``--poll-interval`` seconds until ACTIVE or ERROR; one server in
  four is DEDICATED's, the others are spread over three unmapped
  projects.

Three configurations, a storm each, in alternating order when repeated:
``nova`` (nova's default ``enabled_filters``), ``filter``
(+ ``ProjectCellFilter``) and ``prefilter`` (+ ``[cellsched]
placement_prefilter = true``, cell aggregates built by
``nova_cellsched.scheduler.aggregate_sync.sync``).

Every boot is timed in the process by spans (nova's own methods wrapped,
:mod:`nova_cellsched.listing.timing`): the client's POST, nova-api's
``compute.API.create``, the conductor's ``schedule_and_build_instances``,
the scheduler's ``select_destinations`` and inside it the request
filters, placement's allocation candidates, the host states, each
filter, the weighers and the claims, the compute's
``build_and_run_instance`` (RPC) and ``_do_build_and_run_instance``,
and every ``oslo_concurrency.lockutils`` lock and database write lock
waited for. ``--trace FILE`` writes one storm's spans as a Chrome
trace-event file (``.gz``: gzipped).
"""

import os

# nova's native threading mode, as nova-api and nova-scheduler run since
# 2026.1 and as this project's test suite runs nova. Set before nova.tests
# is imported: importing it applies the concurrency choice.
os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

from nova.tests.functional import integrated_helpers  # noqa: E402,I001

import argparse  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import functools  # noqa: E402
import gzip  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import queue  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

import fixtures  # noqa: E402
import nova.conf  # noqa: E402
from nova import test  # noqa: E402
from nova.tests import fixtures as nova_fixtures  # noqa: E402
from nova.tests.functional.api import client as api_client  # noqa: E402
from nova.tests.functional import fixtures as func_fixtures  # noqa: E402
from nova import utils as nova_utils  # noqa: E402
from oslo_concurrency import lockutils  # noqa: E402

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import reporting  # noqa: E402
import runinfo  # noqa: E402

from nova_cellsched import cells as cells_mod  # noqa: E402
from nova_cellsched.listing import timing  # noqa: E402
from nova_cellsched.scheduler import aggregate_sync  # noqa: E402
from nova_cellsched.scheduler import host_filter  # noqa: E402

CONF = nova.conf.CONF
DEDICATED = '0d5e63a0e3e84e1e9d4f7e06ad7eb6b2'
UNMAPPED = ('5b1e0a9f2c8d4e8fa1b2c3d4e5f60718',
            '6c2f1b0a3d9e4f8a9b1c2d3e4f506172',
            '7d3a2c1b4e0f4a9b8c2d3e4f50617283')
# One server in four is DEDICATED's.
PROJECTS = (DEDICATED,) + UNMAPPED
CONFIGS = ('nova', 'filter', 'prefilter')
FILTER_PATH = '%s.%s' % (host_filter.ProjectCellFilter.__module__,
                         host_filter.ProjectCellFilter.__name__)
UUID_RE = re.compile(r'[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?'
                     r'[0-9a-f]{12}')
# A lock or database write lock wait at least this long is a span of its
# own in the trace; every wait is counted in the summary.
LOCK_SPAN_MIN_S = 0.001
ARGS = argparse.Namespace()
RESULTS: dict = {}

# The phases of one boot, consecutive, from the client's POST to the
# client seeing ACTIVE: (key, label, what).
PHASES = (
    ('api', 'API', 'client POST until nova-api has cast to the conductor '
     '(compute.API.create returned)'),
    ('to_conductor', 'to conductor', 'the cast waiting for a conductor '
     'RPC worker'),
    ('conductor_before', 'conductor', 'conductor until it calls the '
     'scheduler'),
    ('to_scheduler', 'to scheduler', 'the call waiting for a scheduler RPC '
     'worker'),
    ('scheduling', 'scheduling', 'SchedulerManager.select_destinations'),
    ('conductor_after', 'conductor after', 'scheduler reply, instance '
     'created in its cell, cast to the compute, until the compute got it'),
    ('compute_queue', 'compute queue', 'compute got build_and_run_instance '
     'until _do_build_and_run_instance started (build pool, instance '
     'lock, build semaphore)'),
    ('build', 'build', '_do_build_and_run_instance (claim, fake spawn, '
     'ACTIVE saved)'),
    ('poll', 'poll', 'ACTIVE saved until the client\'s GET saw it'),
)


def lock_key(name):
    """A lock's name with uuids folded, so per-instance locks add up."""
    return UUID_RE.sub('<uuid>', str(name))


class Probes:
    """The spans and lock waits of one storm, from every thread.

    The wrappers installed by :func:`install_global_probes` and
    :meth:`install` record into the current storm's probes
    (``Probes.current``), or do nothing between storms.
    """

    current = None

    def __init__(self):
        self.recorder = timing.Recorder()
        self.local = threading.local()
        self.locks = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
        self.locks_guard = threading.Lock()
        self.received = {}
        # Instances whose conductor or compute span raised: nothing will
        # move them out of BUILD, so their client stops polling.
        self.failed = set()

    def instance(self):
        """The instance the current thread is scheduling, if any."""
        return getattr(self.local, 'instance', None)

    def lock_used(self, kind, name, asked, got, released):
        wait = got - asked
        key = '%s %s' % (kind, name if kind == 'db_write'
                         else lock_key(name))
        with self.locks_guard:
            stats = self.locks[key]
            stats[0] += 1
            stats[1] += wait
            stats[2] = max(stats[2], wait)
            stats[3] += released - got
        if wait >= LOCK_SPAN_MIN_S:
            extra = {'lock': key}
            if self.instance():
                extra['instance'] = self.instance()
            self.recorder.add('wait.%s' % kind, asked, got, **extra)

    def wrap(self, test_case, target, name, instance_of=None,
             result_instance=None, sets_instance=False, materialize=False):
        """Replace *target* (``module.Class.attr`` or ``module.func``) by a
        wrapper timing each call as span *name*, for the test's lifetime.
        """
        owner_path, attr = target.rsplit('.', 1)
        owner = _resolve(owner_path)
        original = getattr(owner, attr)
        probes = self

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            extra = {}
            uuid = instance_of(args, kwargs) if instance_of else None
            uuid = uuid or probes.instance()
            if uuid:
                extra['instance'] = uuid
            previous = getattr(probes.local, 'instance', None)
            if sets_instance and uuid:
                probes.local.instance = uuid
            cpu = time.thread_time()
            try:
                with probes.recorder.span(name, **extra) as span_args:
                    try:
                        result = original(*args, **kwargs)
                        if materialize and result is not None:
                            result = list(result)
                    except Exception as exc:
                        span_args['error'] = type(exc).__name__
                        if uuid:
                            probes.failed.add(uuid)
                        raise
                    if result_instance and 'instance' not in span_args:
                        found = result_instance(result)
                        if found:
                            span_args['instance'] = found
                    span_args['cpu_s'] = time.thread_time() - cpu
                    return result
            finally:
                if sets_instance:
                    probes.local.instance = previous

        test_case.useFixture(fixtures.MonkeyPatch(target, wrapper))
        return wrapper


def _resolve(path):
    """The object at dotted *path* (a module, or a class in one)."""
    parts = path.split('.')
    for cut in range(len(parts), 0, -1):
        try:
            obj = __import__('.'.join(parts[:cut]), fromlist=['_'])
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError('no module in %r' % path)


class _TimedLock:
    """A database write lock (an RLock) whose waits are counted."""

    def __init__(self, lock, label):
        self._lock = lock
        self._label = label
        self._got = threading.local()

    def __enter__(self):
        probes = Probes.current
        asked = probes.recorder.now() if probes else 0.0
        self._lock.acquire()
        depth = getattr(self._got, 'depth', 0)
        self._got.depth = depth + 1
        if depth == 0 and probes:
            self._got.times = (asked, probes.recorder.now())
        return self

    def __exit__(self, *exc_info):
        self._got.depth -= 1
        probes = Probes.current
        if self._got.depth == 0 and probes and hasattr(self._got, 'times'):
            asked, got = self._got.times
            probes.lock_used('db_write', self._label, asked, got,
                             probes.recorder.now())
        self._lock.release()
        return False


def _db_label(url):
    """'api', 'cell1'...: the database of a test SQLite URL, no path."""
    match = re.search(r'nova-test-(.+?)-[^-/]*\.sqlite', str(url))
    return match.group(1) if match else 'database'


def install_global_probes():
    """Count every oslo.concurrency lock and database write lock wait.

    Process-wide and for the whole run: ``lockutils.lock`` (which nova's
    ``utils.synchronized`` enters on every call) and the write lock per
    database of nova's ``DatabaseWriteLock`` fixture (SQLite allows one
    writer per database file). They record only while a storm runs.
    """
    original_lock = lockutils.lock

    @contextlib.contextmanager
    def timed_lock(name, *args, **kwargs):
        probes = Probes.current
        if probes is None:
            with original_lock(name, *args, **kwargs) as held:
                yield held
            return
        asked = probes.recorder.now()
        with original_lock(name, *args, **kwargs) as held:
            got = probes.recorder.now()
            try:
                yield held
            finally:
                probes.lock_used('lock', name, asked, got,
                                 probes.recorder.now())

    lockutils.lock = timed_lock
    write_lock = nova_fixtures.DatabaseWriteLock
    original_get = write_lock._get_lock
    timed = {}

    def _get_lock(fixture, db_url):
        lock = original_get(fixture, db_url)
        key = id(lock)
        if key not in timed or timed[key]._lock is not lock:
            timed[key] = _TimedLock(lock, _db_label(db_url))
        return timed[key]

    write_lock._get_lock = _get_lock
    # nova's CellDatabases fixture points the process's one default
    # database at the cell last targeted, under a reader-writer lock:
    # threads in different cells exclude each other, and a thread that
    # lost the race sleeps 0, 1 then 2 s before giving up.
    cells = nova_fixtures.CellDatabases
    original_init = cells.__init__

    def __init__(fixture, *args, **kwargs):
        original_init(fixture, *args, **kwargs)
        fixture._cell_lock = _TimedRWLock(fixture._cell_lock)

    cells.__init__ = __init__
    fixtures_module = importlib.import_module('nova.tests.fixtures.nova')
    fixtures_module.time = _SleepProbe(fixtures_module.time)


class _TimedRWLock:
    """The CellDatabases fixture's reader-writer lock, waits counted."""

    def __init__(self, lock):
        self._lock = lock

    @contextlib.contextmanager
    def _timed(self, mode, enter):
        probes = Probes.current
        asked = probes.recorder.now() if probes else 0.0
        with enter():
            got = probes.recorder.now() if probes else 0.0
            try:
                yield
            finally:
                if probes:
                    probes.lock_used('cell_switch', mode, asked, got,
                                     probes.recorder.now())

    def read_lock(self):
        return self._timed('read', self._lock.read_lock)

    def write_lock(self):
        return self._timed('write', self._lock.write_lock)


class _SleepProbe:
    """A ``time`` module whose sleeps are spans (``wait.sleep``)."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    def sleep(self, seconds):
        probes = Probes.current
        if probes is None:
            return self._module.sleep(seconds)
        caller = sys._getframe(1).f_code.co_name
        with probes.recorder.span('wait.sleep', caller=caller,
                                  seconds=seconds):
            self._module.sleep(seconds)
        with probes.locks_guard:
            stats = probes.locks['sleep %s' % caller]
            stats[0] += 1
            stats[1] += seconds
            stats[2] = max(stats[2], seconds)


def _uuid_of(index, name):
    """``instance_of`` for an argument: position *index* or kwarg *name*,
    an object with ``uuid`` / ``instance_uuid``, or a list of them, or a
    list of uuids.
    """
    def get(args, kwargs):
        value = kwargs.get(name, args[index] if len(args) > index else None)
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if value is None or isinstance(value, str):
            return value
        for attr in ('instance_uuid', 'uuid'):
            if attr in getattr(value, 'fields', ()) and \
                    value.obj_attr_is_set(attr):
                return getattr(value, attr)
        return None
    return get


class BootStorm(test.TestCase,
                integrated_helpers.PlacementInstanceHelperMixin):
    """One world and one storm in it, for configuration *config*."""

    microversion = 'latest'

    def __init__(self, config):
        super().__init__()
        self.config = config

    def setUp(self):
        type(self).NUMBER_OF_CELLS = ARGS.cells
        super().setUp()
        # The scheduler started below builds the process's policy and
        # registers the pre-filter: both afresh for this world.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state._shared', None))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.periodic_sync._worker', None))
        from nova.scheduler import request_filter as nova_request_filter
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            list(nova_request_filter.ALL_REQUEST_FILTERS)))
        api_paste = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
        self.flags(api_paste_config=api_paste, group='wsgi')
        self.flags(compute_driver='fake.MediumFakeDriver')
        # 200 servers of 4 projects: no quota in the way.
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        if self.config != 'nova':
            self.flags(
                available_filters=list(
                    CONF.filter_scheduler.available_filters) + [FILTER_PATH],
                enabled_filters=list(
                    CONF.filter_scheduler.enabled_filters) +
                ['ProjectCellFilter'],
                group='filter_scheduler')
        names = ['cell%d' % n for n in range(1, ARGS.cells + 1)]
        self.default_cells = names[:-2]
        self.dedicated_cell = names[-2]
        self.disabled_cell = names[-1]
        self.flags(cells_default=self.default_cells,
                   cells_projects='%s:%s' % (self.dedicated_cell, DEDICATED),
                   placement_prefilter=self.config == 'prefilter',
                   group='cellsched')
        self.useFixture(nova_fixtures.RealPolicyFixture())
        self.useFixture(nova_fixtures.NeutronFixture(self))
        self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.placement = self.useFixture(func_fixtures.PlacementFixture()).api
        self.useFixture(nova_fixtures.AllServicesCurrent())
        self.useFixture(nova_fixtures.NotificationFixture(self))
        self.api_fixture = self.useFixture(
            nova_fixtures.OSAPIFixture(api_version='v2.1'))
        self.admin_api = self.api_fixture.admin_api
        self.admin_api.microversion = self.microversion
        self.api = self.admin_api
        started = time.perf_counter()
        self.start_service('conductor')
        self.scheduler_service = self.start_service('scheduler')
        for cell in names:
            for n in range(ARGS.hosts_per_cell):
                self._start_compute('%s-host%d' % (cell, n), cell_name=cell)
        self.start_s = time.perf_counter() - started
        self.sync_s = None
        if self.config == 'prefilter':
            from nova.scheduler.client import report
            started = time.perf_counter()
            aggregate_sync.sync(
                aggregate_sync.Placement(report.SchedulerReportClient()),
                cells_mod.load_cell_mappings())
            self.sync_s = time.perf_counter() - started

    def _allowed_cells(self, project):
        if project == DEDICATED:
            return {self.dedicated_cell}
        return set(self.default_cells)

    def _install_probes(self, probes):
        """Wrap nova's methods along a boot's way (see the module doc)."""
        wrap = probes.wrap
        wrap(self, 'nova.compute.api.API.create', 'api.create',
             result_instance=lambda r: r[0][0].uuid if r and r[0] else None)
        wrap(self, 'nova.conductor.manager.ComputeTaskManager.'
             'schedule_and_build_instances',
             'conductor.schedule_and_build_instances',
             instance_of=_uuid_of(2, 'build_requests'), sets_instance=True)
        wrap(self, 'nova.scheduler.client.query.SchedulerQueryClient.'
             'select_destinations', 'conductor.call_scheduler',
             instance_of=_uuid_of(3, 'instance_uuids'))
        wrap(self, 'nova.scheduler.manager.SchedulerManager.'
             'select_destinations', 'scheduler.select_destinations',
             instance_of=_uuid_of(5, 'instance_uuids'), sets_instance=True)
        wrap(self, 'nova.scheduler.request_filter.process_reqspec',
             'scheduler.request_filters')
        wrap(self, 'nova.scheduler.client.report.SchedulerReportClient.'
             'get_allocation_candidates', 'placement.allocation_candidates')
        # A generator: listed inside the span, so that the host states are
        # built (cell databases read) here and not in the first filter.
        wrap(self, 'nova.scheduler.manager.SchedulerManager.'
             '_get_all_host_states', 'scheduler.host_states',
             materialize=True)
        wrap(self, 'nova.scheduler.host_manager.HostManager.'
             'get_filtered_hosts', 'scheduler.filters')
        wrap(self, 'nova.scheduler.host_manager.HostManager.'
             'get_weighed_hosts', 'scheduler.weighers')
        wrap(self, 'nova.scheduler.utils.claim_resources',
             'placement.claim')
        wrap(self, 'nova.compute.manager.ComputeManager.'
             '_do_build_and_run_instance', 'compute.build',
             instance_of=_uuid_of(2, 'instance'), sets_instance=True)
        # Each enabled filter and request filter of the running scheduler.
        manager = self.scheduler_service.manager
        for flt in manager.host_manager.enabled_filters:
            self._wrap_filter(probes, flt)
        from nova.scheduler import request_filter as nova_request_filter
        filters = nova_request_filter.ALL_REQUEST_FILTERS
        filters[:] = [self._wrap_request_filter(probes, f) for f in filters]
        # The compute's RPC endpoint returns at once (it spawns the build):
        # remember when it got each instance.
        from nova.compute import manager as compute_manager
        original = compute_manager.ComputeManager.build_and_run_instance

        @functools.wraps(original)
        def build_and_run_instance(manager_self, context, instance, *args,
                                   **kwargs):
            probes.received[instance.uuid] = probes.recorder.now()
            return original(manager_self, context, instance, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager.build_and_run_instance',
            build_and_run_instance))

    @staticmethod
    def _wrap_filter(probes, flt):
        name = 'filter.%s' % type(flt).__name__
        original = flt.filter_all

        def filter_all(filter_obj_list, spec_obj):
            extra = {'instance': probes.instance()} if probes.instance() \
                else {}
            cpu = time.thread_time()
            with probes.recorder.span(name, **extra) as span_args:
                hosts = list(original(filter_obj_list, spec_obj) or ())
                span_args['passed'] = len(hosts)
                span_args['cpu_s'] = time.thread_time() - cpu
                return hosts

        flt.filter_all = filter_all

    @staticmethod
    def _wrap_request_filter(probes, func):
        name = 'request_filter.%s' % func.__name__

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            extra = {'instance': probes.instance()} if probes.instance() \
                else {}
            cpu = time.thread_time()
            with probes.recorder.span(name, **extra) as span_args:
                result = func(*args, **kwargs)
                span_args['cpu_s'] = time.thread_time() - cpu
                return result

        return wrapper

    def runTest(self):
        probes = Probes()
        self._install_probes(probes)
        clients = {}

        def client(worker, project):
            key = (worker, project)
            if key not in clients:
                api = api_client.TestOpenStackClient(
                    'fake', self.api_fixture.base_url, project_id=project,
                    roles=['reader', 'member'])
                api.microversion = self.microversion
                clients[key] = api
            return clients[key]

        for worker in range(ARGS.clients):
            for project in PROJECTS:
                client(worker, project)
        jobs = queue.Queue()
        for index in range(ARGS.servers):
            jobs.put(index)
        boots = {}
        errors = []
        crashed = []
        recorder = probes.recorder

        def worker(number):
            try:
                boot_all(number)
            except Exception as exc:
                # Not a storm figure: the run fails, saying why.
                crashed.append('%s: %s' % (type(exc).__name__, exc))
                raise

        def boot_all(number):
            while True:
                try:
                    index = jobs.get_nowait()
                except queue.Empty:
                    return
                project = PROJECTS[index % len(PROJECTS)]
                api = client(number, project)
                body = self._build_server(
                    name='storm-%04d' % index, flavor_id='1',
                    networks='none')
                boot = {'index': index, 'project': project,
                        'post_start': recorder.now()}
                try:
                    with recorder.span('client.post_server') as span_args:
                        server = api.post_server({'server': body})
                        span_args['instance'] = server['id']
                    boot['post_end'] = recorder.now()
                    # The POST's answer has no status: BUILD until a GET.
                    server = {'id': server['id'], 'status': 'BUILD'}
                    deadline = time.monotonic() + ARGS.timeout
                    while server['status'] not in ('ACTIVE', 'ERROR'):
                        if time.monotonic() > deadline or \
                                server['id'] in probes.failed:
                            break
                        time.sleep(ARGS.poll_interval)
                        server = api.get_server(server['id'])
                    boot['seen'] = recorder.now()
                    boot['status'] = server['status']
                    boots[server['id']] = boot
                except api_client.OpenStackApiException as exc:
                    boot['status'] = 'POST failed'
                    errors.append(str(exc)[:200])
                    boots['failed-%d' % index] = boot

        threads = [threading.Thread(target=worker, args=(n,),
                                    name='client-%02d' % n, daemon=True)
                   for n in range(ARGS.clients)]
        Probes.current = probes
        started = recorder.now()
        deadline = time.monotonic() + ARGS.storm_timeout
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        finally:
            Probes.current = None
        wall = recorder.now() - started
        hung = [t.name for t in threads if t.is_alive()]
        if hung:
            # A client blocked inside nova (its POST or GET never
            # returned): nova's fixtures would wait for it forever at
            # clean-up. Save what was measured and leave the process.
            RESULTS.setdefault('storms', []).append({
                'config': self.config, 'servers': ARGS.servers,
                'clients': ARGS.clients, 'hung_clients': hung,
                'wall_s': wall, 'finished': len(boots)})
            print('%s: %d client(s) still blocked in nova after %.0f s '
                  '(--storm-timeout): %s; results so far saved, exiting'
                  % (self.config, len(hung), wall, ', '.join(hung)),
                  flush=True)
            save(RESULTS)
            if ARGS.log:
                with open(ARGS.log, 'a') as handle:
                    handle.write(self.stdlog.logger.output)
            os._exit(3)
        self.assertEqual([], crashed, 'a client thread failed')
        listed = self.admin_api.get_servers(
            detail=True, search_opts={'all_tenants': 1, 'limit': 1000})
        by_id = {s['id']: s for s in listed}
        for uuid, boot in boots.items():
            server = by_id.get(uuid)
            if server is None:
                continue
            boot['host'] = server.get('OS-EXT-SRV-ATTR:host')
            boot['fault'] = (server.get('fault') or {}).get('message')
            boot['final_status'] = server['status']
        if ARGS.log:
            with open(ARGS.log, 'a') as handle:
                handle.write(self.stdlog.logger.output)
        RESULTS.setdefault('storms', []).append(self._summary(
            probes, boots, errors, wall))
        if ARGS.trace and self.config == ARGS.trace_config and \
                not RESULTS.get('trace'):
            RESULTS['trace'] = write_trace(probes, self.config)

    def _cell_of_host(self, host):
        mapping = self.host_mappings.get(host)
        return mapping.cell_mapping.name if mapping else None

    def _summary(self, probes, boots, errors, wall):
        spans = probes.recorder.spans()
        by_instance = collections.defaultdict(dict)
        for span in spans:
            uuid = span.args.get('instance')
            if uuid and span.name in (
                    'api.create', 'conductor.schedule_and_build_instances',
                    'conductor.call_scheduler',
                    'scheduler.select_destinations', 'compute.build'):
                # The first of each (a reschedule adds more).
                by_instance[uuid].setdefault(span.name, span)
        phases = collections.defaultdict(list)
        client_total, server_total, shares = [], [], []
        outside, no_valid_host, error = 0, 0, 0
        landed = collections.Counter()
        faults = collections.Counter()
        unfinished = 0
        for uuid, boot in boots.items():
            status = boot.get('final_status', boot['status'])
            if status not in ('ACTIVE', 'ERROR', 'POST failed'):
                unfinished += 1
            if status == 'ERROR':
                error += 1
                faults[(boot.get('fault') or '?')[:160]] += 1
                if 'No valid host' in (boot.get('fault') or ''):
                    no_valid_host += 1
            if boot.get('host'):
                cell = self._cell_of_host(boot['host'])
                landed[cell] += 1
                if cell not in self._allowed_cells(boot['project']):
                    outside += 1
            if status != 'ACTIVE' or boot['status'] != 'ACTIVE':
                continue
            got = by_instance.get(uuid, {})
            if len(got) < 5 or uuid not in probes.received:
                continue
            t0 = boot['post_start']
            marks = [
                t0,
                got['api.create'].end,
                got['conductor.schedule_and_build_instances'].start,
                got['conductor.call_scheduler'].start,
                got['scheduler.select_destinations'].start,
                got['scheduler.select_destinations'].end,
                probes.received[uuid],
                got['compute.build'].start,
                got['compute.build'].end,
                boot['seen'],
            ]
            for (key, _label, _what), start, end in zip(
                    PHASES, marks, marks[1:]):
                phases[key].append(end - start)
            client_total.append(boot['seen'] - t0)
            server_total.append(got['compute.build'].end - t0)
            shares.append(got['scheduler.select_destinations'].duration /
                          (got['compute.build'].end - t0))
        inner = collections.defaultdict(list)
        inner_cpu = collections.defaultdict(list)
        for span in spans:
            if span.name.startswith(('scheduler.', 'placement.', 'filter.',
                                     'request_filter.')):
                inner[span.name].append(span.duration)
                if 'cpu_s' in span.args:
                    inner_cpu[span.name].append(span.args['cpu_s'])

        def dist(values):
            return {'n': len(values),
                    'p50': reporting.percentile(values, 50),
                    'p95': reporting.percentile(values, 95),
                    'p99': reporting.percentile(values, 99),
                    'max': max(values) if values else None,
                    'mean': (sum(values) / len(values)) if values else None}

        databases = {cm.database_connection: name
                     for name, cm in self.cell_mappings.items()}

        def lock_name(key):
            kind, _sep, name = key.partition(' ')
            if kind == 'db_write':
                name = databases.get(name, name)
            return lock_key('%s %s' % (kind, name))

        gave_up = sum(1 for span in spans if span.name == 'wait.sleep' and
                      span.args.get('caller') == '_wrap_target_cell' and
                      span.args.get('seconds') == 2)
        locks = sorted(
            ({'lock': lock_name(key), 'count': v[0], 'wait_s': v[1],
              'max_wait_s': v[2],
              'held_s': v[3]} for key, v in probes.locks.items()),
            key=lambda row: -row['wait_s'])
        sched = phases['scheduling']
        return {
            'config': self.config,
            'servers': ARGS.servers, 'clients': ARGS.clients,
            'cells': ARGS.cells, 'hosts_per_cell': ARGS.hosts_per_cell,
            'start_s': self.start_s, 'sync_s': self.sync_s,
            'wall_s': wall,
            'boots_per_s': len(boots) / wall if wall else None,
            'post_failed': len(errors), 'post_errors': errors[:5],
            'active': sum(1 for b in boots.values()
                          if b.get('final_status') == 'ACTIVE'),
            'error': error, 'no_valid_host': no_valid_host,
            'faults': dict(faults), 'unfinished': unfinished,
            'cell_switch_gave_up': gave_up,
            'outside_allowed_cells': outside,
            'landed': dict(sorted(landed.items(), key=lambda kv: str(kv))),
            'timed_boots': len(client_total),
            'post_to_active_s': dist(client_total),
            'post_to_active_server_s': dist(server_total),
            'scheduling_share': {
                'of_sum': (sum(sched) / sum(server_total))
                if server_total else None,
                'mean': (sum(shares) / len(shares)) if shares else None},
            'phases_s': {key: dist(phases[key]) for key, _l, _w in PHASES},
            'inside_scheduling_s': {name: dist(values)
                                    for name, values in sorted(inner.items())},
            # CPU time of the calling thread (time.thread_time): without
            # the waits for the GIL and locks that the wall times include.
            'inside_scheduling_cpu_s': {
                name: dist(values) for name, values in sorted(
                    inner_cpu.items())},
            'locks': locks[:12],
        }


def write_trace(probes, config):
    """Write the storm's spans to ``--trace``; return what was written."""
    spans = probes.recorder.spans()
    trace = timing.spans_trace(
        spans, 'nova boot storm (%s)' % config,
        category=lambda span: span.name.split('.')[0],
        other_data={'config': config, 'servers': ARGS.servers,
                    'clients': ARGS.clients})
    data = json.dumps(trace, separators=(',', ':')).encode()
    path = ARGS.trace
    if path.endswith('.gz'):
        # mtime 0: the same spans give the same bytes.
        with open(path, 'wb') as raw, gzip.GzipFile(
                fileobj=raw, mode='wb', mtime=0) as handle:
            handle.write(data)
    else:
        with open(path, 'wb') as handle:
            handle.write(data)
    return {'config': config, 'file': os.path.basename(path),
            'events': len(trace['traceEvents']), 'json_bytes': len(data)}


def fmt_s(value):
    return '-' if value is None else '%.2f' % value


def fmt_ms(value):
    return '-' if value is None else '%.1f' % (value * 1000.0)


def summary_lines(report):
    """Plain text tables of a report (printed, and in the markdown)."""
    lines = ['| config | run | servers | ACTIVE | ERROR | NoValidHost | '
             'POST failed | unfinished | cell switch gave up | '
             'outside allowed cells | wall s | boots/s | POST->ACTIVE p50 s '
             '| p95 s | p99 s | max s | server-side p50 s | p95 s | max s '
             '| scheduling share |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|'
             '---|---|---|---|---|']
    for run, storm in enumerate(report['storms']):
        c, s = storm['post_to_active_s'], storm['post_to_active_server_s']
        share = storm['scheduling_share']['of_sum']
        lines.append(
            '| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.1f | %.2f '
            '| %s | %s | %s | %s | %s | %s | %s | %s |' % (
                storm['config'], run + 1, storm['servers'], storm['active'],
                storm['error'], storm['no_valid_host'], storm['post_failed'],
                storm['unfinished'], storm['cell_switch_gave_up'],
                storm['outside_allowed_cells'], storm['wall_s'],
                storm['boots_per_s'], fmt_s(c['p50']), fmt_s(c['p95']),
                fmt_s(c['p99']), fmt_s(c['max']), fmt_s(s['p50']),
                fmt_s(s['p95']), fmt_s(s['max']),
                '-' if share is None else '%.1f%%' % (share * 100)))
    lines += ['', 'Mean ms per boot in each phase (consecutive; they add '
              'up to POST->ACTIVE):', '',
              '| config | run | ' + ' | '.join(
                  label for _k, label, _w in PHASES) + ' |',
              '|---|---|' + '---|' * len(PHASES)]
    for run, storm in enumerate(report['storms']):
        lines.append('| %s | %d | %s |' % (
            storm['config'], run + 1, ' | '.join(
                fmt_ms(storm['phases_s'][k]['mean'])
                for k, _l, _w in PHASES)))
    names = sorted({name for storm in report['storms']
                    for name in storm['inside_scheduling_s']})
    lines += ['', 'Inside the scheduler: calls, and mean / p95 wall ms per '
              'call (CPU ms of the thread, mean):',
              '', '| span | ' + ' | '.join(
                  '%s run %d' % (s['config'], n + 1)
                  for n, s in enumerate(report['storms'])) + ' |',
              '|---|' + '---|' * len(report['storms'])]
    for name in names:
        cells = []
        for storm in report['storms']:
            d = storm['inside_scheduling_s'].get(name)
            cpu = storm.get('inside_scheduling_cpu_s', {}).get(name)
            cells.append('-' if not d else '%d x %s / %s (%s)' % (
                d['n'], fmt_ms(d['mean']), fmt_ms(d['p95']),
                fmt_ms(cpu['mean']) if cpu else '-'))
        lines.append('| %s | %s |' % (name, ' | '.join(cells)))
    lines += ['', 'Lock waits (top 6 by total wait of each storm; `lock` '
              'is oslo.concurrency, `db_write` the test databases\' write '
              'lock):', '',
              '| config | run | lock | acquired | total wait s | max wait ms '
              '| total held s |', '|---|---|---|---|---|---|---|']
    for run, storm in enumerate(report['storms']):
        for row in storm['locks'][:6]:
            lines.append('| %s | %d | `%s` | %d | %.2f | %.1f | %.2f |' % (
                storm['config'], run + 1, row['lock'], row['count'],
                row['wait_s'], row['max_wait_s'] * 1000, row['held_s']))
    return lines


def ratio_lines(report):
    """Each configuration's p50 and p95 POST->ACTIVE over nova's."""
    by = collections.defaultdict(list)
    for storm in report['storms']:
        by[storm['config']].append(storm)
    if 'nova' not in by:
        return []
    lines = []
    base = by['nova']
    for config in CONFIGS[1:]:
        for n, storm in enumerate(by.get(config, ())):
            ref = base[min(n, len(base) - 1)]
            pairs = []
            for key in ('p50', 'p95'):
                a = storm['post_to_active_s'][key]
                b = ref['post_to_active_s'][key]
                if a and b:
                    pairs.append('%s %.2f' % (key, a / b))
            sa = storm['phases_s']['scheduling']['mean']
            sb = ref['phases_s']['scheduling']['mean']
            if sa and sb:
                pairs.append('scheduling mean %.2f' % (sa / sb))
            lines.append('%s / nova (run %d): %s' % (config, n + 1,
                                                     ', '.join(pairs)))
    return lines


def write_markdown(path, report):
    head = [
        '# Boot storm: POST /servers to ACTIVE under concurrency', '',
        '`%s` on %s (commit %s), nova %s, Python %s, %s %s CPU(s), '
        'nova concurrency mode: %s.' % (
            report.get('command', 'python benchmarks/bench_bootstorm.py'),
            report.get('date', '?')[:16], report.get('commit'),
            report.get('nova'), report.get('python'), report.get('machine'),
            report.get('cpus', '?'), report.get('concurrency_mode')), '',
        '%(servers)d servers, %(clients)d concurrent clients (POST, then '
        'GET every %(poll_interval)s s until ACTIVE or ERROR), %(cells)d '
        'cells x %(hosts_per_cell)d fake computes (MediumFakeDriver), all in '
        'one process with nova\'s functional fixtures (fake RPC driver, '
        'SQLite databases, in-process placement). Cells: %(layout)s. One '
        'server in four is the dedicated project\'s. A fresh world per '
        'storm.' % report, '']
    lines = head + summary_lines(report)
    lines += ['', 'Ratios (same run):', '']
    lines += ['* ' + line for line in ratio_lines(report)]
    lines += ['', 'Columns:', '',
              '* POST->ACTIVE: from the client sending POST to its GET '
              'seeing ACTIVE (ACTIVE servers), so it includes up to one '
              'poll interval; server-side: to the compute\'s '
              '`_do_build_and_run_instance` returning (ACTIVE saved).',
              '* scheduling share: the sum of '
              '`SchedulerManager.select_destinations` over the sum of '
              'server-side POST->ACTIVE.',
              '* outside allowed cells: servers whose host is in a cell '
              'their project may not use under the `[cellsched]` options '
              '(nova\'s defaults do not read them: expected non-zero there, '
              'must be 0 with the filter).',
              '* phases:']
    lines += ['  * %s: %s' % (label, what) for _k, label, what in PHASES]
    if report.get('trace'):
        lines += ['', 'Trace of the %(config)s storm: `%(file)s` '
                  '(%(events)d events; Perfetto or chrome://tracing).'
                  % report['trace']]
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--servers', type=int, default=200)
    parser.add_argument('--clients', type=int, default=20,
                        help='concurrent clients (default 20)')
    parser.add_argument('--cells', type=int, default=5,
                        help='cells, at least 5 (default 5)')
    parser.add_argument('--hosts-per-cell', type=int, default=5)
    parser.add_argument('--configs', default=','.join(CONFIGS),
                        help='comma-separated, of %s' % ', '.join(CONFIGS))
    parser.add_argument('--repeat', type=int, default=1,
                        help='storms per configuration; the order '
                        'alternates (reversed on even rounds)')
    parser.add_argument('--poll-interval', type=float, default=0.25)
    parser.add_argument('--timeout', type=float, default=120.0,
                        help='seconds a client polls one server at most')
    parser.add_argument('--storm-timeout', type=float, default=600.0,
                        help='seconds a storm may take; clients still '
                        'blocked in nova then end the run (exit 3)')
    parser.add_argument('--quick', action='store_true',
                        help='20 servers, 5 clients, 2 hosts per cell')
    parser.add_argument('--trace', metavar='FILE',
                        help='write the Chrome trace of one storm '
                        '(.gz: gzipped)')
    parser.add_argument('--trace-config', default='prefilter',
                        choices=CONFIGS)
    parser.add_argument('--log', metavar='FILE',
                        help='append nova\'s log of each storm (debugging)')
    reporting.add_output_arguments(parser, name='bootstorm')
    parser.parse_args(argv, namespace=ARGS)
    if ARGS.render:
        return reporting.rerender(ARGS.render, write_markdown)
    if ARGS.quick:
        ARGS.servers, ARGS.clients, ARGS.hosts_per_cell = 20, 5, 2
    configs = [c for c in ARGS.configs.split(',') if c]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown or ARGS.cells < 5:
        parser.error('expected --configs among %s and --cells >= 5; got '
                     '%s and %d' % (', '.join(CONFIGS), ','.join(unknown)
                                    or '-', ARGS.cells))
    RESULTS.update(runinfo.run_info('bench_bootstorm.py', argv))
    RESULTS.update({
        'concurrency_mode': 'threading' if nova_utils.
        concurrency_mode_threading() else 'eventlet',
        'servers': ARGS.servers, 'clients': ARGS.clients,
        'cells': ARGS.cells, 'hosts_per_cell': ARGS.hosts_per_cell,
        'poll_interval': ARGS.poll_interval,
        'layout': 'cell1..cell%d cells_default, cell%d dedicated to one '
        'project (cells_projects), cell%d in neither (disabled for new '
        'servers)' % (ARGS.cells - 2, ARGS.cells - 1, ARGS.cells)})
    install_global_probes()
    for round_ in range(ARGS.repeat):
        order = configs if round_ % 2 == 0 else configs[::-1]
        for config in order:
            result = unittest.TextTestRunner(
                stream=sys.stderr, verbosity=0).run(BootStorm(config))
            if not result.wasSuccessful():
                return 1
            storm = RESULTS['storms'][-1]
            print('%-9s %d servers: %d ACTIVE, %d ERROR (%d NoValidHost), '
                  '%d outside allowed cells, %d POST failed, %d unfinished '
                  '(%d cell switches gave up); '
                  'wall %.1f s; POST->ACTIVE p50 '
                  '%s p95 %s p99 %s max %s s; scheduling share %s'
                  % (config, storm['servers'], storm['active'],
                     storm['error'], storm['no_valid_host'],
                     storm['outside_allowed_cells'], storm['post_failed'],
                     storm['unfinished'], storm['cell_switch_gave_up'],
                     storm['wall_s'],
                     fmt_s(storm['post_to_active_s']['p50']),
                     fmt_s(storm['post_to_active_s']['p95']),
                     fmt_s(storm['post_to_active_s']['p99']),
                     fmt_s(storm['post_to_active_s']['max']),
                     fmt_s(storm['scheduling_share']['of_sum'])),
                  flush=True)
            for fault, count in storm['faults'].items():
                print('  ERROR x%d: %s' % (count, fault))
            for error in storm['post_errors']:
                print('  POST failed: %s' % error)
    print('\n'.join(summary_lines(RESULTS)))
    for line in ratio_lines(RESULTS):
        print(line)
    save(RESULTS)
    return 0


def save(report):
    """Write ``--json`` and ``--out``'s files, as far as *report* goes."""
    complete = all('hung_clients' not in s for s in report.get('storms', ()))
    reporting.write_results(report, name=ARGS.name, out=ARGS.out,
                            json_path=ARGS.json,
                            write_markdown=write_markdown,
                            markdown=complete, say=print)


if __name__ == '__main__':
    sys.exit(main())
