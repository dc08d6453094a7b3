"""The HTML report: one self-contained page (no script, no external asset, a strict Content-Security-Policy)
a person reads in a browser, offline. Rendered with Jinja2, autoescaping every value: names, call sites and
file names come from dumps and are hostile.

    html = render_html(verdict)                              # the report
    html = render_html(verdict, source=Path("train/"))       # with the bridge to the code (--source DIR)
"""

from __future__ import annotations

from .page import render_html

__all__ = ["render_html"]
