"""A rank's trace: one decoded dump made into a compact :class:`~.rank_trace.RankTrace` (``summarize``, the
map step's hot path, with the per-entry readers of ``entry_fields``; the model is ``rank_trace``), the
per-collective rules it and the aligner apply (``rules``), its columns (``tail_rows``), its wire form from
a worker to the parent (``wire``) and one rank's own timeline (``timeline``).

May import: ``decode``, ``store``, ``base``, ``verdict``."""
