"""The verdict: reading the analyzer's verdict.json (``reading``), the operator's own verdict of an attempt
that crashed before any collective hung (``exit_verdict``), the verdict checked against what the cluster saw
(``evidence_check``), and what it looks like where people read it (``words``, ``report``, ``events``).

Pure except ``reading`` (it reads the store it is handed): may import the shared base and ``incident``.
"""
