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

"""A strict reader of W3C Server-Timing header values, for tests.

The grammar (https://www.w3.org/TR/server-timing/)::

    Server-Timing = #server-timing-metric
    server-timing-metric = metric-name *( OWS ";" OWS server-timing-param )
    metric-name = token
    server-timing-param = server-timing-param-name OWS "=" OWS
                          server-timing-param-value
    server-timing-param-value = token / quoted-string
"""

import re

TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
PARAM = r'%s[ \t]*=[ \t]*(?:%s|%s)' % (TOKEN, TOKEN, QUOTED)
METRIC = r'%s(?:[ \t]*;[ \t]*%s)*' % (TOKEN, PARAM)
HEADER = re.compile(r'^%s(?:[ \t]*,[ \t]*%s)*$' % (METRIC, METRIC))


def parse(value):
    """{metric: {param: value}} of a header value; ValueError if invalid."""
    if not HEADER.match(value):
        raise ValueError('not a Server-Timing value: %r' % value)
    metrics = {}
    for metric in re.finditer(METRIC, value):
        text = metric.group(0)
        name = re.match(TOKEN, text).group(0)
        params = {}
        for param in re.finditer(
                r';[ \t]*(%s)[ \t]*=[ \t]*(%s|%s)' % (TOKEN, TOKEN, QUOTED),
                text):
            raw = param.group(2)
            if raw.startswith('"'):
                raw = re.sub(r'\\(.)', r'\1', raw[1:-1])
            params[param.group(1)] = raw
        metrics[name] = params
    return metrics
