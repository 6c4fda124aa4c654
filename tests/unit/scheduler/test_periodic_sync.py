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

"""The periodic sync's option, thread, SIGHUP and fork handling."""

import os
import subprocess
import sys
import textwrap
import threading

import fixtures
from oslo_config import cfg

from nova_cellsched import compat
from nova_cellsched import conf as conf_mod
from nova_cellsched import exception
from nova_cellsched.scheduler import aggregate_sync
from nova_cellsched.scheduler import periodic_sync
from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _conf(tmp, value=None):
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    args = []
    if value is not None:
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[cellsched]\naggregate_sync_interval = %s\n' % value)
        args = ['--config-file', path]
    conf(args, project='nova-cellsched-test')
    return conf


class IntervalTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_default_is_off(self):
        self.assertEqual(-1, periodic_sync.read_interval(_conf(self.tmp)))
        self.assertIsNone(periodic_sync.spacing(-1))

    def test_values(self):
        self.assertEqual([None, 60, 1, 3600],
                         [periodic_sync.spacing(periodic_sync.read_interval(
                             _conf(self.tmp, v))) for v in
                          (-1, 0, 1, 3600)])

    def test_bad_values_are_one_line_naming_the_option(self):
        for value, reason in (
                ('-2', 'Should be greater than or equal to -1'),
                ('soon', "invalid literal for int() with base 10: 'soon'"),
                ('1.5', "invalid literal for int() with base 10: '1.5'")):
            exc = self.assertRaises(exception.InvalidConfig,
                                    periodic_sync.read_interval,
                                    _conf(self.tmp, value))
            self.assertEqual(
                "[cellsched] aggregate_sync_interval = '%s' in %s is not "
                'valid: %s; expected -1 (off, the default), 0 (every 60 '
                'seconds) or a positive number of seconds'
                % (value, os.path.join(self.tmp, 'nova.conf'), reason),
                str(exc))

    def test_scheduler_start_refuses_a_bad_interval(self):
        """What building the filter at nova-scheduler start prints: a
        traceback whose last line is the one-line message.
        """
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[cellsched]\naggregate_sync_interval = -5\n')
        code = textwrap.dedent('''
            import nova.conf
            nova.conf.CONF(['--config-file', %r], project='nova')
            from nova_cellsched.filters import ProjectCellFilter
            ProjectCellFilter()
        ''' % path)
        done = subprocess.run([sys.executable, '-c', code], cwd=TOP,
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONPATH=TOP))
        self.assertNotEqual(0, done.returncode)
        self.assertEqual(
            'nova_cellsched.exception.InvalidConfig: [cellsched] '
            "aggregate_sync_interval = '-5' in %s is not valid: Should be "
            'greater '
            'than or equal to -1; expected -1 (off, the default), 0 (every '
            '60 seconds) or a positive number of seconds' % path,
            done.stderr.strip().splitlines()[-1], done.stderr)


class FakePlacement:
    pass


