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

"""``nova-cellsched demo --api``: the commands it prints work as printed.

The demo runs as a user runs it, in a process of its own (this
checkout's code, ``python -m nova_cellsched.cmd.cellsched``), on a small
SQLite world. The ``curl`` and ``openstack`` lines it prints are split
as a shell splits them and run as they are; then the demo's process
group gets SIGINT, as a terminal sends Ctrl-C (or SIGTERM, or SIGHUP as
when its terminal closes), and it must exit 0 leaving no process of
uwsgi's session and no temp dir behind. Killed outright (SIGKILL, a
crash), it leaves no process of uwsgi's session either.
"""

import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import fixtures
from paste import deploy
import testtools
import testtools.content

from nova_cellsched.demo import api as demo_api
from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
#: Generous: the world is built, listed, and nova-api imported twice on
#: a loaded 2-core machine.
READY_TIMEOUT = 600
#: uwsgi stops its workers gracefully (seconds each, here); a bound, not
#: a measurement.
STOP_BOUND = 60
UUID = re.compile(r'\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                  r'[0-9a-f]{12}\b')


class Demo:
    """One ``nova-cellsched demo --api`` process and its output lines."""

    def __init__(self, cwd: str, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in [TOP, os.environ.get('PYTHONPATH', '')] if p))
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'nova_cellsched.cmd.cellsched', 'demo',
             '--api', *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        self.lines: list[str] = []
        #: (pid, temp dir) of its uwsgi master, once known.
        self.uwsgi: tuple[int, str] | None = None
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip('\n'))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float) -> None:
        """Collect output lines until one contains *text*."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError('no %r in %.0f s:\n%s' % (
                    text, timeout, self.output()))
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError('the demo exited (%s) before %r:\n%s'
                                     % (self.process.wait(), text,
                                        self.output()))
            self.lines.append(line)

    def finish(self, timeout: float) -> int:
        """The exit code, once the process has exited and said all."""
        code = self.process.wait(timeout)
        self._reader.join(10)
        while True:
            line = self._queue.get_nowait() if not self._queue.empty() \
                else None
            if line is None:
                return code
            self.lines.append(line)

    def output(self) -> str:
        return '\n'.join(self.lines)

    def command(self, first_word: str) -> str:
        """The one printed command line whose first word is *first_word*."""
        (line,) = [line.strip() for line in self.lines
                   if line.strip().split(' ', 1)[0] == first_word]
        return line

    def kill(self) -> None:
        """Stop it however the test ended, leaving no uwsgi behind.

        SIGTERM first: the demo then stops uwsgi (in a session of its
        own, which a SIGKILL of the demo would leave running); SIGKILL
        the demo's group and uwsgi's session only if that fails.
        """
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_BOUND)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        if self.uwsgi is not None:
            pid, temp_dir = self.uwsgi
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shutil.rmtree(temp_dir, True)


def session_processes(sid: int) -> list[str]:
    """``pid command`` of every process left in session *sid*."""
    out = subprocess.run(['ps', '-o', 'pid=,cmd=', '-s', str(sid)],
                         capture_output=True, text=True, check=False)
    return out.stdout.splitlines()


class DemoApiTest(base.TestCase):
    """The demo's nova-api answers the printed commands, and stops."""

    def setUp(self):
        super().setUp()
        problem = demo_api.uwsgi_missing()
        if problem:
            self.skipTest(problem)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.env = dict(os.environ)
        # A user's shell may hold an openstack cloud; the printed
        # command must not depend on it, nor this test on the runner's.
        for name in list(self.env):
            if name.startswith('OS_'):
                del self.env[name]

    def start(self):
        demo = Demo(self.tmp, '--cells', '3', '--instances', '60',
                    '--dir', os.path.join(self.tmp, 'world'))
        self.addCleanup(demo.kill)
        self.addCleanup(lambda: self.addDetail(
            'demo-output', testtools.content.text_content(demo.output())))
        demo.wait_for('Ctrl-C stops nova-api.', READY_TIMEOUT)
        demo.uwsgi = self.uwsgi_master(demo)
        return demo, demo.uwsgi

    def uwsgi_master(self, demo):
        """(pid, temp dir) of the demo's uwsgi master, its child."""
        out = subprocess.run(['ps', '-o', 'pid=,args=', '--ppid',
                              str(demo.process.pid)], capture_output=True,
                             text=True, check=False)
        masters = [line.split() for line in out.stdout.splitlines()
                   if 'uwsgi' in line]
        self.assertEqual(1, len(masters), out.stdout)
        pid, *argv = masters[0]
        ini = argv[argv.index('--ini') + 1]
        return int(pid), os.path.dirname(ini)

    def run_printed(self, line):
        """*line* split as a shell splits it, run as it is."""
        return subprocess.run(shlex.split(line), cwd=self.tmp,
                              env=self.env, capture_output=True, text=True,
                              timeout=300)

    def assertStopsCleanly(self, demo, uwsgi, signum):
        pid, temp_dir = uwsgi
        self.assertTrue(os.path.isdir(temp_dir))
        # As a terminal sends Ctrl-C: to the foreground process group
        # (uwsgi runs in a session of its own, and gets SIGTERM from the
        # demo).
        os.killpg(demo.process.pid, signum)
        code = demo.finish(STOP_BOUND)
        self.assertEqual(0, code, demo.output())
        self.assertIn('Stopped.', demo.lines[-1])
        self.assertEqual([], session_processes(pid))
        self.assertFalse(os.path.exists(temp_dir))
        # The world stays, with nova-api's log.
        world = os.path.join(self.tmp, 'world')
        self.assertTrue(os.path.isfile(os.path.join(world, 'nova.conf')))
        with open(os.path.join(world, 'nova-api.log')) as handle:
            log = handle.read()
        self.assertIn('nova-cellsched serves nova-api server lists', log)

    def test_printed_commands_work_and_ctrl_c_stops_it(self):
        """curl shows Server-Timing and servers; openstack lists them."""
        if shutil.which('curl') is None:
            self.skipTest('curl is not installed: the printed curl command '
                          'cannot run here')
        demo, uwsgi = self.start()
        curl = self.run_printed(demo.command('curl'))
        self.assertEqual(0, curl.returncode, curl.stderr)
        # text=True: universal newlines, HTTP's CRLF are read as LF.
        head, _sep, body = curl.stdout.partition('\n\n')
        status, *headers = head.split('\n')
        self.assertRegex(status, r'^HTTP/1\.1 200 ')
        names = {h.split(':', 1)[0].lower() for h in headers}
        self.assertIn('server-timing', names)
        servers = json.loads(body)['servers']
        self.assertEqual(5, len(servers))
        self.assertIn('OS-EXT-SRV-ATTR:host', servers[0])

        openstack = self.run_printed(demo.command('env'))
        self.assertEqual(0, openstack.returncode, openstack.stderr)
        self.assertIn('openstack', demo.command('env'))
        # The same five servers, in the same order (created_at desc).
        self.assertEqual([s['id'] for s in servers],
                         UUID.findall(openstack.stdout))

        self.assertStopsCleanly(demo, uwsgi, signal.SIGINT)

    def nova_api_errors(self):
        """The ERROR lines of the demo's nova-api.log (oslo.log's format)."""
        path = os.path.join(self.tmp, 'world', 'nova-api.log')
        with open(path) as handle:
            return [line.rstrip('\n') for line in handle
                    if re.match(r'^\S+ \S+ \d+ ERROR ', line)]

    def test_printed_commands_log_no_error(self):
        """The guide sends users to nova-api.log: the demo logs no ERROR.

        The printed commands, and ``/servers/detail`` at 2.100 (which
        shows each server's ``scheduler_hints`` from its RequestSpec, a
        null there failing nova's response schema) and at the newest
        microversion, leave no ERROR line in nova-api's log.
        """
        if shutil.which('curl') is None:
            self.skipTest('curl is not installed: the printed curl command '
                          'cannot run here')
        demo, uwsgi = self.start()
        printed = demo.command('curl')
        self.assertIn("'OpenStack-API-Version: compute latest'", printed)
        lines = [printed, demo.command('env'),
                 printed.replace('compute latest', 'compute 2.100')]
        for line in lines:
            answer = self.run_printed(line)
            self.assertEqual(0, answer.returncode, answer.stderr)
            if line.startswith('curl'):
                self.assertRegex(answer.stdout, r'^HTTP/1\.1 200 ')
                head, _sep, body = answer.stdout.partition('\n\n')
                self.assertEqual(5, len(json.loads(body)['servers']), head)
        self.assertStopsCleanly(demo, uwsgi, signal.SIGINT)
        errors = self.nova_api_errors()
        self.assertEqual([], errors[:20], '%d ERROR lines in nova-api.log'
                         % len(errors))

    def test_sigterm_stops_it(self):
        demo, uwsgi = self.start()
        self.assertStopsCleanly(demo, uwsgi, signal.SIGTERM)

    def test_sighup_stops_it(self):
        """Its terminal closed (SIGHUP): it stops nova-api, as on Ctrl-C.

        uwsgi runs in a session of its own: the terminal's SIGHUP never
        reaches it; the demo must stop it.
        """
        demo, uwsgi = self.start()
        self.assertStopsCleanly(demo, uwsgi, signal.SIGHUP)

    def assertNoUwsgiAfterDeath(self, demo, uwsgi, signum):
        """*signum* kills the demo outright: uwsgi must not outlive it."""
        pid, _temp_dir = uwsgi
        port = int(re.search(r'http://127\.0\.0\.1:(\d+)/v2\.1',
                             demo.output()).group(1))
        self.assertNotEqual([], session_processes(pid))
        os.kill(demo.process.pid, signum)
        self.assertEqual(-signum, demo.finish(STOP_BOUND))
        deadline = time.monotonic() + STOP_BOUND
        while session_processes(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual([], session_processes(pid))
        # Nobody answers as an admin on its port any more.
        with socket.socket() as sock:
            self.assertNotEqual(0, sock.connect_ex(('127.0.0.1', port)))

    def test_sigkill_of_the_demo_stops_uwsgi(self):
        """No finally runs in the demo: the kernel stops uwsgi."""
        demo, uwsgi = self.start()
        self.assertNoUwsgiAfterDeath(demo, uwsgi, signal.SIGKILL)

    def test_a_crash_of_the_demo_stops_uwsgi(self):
        """A segmentation fault of the demo's interpreter, say."""
        demo, uwsgi = self.start()
        self.assertNoUwsgiAfterDeath(demo, uwsgi, signal.SIGSEGV)


def identity_app_factory(global_conf, **local_conf):
    """paste app: answers with the identity headers it was given (JSON)."""
    def app(environ, start_response):
        body = json.dumps({k: v for k, v in environ.items()
                           if k.startswith('HTTP_X_')}).encode()
        start_response('200 OK', [('Content-Type', 'application/json')])
        return [body]
    return app


class NoauthOnlyInTheDemoTest(base.TestCase):
    """The demo's admin-for-anyone filter refuses a pipeline not the demo's.

    A paste file naming ``nova_cellsched.demo.api:noauth_filter_factory``
    as an operator could name it in a real nova-api's pipeline, loaded by
    paste.deploy as nova-api loads its pipelines.
    """

    PASTE = ('[pipeline:main]\n'
             'pipeline = noauth identity\n'
             '[filter:noauth]\n'
             'paste.filter_factory = '
             'nova_cellsched.demo.api:noauth_filter_factory\n'
             '[app:identity]\n'
             'paste.app_factory = %s:identity_app_factory\n' % __name__)

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.paste = os.path.join(self.dir, 'api-paste.ini')
        with open(self.paste, 'w') as handle:
            handle.write(self.PASTE)

    def _load(self, env_value):
        self.useFixture(fixtures.EnvironmentVariable(
            demo_api.DEMO_PASTE_DIR_ENV, env_value))
        return deploy.loadapp('config:' + self.paste)

    def test_outside_the_demo_the_pipeline_does_not_load(self):
        exc = self.assertRaises(demo_api.DemoOnlyFilter, self._load, None)
        message = str(exc)
        self.assertNotIn('\n', message)
        self.assertIn('makes anyone who reaches nova-api an admin and '
                      'loads only in the demo', message)
        self.assertIn('got it unset', message)
        self.assertIn("use keystone's authtoken", message)

    def test_another_directory_named_does_not_load(self):
        other = self.useFixture(fixtures.TempDir()).path
        exc = self.assertRaises(demo_api.DemoOnlyFilter, self._load, other)
        self.assertIn(repr(other), str(exc))

    def test_in_the_demo_directory_it_loads_and_makes_an_admin(self):
        app = self._load(self.dir)
        answers = []
        body = b''.join(app({'REQUEST_METHOD': 'GET', 'PATH_INFO': '/',
                             'HTTP_X_AUTH_TOKEN': 'u1:p1'},
                            lambda status, headers: answers.append(status)))
        self.assertEqual(['200 OK'], answers)
        identity = json.loads(body)
        self.assertEqual('u1', identity['HTTP_X_USER_ID'])
        self.assertEqual('p1', identity['HTTP_X_PROJECT_ID'])
        self.assertEqual('admin,member,reader', identity['HTTP_X_ROLES'])
