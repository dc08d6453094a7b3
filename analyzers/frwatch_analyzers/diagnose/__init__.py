"""From aligned groups to a verdict: where the category is decided (``category``: every rule that names the
root, its category and culprits), the verdict assembled (``diagnosis``), the entries that prove it
(``proof``), its words (``wording``), the probes to run next (``nextsteps``) and the HTML report's
timelines (``lanes``).

May import: ``align``, ``load`` and below. Beside ``live`` (neither imports the other)."""
