"""Logging of frwatch's processes (operator, agent): JSON lines on stderr, structlog over the standard
library's logging, so kopf's, boto's and frwatch's own loggers all come out the same way::

    {"event": "...", "level": "info", "logger": "frwatch.agent", "timestamp": "2026-...Z"}

(plus ``exception`` with the traceback when one is logged).
"""

from __future__ import annotations

import logging
import sys

import structlog

#: Libraries that log every request at INFO/DEBUG: WARNING and above only.
NOISY_LOGGERS = ("botocore", "urllib3", "aiohttp.access", "kubernetes.client.rest")


def setup_logging(level: str) -> None:
    """Route the root logger to stderr as JSON lines at ``level`` (a Python level name)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso"),
                structlog.processors.format_exc_info,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
