"""The alignment, per process group: who is a member and where members stop agreeing (``groups``), what a
group's own past says (``history``), send/recv pairs (``p2p``), ranks consistently behind (``stragglers``),
and everything the reduce step knows (``world``).

May import: ``trace`` and below. Beside ``load`` (neither imports the other)."""
