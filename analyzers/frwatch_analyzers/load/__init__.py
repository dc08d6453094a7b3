"""Every input made ready for the alignment: the map step over all dumps in workers, summaries first
(``loading``), every file of a rank merged by content (``merge``), claims checked against each other
(``consistency``).

May import: ``summaries`` and below. Beside ``align`` (neither imports the other)."""
