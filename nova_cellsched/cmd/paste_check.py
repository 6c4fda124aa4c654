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

"""Is the cellsched filter in every server-list pipeline of api-paste.ini?

:func:`inspect` reads an ``api-paste.ini`` with paste.deploy's own
parser (:class:`paste.deploy.loadwsgi.ConfigLoader`: the same
``[DEFAULT]``, ``%(here)s`` interpolation and section-name lookup as
nova-api's ``loadapp``) and follows what nova-api serves, starting at
``[composite:osapi_compute]`` (the name nova-api loads): the URL map,
the ``nova.api.auth:pipeline_factory_v21`` composites and their
pipelines, ``[pipeline:...]`` sections (a ``[filter-app:...]`` or
another composite on the way is reported as not followed). It
imports none of the factories, so nothing of nova's application is
built and nothing is installed.

A *server-list pipeline* is one that ends in nova's v2.1 compute
application (the ``[app:...]`` whose factory is
``nova.api.openstack.compute:APIRouterV21.factory``,
``osapi_compute_app_v21`` in nova's file); the *filter* is any
``[filter:...]`` whose factory is ``nova_cellsched.api:filter_factory``,
whatever its section is called. Where in the pipeline it stands does
not change what it does (it installs the lister when nova-api builds
the pipeline); the position is reported for the reader.
"""

import configparser
import dataclasses

from paste.deploy import loadwsgi

from nova_cellsched import exception

#: The composite nova-api loads (``nova.wsgi.osapi_compute.NAME``).
ENTRY = 'osapi_compute'
#: The factory of nova's v2.1 compute application (server lists).
COMPUTE_APP_FACTORY = 'nova.api.openstack.compute:APIRouterV21.factory'
#: The factory of our filter, as the README tells operators to write it.
FILTER_FACTORY = 'nova_cellsched.api:filter_factory'
#: nova's composite that picks a pipeline by key.
AUTH_PIPELINE_FACTORY = 'nova.api.auth:pipeline_factory_v21'
#: The keys of that composite nova reads from nova 32 on
#: (``local_conf['keystone']``; no ``[api] auth_strategy`` any more).
#: nova 31 reads the key ``[api] auth_strategy`` names (``keystone`` by
#: default, or the deprecated ``noauth2``): the caller says so
#: (:func:`inspect`).
AUTH_KEYS_USED = ('keystone',)
#: Why the other keys are not used, as the note says it.
AUTH_KEYS_WHY = 'nova builds this composite from its keystone pipeline only'


class MalformedPaste(exception.CellschedError):
    """The file cannot be read as an api-paste.ini; one-line message."""

    exit_code = 2


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """One server-list pipeline found in the file.

    :ivar served_at: the URL prefix of the URL map that reaches it, or
        ``''`` when nova-api does not use it (a key of
        ``pipeline_factory_v21`` nova does not read).
    :ivar section: the section holding the pipeline.
    :ivar key: the option naming it (``keystone``, ``pipeline``, ...).
    :ivar names: the filters and the app, outermost first.
    :ivar filter_at: the 0-based index of the cellsched filter in
        *names*, or None.
    :ivar wrong_factory: the ``[filter:...]`` section of a filter named
        ``cellsched`` in *names* whose factory is not ours, or ``''``.
    """

    served_at: str
    section: str
    key: str
    names: tuple[str, ...]
    filter_at: int | None
    wrong_factory: str = ''

    @property
    def used(self) -> bool:
        return bool(self.served_at)

    @property
    def position(self) -> str:
        """Where the filter stands, in words; '' without it."""
        if self.filter_at is None:
            return ''
        where = '%d of %d' % (self.filter_at + 1, len(self.names))
        if self.filter_at + 1 < len(self.names):
            where += ', before %s' % self.names[self.filter_at + 1]
        return where

    @property
    def problem(self) -> str:
        """Why this pipeline is not right; '' when it is."""
        if not self.used or self.filter_at is not None:
            return ''
        if self.wrong_factory:
            return ('[%s] %s: its cellsched is not the cellsched filter '
                    '(see [%s]), so server lists under %s are served by '
                    "nova's own lister" % (self.section, self.key,
                                           self.wrong_factory,
                                           self.served_at))
        return ('[%s] %s: the cellsched filter is not in this pipeline, '
                "so server lists under %s are served by nova's own lister "
                '(add it before %s)' % (self.section, self.key,
                                        self.served_at, self.names[-1]))


@dataclasses.dataclass
class Report:
    """What :func:`inspect` found.

    :ivar pipelines: the server-list pipelines, in the file's order.
    :ivar problems: one line each, including the pipelines' own.
    :ivar notes: facts worth a line that are not problems.
    """

    pipelines: list[Pipeline] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)


def _one_line(text: object) -> str:
    return ' '.join(str(text).split())


