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

"""demo.api.stop_session: nothing of a stopped session is left.

The uwsgi harness of the demo and tests, test_uwsgi_guide and
bench_sync.py's placement stop their uwsgi with it. A real session
here: a shell that ignores SIGTERM, with a child that ignores it too.
"""

import os
import subprocess
import time


from nova_cellsched.demo import api as demo_api
from tests import base


def session_members(sid: int) -> set[int]:
    """Live (not zombie) pids of session *sid*, from /proc."""
    pids = set()
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        # After the name: state, ppid, pgrp, session.
        if int(fields[3]) == sid and fields[0] != 'Z':
            pids.add(int(name))
    return pids


class StopSessionTest(base.TestCase):

    def start(self, script: str) -> subprocess.Popen:
        process = subprocess.Popen(['sh', '-c', script],
                                   start_new_session=True,
                                   stdout=subprocess.PIPE, text=True)
        self.addCleanup(demo_api.stop_session, process, 0)
        # The child's pid, once it runs.
        self.child = int(process.stdout.readline())
        process.stdout.close()
        return process

    def wait_gone(self, sid: int) -> set[int]:
        deadline = time.monotonic() + 30
        while session_members(sid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return session_members(sid)

    def test_lingering_session_is_killed(self):
        process = self.start('trap "" TERM; sleep 300 & echo $!; wait')
        self.assertEqual({process.pid, self.child},
                         session_members(process.pid))
        demo_api.stop_session(process, timeout=0.5)
        self.assertIsNotNone(process.returncode)
        self.assertEqual(set(), self.wait_gone(process.pid))
        # Again: nothing more to do, no error.
        demo_api.stop_session(process, timeout=0.5)

    def test_polite_session_ends_on_sigterm(self):
        process = self.start('sleep 300 & echo $!; wait')
        demo_api.stop_session(process, timeout=30)
        self.assertEqual(-15, process.returncode)
        self.assertEqual(set(), self.wait_gone(process.pid))
