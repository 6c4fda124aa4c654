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

"""The uwsgi ini of doc/source/admin/nova-api-uwsgi.rst serves as pasted.

The ini is taken from the page as written and run in a real uwsgi (this
venv's) with two changes only, both of place: the port (8774 may be
taken here) and ``/etc/nova`` (a temp dir holding a demo world's
nova.conf and nova's api-paste.ini with the cellsched filter, as
doc/source/admin/nova-api.rst adds it). The page's ``curl`` line, with
the same port, must then get ``HTTP/1.1 200``.
"""

import os
import re
import shlex
import shutil
import subprocess
import time

import fixtures
import testtools
import testtools.content

from nova_cellsched.demo import api as demo_api
from nova_cellsched.demo import world as demo
from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PAGE = os.path.join(TOP, 'doc', 'source', 'admin', 'nova-api-uwsgi.rst')
#: nova-api loads twice (two workers) on a loaded 2-core machine.
READY_TIMEOUT = 300
GUIDE_PORT = '8774'


def literal_blocks(text):
    """The literal blocks (after ``::``) of *text*, dedented."""
    blocks = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.rstrip().endswith('::'):
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for following in lines[index + 1:]:
            if following.strip() and (
                    len(following) - len(following.lstrip()) <= indent):
                break
            body.append(following)
        while body and not body[0].strip():
            body.pop(0)
        if body:
            cut = min(len(b) - len(b.lstrip()) for b in body if b.strip())
            blocks.append('\n'.join(b[cut:] for b in body).strip() + '\n')
    return blocks


def guide_ini_and_curl():
    with open(PAGE) as handle:
        blocks = literal_blocks(handle.read())
    (ini,) = [b for b in blocks if b.startswith('[uwsgi]\n')]
    (curl,) = [b.strip() for b in blocks if b.startswith('curl ')]
    return ini, curl


class UwsgiGuideTest(base.TestCase):

    def test_comments_stand_on_their_own_lines(self):
        """uwsgi keeps a ``#`` after a value as part of the value."""
        ini, _curl = guide_ini_and_curl()
        for line in ini.splitlines():
            if '=' in line and not line.lstrip().startswith('#'):
                self.assertNotIn('#', line)

    def test_the_guides_ini_serves_and_its_curl_gets_200(self):
        problem = demo_api.uwsgi_missing()
        if problem:
            self.skipTest(problem)
        if shutil.which('curl') is None:
            self.skipTest('curl is not installed: the guide\'s curl line '
                          'cannot run here')
        ini, curl = guide_ini_and_curl()
        self.assertIn('127.0.0.1:%s' % GUIDE_PORT, curl)
        tmp = self.useFixture(fixtures.TempDir()).path
        world = demo.build(os.path.join(tmp, 'world'), cells=1, instances=5)
        etc = os.path.join(tmp, 'etc-nova')
        os.mkdir(etc)
        shutil.copy(world.config_file, os.path.join(etc, 'nova.conf'))
        demo_api.paste_with_filter(etc)
        port = str(demo_api.free_port())
        written = ini.replace('127.0.0.1:%s' % GUIDE_PORT,
                              '127.0.0.1:%s' % port)
        written = written.replace('/etc/nova', etc)
        self.assertEqual(1, len(re.findall(port, written)), written)
        path = os.path.join(etc, 'nova-api-uwsgi.ini')
        with open(path, 'w') as handle:
            handle.write(written)
        log = os.path.join(tmp, 'uwsgi.log')
        env = dict(os.environ, PYTHONPATH=TOP)
        with open(log, 'wb') as out:
            uwsgi = subprocess.Popen(
                [demo_api.UWSGI, '--ini', path], env=env, cwd=tmp,
                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True,
                preexec_fn=demo_api.die_with_parent())
        self.addCleanup(demo_api.stop_session, uwsgi, 60)
        # Read now (at cleanup), not when the result is written: by then
        # the temporary directory is gone, and a detail whose file is
        # missing ends the whole stestr worker.
        self.addCleanup(lambda: self.addDetail(
            'uwsgi-log', testtools.content.content_from_file(
                log, buffer_now=True)))
        argv = shlex.split(curl.replace(':%s/' % GUIDE_PORT,
                                        ':%s/' % port))
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            self.assertIsNone(uwsgi.poll(), 'uwsgi exited')
            answer = subprocess.run(argv, capture_output=True, text=True,
                                    timeout=120)
            status = answer.stdout.split('\n', 1)[0]
            if answer.returncode == 0 and status.startswith('HTTP/'):
                break
            self.assertLess(time.monotonic(), deadline, answer)
            time.sleep(1)
        self.assertRegex(status, r'^HTTP/1\.1 200 ')
        self.assertIn('"id": "v2.1"', answer.stdout)
        # The first worker answered; the test ends once every worker has
        # loaded nova-api: a uwsgi worker still loading its app when
        # SIGTERM comes finishes loading first, and its master then waits
        # uwsgi's mercy (60 s) for it.
        processes = int(re.search(r'^\s*processes\s*=\s*(\d+)\s*$', written,
                                  re.MULTILINE).group(1))
        while True:
            with open(log, errors='replace') as handle:
                loaded = handle.read().count(demo_api.APP_LOADED)
            if loaded >= processes:
                break
            self.assertIsNone(uwsgi.poll(), 'uwsgi exited')
            self.assertLess(time.monotonic(), deadline, 'workers loaded: '
                            '%d of %d' % (loaded, processes))
            time.sleep(0.2)
