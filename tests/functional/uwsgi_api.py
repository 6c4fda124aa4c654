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

"""A real nova-api: nova 34's WSGI application served by uwsgi.

:class:`UwsgiNovaApi` writes a ``nova.conf``, an ``api-paste.ini`` and a
uwsgi ini into a temp dir and runs ``uwsgi`` on a free loopback port, as
devstack runs nova-api (``lib/apache``'s ``write_uwsgi_config``: master,
``processes``, ``enable-threads``, ``lazy-apps``, ``thunder-lock``,
``buffer-size = 65535``, ``Connection: close``; the application is
``nova.wsgi.osapi_compute:application``; nova finds its files through
``OS_NOVA_CONFIG_DIR``). Two deviations, both said where they are made:
``exit-on-reload`` is off (devstack lets systemd restart an exited
uwsgi; these tests reload uwsgi itself), and authentication.

nova 34 no longer has ``[api] auth_strategy = noauth2`` (its pipelines
have only the ``keystone`` key). Where keystone's ``authtoken`` stands
in nova's pipelines, the test file puts :func:`noauth_filter_factory`,
which does what nova's removed noauth2 middleware did: the token
``user:project`` names the user and project, with the admin role, and
nova's own ``keystonecontext`` builds the request context from that. The
``cellsched`` filter goes exactly where README.rst tells operators to put
it. Clients reach it with keystoneauth's ``admin_token`` plugin (token
``admin:admin``, the endpoint for every service).

nova-api's server views ask neutron for the servers' security groups:
:class:`FakeNeutron` answers (no ports) on another loopback port.
"""

import configparser
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any
import urllib.error
import urllib.request

import fixtures

from tests.functional import mariadb_server as mdb
from tests.functional import nova_api

#: The uwsgi binary: the one installed in this venv, or the override.
UWSGI = os.environ.get('NOVA_CELLSCHED_TEST_UWSGI',
                       os.path.join(os.path.dirname(sys.executable),
                                    'uwsgi'))
#: The token clients send: user ``admin`` of project ``admin``.
TOKEN = 'admin:admin'
#: The checkout this module is in: nova-api imports nova_cellsched and
#: this module from it.
TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NOAUTH = 'noauth'
FILTER = nova_api.FILTER
APP = nova_api.APP


def unavailable() -> str | None:
    """Why uwsgi cannot run here, or None."""
    if not os.access(UWSGI, os.X_OK):
        return ('%s is not installed (pip install uwsgi: it builds from '
                'source and needs gcc and the Python headers)' % UWSGI)
    return mdb.unavailable()


# The authentication stand-in, loaded by nova-api from the paste file.

def noauth_filter_factory(global_conf: Any, **local_conf: Any) -> Any:
    """paste filter: nova's removed noauth2, before ``keystonecontext``.

    ``X-Auth-Token: user:project`` (``admin:admin`` when absent) becomes
    the identity headers keystone's ``authtoken`` would set, with the
    ``admin``, ``member`` and ``reader`` roles. For tests only: anyone
    who can reach the port is an admin.
    """
    def filter_(app: Any) -> Any:
        def noauth(environ: dict[str, Any], start_response: Any) -> Any:
            token = environ.get('HTTP_X_AUTH_TOKEN') or TOKEN
            user, _sep, project = token.partition(':')
            environ['HTTP_X_USER_ID'] = user
            environ['HTTP_X_USER_NAME'] = user
            environ['HTTP_X_PROJECT_ID'] = project or user
            environ['HTTP_X_PROJECT_NAME'] = project or user
            environ['HTTP_X_ROLES'] = 'admin,member,reader'
            environ['HTTP_X_IDENTITY_STATUS'] = 'Confirmed'
            return app(environ, start_response)
        return noauth
    return filter_


def write_paste(directory: str, with_filter: bool) -> str:
    """nova's api-paste.ini, noauth for ``authtoken``, and maybe cellsched.

    With *with_filter*, the ``[filter:cellsched]`` section and
    ``cellsched`` just before ``osapi_compute_app_v21`` in both ``/v2``
    and ``/v2.1`` pipelines, as README.rst "In nova-api" shows.
    """
    source = nova_api.NOVA_API_PASTE
    if with_filter:
        source = nova_api.paste_with_filter(directory)
    parser = configparser.RawConfigParser()
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    with open(source) as f:
        parser.read_file(f)
    replaced = 0
    for section in parser.sections():
        for key, value in parser.items(section):
            words = value.split()
            if key == 'keystone' and 'authtoken' in words:
                words[words.index('authtoken')] = NOAUTH
                parser.set(section, key, ' '.join(words))
                replaced += 1
    if replaced < 2:
        raise AssertionError('no authtoken in the pipelines of %s' % source)
    parser.add_section('filter:' + NOAUTH)
    parser.set('filter:' + NOAUTH, 'paste.filter_factory',
               'tests.functional.uwsgi_api:noauth_filter_factory')
    path = os.path.join(directory, 'api-paste.ini')
    with open(path, 'w') as f:
        parser.write(f)
    return path


