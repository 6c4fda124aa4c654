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

"""JSON in and out of a listing: orjson when installed, else the stdlib.

Parsing the network info cache of every listed instance (about 1 KB of
JSON each) is the largest single CPU cost of a detailed listing, and
encoding the records the second; orjson does both several times faster
than the standard library. It is optional: without it the standard
library gives the same values and the same bytes.
"""

import datetime
import importlib
import json
from typing import Any

# Imported by name so that type checking gives the same answer whether or
# not orjson is installed in the checker's environment.
orjson: Any
try:
    orjson = importlib.import_module('orjson')
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

#: Whether orjson is used.
FAST = orjson is not None


def _default(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    raise TypeError('%s is not JSON serializable: %r'
                    % (type(value).__name__, value))


def loads(text: str | bytes, fast: bool | None = None) -> Any:
    """Parse JSON text.

    :param fast: use orjson (True) or the standard library (False);
        default orjson when installed.
    """
    if FAST if fast is None else fast:
        return orjson.loads(text)
    return json.loads(text)


def dumps(value: Any, fast: bool | None = None) -> bytes:
    """Compact UTF-8 JSON; datetimes as ISO 8601 (``isoformat()``).

    Both back ends give the same bytes for the values of a listing
    (text, numbers, booleans, None, datetimes, lists and dicts with text
    keys).

    :param fast: as for :func:`loads`.
    :raises TypeError: a value JSON cannot represent.
    """
    if FAST if fast is None else fast:
        try:
            encoded: bytes = orjson.dumps(value,
                                          option=orjson.OPT_NON_STR_KEYS)
            return encoded
        except orjson.JSONEncodeError as exc:
            raise TypeError(str(exc)) from exc
    return json.dumps(value, default=_default, ensure_ascii=False,
                      separators=(',', ':'), allow_nan=False
                      ).encode('utf-8')
