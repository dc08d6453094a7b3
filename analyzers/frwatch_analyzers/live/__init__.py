"""Live watch, analyzer side: a rank's live progress as an agent samples it (``summary``) and the judgement
over rounds, desync and stall (``watch``: :class:`~.watch.LiveWatch`). Pure: no I/O, no clock.

May import: ``align`` and below. Beside ``diagnose`` (neither imports the other)."""
