"""Live watch on the operator's side (issue 15): which watch a job gets (``policy``), the judgement of one
attempt (``judge``: the operator's desync/stall decision over the analyzer's ``live_findings``), the pulls from
the agents (``pull``), and the rounds sharded over replicas (``shards``).

``policy`` and ``judge`` are pure; ``pull`` uses ``agent.client``; ``shards`` the leases.
"""
