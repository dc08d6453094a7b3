"""frwatch analyzer: aligns every rank's Flight Recorder dump and names the earliest branching point.

The public surface is :func:`analyze` (dumps in, :class:`Verdict` out) and the verdict models.
This package imports nothing from the operator, kopf, kubernetes, structlog or torch.
"""
