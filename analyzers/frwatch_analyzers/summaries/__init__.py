"""A rank's summary stored beside its dump (the map step done at the edge or by a fan-out shard): the format
(``rank_summary``, ``format``, ``encode``, ``decode``), making one in a worker (``writer``), whether one
can stand for its dump (``check``), the fan-out's map (``map_shard``: ``frwatch analyze --map-shard I/N``)
and its reduce (``reduce``: every usable summary taken instead of its dump, before the alignment).

May import: ``trace`` and below."""