def _describe(exc: Exception) -> str:
    """A parse error in one line, without the file's values.

    configparser's messages quote the offending lines and raw values; an
    api-paste.ini may hold a password (``[filter:authtoken]``), so only
    line numbers and section and option names are kept.
    """
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return 'line %d: an option before any [section] header' % exc.lineno
    if isinstance(exc, configparser.ParsingError):
        lines = ', '.join(str(lineno) for lineno, _line in exc.errors)
        return ("line %s: not '[section]', 'key = value' or a comment"
                % lines)
    if isinstance(exc, configparser.DuplicateSectionError):
        return 'line %s: section [%s] appears twice' % (exc.lineno,
                                                        exc.section)
    if isinstance(exc, configparser.DuplicateOptionError):
        return 'line %s: option %r appears twice in [%s]' % (
            exc.lineno, exc.option, exc.section)
    if isinstance(exc, configparser.InterpolationError):
        return 'option %r in [%s]: a bad %%(name)s substitution' % (
            exc.option, exc.section)
    if isinstance(exc, UnicodeDecodeError):
        return 'not UTF-8 text (byte %d)' % exc.start
    return type(exc).__name__


def _spec(value: str) -> str:
    """``call:mod:attr`` or ``mod:attr`` -> ``mod:attr``, spaces removed."""
    value = value.strip()
    if value.startswith('call:'):
        value = value[len('call:'):]
    return value.replace(' ', '')


