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

"""Libraries are checked by what they do, never pinned by their source.

nova runs with whatever its requirements allow (a plain ``pip install
nova==X`` brings SQLAlchemy 2.1): a part stays on wherever the library
behaves as the part relies on, and where it does not, the message names
the library, its version, the tested versions and the fix.
"""

import datetime
import functools
import importlib.metadata
import logging
import os

import fixtures
import nova.conf

from cellsched_tools import maintainer
import nova_cellsched.api as cellsched_api
from nova_cellsched.api.startup import install as patch
from nova_cellsched import compat
from nova_cellsched.compat import checks
from nova_cellsched.compat import core
from nova_cellsched.compat import hashing
from nova_cellsched.compat import parts
from tests.fixtures import releases
from tests.fixtures import selftests
from tests.unit.compat import test_compat

CONF = nova.conf.CONF


def _join_forgetting_its_joins(original):
    """``Query.join`` of a SQLAlchemy that keeps joins elsewhere."""
    def join(self, *args, **kwargs):
        joined = original(self, *args, **kwargs)
        joined._setup_joins = ()
        return joined
    return join


class _Base(test_compat._Base):
    """No part on at the start (as compat's own tests), on SQLite."""

    def forget_joins(self):
        from sqlalchemy.orm import query as sa_query

        self.useFixture(fixtures.MonkeyPatch(
            'sqlalchemy.orm.query.Query.join',
            _join_forgetting_its_joins(sa_query.Query.join)))

    def assert_library_message(self, library, problem):
        """Names the library, its version, the tested ones, the fix."""
        self.assertIsInstance(problem, checks.LibraryProblem)
        self.assertTrue(problem.startswith(
            '%s %s (installed) ' % (library,
                                    importlib.metadata.version(library))),
            problem)
        self.assertIn('; tested with %s %s.' % (
            library, ', '.join(checks.LIBRARIES_TESTED[library])), problem)
        self.assertIn("To fix: build nova's venv with its release's "
                      'upper-constraints (pip install -c https://releases.'
                      'openstack.org/constraints/upper/', problem)
        self.assertIn(' nova==%s)' % hashing.nova_version(), problem)


class LibraryChecksTest(_Base):

    def test_no_library_code_is_pinned_by_its_source(self):
        """Every relied-on source is nova's own code or value.

        ``nova.objects.base.obj_make_list`` is oslo.versionedobjects':
        pinned, a plain ``pip install nova==33.0.2`` (oslo.versionedobjects
        3.12.0, nova 34's) made nova 33 match no one tested release.
        """
        core.nova_chooses_threads()
        nova_dir = os.path.dirname(importlib.import_module('nova').__file__)
        for source in parts.all_sources():
            self.assertTrue(source.module.startswith('nova.'), source.name)
            code = hashing.code_source(core._value(source))
            if code is not None:
                self.assertTrue(code[1].startswith(nova_dir + os.sep),
                                '%s is in %s' % (source.name, code[1]))
        for release in core.tested():
            self.assertEqual([], [name for name in release.hashes
                                  if not name.startswith('nova.')])

    def test_the_installed_libraries_behave_as_relied_on(self):
        for part, found in checks.LIBRARY_CHECKS.items():
            self.assertIn(part, parts.BY_NAME)
            for check in found:
                spec = 'nova_cellsched.compat.checks:%s' % check.__name__
                self.assertIn(spec, parts.BY_NAME[part].checks)
                self.assertEqual([], check(), spec)
        self.assertEqual([], checks.library_problems())

    def test_a_sqlalchemy_that_keeps_joins_elsewhere_turns_keyset_off(self):
        """One problem naming SQLAlchemy; the lister stays nova's."""
        self.forget_joins()
        (problem,) = checks.keyset_sqlalchemy()
        self.assert_library_message('SQLAlchemy', problem)
        self.assertIn('Query.join does not record its joins in '
                      'Query._setup_joins', problem)
        found = compat.check(['lister'])
        self.assertEqual([problem], found['keyset'])
        self.assertEqual([problem], found['lister'])
        error = self.assertRaises(patch.IncompatibleNova,
                                  cellsched_api.install)
        self.assertEqual([problem], error.problems)
        # The fix is the library's, not a nova-cellsched upgrade.
        self.assertNotIn(core.HOW_TO_FIX, str(error))
        self.assertEqual([], compat.on())

    def test_a_part_off_for_a_library_warns_with_its_fix(self):
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_serialization.jsonutils.to_primitive',
            lambda value, *args, **kwargs: str(value)))
        (problem,) = checks.validation_serialization()
        self.assert_library_message('oslo.serialization', problem)
        self.assertIn('jsonutils.dumps gives', problem)
        found = compat.install(['validation'])
        if 'validation' in releases.running_table().lacks:
            # nova 31 and 32: nothing to validate, said at INFO.
            self.assertEqual([core.lacking('validation')],
                             found['validation'])
            return
        self.assertEqual([problem], found['validation'])
        (said,) = [line for line in logs.output.splitlines()
                   if 'is off' in line]
        self.assertIn("nova-cellsched's part validation, which", said)
        self.assertIn(problem, said)
        self.assertNotIn(core.HOW_TO_FIX, said)

    def test_obj_make_list_that_reorders_turns_the_lister_off(self):
        from nova.objects import base as nova_base

        original = nova_base.obj_make_list

        @functools.wraps(original)
        def reordering(context, list_obj, *args, **kwargs):
            made = original(context, list_obj, *args, **kwargs)
            made.objects = list(reversed(made.objects))
            return made

        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.base.obj_make_list', reordering))
        problems = checks.lister_object_lists()
        self.assertNotEqual([], problems)
        for problem in problems:
            self.assert_library_message('oslo.versionedobjects', problem)
            self.assertIn("obj_make_list, called with", problem)
            self.assertIn("[('server-1', 'a'), ('server-1', 'b')]", problem)
        self.assertEqual(problems, compat.check(['lister'])['lister'])

    def test_a_datetime_serializes_as_nova_serializes_it(self):
        """What the check compares: to_primitive's string, in the JSON."""
        from oslo_serialization import jsonutils

        when = datetime.datetime(2026, 1, 2, 3, 4, 5, 6)
        self.assertEqual('"%s"' % jsonutils.to_primitive(when),
                         jsonutils.dumps(when))


class TheSameAnswerEverywhereTest(_Base):
    """``check``, the maintainer's "parts off" and the self-test agree."""

    def test_the_maintainers_parts_off_are_checks(self):
        self.forget_joins()
        out = []
        maintainer.main([], out.append)
        (line,) = [line for line in ''.join(out).splitlines()
                   if line.startswith('# parts off on nova')]
        found = compat.check()
        off = [name for name, problems in found.items() if problems]
        self.assertEqual(['keyset', 'lister', 'view', 'render', 'min_version'],
                         [name for name in off
                          if name not in releases.running_table().lacks])
        self.assertIn('keyset (%s)' % found['keyset'][0], line)
        self.assertIn('lister (requires keyset)', line)

    def test_the_self_test_runs_the_library_checks(self):
        from nova_cellsched.api.startup import selftest

        self.useFixture(selftests.SelfTestsEnded(self.id()))
        self.forget_joins()
        problems, _seconds = selftest.run(timeout=300.0)
        self.assertEqual(checks.keyset_sqlalchemy()[0], problems[0])
