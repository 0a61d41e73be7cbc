"""Every number the protocol fixes, stated once (docs/DESIGN.md §5, §6, §7).

The capabilities response advertises the first six as `limits`; request models, the token codec,
the budgets and the HTTP adapter all take their bounds from here.
"""

from __future__ import annotations

from typing import Final

# -- advertised in capabilities.limits ----------------------------------------------------------
SEARCH_MAX_RESULTS: Final = 3  # distinct parent documents per search (request `limit` is 1..3)
SEARCH_MAX_BYTES: Final = 4096  # the whole serialized search response, UTF-8
READ_DEFAULT_BYTES: Final = 16384  # read page budget when the request names none
READ_MAX_BYTES: Final = 32768  # largest accepted read `max_bytes`
REFERENCE_TTL_SECONDS: Final = 300  # references and cursors expire this long after issuance
READ_CHAIN_MAX_BYTES: Final = 131072  # body bytes one reference's reading chain may expose

# -- request bounds ----------------------------------------------------------------------------
SEARCH_MIN_RESULTS: Final = 1
READ_MIN_BYTES: Final = 4096  # smallest accepted read `max_bytes`
QUERY_MAX_CHARS: Final = 2000  # search query (and a turn's retrieval query), in characters
RUN_ID_MAX_CHARS: Final = 128
# Opaque tokens as a client may send them back; a real reference or cursor is far shorter.
TOKEN_MAX_CHARS: Final = 2048
REQUEST_MAX_BODY_BYTES: Final = 64 * 1024  # knowledge request bodies; larger → 400 invalid_request
# Nesting of any request body (wire.loads); deeper → 400. No endpoint's schema comes close.
REQUEST_MAX_DEPTH: Final = 32
