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

"""ProjectCellFilter deciding while its mapping is reloaded, SIGHUP-style.

The filter reads its options from an oslo.config ``ConfigOpts`` parsed
from a real file; another thread rewrites the file and calls
``mutate_config_files()`` (what nova's services do on SIGHUP) 100 times
while four threads make 1,000 scheduling decisions over 10,000 of nova's
``FakeHostState`` with real ``RequestSpec`` objects. Each decision must
be exactly the hosts of the cells that one mapping version allows: one
of the versions in force while it was made, never a mix of two.
"""

# nova.tests first, as in tests/unit/test_filter.py.
from nova.tests.unit.scheduler import fakes  # isort: skip

import logging
import os
import threading
import time
import uuid as uuid_lib

import fixtures
from nova import objects
from oslo_config import cfg
import testtools.content

from nova_cellsched import conf as conf_mod
from nova_cellsched.scheduler import decision
from nova_cellsched.scheduler import host_filter as filters
from nova_cellsched.scheduler import mapping as mapping_mod
from nova_cellsched.scheduler import state
from tests import base
from tests.fixtures import request_specs
from tests.fixtures import scheduler_state

CELLS = 20
HOSTS = 10000
DECISIONS = 1000
DECIDERS = 4
RELOADS = 100
#: Project ids: mapped in some versions, unmapped in others.
PROJECTS = [uuid_lib.UUID(int=0xabc0 + i).hex for i in range(6)]
UNMAPPED = uuid_lib.UUID(int=0xdead).hex


def make_cells():
    rng_uuids = [str(uuid_lib.UUID(int=(i + 1) * 7919, version=4))
                 for i in range(CELLS)]
    return [decision.CellInfo(uuid=u, name='c%02d' % i)
            for i, u in enumerate(rng_uuids)]


def version(v, cells):
    """Mapping version *v*: option values and the allowed cells oracle.

    Refers to cells by name, dashed uuid and undashed upper-case uuid,
    and names a different subset of the projects in each version, so a
    decision made with one option of version v and the other of version
    v+1 allows cells neither version allows.
    """
    def ref(i):
        cell = cells[i % CELLS]
        return (cell.name, cell.uuid,
                cell.uuid.replace('-', '').upper())[i % 3]

    default = [(v * 3) % CELLS, (v * 3 + 1) % CELLS]
    projects = {}
    for k, project in enumerate(PROJECTS):
        if (v + k) % 3 != 0:
            projects[project] = [(v * 5 + k * 2 + 7) % CELLS]
    by_cell = {}
    for project, indexes in projects.items():
        for i in indexes:
            by_cell.setdefault(i, []).append(project)
    text_default = ','.join(ref(i) for i in default)
    text_projects = ','.join('%s:%s' % (ref(i), ';'.join(ps))
                             for i, ps in sorted(by_cell.items()))
    allowed = {}
    for project in PROJECTS + [UNMAPPED]:
        indexes = projects.get(project, default)
        allowed[project] = frozenset(cells[i].uuid for i in indexes)
    return text_default, text_projects, allowed


def write_options(path, text_default, text_projects):
    tmp = path + '.new'
    with open(tmp, 'w') as handle:
        handle.write('[cellsched]\ncells_default = %s\ncells_projects = %s\n'
                     % (text_default, text_projects))
    os.replace(tmp, path)