class _Walker:
    def __init__(self, path: str,
                 auth_keys: tuple[tuple[str, ...], str] = (
                     AUTH_KEYS_USED, AUTH_KEYS_WHY)) -> None:
        try:
            self.loader = loadwsgi.ConfigLoader(path)
        except FileNotFoundError:
            raise MalformedPaste('%s: no such file; give the path of '
                                 "nova-api's api-paste.ini ([wsgi] "
                                 'api_paste_config in nova.conf)' % path)
        except OSError as exc:
            raise MalformedPaste('%s: cannot be read: %s' % (
                path, _one_line(exc.strerror or exc)))
        except (configparser.Error, UnicodeDecodeError) as exc:
            raise MalformedPaste('%s is not a valid api-paste.ini: %s' % (
                path, _describe(exc)))
        self.path = path
        self.auth_keys, self.auth_why = auth_keys
        self.report = Report()
        self._seen: set[tuple[str, str]] = set()

    # -- reading, as paste.deploy reads -----------------------------------

    def _section(self, kind: loadwsgi._ObjectType, name: str) -> str:
        try:
            return str(self.loader.find_config_section(kind, name=name))
        except LookupError as exc:
            if str(exc).startswith('No section'):
                prefixes = [p for group in kind.config_prefixes
                            for p in group]
                raise _Unresolved('%r names no section (expected %s)'
                                  % (name, ' or '.join('[%s:%s]' % (p, name)
                                                       for p in prefixes)))
            raise _Unresolved(_one_line(exc).replace(
                ' found in config %s' % self.loader.filename, ''))

    def _options(self, section: str) -> dict[str, str]:
        """The section's own options, interpolated, [DEFAULT]'s left out."""
        parser = self.loader.parser
        options = {}
        try:
            defaults = parser.defaults()
            for option in parser.options(section):
                if option in defaults:
                    continue
                options[option] = parser.get(section, option)
        except configparser.Error as exc:
            raise MalformedPaste('%s is not a valid api-paste.ini: %s' % (
                self.path, _describe(exc)))
        return options

    # -- following what nova-api serves -----------------------------------

    def walk(self) -> Report:
        try:
            section = self._section(loadwsgi.APP, ENTRY)
        except _Unresolved:
            raise MalformedPaste(
                '%s is not an api-paste.ini of nova-api: it has no '
                '[composite:%s] (the application nova-api loads)'
                % (self.path, ENTRY))
        self._app(ENTRY, section, served_at='/', outer=(),
                  via=(section, ''))
        for section in self.loader.parser.sections():
            # Pipelines the URL map does not reach: listed, not checked.
            if section.startswith('composite:') and _spec(
                    self._options(section).get('use', '')) == \
                    AUTH_PIPELINE_FACTORY:
                self._auth_composite(section, '', ())
        if not self.report.pipelines:
            self.report.problems.append(
                "no pipeline ends in nova's compute application (an "
                '[app:...] with paste.app_factory = %s): nova-api serves '
                'no server lists with this file' % COMPUTE_APP_FACTORY)
        self.report.problems[:0] = [p.problem for p in self.report.pipelines
                                    if p.problem]
        return self.report

    def _app(self, name: str, section: str, served_at: str,
             outer: tuple[str, ...], via: tuple[str, str]) -> None:
        """Follow the APP *section*, named *name* by *via* (section, key).
        """
        if (section, served_at) in self._seen:
            return
        self._seen.add((section, served_at))
        options = self._options(section)
        if section.startswith('pipeline:'):
            self._pipeline(section, 'pipeline',
                           options.get('pipeline', '').split(), served_at,
                           outer)
        elif section.startswith(('composite:', 'composit:')):
            use = _spec(options.get('use', ''))
            if use == AUTH_PIPELINE_FACTORY:
                self._auth_composite(section, served_at, outer)
            elif use.endswith(('urlmap_factory', 'Paste#urlmap')):
                for key, value in options.items():
                    if key.startswith('/') or key.startswith(
                            ('domain ', 'http://', 'https://')):
                        self._follow(value.strip(), section, key,
                                     self._join(served_at, key), outer)
            else:
                self._not_followed(section, options)
        elif section.startswith('filter-app:'):
            self._not_followed(section, options)
        elif self._is_compute_app(section):
            # The app itself, without a pipeline of its own.
            self._pipeline(via[0], via[1], [name], served_at, outer)

    def _not_followed(self, section: str, options: dict[str, str]) -> None:
        self.report.notes.append(
            '[%s] (%s) was not followed: the pipelines behind it are not '
            'checked' % (section, 'use = %s' % options['use']
                         if 'use' in options else section.split(':')[0]))

    def _auth_composite(self, section: str, served_at: str,
                        outer: tuple[str, ...]) -> None:
        for key, value in self._options(section).items():
            if key == 'use':
                continue
            used = served_at if key in self.auth_keys else ''
            if not served_at and (section, key) in {
                    (p.section, p.key) for p in self.report.pipelines}:
                continue
            if served_at and not used:
                self.report.notes.append('[%s] %s is not used: %s' % (
                    section, key, self.auth_why))
            self._pipeline(section, key, value.split(), used, outer)

    def _follow(self, name: str, section: str, key: str, served_at: str,
                outer: tuple[str, ...]) -> None:
        try:
            target = self._section(loadwsgi.APP, name)
        except _Unresolved as exc:
            self._unresolved(section, served_at, str(exc))
            return
        self._app(name, target, served_at, outer, (section, key))

    def _pipeline(self, section: str, key: str, names: list[str],
                  served_at: str, outer: tuple[str, ...]) -> None:
        if not names:
            if served_at:
                self.report.problems.append('[%s] %s is empty' % (section,
                                                                  key))
            return
        try:
            app_section = self._section(loadwsgi.APP, names[-1])
        except _Unresolved as exc:
            self._unresolved(section, served_at, str(exc))
            return
        filters = list(outer) + names[:-1]
        if not self._is_compute_app(app_section):
            # A pipeline ending in a pipeline or composite: the filters
            # before it wrap whatever that one serves.
            self._app(names[-1], app_section, served_at, tuple(filters),
                      (section, key))
            return
        filter_at = None
        wrong_factory = ''
        for index, name in enumerate(filters):
            try:
                filter_section = self._section(loadwsgi.FILTER, name)
            except _Unresolved as exc:
                self._unresolved(section, served_at, str(exc))
                continue
            factory = self._options(filter_section).get(
                'paste.filter_factory',
                self._options(filter_section).get('use', ''))
            if _spec(factory) == FILTER_FACTORY:
                filter_at = index
            elif name == 'cellsched':
                wrong_factory = filter_section
                problem = ('[%s] has paste.filter_factory = %s, expected %s'
                           % (filter_section, factory, FILTER_FACTORY))
                # Once, however many pipelines name the filter.
                if problem not in self.report.problems:
                    self.report.problems.append(problem)
        self.report.pipelines.append(Pipeline(
            served_at, section, key, tuple(filters) + (names[-1],),
            filter_at, wrong_factory))

    def _is_compute_app(self, section: str) -> bool:
        options = self._options(section)
        return _spec(options.get('paste.app_factory',
                                 options.get('use', ''))) == \
            COMPUTE_APP_FACTORY

    def _unresolved(self, section: str, served_at: str, why: str) -> None:
        if served_at:
            self.report.problems.append(
                '[%s] %s: nova-api would fail to start with this file'
                % (section, why))

    @staticmethod
    def _join(prefix: str, key: str) -> str:
        if prefix in ('', '/'):
            return key
        if key == '/':
            return prefix
        return prefix.rstrip('/') + key


class _Unresolved(Exception):
    """A name that resolves to no section (one-line message)."""


def inspect(path: str,
            auth_keys: tuple[tuple[str, ...], str] = (AUTH_KEYS_USED,
                                                      AUTH_KEYS_WHY)
            ) -> Report:
    """Read the api-paste.ini at *path*; report its server-list pipelines.

    :param auth_keys: (the keys of ``pipeline_factory_v21`` composites
        the running nova reads, why the others are not used): nova's
        ``keystone`` from nova 32 on; nova 31's ``[api] auth_strategy``.

    :raises MalformedPaste: the file is missing, unreadable, not an INI
        file paste.deploy reads, or has no ``[composite:osapi_compute]``.
        The message is one line and names the file.
    """
    return _Walker(path, auth_keys).walk()