def pipelines(paste: str) -> dict[str, list[str]]:
    """Section -> the words of its ``keystone`` pipeline."""
    parser = configparser.RawConfigParser()
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(paste)
    return {s: parser.get(s, 'keystone').split() for s in parser.sections()
            if parser.has_option(s, 'keystone')}


class FakeNeutron(fixtures.Fixture):
    """neutron's ports and security groups API: no port, no group."""

    def _setUp(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split('?')[0].rstrip('/')
                name = path.rsplit('/', 1)[-1].replace('-', '_')
                body = json.dumps({name: []}).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      Handler)
        self.server.daemon_threads = True
        thread = threading.Thread(target=self.server.serve_forever,
                                  daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]


class UwsgiError(Exception):
    """uwsgi did not start, reload or stop as asked."""


class UwsgiNovaApi(fixtures.Fixture):
    """nova-api under uwsgi on 127.0.0.1, on *world*'s databases.

    :param world: a :class:`tests.functional.mariadb_server.World`.
    :param neutron_url: where nova-api finds neutron.
    :param with_filter: the cellsched filter in the pipelines.
    :param processes: uwsgi workers (devstack: ``API_WORKERS``).
    :param threads: threads per worker (devstack sets none: 1).
    :param cellsched: ``[cellsched]`` options for nova.conf.
    :param start_timeout: seconds to wait for every worker to answer.
    :param nova_conf: more nova.conf settings, ``{section: {option:
        value}}``, over the ones written here (e.g. ``{'DEFAULT':
        {'debug': 'false'}}`` for a benchmark).

    ``url`` is the compute endpoint (``.../v2.1``); ``log`` uwsgi's log
    (nova-api's log lines included).
    """

    def __init__(self, world: Any, neutron_url: str,
                 with_filter: bool = True, processes: int = 2,
                 threads: int = 1, cellsched: dict[str, Any] | None = None,
                 start_timeout: float = 120.0,
                 nova_conf: dict[str, dict[str, str]] | None = None
                 ) -> None:
        super().__init__()
        self.world = world
        self.neutron_url = neutron_url
        self.with_filter = with_filter
        self.processes = processes
        self.threads = threads
        self.cellsched = cellsched or {}
        self.start_timeout = start_timeout
        self.nova_conf_overrides = nova_conf or {}
        self.process: subprocess.Popen[bytes] | None = None

    def _setUp(self) -> None:
        problem = unavailable()
        if problem:
            raise UwsgiError(problem)
        self.dir = tempfile.mkdtemp(prefix='ncs-uwsgi-')
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.paste = write_paste(self.dir, self.with_filter)
        self._write_nova_conf()
        self.log = os.path.join(self.dir, 'uwsgi.log')
        self.pidfile = os.path.join(self.dir, 'uwsgi.pid')
        self.addCleanup(self.stop)
        for attempt in range(3):
            self.port = mdb.free_port()
            self._write_ini()
            try:
                self.start()
                return
            except UwsgiError:
                self.stop()
                if attempt == 2 or 'Address already in use' not in (
                        self.log_tail()):
                    raise

    def _write_nova_conf(self) -> None:
        conf = configparser.RawConfigParser()
        conf['DEFAULT'] = {
            'host': 'uwsgi-api', 'transport_url': 'fake://',
            'debug': 'true', 'use_stderr': 'true',
            'state_path': self.dir,
        }
        conf['api'] = {'auth_strategy': 'keystone',
                       'response_validation': 'warn'}
        conf['api_database'] = {'connection': self.world.api_url}
        # nova-api's own [database]: any cell (nova reads its scheme).
        first = next(c for c in self.world.cells.values()
                     if c.name != 'cell0')
        conf['database'] = {'connection': first.url}
        conf['wsgi'] = {'api_paste_config': self.paste}
        conf['neutron'] = {'endpoint_override': self.neutron_url}
        conf['oslo_concurrency'] = {'lock_path': self.dir}
        conf['oslo_messaging_notifications'] = {'driver': 'noop'}
        conf['cellsched'] = {k: str(v) for k, v in self.cellsched.items()}
        for section, values in self.nova_conf_overrides.items():
            if section not in conf:
                conf[section] = {}
            conf[section].update(values)
        self.nova_conf = os.path.join(self.dir, 'nova.conf')
        with open(self.nova_conf, 'w') as f:
            conf.write(f)

    def _write_ini(self) -> None:
        # As devstack's write_uwsgi_config, with http-socket for its
        # socket + apache pair, and exit-on-reload off (see the module).
        ini = configparser.RawConfigParser()
        ini['uwsgi'] = {
            'module': 'nova.wsgi.osapi_compute:application',
            'http-socket': '127.0.0.1:%d' % self.port,
            'processes': str(self.processes),
            'master': 'true',
            'die-on-term': 'true',
            'exit-on-reload': 'false',
            'enable-threads': 'true',
            'thunder-lock': 'true',
            'buffer-size': '65535',
            'add-header': 'Connection: close',
            'lazy-apps': 'true',
            'home': sys.prefix,
            'env': 'OS_NOVA_CONFIG_DIR=%s' % self.dir,
            'pidfile': self.pidfile,
            'logto': self.log,
            'need-app': 'true',
            # uwsgi's worker-reload-mercy stays 60 s: a worker that does
            # not exit by itself shows as a reload or a stop over 10 s.
        }
        if self.threads > 1:
            ini['uwsgi']['threads'] = str(self.threads)
        self.ini = os.path.join(self.dir, 'uwsgi.ini')
        with open(self.ini, 'w') as f:
            ini.write(f)

    @property
    def base(self) -> str:
        return 'http://127.0.0.1:%d' % self.port

    @property
    def url(self) -> str:
        return self.base + '/v2.1'

    def start(self) -> None:
        """Start uwsgi; return once every worker has loaded nova-api."""
        env = dict(os.environ)
        # The worktree (nova_cellsched, this module) before the venv.
        env['PYTHONPATH'] = os.pathsep.join(
            p for p in [TOP, env.get('PYTHONPATH', '')] if p)
        with open(self.log, 'ab'):
            pass
        self.process = subprocess.Popen(
            [UWSGI, '--ini', self.ini], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.wait_ready(self.processes, self.start_timeout)

    def apps_ready(self) -> int:
        """How many times a worker logged that nova-api is loaded."""
        return self.log_text().count('WSGI app 0 (mountpoint=')

    def wait_ready(self, count: int, timeout: float) -> None:
        """Wait until *count* more apps are loaded and the API answers."""
        deadline = time.monotonic() + timeout
        while self.apps_ready() < count:
            if self.process is None or self.process.poll() is not None:
                raise UwsgiError('uwsgi exited: %s' % self.log_tail())
            if time.monotonic() > deadline:
                raise UwsgiError('uwsgi: %d of %d workers loaded nova-api '
                                 'in %.0fs: %s' % (
                                     self.apps_ready(), count, timeout,
                                     self.log_tail()))
            time.sleep(0.1)
        status, _body, _headers = self.get('/flavors', timeout=timeout)
        if status != 200:
            raise UwsgiError('GET /flavors answered %s: %s'
                             % (status, self.log_tail()))

    def reload(self, timeout: float = 120.0) -> float:
        """SIGHUP (graceful reload); seconds until the workers served.

        Returns when the master has respawned every worker and each has
        loaded nova-api again.
        """
        assert self.process is not None
        before = self.apps_ready()
        start = time.monotonic()
        self.process.send_signal(signal.SIGHUP)
        deadline = start + timeout
        while self.apps_ready() < before + self.processes:
            if self.process.poll() is not None:
                raise UwsgiError('uwsgi exited on reload: %s'
                                 % self.log_tail())
            if time.monotonic() > deadline:
                raise UwsgiError('uwsgi did not reload in %.0fs: %s'
                                 % (timeout, self.log_tail()))
            time.sleep(0.05)
        return time.monotonic() - start

    def terminate(self, timeout: float = 60.0) -> float | None:
        """SIGTERM; seconds until uwsgi exited, None if it did not."""
        assert self.process is not None
        start = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return time.monotonic() - start

    def stop(self) -> None:
        """SIGTERM, then SIGKILL the whole session if it lingers."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.process.poll() is None:
            self.process.wait(10)

    def worker_pids(self) -> list[int]:
        """The pids of uwsgi's processes other than the master."""
        assert self.process is not None
        out = subprocess.run(['ps', '-o', 'pid=', '--ppid',
                              str(self.process.pid)],
                             capture_output=True, text=True, check=False)
        return [int(p) for p in out.stdout.split()]

    def log_text(self) -> str:
        try:
            with open(self.log, errors='replace') as handle:
                return handle.read()
        except OSError:
            return ''

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_text()[-chars:]

    # A plain client.

    def get(self, path: str, timeout: float = 60.0
            ) -> tuple[int, Any, dict[str, str]]:
        """GET *path* under ``/v2.1``: (status, JSON body, headers)."""
        return self.request('GET', path, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None,
                timeout: float = 60.0) -> tuple[int, Any, dict[str, str]]:
        """*method* *path* under ``/v2.1`` with a JSON *body*."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={'X-Auth-Token': TOKEN, 'Accept': 'application/json',
                     'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                return (resp.status, json.loads(resp.read() or b'null'),
                        dict(resp.headers))
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors='replace')
            return exc.code, parsed, dict(exc.headers)
