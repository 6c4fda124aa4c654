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

"""A real nova-api for the demo and the tests: nova 34 under uwsgi.

**For demos and tests only, never for a cloud**: the paste file written
here authenticates nobody. Anyone who can reach the port is an admin of
any project they name.

:class:`UwsgiNovaApi` writes a ``nova.conf``, an ``api-paste.ini`` and a
uwsgi ini into a temp dir and runs ``uwsgi`` on a loopback port, as
devstack runs nova-api (``lib/apache``'s ``write_uwsgi_config``: master,
``processes``, ``enable-threads``, ``lazy-apps``, ``thunder-lock``,
``buffer-size = 65535``, ``Connection: close``; nova finds its files
through ``OS_NOVA_CONFIG_DIR``). The application is nova's
(``nova.wsgi.osapi_compute:application``) without the filter, and the one
the guide tells operators to use with it
(``nova_cellsched.wsgi.osapi_compute:application``: nova's, its start-up
check bounded) with the filter. Two deviations from devstack, both said
where they are made: ``exit-on-reload`` is off (devstack lets systemd
restart an exited uwsgi; the tests reload uwsgi itself), and
authentication.

nova 34 no longer has ``[api] auth_strategy = noauth2`` (its pipelines
have only the ``keystone`` key). Where keystone's ``authtoken`` stands
in nova's pipelines, :func:`write_paste` puts
:func:`noauth_filter_factory`, which does what nova's removed noauth2
middleware did: the token ``user:project`` names the user and project,
with the admin role, and nova's own ``keystonecontext`` builds the
request context from that. The ``cellsched`` filter goes exactly where
the guide (``doc/source/admin/nova-api.rst``) tells operators to put it.
Clients reach it with keystoneauth's ``admin_token`` plugin (token
``admin:admin``, the endpoint for every service).

nova-api's server views ask neutron for the servers' security groups:
:class:`NeutronStandIn` answers (no ports) on another loopback port.

This module is imported by nova-api's workers (the paste filter) and by
``nova-cellsched demo --api``: it imports neither nova nor test
libraries.
"""

from collections.abc import Callable
import configparser
import ctypes
import ctypes.util
import http.server
import json
import os
import random
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any
import urllib.error
import urllib.request

import nova_cellsched

#: The token clients send: user ``admin`` of project ``admin``.
TOKEN = 'admin:admin'  # noqa: S105 - the noauth stand-in's, not a secret
#: nova's api-paste.ini as installed with nova (``<venv>/etc/nova``).
NOVA_API_PASTE = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
#: The uwsgi of this virtualenv (tools/venv installs uWSGI==2.0.31).
UWSGI = os.path.join(os.path.dirname(sys.executable), 'uwsgi')
#: nova's WSGI entry point for nova-api.
NOVA_MODULE = 'nova.wsgi.osapi_compute:application'
#: nova's, with the start-up check bounded (:mod:`nova_cellsched.wsgi`).
BOUNDED_MODULE = 'nova_cellsched.wsgi.osapi_compute:application'
FILTER = 'cellsched'
APP = 'osapi_compute_app_v21'
NOAUTH = 'noauth'
#: The directory nova-api's workers import nova_cellsched from (first on
#: their PYTHONPATH): this checkout, or the site-packages holding it.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(
    nova_cellsched.__file__)))
#: What uwsgi logs once per worker that has loaded nova-api.
APP_LOADED = 'WSGI app 0 (mountpoint='


def uwsgi_missing(uwsgi: str | None = None) -> str | None:
    """Why *uwsgi* (default :data:`UWSGI`) cannot run nova-api, or None.

    One line that says what is missing and how to install it.
    """
    uwsgi = uwsgi or UWSGI
    if not os.access(uwsgi, os.X_OK):
        return ('%s is not installed (tools/venv installs uWSGI==2.0.31 '
                'into the venv; by hand: %s -m pip install uWSGI==2.0.31, '
                'which builds from source and needs gcc and the Python '
                'headers)' % (uwsgi, sys.executable))
    if not os.path.isfile(NOVA_API_PASTE):
        return ("nova's api-paste.ini is not at %s (expected where nova's "
                'package installs it; reinstall nova into this venv)'
                % NOVA_API_PASTE)
    return None


