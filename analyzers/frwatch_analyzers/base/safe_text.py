"""Text from untrusted input, made safe to print and to serialise.

Names in dumps, manifests and file names reach the report, the headline, Kubernetes annotations and
Events. A name may carry terminal escapes (``\\x1b[2J``), newlines (a forged report line), bidi controls,
lone surrogates (a pickle's strings and JSON's ``\\ud800`` allow them; UTF-8 does not) or undecodable
bytes of a file name. :func:`printable` turns each such character into a visible escape
(``\\x1b``, ``\\n``, ``\\u202e``, ``\\udcff``) and leaves every other character as it is.
"""

from __future__ import annotations

import re

#: C0 and C1 controls, DEL, bidi embeddings/overrides/isolates, line/paragraph separators, surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    char = m.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str, limit: int = 0) -> str:
    """``text`` with every control, bidi and surrogate character escaped; cut to ``limit`` characters
    (0: no cut) with the number of characters left out."""
    if not text.isprintable():
        text = _UNSAFE.sub(_escape, text)
    if limit and len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return text