class PeriodicSyncTest(base.TestCase):
    """The thread and its controls, with a fake sync."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf = _conf(self.tmp)
        self.calls = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.aggregate_sync.sync', self._sync))
        self.rows = []
        self.timeouts = []
        if not compat.is_on('guard'):
            # A run turns the I/O bound of the cell reads on.
            self.addCleanup(compat.restore, ['guard'])

    def _sync(self, placement, cells, workers, max_removal, force=False,
              timeout=None):
        self.calls.append((placement, list(cells), workers, max_removal,
                           force))
        self.timeouts.append(timeout)
        return self.rows

    def _worker(self, **kwargs):
        kwargs.setdefault('cell_mappings', lambda: ['c1'])
        worker = periodic_sync.PeriodicSync(
            self.conf, placement=FakePlacement, **kwargs)
        self.addCleanup(worker.stop, 10)
        return worker

    def _interval(self, value):
        # The group object is shared by every ConfigOpts it is registered
        # on, and so are its overrides.
        self.conf.set_override('aggregate_sync_interval', value,
                               group='cellsched')
        self.addCleanup(self.conf.clear_override, 'aggregate_sync_interval',
                        group='cellsched')

    def _wait_runs(self, worker, count):
        with worker.ran:
            self.assertTrue(worker.ran.wait_for(
                lambda: worker.runs >= count, timeout=60))

    def test_off_by_default_no_thread(self):
        worker = self._worker()
        self.assertFalse(worker.start())
        self.assertFalse(worker.running)
        self.assertEqual([], self.calls)

    def test_run_once_uses_the_workers_option(self):
        self.conf.set_override('aggregate_sync_workers', 3,
                               group='cellsched')
        self.addCleanup(self.conf.clear_override, 'aggregate_sync_workers',
                        group='cellsched')
        result = self._worker().run_once()
        self.assertTrue(result.ok)
        self.assertEqual(['c1'], self.calls[0][1])
        self.assertEqual(3, self.calls[0][2])

    def test_run_uses_the_removal_guard_and_never_forces(self):
        """``[cellsched] aggregate_sync_max_removal`` as it is at each run
        (a SIGHUP changes it for the next run); never ``force``.
        """
        worker = self._worker()
        worker.run_once()
        self.conf.set_override('aggregate_sync_max_removal', 0.2,
                               group='cellsched')
        self.addCleanup(self.conf.clear_override,
                        'aggregate_sync_max_removal', group='cellsched')
        worker.run_once()
        self.assertEqual([(0.5, False), (0.2, False)],
                         [call[3:] for call in self.calls])

    def test_bad_removal_share_changes_nothing(self):
        """A value oslo.config refuses (SIGHUP'd in): the run changes
        nothing and says which option and why.
        """
        path = os.path.join(self.tmp, 'share.conf')
        with open(path, 'w') as f:
            f.write('[cellsched]\naggregate_sync_max_removal = 2\n')
        bad = cfg.ConfigOpts()
        conf_mod.register_opts(bad)
        bad(['--config-file', path], project='nova-cellsched-test')
        self.useFixture(fixtures.FakeLogger())
        worker = periodic_sync.PeriodicSync(
            bad, placement=FakePlacement, cell_mappings=lambda: ['c1'])
        result = worker.run_once()
        self.assertEqual([], self.calls)
        self.assertIn('[cellsched] aggregate_sync_max_removal is not valid',
                      result.error)
        self.assertIn('nothing was changed', result.error)

    def test_thread_runs_every_interval(self):
        self._interval(1)
        worker = self._worker()
        self.assertTrue(worker.start())
        self.assertTrue(worker.start())   # once
        self._wait_runs(worker, 2)
        self.assertEqual(
            1, sum(1 for t in threading.enumerate()
                   if t.name == 'cellsched-periodic-sync'))
        worker.stop(10)
        self.assertFalse(worker.running)

    def test_sighup_starts_retimes_and_stops(self):
        worker = self._worker()
        self.assertFalse(worker.running)
        self._interval(1)
        worker.reconfigure(self.conf)
        self.assertTrue(worker.running)
        self._wait_runs(worker, 1)
        self._interval(2)
        worker.reconfigure(self.conf)
        self.assertEqual(2, worker.interval)
        self.assertTrue(worker.running)
        self._interval(-1)
        worker.reconfigure(self.conf)
        self.assertFalse(worker.running)

    def test_sighup_with_a_bad_value_keeps_the_interval(self):
        worker = self._worker()
        logged = self.useFixture(fixtures.FakeLogger())
        path = os.path.join(self.tmp, 'bad.conf')
        with open(path, 'w') as f:
            f.write('[cellsched]\naggregate_sync_interval = never\n')
        bad = cfg.ConfigOpts()
        conf_mod.register_opts(bad)
        bad(['--config-file', path], project='nova-cellsched-test')
        worker.reconfigure(bad)
        self.assertEqual(-1, worker.interval)
        self.assertIn('Ignoring the new value, the periodic sync keeps its '
                      'interval of -1: [cellsched] aggregate_sync_interval',
                      logged.output)

    def test_run_never_raises(self):
        def broken(placement, cells, workers, max_removal, timeout):
            raise RuntimeError('boom')

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.aggregate_sync.sync', broken))
        self.useFixture(fixtures.FakeLogger())
        result = self._worker().run_once()
        self.assertEqual('unexpected RuntimeError: boom; nothing removed '
                         'after it', result.error)

    def test_placement_that_cannot_be_built_is_retried(self):
        built = []

        def placement():
            built.append(1)
            if len(built) == 1:
                raise exception.PlacementUnreachable(OSError('refused'))
            return FakePlacement()

        self.useFixture(fixtures.FakeLogger())
        worker = periodic_sync.PeriodicSync(
            self.conf, placement=placement, cell_mappings=lambda: [])
        self.assertIn('cannot reach the placement API',
                      worker.run_once().error)
        self.assertTrue(worker.run_once().ok)
        self.assertEqual(2, len(built))

    def test_forked_child_does_nothing(self):
        """A worker process forked from the scheduler's parent has a copy
        of the sync but no thread: it neither starts nor reconfigures.
        """
        self._interval(1)
        worker = self._worker()
        worker.pid = os.getpid() + 1   # as seen from a child
        self.assertFalse(worker.start())
        worker.reconfigure(self.conf)
        self.assertFalse(worker.running)
        self.assertFalse(worker.before_fork())

    def test_fork_waits_for_a_run(self):
        worker = self._worker()
        self.assertTrue(worker.before_fork())
        self.assertFalse(worker.run_lock.acquire(blocking=False))
        worker.after_fork(True)
        self.assertTrue(worker.run_lock.acquire(blocking=False))
        worker.run_lock.release()

    def test_fork_never_proceeds_mid_run(self):
        """A run that outlasts FORK_WAIT: a real fork (as oslo.service
        forks nova-scheduler's workers) waits until the run ended, so
        the child inherits no lock the run held, and the run's pool
        submissions (which take concurrent.futures' fork lock) do not
        deadlock the waiting fork. Run in a subprocess, bounded.
        """
        script = textwrap.dedent("""
            import concurrent.futures
            import os
            import threading
            import time

            from oslo_config import cfg

            from nova_cellsched import conf as conf_mod
            from nova_cellsched.scheduler import aggregate_sync
            from nova_cellsched.scheduler import periodic_sync

            periodic_sync.FORK_WAIT = 0.2
            held = threading.Lock()   # what a run holds: a pool mutex...
            started = threading.Event()
            ended = []

            def sync(placement, cells, **kwargs):
                with held:
                    started.set()
                    time.sleep(1.0)   # outlasts FORK_WAIT
                    with concurrent.futures.ThreadPoolExecutor(2) as pool:
                        pool.submit(time.sleep, 0.1).result()
                    ended.append(time.monotonic())
                return []

            aggregate_sync.sync = sync
            conf = cfg.ConfigOpts()
            conf_mod.register_opts(conf)
            conf([], project='nova-cellsched-test')
            worker = periodic_sync.PeriodicSync(
                conf, placement=object, cell_mappings=lambda: ['c1'])
            periodic_sync._worker = worker
            periodic_sync._register_fork_handlers()
            run = threading.Thread(target=worker.run_once)
            run.start()
            started.wait(10)
            pid = os.fork()
            if pid == 0:
                free = held.acquire(timeout=2)
                os._exit(0 if ended and free else 1)
            _, status = os.waitpid(pid, 0)
            run.join(10)
            print('child exit %d, run ok %s' % (
                os.waitstatus_to_exitcode(status), worker.last.ok))
        """)
        env = dict(os.environ, PYTHONPATH=TOP)
        done = subprocess.run([sys.executable, '-c', script], env=env,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('child exit 0, run ok True', done.stdout)
        self.assertIn('has waited 0 s for the periodic sync of the cell '
                      'aggregates to end, and waits on', done.stderr)

    def test_run_reads_each_cell_within_list_cell_timeout(self):
        """Each run gives the sync ``[cellsched] list_cell_timeout`` as
        the bound of every cell database read, and a fork waits for a
        run that bound plus FORK_WAIT_PLACEMENT at most.
        """
        worker = self._worker()
        worker.run_once()
        self.conf.set_override('list_cell_timeout', 2.5, group='cellsched')
        self.addCleanup(self.conf.clear_override, 'list_cell_timeout',
                        group='cellsched')
        worker.run_once()
        self.assertEqual([60.0, 2.5], self.timeouts)
        self.assertEqual(2.5 + periodic_sync.FORK_WAIT_PLACEMENT,
                         worker.fork_wait())

    def test_fork_waits_for_a_run_at_most_its_bound(self):
        """A run that never ends (a placement request without a timeout):
        a real fork waits list_cell_timeout + FORK_WAIT_PLACEMENT, logs
        an ERROR saying so and goes on; the child runs; the run, still
        going, later ends normally. Run in a subprocess, bounded.
        """
        script = textwrap.dedent("""
            import os
            import threading
            import time

            from oslo_config import cfg

            from nova_cellsched import conf as conf_mod
            from nova_cellsched.scheduler import aggregate_sync
            from nova_cellsched.scheduler import periodic_sync

            periodic_sync.FORK_WAIT = 0.2
            periodic_sync.FORK_WAIT_PLACEMENT = 0.5
            aggregate_sync.bound_cell_io = lambda: True
            started = threading.Event()
            release = threading.Event()

            def sync(placement, cells, **kwargs):
                started.set()
                release.wait(60)   # hangs until the parent has forked
                return []

            aggregate_sync.sync = sync
            conf = cfg.ConfigOpts()
            conf_mod.register_opts(conf)
            conf([], project='nova-cellsched-test')
            conf.set_override('list_cell_timeout', 0.5, group='cellsched')
            worker = periodic_sync.PeriodicSync(
                conf, placement=object, cell_mappings=lambda: ['c1'])
            periodic_sync._worker = worker
            periodic_sync._register_fork_handlers()
            run = threading.Thread(target=worker.run_once)
            run.start()
            started.wait(10)
            began = time.monotonic()
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            waited = time.monotonic() - began
            _, status = os.waitpid(pid, 0)
            release.set()
            run.join(10)
            print('fork waited %.2f s (bound %.1f s), child exit %d, run '
                  'ok %s' % (waited, worker.fork_wait(),
                             os.waitstatus_to_exitcode(status),
                             worker.last.ok))
        """)
        env = dict(os.environ, PYTHONPATH=TOP)
        done = subprocess.run([sys.executable, '-c', script], env=env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertRegex(done.stdout, r'fork waited \d+\.\d+ s \(bound 1\.0 '
                         r's\), child exit 0, run ok True')
        waited = float(done.stdout.split()[2])
        # The bound, with a generous margin for a loaded machine.
        self.assertGreaterEqual(waited, 0.9, done.stdout)
        self.assertLess(waited, 10.0, done.stdout)
        self.assertIn('waited 1 s, its bound ([cellsched] list_cell_timeout '
                      '+ 0.5 s), for the periodic sync of the cell aggregates '
                      'to end, and goes on without waiting further',
                      done.stderr)

    def test_missing_since_is_remembered_until_added(self):
        now = [100.0]
        worker = self._worker(wall=lambda: now[0])
        logged = self.useFixture(fixtures.FakeLogger())
        failed = aggregate_sync.SyncRow('cell1 (c1)', 'c1', 'p1', 'add',
                                        'failed: no resource provider p1')
        self.rows = [failed]
        worker.run_once()
        now[0] += 300
        worker.run_once()
        self.assertIn('add p1 in cell cell1 (c1): failed: no resource '
                      'provider p1 (missing for at least 5 min: this '
                      "scheduler's periodic sync first found it missing at "
                      '1970-01-01 00:01:40 UTC)', logged.output)
        self.rows = [aggregate_sync.SyncRow('cell1 (c1)', 'c1', 'p1', 'add',
                                            aggregate_sync.DONE)]
        worker.run_once()
        self.assertEqual({}, worker.missing_since)


class SetupTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.periodic_sync._worker', None))

    def test_once_per_process(self):
        conf = _conf(self.useFixture(fixtures.TempDir()).path)
        first = periodic_sync.setup(conf)
        self.assertIs(first, periodic_sync.setup(conf))
        self.assertIs(first, periodic_sync.get())
        self.assertFalse(first.running)

    def test_bad_interval_is_logged_and_raised(self):
        conf = _conf(self.useFixture(fixtures.TempDir()).path, 'x')
        logged = self.useFixture(fixtures.FakeLogger())
        self.assertRaises(exception.InvalidConfig, periodic_sync.setup,
                          conf)
        self.assertIsNone(periodic_sync.get())
        self.assertIn('[cellsched] aggregate_sync_interval', logged.output)