#: prctl(2)'s option that sends the caller a signal when its parent dies.
PR_SET_PDEATHSIG = 1
#: What uwsgi's master gets when the process that started it dies: with
#: ``die-on-term`` it stops its workers and exits.
PARENT_DEATH_SIGNAL = signal.SIGTERM


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, or None where there is none (not Linux)."""
    if not sys.platform.startswith('linux'):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6',
                           use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that ties the child to this process's life.

    The child (uwsgi's master, before it executes uwsgi) asks the kernel
    for :data:`PARENT_DEATH_SIGNAL` when its parent dies, however it
    dies: SIGKILL and a crash included, where no ``finally`` of the
    parent runs. If the parent died already between the fork and that
    request, the child exits at once. The signal survives ``execve`` (not
    of a set-uid binary). prctl(2) sends it when the *thread* that
    forked the child ends: start uwsgi from a thread that outlives it
    (the main thread). None where prctl does not exist (not Linux).
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        # In the child between fork and exec: no allocation-heavy work.
        prctl(PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as handle:
            low, high = handle.read().split()
            return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing uses right now.

    Picked below the kernel's ephemeral range, so that while a server is
    killed no client connection can take its port and it restarts on it.
    Another process may take it before the caller binds it: retry then.
    """
    low, _high = _ephemeral_range()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12000), low)
        with socket.socket() as sock:
            try:
                sock.bind(('127.0.0.1', port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


# The authentication stand-in, loaded by nova-api from the paste file.

#: Set by :class:`UwsgiNovaApi` in its nova-api's environment to the
#: directory of the paste file it wrote; :func:`noauth_filter_factory`
#: loads nowhere else.
DEMO_PASTE_DIR_ENV = 'NOVA_CELLSCHED_DEMO_PASTE_DIR'


class DemoOnlyFilter(Exception):
    """The demo's noauth filter was named by a paste file not the demo's.
    """


def noauth_filter_factory(global_conf: Any, **local_conf: Any) -> Any:
    """paste filter: nova's removed noauth2, before ``keystonecontext``.

    ``X-Auth-Token: user:project`` (``admin:admin`` when absent) becomes
    the identity headers keystone's ``authtoken`` would set, with the
    ``admin``, ``member`` and ``reader`` roles;
    ``user:project:member,reader`` gives those roles instead (a project
    member). **For demos and tests only**: anyone who can reach the port
    is an admin.

    So it loads only in the demo's own nova-api: the paste file naming it
    must be in the directory that :data:`DEMO_PASTE_DIR_ENV` names in the
    process's environment, which only :class:`UwsgiNovaApi` sets (to its
    temp dir, where it writes the paste file).

    :raises DemoOnlyFilter: anywhere else (a real nova-api's pipeline),
        so that nova-api does not start; one line saying why.
    """
    here = global_conf.get('here')
    demo_dir = os.environ.get(DEMO_PASTE_DIR_ENV)
    if not (here and demo_dir and
            os.path.realpath(here) == os.path.realpath(demo_dir)):
        raise DemoOnlyFilter(
            '%s:noauth_filter_factory makes anyone who reaches nova-api an '
            'admin and loads only in the demo (expected %s to name the '
            'directory of the paste file, %s; got %s): use keystone\'s '
            'authtoken in a real pipeline'
            % (__name__, DEMO_PASTE_DIR_ENV, here or 'unknown',
               repr(demo_dir) if demo_dir else 'it unset'))
    def filter_(app: Any) -> Any:
        def noauth(environ: dict[str, Any], start_response: Any) -> Any:
            token = environ.get('HTTP_X_AUTH_TOKEN') or TOKEN
            user, _sep, project = token.partition(':')
            project, _sep, roles = project.partition(':')
            environ['HTTP_X_USER_ID'] = user
            environ['HTTP_X_USER_NAME'] = user
            environ['HTTP_X_PROJECT_ID'] = project or user
            environ['HTTP_X_PROJECT_NAME'] = project or user
            environ['HTTP_X_ROLES'] = roles or 'admin,member,reader'
            environ['HTTP_X_IDENTITY_STATUS'] = 'Confirmed'
            return app(environ, start_response)
        return noauth
    return filter_


def _read_paste(source: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser()
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    with open(source) as f:
        parser.read_file(f)
    return parser


def paste_with_filter(directory: str, source: str = NOVA_API_PASTE) -> str:
    """nova's api-paste.ini with ``cellsched`` before the app, in *directory*.

    As the guide tells operators: a ``[filter:cellsched]`` section and
    the filter inserted just before ``osapi_compute_app_v21`` in every
    pipeline that ends with it. Returns the path of the file written
    (``api-paste.ini``); removing *directory* is the caller's business.

    :raises ValueError: no pipeline of *source* ends with the app.
    """
    parser = _read_paste(source)
    changed = 0
    for section in parser.sections():
        for key, value in parser.items(section):
            words = value.split()
            if key in ('keystone', 'pipeline', 'noauth2') and (
                    words and words[-1] == APP and FILTER not in words):
                parser.set(section, key,
                           ' '.join(words[:-1] + [FILTER, APP]))
                changed += 1
    if changed < 2:
        raise ValueError('expected the /v2 and /v2.1 pipelines of %s to '
                         'end with %s, found %d such pipelines'
                         % (source, APP, changed))
    parser.add_section('filter:' + FILTER)
    parser.set('filter:' + FILTER, 'paste.filter_factory',
               'nova_cellsched.api:filter_factory')
    path = os.path.join(directory, 'api-paste.ini')
    with open(path, 'w') as f:
        parser.write(f)
    return path


def write_paste(directory: str, with_filter: bool) -> str:
    """nova's api-paste.ini, noauth for ``authtoken``, and maybe cellsched.

    With *with_filter*, the ``[filter:cellsched]`` section and
    ``cellsched`` just before ``osapi_compute_app_v21`` in both ``/v2``
    and ``/v2.1`` pipelines (:func:`paste_with_filter`). Writes
    ``api-paste.ini`` in *directory* and returns its path.

    :raises ValueError: nova's file has no ``authtoken`` in its
        ``keystone`` pipelines to replace.
    """
    source = NOVA_API_PASTE
    if with_filter:
        source = paste_with_filter(directory)
    parser = _read_paste(source)
    replaced = 0
    for section in parser.sections():
        for key, value in parser.items(section):
            words = value.split()
            if key == 'keystone' and 'authtoken' in words:
                words[words.index('authtoken')] = NOAUTH
                parser.set(section, key, ' '.join(words))
                replaced += 1
    if replaced < 2:
        raise ValueError('expected authtoken in the /v2 and /v2.1 keystone '
                         'pipelines of %s, found it in %d' % (source,
                                                               replaced))
    parser.add_section('filter:' + NOAUTH)
    parser.set('filter:' + NOAUTH, 'paste.filter_factory',
               __name__ + ':noauth_filter_factory')
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


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """``http.server.ThreadingHTTPServer``, from ``socketserver`` itself.

    Not ``http.server``'s class: where eventlet's green ``http.server``
    was imported first (nova 31 and 32: ``oslo_service`` imports
    ``eventlet.wsgi``), ``sys.modules['http.server']`` can hold a copy
    built on a green ``socketserver``, whose ``shutdown()`` waits for a
    green event that the server's native thread never wakes: the
    process hung at exit.
    """

    daemon_threads = True
    allow_reuse_address = True


class NeutronStandIn:
    """neutron's ports and security groups API: no port, no group.

    Every ``GET .../<things>`` answers ``{"<things>": []}``. :meth:`start`
    serves on loopback *port* (default: a free one; :attr:`url`) from a
    daemon thread; :meth:`stop` ends it (idempotent).
    """

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ''

    def start(self) -> None:
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

        self.server = _Server(('127.0.0.1', self.port), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        name='neutron-stand-in',
                                        daemon=True)
        self._thread.start()
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]

    def stop(self) -> None:
        if self.server is None:
            return
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self.server = None
        self._thread = None


def uwsgi_options(module: str, port: int, processes: int, threads: int,
                  env: tuple[str, str], pidfile: str, log: str
                  ) -> dict[str, str]:
    """The ``[uwsgi]`` section of a WSGI service, as devstack writes it.

    devstack's ``write_uwsgi_config`` (master, ``processes``,
    ``enable-threads``, ``lazy-apps``, ``thunder-lock``, ``buffer-size =
    65535``, ``Connection: close``), with ``http-socket`` on
    ``127.0.0.1:port`` for its socket + apache pair and ``exit-on-reload``
    off (devstack lets systemd restart an exited uwsgi). *env* is the
    ``(name, value)`` of the variable through which the service finds its
    config files (``OS_NOVA_CONFIG_DIR``).
    uwsgi's ``worker-reload-mercy`` stays 60 s: a worker that does not
    exit by itself shows as a reload or a stop over 10 s.
    """
    options = {
        'module': module,
        'http-socket': '127.0.0.1:%d' % port,
        'processes': str(processes),
        'master': 'true',
        'die-on-term': 'true',
        'exit-on-reload': 'false',
        'enable-threads': 'true',
        'thunder-lock': 'true',
        'buffer-size': '65535',
        'add-header': 'Connection: close',
        'lazy-apps': 'true',
        'home': sys.prefix,
        'pidfile': pidfile,
        'logto': log,
        'env': '%s=%s' % env,
        'need-app': 'true',
    }
    if threads > 1:
        options['threads'] = str(threads)
    return options


def stop_session(process: 'subprocess.Popen[Any]',
                 timeout: float = 30.0) -> None:
    """SIGTERM *process*, then SIGKILL its whole session if it lingers.

    For a process started with ``start_new_session=True`` (a uwsgi
    master and its workers): returns once it has exited and no process
    of its session is left. Calling it again does nothing more.

    :param timeout: seconds the process is given after SIGTERM.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if process.poll() is None:
        process.wait(10)


class UwsgiError(Exception):
    """uwsgi did not start, reload or stop as asked."""


class Interrupted(Exception):
    """The caller's *should_stop* said to stop waiting for uwsgi."""


class UwsgiNovaApi:
    """nova-api under uwsgi on 127.0.0.1, on the given databases.

    :param api_url: nova's ``[api_database] connection``.
    :param database_url: nova-api's own ``[database] connection`` (any
        cell's: nova reads its scheme).
    :param neutron_url: where nova-api finds neutron.
    :param with_filter: the cellsched filter in the pipelines.
    :param processes: uwsgi workers (devstack: ``API_WORKERS``).
    :param threads: threads per worker (devstack sets none: 1).
    :param cellsched: ``[cellsched]`` options for nova.conf.
    :param start_timeout: seconds to wait for every worker to answer.
    :param nova_conf: more nova.conf settings, ``{section: {option:
        value}}``, over the ones written here (e.g. ``{'DEFAULT':
        {'debug': 'false'}}`` for a benchmark).
    :param port: the port to serve on; None: a free one (retried on
        another if taken meanwhile).
    :param uwsgi: the uwsgi binary.
    :param log: uwsgi's log file (nova-api's log lines included);
        default ``uwsgi.log`` in the temp dir.
    :param module: the WSGI application uwsgi loads; None:
        :data:`BOUNDED_MODULE` with the filter, :data:`NOVA_MODULE`
        without.

    :meth:`launch` makes the temp dir (:attr:`dir`), writes the files and
    starts uwsgi; :meth:`shutdown` stops uwsgi and removes the temp dir.
    :attr:`url` is the compute endpoint (``.../v2.1``).
    """

    def __init__(self, api_url: str, database_url: str, neutron_url: str,
                 with_filter: bool = True, processes: int = 2,
                 threads: int = 1, cellsched: dict[str, Any] | None = None,
                 start_timeout: float = 120.0,
                 nova_conf: dict[str, dict[str, str]] | None = None,
                 port: int | None = None, uwsgi: str | None = None,
                 log: str | None = None, module: str | None = None
                 ) -> None:
        self.api_url = api_url
        self.database_url = database_url
        self.neutron_url = neutron_url
        self.with_filter = with_filter
        self.processes = processes
        self.threads = threads
        self.cellsched = cellsched or {}
        self.start_timeout = start_timeout
        self.nova_conf_overrides = nova_conf or {}
        self.requested_port = port
        self.uwsgi = uwsgi or UWSGI
        self.log_path = log
        self.module = module or (BOUNDED_MODULE if with_filter
                                 else NOVA_MODULE)
        self.process: subprocess.Popen[bytes] | None = None
        self.dir: str | None = None
        self.port = 0

    def launch(self, should_stop: Callable[[], bool] = lambda: False
               ) -> None:
        """Write the files into a new temp dir and start uwsgi.

        Returns once every worker has loaded nova-api and ``GET
        /flavors`` answered 200. On any failure, uwsgi is stopped and
        the temp dir removed before the exception propagates.

        :raises UwsgiError: uwsgi is missing, exited, or was not ready
            within *start_timeout* (the message ends with its log).
        :raises Interrupted: *should_stop* returned True meanwhile.
        """
        problem = uwsgi_missing(self.uwsgi)
        if problem:
            raise UwsgiError(problem)
        try:
            self.dir = tempfile.mkdtemp(prefix='ncs-uwsgi-')
            self.paste = write_paste(self.dir, self.with_filter)
            self._write_nova_conf()
            self.log = self.log_path or os.path.join(self.dir, 'uwsgi.log')
            self.pidfile = os.path.join(self.dir, 'uwsgi.pid')
            attempts = 1 if self.requested_port else 3
            for attempt in range(attempts):
                self.port = self.requested_port or free_port()
                self._write_ini()
                try:
                    self.start(should_stop)
                    return
                except UwsgiError:
                    self.stop()
                    if attempt == attempts - 1 or (
                            'Address already in use' not in
                            self.log_tail()):
                        raise
        except BaseException:
            self.shutdown()
            raise

    def shutdown(self) -> None:
        """:meth:`stop` uwsgi, then remove the temp dir (idempotent)."""
        try:
            self.stop()
        finally:
            if self.dir is not None:
                shutil.rmtree(self.dir, True)
                self.dir = None

    def _temp_dir(self) -> str:
        if self.dir is None:
            raise UwsgiError('no temp dir: call launch() first')
        return self.dir

    def _running(self) -> 'subprocess.Popen[bytes]':
        if self.process is None:
            raise UwsgiError('uwsgi was not started: call launch() first')
        return self.process

    def _write_nova_conf(self) -> None:
        directory = self._temp_dir()
        conf = configparser.RawConfigParser()
        conf['DEFAULT'] = {
            'host': 'uwsgi-api', 'transport_url': 'fake://',
            'debug': 'true', 'use_stderr': 'true',
            'state_path': directory,
        }
        conf['api'] = {'auth_strategy': 'keystone',
                       'response_validation': 'warn'}
        conf['api_database'] = {'connection': self.api_url}
        conf['database'] = {'connection': self.database_url}
        conf['wsgi'] = {'api_paste_config': self.paste}
        conf['neutron'] = {'endpoint_override': self.neutron_url}
        conf['oslo_concurrency'] = {'lock_path': directory}
        conf['oslo_messaging_notifications'] = {'driver': 'noop'}
        conf['cellsched'] = {k: str(v) for k, v in self.cellsched.items()}
        for section, values in self.nova_conf_overrides.items():
            if section not in conf:
                conf[section] = {}
            conf[section].update(values)
        self.nova_conf = os.path.join(directory, 'nova.conf')
        with open(self.nova_conf, 'w') as f:
            conf.write(f)

    def _write_ini(self) -> None:
        # As devstack's write_uwsgi_config, with http-socket for its
        # socket + apache pair, and exit-on-reload off (see the module).
        directory = self._temp_dir()
        ini = configparser.RawConfigParser()
        ini['uwsgi'] = uwsgi_options(
            self.module, self.port, self.processes, self.threads,
            ('OS_NOVA_CONFIG_DIR', directory), self.pidfile, self.log)
        self.ini = os.path.join(directory, 'uwsgi.ini')
        with open(self.ini, 'w') as f:
            ini.write(f)

    @property
    def base(self) -> str:
        return 'http://127.0.0.1:%d' % self.port

    @property
    def url(self) -> str:
        return self.base + '/v2.1'

    def start(self, should_stop: Callable[[], bool] = lambda: False
              ) -> None:
        """Start uwsgi; return once every worker has loaded nova-api.

        uwsgi runs in a session of its own: a Ctrl-C at the terminal
        reaches only the caller, which decides how to stop it. It never
        outlives the caller: when the caller's process dies, however it
        dies (SIGKILL, a crash, its terminal closed), the kernel sends
        uwsgi's master SIGTERM and it stops its workers
        (:func:`die_with_parent`; call this from the main thread).
        """
        env = dict(os.environ)
        # The demo's paste file is in its temp dir: the noauth stand-in
        # loads there only.
        env[DEMO_PASTE_DIR_ENV] = self._temp_dir()
        # This package (a checkout, or site-packages) before the venv's.
        env['PYTHONPATH'] = os.pathsep.join(
            p for p in [PACKAGE_ROOT, env.get('PYTHONPATH', '')] if p)
        # Truncated: apps_ready counts the lines of this run only.
        with open(self.log, 'wb'):
            pass
        self.process = subprocess.Popen(  # noqa: S603 - our uwsgi, our ini
            [self.uwsgi, '--ini', self.ini], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
            # Not thread-safe in general; this one only calls prctl.
            preexec_fn=die_with_parent())
        self.wait_ready(self.processes, self.start_timeout, should_stop)

    def apps_ready(self) -> int:
        """How many times a worker logged that nova-api is loaded."""
        return self.log_text().count(APP_LOADED)

    def wait_ready(self, count: int, timeout: float,
                   should_stop: Callable[[], bool] = lambda: False
                   ) -> None:
        """Wait until *count* apps are loaded and the API answers.

        :raises UwsgiError: uwsgi exited, or not ready in *timeout* s.
        :raises Interrupted: *should_stop* returned True meanwhile.
        """
        deadline = time.monotonic() + timeout
        while self.apps_ready() < count:
            if should_stop():
                raise Interrupted()
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
        process = self._running()
        before = self.apps_ready()
        start = time.monotonic()
        process.send_signal(signal.SIGHUP)
        deadline = start + timeout
        while self.apps_ready() < before + self.processes:
            if process.poll() is not None:
                raise UwsgiError('uwsgi exited on reload: %s'
                                 % self.log_tail())
            if time.monotonic() > deadline:
                raise UwsgiError('uwsgi did not reload in %.0fs: %s'
                                 % (timeout, self.log_tail()))
            time.sleep(0.05)
        return time.monotonic() - start

    def terminate(self, timeout: float = 60.0) -> float | None:
        """SIGTERM; seconds until uwsgi exited, None if it did not."""
        process = self._running()
        start = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return time.monotonic() - start

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL the whole session if it lingers.

        Returns once the master has exited and no process of uwsgi's
        session is left (idempotent).
        """
        if self.process is not None:
            stop_session(self.process, timeout)

    def worker_pids(self) -> list[int]:
        """The pids of uwsgi's processes other than the master."""
        process = self._running()
        argv = ['ps', '-o', 'pid=', '--ppid', str(process.pid)]
        out = subprocess.run(argv, capture_output=True,  # noqa: S603,S607
                             text=True, check=False)
        return [int(p) for p in out.stdout.split()]

    def log_text(self) -> str:
        try:
            with open(self.log, errors='replace') as handle:
                return handle.read()
        except (OSError, AttributeError):
            return ''

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_text()[-chars:]

    # A plain client.

    def get(self, path: str, timeout: float = 60.0,
            version: str | None = None) -> tuple[int, Any, dict[str, str]]:
        """GET *path* under ``/v2.1``: (status, JSON body, headers).

        *version* is the compute microversion asked for (``2.69``,
        ``latest``); none is nova's 2.1.
        """
        return self.request('GET', path, timeout=timeout, version=version)

    def request(self, method: str, path: str, body: Any = None,
                timeout: float = 60.0, version: str | None = None
                ) -> tuple[int, Any, dict[str, str]]:
        """*method* *path* under ``/v2.1`` with a JSON *body*."""
        data = None if body is None else json.dumps(body).encode()
        headers = {'X-Auth-Token': TOKEN, 'Accept': 'application/json',
                   'Content-Type': 'application/json'}
        if version is not None:
            headers['OpenStack-API-Version'] = 'compute %s' % version
        request = urllib.request.Request(  # noqa: S310 - self.url
            self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(  # noqa: S310 - http://127.0.0.1
                    request, timeout=timeout) as resp:
                return (resp.status, json.loads(resp.read() or b'null'),
                        dict(resp.headers))
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors='replace')
            return exc.code, parsed, dict(exc.headers)
