"""Debian's chromium, driven by playwright (the pinned PyPI package, its own driver; never
`playwright install`): open a report page from a file and watch for console errors and requests. Used by
the HTML report's tests (tests/htmlreport) and its benchmark (benchmarks/bench_report.py).

    with Browser(tmp_path) as browser:
        seen = browser.open(html_file)
        seen.page.locator("#branch").inner_text()
        assert not seen.console_errors and not seen.failed and seen.requests == [seen.url]
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Generous on a loaded 2-core machine: these wait on explicit signals, never on a sleep.
LAUNCH_TIMEOUT_MS = 120_000
PAGE_TIMEOUT_MS = 60_000


def chromium_missing() -> str:
    """Why the browser cannot run here ('' when it can)."""
    if not Path(CHROMIUM).exists() or shutil.which("chromedriver") is None:
        return (
            f"{CHROMIUM} is missing: scripts/setup installs Debian's chromium and chromium-driver (as root)"
        )
    return ""


@dataclass
class Seen:
    page: Any
    url: str
    console_errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    render_ms: float = 0.0


class Browser:
    """One chromium with a fresh user-data-dir under ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        self.profile = workdir / "chromium-profile"
        self._pw: Any = None
        self._context: Any = None

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self._context = self._pw.chromium.launch_persistent_context(
            str(self.profile),
            executable_path=CHROMIUM,
            args=FLAGS,
            headless=True,
            timeout=LAUNCH_TIMEOUT_MS,
            viewport={"width": 1360, "height": 900},
        )
        return self

    def open(self, html: Path) -> Seen:
        page = self._context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        url = html.resolve().as_uri()
        seen = Seen(page, url)
        page.on(
            "console",
            lambda m: seen.console_errors.append(m.text) if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: seen.console_errors.append(str(e)))
        page.on("requestfailed", lambda r: seen.failed.append(f"{r.url}: {r.failure}"))
        page.on("request", lambda r: seen.requests.append(r.url))
        page.goto(url, wait_until="load")
        seen.render_ms = float(
            page.evaluate(
                "() => { const n = performance.getEntriesByType('navigation')[0];"
                " return n ? n.loadEventEnd - n.startTime : -1; }"
            )
        )
        return seen

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._context is not None:
            self._context.close()
        if self._pw is not None:
            self._pw.stop()
