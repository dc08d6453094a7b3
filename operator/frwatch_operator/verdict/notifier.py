"""Sends the notices of :mod:`frwatch_operator.verdict.notice` to a webhook, without ever holding up an Incident.

:meth:`Notifier.offer` only puts the notice on a bounded queue and returns at once (a full queue drops the
notice and says so in the metrics and the log); one worker thread sends them in turn. Each send has a
bounded number of tries, each try a total deadline (connect, write and read together), and a bounded pause
between tries, so one receiver that hangs or refuses costs at most ``attempts * timeout + pauses`` seconds
of that one thread and nothing of the handlers. Only a 2xx answer is a success; 4xx other than 429 is
not tried again (the receiver said no to this body). When a notice is done (sent or given up), ``done`` is
called with the outcome: the handler records it on the Incident so it is not sent again.

The URL is a secret (a Slack webhook URL is its own credential): it is never logged, only its host.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3

from frwatch_operator.verdict.notice import Notice

logger = logging.getLogger(__name__)

#: (notice, outcome): outcome is ``sent`` or ``failed: <why>`` (``dropped`` never reaches it: not tried).
Done = Callable[[Notice, str], None]


@dataclass(frozen=True)
class SendPolicy:
    """How hard one notice is tried."""

    attempts: int = 3
    timeout_seconds: float = 5.0  #: total deadline of one try (connect + send + read)
    pause_seconds: float = 1.0  #: before the 2nd try; doubled before each later one
    queue_size: int = 100
    remembered: int = 10_000  #: Incidents whose notice is done, kept so a late event does not send it again


class Notifier:
    """One worker thread sending notices to one webhook URL."""

    def __init__(
        self,
        url: str,
        policy: SendPolicy,
        done: Done,
        count: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the notification webhook URL must be http(s)://host/...")
        self._url = url
        self.host = parts.hostname
        self._policy = policy
        self._done = done
        self._count = count
        self._queue: queue.Queue[Notice | None] = queue.Queue(maxsize=policy.queue_size)
        self._pending: set[str] = set()  #: uids queued or being sent (offered twice: sent once)
        #: uids done in this process (oldest first, bounded): a watch event from before the Incident was
        #: marked notified can still arrive after the notice is done; the mark covers a restart
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._http = urllib3.PoolManager(retries=False, maxsize=1)
        self._thread = threading.Thread(target=self._run, name="frwatch-notifier", daemon=True)
        self._thread.start()

    def offer(self, notice: Notice) -> bool:
        """Queue one notice (never blocks). False: already queued or done, or the queue is full (dropped)."""
        with self._lock:
            if notice.incident_uid in self._pending or notice.incident_uid in self._finished:
                return False
            try:
                self._queue.put_nowait(notice)
            except queue.Full:
                logger.warning("notification for Incident %s/%s dropped: %d already waiting",
                               notice.namespace, notice.incident, self._policy.queue_size)  # fmt: skip
                self._count("dropped")
                return False
            self._pending.add(notice.incident_uid)
            return True

    def close(self, wait_seconds: float = 5.0) -> None:
        """Stop the worker after what it is sending now (queued notices are left: a restarted operator
        finds their Incidents not yet annotated and offers them again while they are recent)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._queue.put(None)
        self._thread.join(wait_seconds)

    def _run(self) -> None:
        while True:
            notice = self._queue.get()
            if notice is None:
                return
            outcome = self._send(notice)
            self._count("sent" if outcome == "sent" else "failed")
            try:
                self._done(notice, outcome)
            except Exception:  # the record of it failed: logged; the notice itself is done
                logger.exception("recording the notification of Incident %s/%s", notice.namespace, notice.incident)
            finally:
                with self._lock:
                    self._pending.discard(notice.incident_uid)
                    self._finished[notice.incident_uid] = None
                    while len(self._finished) > self._policy.remembered:
                        self._finished.popitem(last=False)

    def _send(self, notice: Notice) -> str:
        why = ""
        pause = self._policy.pause_seconds
        for attempt in range(1, self._policy.attempts + 1):
            if attempt > 1:
                time.sleep(pause)
                pause *= 2
            why, again = self._try(notice)
            if not why:
                logger.info("Incident %s/%s announced to %s", notice.namespace, notice.incident, self.host)
                return "sent"
            logger.warning("notification of Incident %s/%s to %s, try %d of %d: %s", notice.namespace,
                           notice.incident, self.host, attempt, self._policy.attempts, why)  # fmt: skip
            if not again:
                break
        return f"failed: {why}"[:200]

    def _try(self, notice: Notice) -> tuple[str, bool]:
        """One POST: ("", _) on a 2xx; else (why, whether another try may help)."""
        timeout = urllib3.Timeout(total=self._policy.timeout_seconds)
        try:
            answer = self._http.request(
                "POST", self._url, body=notice.body(), headers={"Content-Type": "application/json"},
                timeout=timeout, redirect=False, preload_content=False,
            )  # fmt: skip
            try:
                answer.read(4096, decode_content=False)  # bounded: the answer is not used
            finally:
                answer.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            return f"{type(exc).__name__} from {self.host}", True
        if 200 <= answer.status < 300:
            return "", False
        return f"HTTP {answer.status} from {self.host}", answer.status == 429 or answer.status >= 500
