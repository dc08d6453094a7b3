"""The frwatch webhook served standalone on its own event loop in a thread, for the capture and TLS tests."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from frwatch_dev.ports import free_port
from frwatch_operator.capture.agent_keys import AgentKeys, KeyRing, new_key
from frwatch_operator.config import AgentSettings, Config, WebhookSettings
from frwatch_operator.webhook import AdmissionNote, JobIndex, serve


class WebhookThread:
    """The standalone webhook server on its own event loop in a thread."""

    def __init__(self, index: JobIndex, config: Config, keys: AgentKeys | None = None) -> None:
        self.index, self.config, self.keys = index, config, keys
        self.notes: list[AdmissionNote] = []
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()
            async with serve(self.index, self.config, observer=self.notes.append, keys=self.keys) as url:
                self.url = url
                self._ready.set()
                await self._stop.wait()

        self._loop.run_until_complete(main())

    def __enter__(self) -> WebhookThread:
        self._thread.start()
        assert self._ready.wait(10), "webhook server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def post(self, body: bytes | dict[str, Any], path: str = "/frwatch-inject") -> dict[str, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            return dict(json.loads(resp.read()))


def webhook_config(**agent: Any) -> Config:
    return Config(
        webhook=WebhookSettings(addr="127.0.0.1", port=free_port(), insecure=True, job_wait_seconds=0.2),
        agent=AgentSettings(**agent),
    )


KEYS = AgentKeys(timedelta(minutes=10), KeyRing((new_key(datetime.now(UTC) - timedelta(days=1)),)))


