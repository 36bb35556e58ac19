"""What a tool may say about a failure: the shape of its code, the length of its text.

A leaf module: the result types (:mod:`arvis.tools.base`), the classified failure
(:mod:`arvis.tools.outcome`) and the errors (:mod:`arvis.tools.errors`) all bound
their fields by these, so none of them has to import another for it.
"""

from __future__ import annotations

import re

FAILURE_CODE = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")
"""A failure code: lowercase, dotted, at most 64 characters (``not_found``, ``crm.locked``)."""
MAX_MESSAGE_CHARS = 2000
"""The longest failure text shown to a caller; a longer one is cut."""
