"""Collection: expected ranks vs dumps in the store vs pods -> progress and whom to ask (``progress``), and
the evidence beyond Flight Recorder (``container_logs``, ``node_evidence``: pure rules; ``evidence``: the reads
and writes of one pass, through the adapters it is handed).

May import: the shared base, ``detect``, ``incident``, and (``evidence`` only) the adapters' types.
"""
