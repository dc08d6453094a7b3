"""Helpers every layer shares, importing nothing of the analyzer: what untrusted input may cost (``limits``),
text made safe to print (``safe_text``), rank ranges and op names for people (``textfmt``).

May import: the standard library only. Lowest layer but the verdict model (``frwatch_analyzers.verdict``)."""
