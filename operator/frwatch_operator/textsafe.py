"""Text the operator writes where people read it (Event messages, annotations): control characters
escaped. Pure.

Names and messages reach the operator from tenants (pod termination messages, verdicts and records read
back from the store, node names a verdict claims): an ANSI escape or a newline written raw into an Event
or an annotation repaints or splits what ``kubectl describe`` shows. Every C0/C1 control character, DEL,
the Unicode bidirectional overrides and lone surrogates are written as Python-style escapes (``\\x1b``,
``\\n``, ``\\u202e``), so the text says what it holds and can no longer act on the terminal.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` with every control character escaped (see the module docstring)."""
    return _UNSAFE.sub(lambda m: _NAMED.get(m.group(), m.group().encode("unicode_escape").decode()), text)
