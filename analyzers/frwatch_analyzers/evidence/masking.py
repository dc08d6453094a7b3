"""Secrets in log text, masked before any of it reaches the verdict, the report, an annotation or an Event.

Training logs print environment dumps, command lines and URLs. :func:`mask` replaces what matches a common
secret shape with ``[masked]`` (keeping the key's name, so a person still sees *which* secret was there):
AWS access key ids and secret keys, ``Authorization: Bearer``/``Basic`` headers, ``password=``/``token:``
style assignments, credentials in URLs, GitHub, Hugging Face, Slack, OpenAI-style and Google API tokens,
JSON Web Tokens and PEM private key blocks. A pattern match is a guess: masking a non-secret costs a few
characters of a log excerpt; printing a secret cannot be undone.
"""

from __future__ import annotations

import re

MASK = "[masked]"

#: A whole PEM private key block (or its first line, when the block is cut by the excerpt).
_PEM = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.{0,8192}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.{0,8192})",
    re.DOTALL,
)

#: Tokens recognisable by their own shape, anywhere in a line.
_TOKENS = re.compile(
    r"\b(?:"
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{40,255}"  # GitHub tokens
    r"|hf_[A-Za-z0-9]{30,64}"  # Hugging Face tokens
    r"|xox[abprs]-[A-Za-z0-9-]{10,200}"  # Slack tokens
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,200}"  # OpenAI / Anthropic style API keys
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|glpat-[A-Za-z0-9_-]{20,64}"  # GitLab tokens
    r"|eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,4096}"  # JSON Web Tokens
    r")"
)

#: ``Authorization: Bearer <token>`` and ``Basic``/``Token`` schemes: the scheme stays, the credential goes.
_AUTH = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,4096}")

#: ``user:password@`` in a URL.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,20}://[^\s:/@]{1,256}:)[^\s@/]{1,1024}@")

#: ``password=...``, ``api_key: ...``, ``"secret": "..."``, ``AWS_SECRET_ACCESS_KEY=...``: the name stays.
_ASSIGNED = re.compile(
    r"(?i)(\b[A-Za-z0-9_.-]{0,64}(?:passw(?:or)?d|passwd|pwd|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credentials?|auth)[A-Za-z0-9_.-]{0,64}[\"']?\s{0,4}[:=]\s{0,4}[\"']?)"
    r"(?!(?:bearer|basic|token)\s|\[masked\])([^\s\"',;&]{1,4096})"
)


def _keep_name(m: re.Match[str]) -> str:
    return f"{m.group(1)}{MASK}"


def mask(text: str) -> str:
    """``text`` with every secret-shaped run replaced by ``[masked]``."""
    text = _PEM.sub(MASK, text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _AUTH.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _ASSIGNED.sub(_keep_name, text)
    return _TOKENS.sub(MASK, text)
