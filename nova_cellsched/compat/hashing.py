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

"""The hasher: one SHA-256 per relied-on source, stable across moves.

:func:`source_hash` is what the table of tested versions
(:mod:`.sources`) holds for each relied-on source: the SHA-256 of
its parsed code (:func:`canonical`: the syntax tree, docstrings, comments
and positions left out), so that moving a function, reindenting it as a
whole, editing a comment or a docstring is not a change, and any edit
of what runs is (a statement moved into or out of a block included).
Pure: imports what it is asked to hash, nothing else.
"""

import ast
import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import linecache
import textwrap
import tokenize
from typing import Any


def nova_version() -> str:
    """The installed nova's version, or ``unknown``."""
    try:
        return importlib.metadata.version('nova')
    except importlib.metadata.PackageNotFoundError:
        return 'unknown'


def resolve(module_name: str, path: str) -> Any:
    """``module.path`` (dotted through attributes); the module if no path.

    :raises ImportError, AttributeError: it is missing.
    """
    found: Any = importlib.import_module(module_name)
    for part in path.split('.') if path else ():
        found = getattr(found, part)
    return found


def normalise(source: str) -> str:
    """*source* without indentation, blank lines and comment lines.

    Text only: a statement moved into or out of a block is the same
    text. What is hashed is :func:`canonical`, which falls back to this
    only for a fragment that does not parse on its own (a lambda in the
    middle of an expression).
    """
    lines = (line.strip() for line in textwrap.dedent(source).splitlines())
    return '\n'.join(line for line in lines
                     if line and not line.startswith('#'))


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef,
               ast.AsyncFunctionDef)


def _dump(node: Any) -> str:
    """A syntax tree as text: node types and fields, no positions.

    Fields that are None or empty are left out, so that a field a later
    Python adds empty (3.12's ``type_params``) changes nothing.
    """
    if isinstance(node, ast.AST):
        body = getattr(node, 'body', None)
        if (isinstance(node, _DOCUMENTED) and body and
                isinstance(body[0], ast.Expr) and
                isinstance(body[0].value, ast.Constant) and
                isinstance(body[0].value.value, str)):
            # NOTE: the docstring is documentation, not behaviour.
            body = body[1:]
        fields = []
        for name, value in ast.iter_fields(node):
            if name == 'body' and isinstance(node, _DOCUMENTED):
                value = body
            if value is None or (isinstance(value, list) and not value):
                continue
            fields.append('%s=%s' % (name, _dump(value)))
        return '%s(%s)' % (type(node).__name__, ', '.join(fields))
    if isinstance(node, list):
        return '[%s]' % ', '.join(_dump(item) for item in node)
    return repr(node)


def canonical(source: str) -> str:
    """*source*'s code as :func:`source_hash` hashes it.

    The syntax tree of the dedented source, without docstrings,
    comments, blank lines, line and column numbers (:func:`_dump`): a
    function moved, reindented as a whole or re-commented is the same;
    a statement moved into or out of a block is not. A fragment that
    does not parse on its own is its :func:`normalise` text.
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return 'text:' + normalise(source)
    return _dump(tree)


@functools.lru_cache(maxsize=16)
def _classes_in(filename: str) -> dict[str, tuple[int, int]]:
    """Top-level classes of a source file: name -> (first, last) line.

    What ``inspect.getsource`` finds for a class (decorators included),
    with the file parsed once rather than once per class.
    """
    with tokenize.open(filename) as handle:
        tree = ast.parse(handle.read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            first = min([node.lineno] +
                        [d.lineno for d in node.decorator_list])
            found[node.name] = (first, node.end_lineno)
    return found


def _class_source(cls: type) -> tuple[str, str, int]:
    """(source, file, first line) of *cls*."""
    filename = inspect.getsourcefile(cls)
    span = _classes_in(filename).get(cls.__name__) if filename else None
    if filename is None or span is None or cls.__qualname__ != cls.__name__:
        lines, first = inspect.getsourcelines(cls)
        return ''.join(lines), inspect.getsourcefile(cls) or '?', first
    lines = linecache.getlines(filename)
    return ''.join(lines[span[0] - 1:span[1]]), filename, span[0]


def code_source(value: Any) -> tuple[str, str, int] | None:
    """The source of a module, class or function, as it is in its file.

    Functions are unwrapped (nova's DB API and API decorators keep the
    original in ``__wrapped__``); their source starts at their
    decorators. A module is its whole source.

    :returns: (source, file, its first line); None for a plain value
        (not code).
    :raises OSError: the source is not installed (``.pyc`` only).
    """
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if inspect.ismodule(value):
        return inspect.getsource(value), inspect.getsourcefile(value) or '?', 1
    if inspect.isclass(value):
        return _class_source(value)
    if callable(value):
        function = inspect.unwrap(value)
        lines, first = inspect.getsourcelines(function)
        return ''.join(lines), inspect.getsourcefile(function) or '?', first
    return None


def source_text(value: Any) -> str:
    """What :func:`source_hash` hashes: source, or repr for a value.

    Code (a module, class or function) is :func:`code_source` parsed
    (:func:`canonical`); a plain value its ``repr`` (a set's sorted).

    :raises OSError: the source is not installed (``.pyc`` only).
    :raises TypeError: neither code nor a plain value.
    """
    code = code_source(value)
    if code is not None:
        return canonical(code[0])
    if isinstance(value, (list, tuple, str, int, frozenset, set, dict)):
        if isinstance(value, (set, frozenset)):
            return repr(sorted(value))
        return repr(value)
    raise TypeError('cannot fingerprint %r' % (value,))


def source_hash(value: Any) -> str:
    """SHA-256 (hex) of :func:`source_text`."""
    return hashlib.sha256(source_text(value).encode('utf-8')).hexdigest()


def signature(value: Any) -> str:
    """*value*'s parameters as ``(a, b=1)``; ``(unknown)`` if none."""
    try:
        return str(inspect.signature(inspect.unwrap(value)))
    except (TypeError, ValueError):
        return '(unknown)'
