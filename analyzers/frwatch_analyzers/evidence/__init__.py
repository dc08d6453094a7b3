"""Evidence beyond Flight Recorder, from logs to causes: reading logs, NCCL debug files and node records next
to the dumps (``read``, ``logtext``), a log's failure lines (``logscan``), secrets masked (``masking``),
a suspect node's own signals (``node_signals``), and all of it combined with the Flight Recorder verdict
(``causes``: why ranks stopped, who failed first).

May import: ``diagnose`` and below."""