class FilterReloadLoadTest(base.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()
        # As in production (debug off): with DEBUG the filter logs one
        # line per rejected host, 9,500 lines per decision here.
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='nova_cellsched', level=logging.INFO))
        self.cells = make_cells()
        self.path = self.useFixture(fixtures.TempDir()).join('nova.conf')
        self.versions = [version(v, self.cells) for v in range(RELOADS + 1)]
        write_options(self.path, *self.versions[0][:2])
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        self.conf(['--config-file', self.path], project='nova',
                  default_config_files=[])
        self.addCleanup(self.conf.reset)
        # The filter reads this ConfigOpts instead of nova's global CONF,
        # and the cell mappings from a list (an API database read, 1 ms).

        def load_cells():
            time.sleep(0.001)
            return list(self.cells)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state.CONF', self.conf))
        # Each test's first filter builds the policy from self.conf.
        self.useFixture(scheduler_state.FreshPolicy())
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state.load_cell_infos', load_cells))
        self.assertIs(state.load_cell_infos, load_cells)
        self.hosts = [
            fakes.FakeHostState('host%05d' % i, 'node%05d' % i,
                                {'cell_uuid': self.cells[i % CELLS].uuid})
            for i in range(HOSTS)]

    def run_load(self, reload_options, filt=None):
        """1,000 decisions by 4 threads while *reload_options(v)* runs.

        :returns: (decisions, mixes, exceptions, reload errors, report)
        """
        filt = filt or filters.ProjectCellFilter()
        state = {'pending': 0, 'committed': 0}
        errors, mixes, decided, reload_errors = [], [], [], []
        start_line = threading.Barrier(DECIDERS + 1)
        done_deciding = threading.Event()
        per_cell = HOSTS // CELLS

        def reloader():
            start_line.wait()
            try:
                for v in range(1, RELOADS + 1):
                    # Spread the reloads over the decisions.
                    while (len(decided) < v * DECISIONS // (RELOADS + 1)
                           and not done_deciding.is_set()):
                        time.sleep(0.0005)
                    state['pending'] = v
                    reload_options(v)
                    state['committed'] = v
            except Exception as exc:  # noqa: BLE001 - reported below
                reload_errors.append(repr(exc))

        def decider(index):
            projects = PROJECTS + [UNMAPPED]
            start_line.wait()
            for n in range(DECISIONS // DECIDERS):
                project = projects[(index + n) % len(projects)]
                spec = request_specs.request_spec(
                    project, instance_uuid=str(uuid_lib.UUID(int=n)))
                low = state['committed']
                try:
                    passed = filt.filter_all(iter(self.hosts), spec)
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(repr(exc))
                    continue
                high = state['pending']
                got = frozenset(h.cell_uuid for h in passed)
                if len(passed) != per_cell * len(got) or not any(
                        self.versions[v][2][project] == got
                        for v in range(low, high + 1)):
                    mixes.append((project, low, high, sorted(got)))
                decided.append(high - low)

        threads = [threading.Thread(target=decider, args=(i,))
                   for i in range(DECIDERS)]
        threads.append(threading.Thread(target=reloader))
        begin = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads[:DECIDERS]:
            thread.join(300)
        done_deciding.set()
        threads[-1].join(300)
        elapsed = time.monotonic() - begin
        self.assertFalse(any(t.is_alive() for t in threads), 'deadlock')
        text = ('filter load: %d decisions over %d hosts in %d cells by %d '
                'threads during %d reloads in %.1fs; %d made across a '
                'reload; %d mixes, %d exceptions'
                % (len(decided), HOSTS, CELLS, DECIDERS, RELOADS, elapsed,
                   sum(1 for d in decided if d), len(mixes), len(errors)))
        self.addDetail('filter-load-%s' % self.id().rsplit('.', 1)[1],
                       testtools.content.text_content(text))
        return decided, mixes, errors, reload_errors

    def assert_last_version_in_force(self, filt):
        last = self.versions[RELOADS][2]
        for project in PROJECTS + [UNMAPPED]:
            spec = objects.RequestSpec(project_id=project)
            self.assertEqual(
                last[project],
                frozenset(h.cell_uuid
                          for h in filt.filter_all(self.hosts, spec)),
                project)

    def sighup(self, v):
        """Rewrite the file with version *v* and mutate, as SIGHUP does."""
        write_options(self.path, *self.versions[v][:2])
        self.conf.mutate_config_files()

    def test_decisions_during_100_atomic_reloads(self):
        """The filter and its policy cache never mix two mappings.

        The mutate hook gets each version's options as one value, without
        oslo.config, so any mix would be the filter's or the cache's.
        """
        snapshot = [(tuple(self.conf.cellsched.cells_default),
                     self.conf.cellsched.cells_projects)]
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state.read_options',
            lambda conf_obj: snapshot[0]))
        filt = filters.ProjectCellFilter()

        def swap(v):
            text_default, text_projects, _allowed = self.versions[v]
            snapshot[0] = (tuple(text_default.split(',')), text_projects)
            scheduler_state.sighup(self.conf)
            time.sleep(0.001)

        decided, mixes, errors, reload_errors = self.run_load(swap)
        self.assertEqual([], reload_errors)
        self.assertEqual([], errors)
        self.assertEqual([], mixes[:5])
        self.assertEqual(DECISIONS, len(decided))
        self.assertGreater(sum(1 for d in decided if d), 0)
        self.assert_last_version_in_force(filt)
        # At most one line per reload: the hook or a request installs the
        # newest options, so quick reloads may be taken together, and a
        # slow reader never rolls the policy back (which logged extra
        # lines; see test_slow_reader_does_not_roll_back_the_policy).
        changes = self.logs.output.count('[cellsched] options changed')
        self.addDetail('filter-load-reload-lines',
                       testtools.content.text_content(
                           'filter load: %d "options changed" lines for %d '
                           'reloads' % (changes, RELOADS)))
        self.assertGreater(changes, 0)
        self.assertLessEqual(changes, RELOADS)

    def test_slow_reader_does_not_roll_back_the_policy(self):
        """Was a bug: a request that read older options rolls back the cache.

        PolicyCache.current() read the options outside the lock and
        _reparse() installed whatever that request read, even when another
        request installed newer options meanwhile. Under load (4 threads,
        100 reloads) this logged "[cellsched] options changed" back to an
        old value and reloaded the cells from the API database again,
        dozens of times. Requests no longer read the options: only the
        SIGHUP hook gives them to the cache (PolicyCache.reset). Here a
        request is loading the cells with version 1 in force when a
        SIGHUP pushes version 2: the request's load does not undo it.
        """
        from nova_cellsched.scheduler import decision

        def to_raw(v):
            return (tuple(self.versions[v][0].split(',')),
                    self.versions[v][1])

        sighups = []

        def load_cells():
            if not sighups:
                # The first load, a request's: a SIGHUP comes meanwhile
                # (it waits for the request's load to end).
                sighup = threading.Thread(
                    target=cache.reset, args=(to_raw(2),))
                sighups.append(sighup)
                sighup.start()
            return list(self.cells)

        cache = decision.PolicyCache(to_raw(1), load_cells)
        cache.current()
        sighups[0].join(60)
        self.assertFalse(sighups[0].is_alive(), 'deadlock')
        self.assertEqual(mapping_mod.parse(*to_raw(2)), cache.mapping)
        cache.current()
        self.assertEqual(mapping_mod.parse(*to_raw(2)), cache.mapping)

    def test_decisions_during_100_reloads(self):
        """Was a bug: decisions during a SIGHUP mix old and new mappings.

        With mutate_config_files() in another thread, hundreds of the
        1,000 decisions allowed cells that neither the old nor the new
        mapping allows: requests read the two options one after the other
        (a SIGHUP between the reads is a torn pair), and oslo.config
        clears its value cache *before* it installs the new namespace, so
        a request that read an option while the files were parsed cached
        the old value again, until the next SIGHUP. Now only the mutate
        hook reads the pair, once the new values are in.
        """
        filt = filters.ProjectCellFilter()
        decided, mixes, errors, reload_errors = self.run_load(self.sighup)
        self.assertEqual([], reload_errors)
        self.assertEqual([], errors)
        self.assertEqual(DECISIONS, len(decided))
        self.assertEqual([], mixes[:5])
        self.assert_last_version_in_force(filt)

    def _mixed_project(self, a, b):
        """A project the pair (default of a, projects of b) misplaces.

        That is: the pair lets it into cells that neither version a nor
        version b gives it.
        """
        mixed = decision.resolve(
            mapping_mod.parse(self.versions[a][0], self.versions[b][1]),
            self.cells)
        for project in PROJECTS + [UNMAPPED]:
            got = mixed.allowed_cells(project)
            if got not in (self.versions[a][2][project],
                           self.versions[b][2][project]):
                return project, got
        self.fail('versions %d and %d do not make a telling mix' % (a, b))

    def test_requests_do_not_read_the_options(self):
        """Was a bug: a SIGHUP between a request's two option reads.

        Requests read cells_default, then cells_projects; a SIGHUP landing
        between the two reads gave the cache (old default, new projects),
        which it parsed and used. Now a request reads neither option:
        a SIGHUP fired by a read of cells_default is never fired by one,
        and the request decides with the mapping in force.
        """
        project, _mix = self._mixed_project(0, 1)
        conf = self.conf
        sighup = self.sighup

        class Group:
            def __init__(self, group):
                self._group = group
                self.armed = True

            def __getattr__(self, name):
                value = getattr(self._group, name)
                if name == 'cells_default' and self.armed:
                    self.armed = False
                    sighup(1)
                return value

        class SighupBetweenReads:
            def __init__(self):
                self.group = Group(conf.cellsched)

            def __getitem__(self, name):
                return self.group

            def __getattr__(self, name):
                return getattr(conf, name)

        filt = filters.ProjectCellFilter()
        reads = SighupBetweenReads()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_cellsched.scheduler.state.CONF', reads))
        spec = objects.RequestSpec(project_id=project)
        got = frozenset(h.cell_uuid
                        for h in filt.filter_all(self.hosts, spec))
        self.assertEqual(self.versions[0][2][project], got)
        self.assertTrue(reads.group.armed)

    def test_request_between_install_and_hooks_gets_one_version(self):
        """Was a bug: a cached old option paired with a fresh new one.

        mutate_config_files() installs the new values, logs each change,
        and only then runs the mutate hooks. A scheduler thread that read
        cells_default during the parse had the old default cached; a
        request after the install and before the hooks read the new
        cells_projects next to it, and used the torn pair (it failed the
        load test above once in a CI run, 1 of 1,000 decisions). Now a
        request during the parse reads no option of the pair, a request
        before the hooks decides with the old version, and the hook
        installs the whole new one.
        """
        project, _mix = self._mixed_project(0, 1)
        filt = filters.ProjectCellFilter()
        spec = objects.RequestSpec(project_id=project)

        def decide():
            return frozenset(h.cell_uuid
                             for h in filt.filter_all(self.hosts, spec))

        self.assertEqual(self.versions[0][2][project], decide())
        conf = self.conf
        reload_files = conf._reload_config_files
        warn_immutability = conf._warn_immutability
        decided = []

        def parse_with_a_request():
            namespace = reload_files()
            # Another scheduler thread decides meanwhile.
            decided.append(decide())
            return namespace

        def right_after_install():
            warn_immutability()
            decided.append(decide())

        conf._reload_config_files = parse_with_a_request
        conf._warn_immutability = right_after_install
        try:
            self.sighup(1)
        finally:
            del conf._reload_config_files
            del conf._warn_immutability
        self.assertEqual([self.versions[0][2][project]] * 2, decided)
        self.assertEqual(self.versions[1][2][project], decide())

    def test_request_during_sighup_does_not_undo_it(self):
        """Was a bug: a request during a SIGHUP keeps the old value cached.

        oslo.config's mutate_config_files() clears the value cache, then
        parses the files, then installs the new namespace. A request
        that reads the options while the files are parsed (here: made
        from inside the parse, as a preempted scheduler thread would)
        computes the old values and caches them: every later request uses
        the old mapping, until the next SIGHUP. The filter cannot see the
        change, since it trusts the cached attribute reads.
        """
        filt = filters.ProjectCellFilter()
        conf = self.conf
        reload_files = conf._reload_config_files

        def slow_parse():
            namespace = reload_files()
            filt.filter_all(self.hosts[:CELLS],
                            objects.RequestSpec(project_id=UNMAPPED))
            return namespace

        conf._reload_config_files = slow_parse
        try:
            self.sighup(1)
        finally:
            del conf._reload_config_files
        # The SIGHUP is over: version 1 is in force, for every request.
        for project in PROJECTS + [UNMAPPED]:
            spec = objects.RequestSpec(project_id=project)
            self.assertEqual(
                self.versions[1][2][project],
                frozenset(h.cell_uuid
                          for h in filt.filter_all(self.hosts, spec)),
                project)
