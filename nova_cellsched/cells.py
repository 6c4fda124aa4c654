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

"""Nova adapter: cell mappings from the nova API database, URLs masked.

Shared by the scheduler, the lister and the command line.
"""

from typing import Any

import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_messaging import transport as messaging_transport
from sqlalchemy.engine import url as sa_url


#: URL query keys that drivers read as a password.
SECRET_QUERY_KEYS = frozenset({'password', 'passwd', 'pwd', 'sslkey',
                               'sslpassword', 'ssl_key'})


def mask_url(url: str | None) -> str:
    """Return *url* with its password (also in the query) as ``***``.

    A value SQLAlchemy cannot read is masked whole, since it may still
    hold a secret.
    """
    if not url:
        return ''
    try:
        parsed = sa_url.make_url(url)
        query = {key: ('***' if key.lower() in SECRET_QUERY_KEYS else value)
                 for key, value in parsed.query.items()}
        masked: str = parsed.set(query=query).render_as_string(
            hide_password=True)
        return masked
    except Exception:  # noqa: BLE001 - any parse error: hide it all
        return '<unparsable URL, masked>'


def register_messaging_opts() -> None:
    """Register oslo.messaging's transport options on nova's CONF.

    Cell mappings template their URLs on ``[DEFAULT] transport_url``
    (``CellMapping.format_mq_url``); a nova service registers it when it
    starts RPC, a command that only reads the database must do it itself.
    The option objects are oslo.messaging's own, as its ``ConfFixture``
    and ``get_transport`` register them, so registering them again
    anywhere is a no-op rather than a conflict.
    """
    nova.conf.CONF.register_opts(messaging_transport._transport_opts)


def register_objects() -> None:
    """Register the nova objects a listing reads: the cell and instance
    mappings.

    Not ``objects.register_all()``: importing every nova object took a
    tenth of the command line's start-up.
    """
    from nova.objects import cell_mapping  # noqa: F401
    from nova.objects import instance_mapping  # noqa: F401


def load_cell_mappings(context: Any = None) -> list[Any]:
    """Return nova's ``CellMapping`` objects, cell0 included."""
    register_objects()
    register_messaging_opts()
    ctxt = context or nova_context.get_admin_context()
    return list(objects.CellMappingList.get_all(ctxt))
