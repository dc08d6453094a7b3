"""Names from a dump are hostile in the page too: ``<script>`` and HTML injected through a real gloo dump's
process-group name, frame names and file names are shown as text, and the rendered DOM (chromium) holds
no element they tried to add."""

from __future__ import annotations

from pathlib import Path

import pytest

from frwatch_analyzers.cli import EXIT_OK, main
from frwatch_dev.dumps import pickle_bytes
from frwatch_dev.testing.browser import Browser, chromium_missing

pytestmark = pytest.mark.slow

GROUP = '<script id="pwned-pg">document.title="pwned"</script>'
DESC = '"><img id="pwned-desc" src=x onerror="document.title=1">'
FUNCTION = '<b id="pwned-fn">step</b><style>body{display:none}</style>'
FILE = '/src/<iframe id="pwned-file" src="https://example.invalid/"></iframe>/train.py'
INJECTED = "#pwned-pg, #pwned-desc, #pwned-fn, #pwned-file, script, img, iframe, style:not(head style)"


def hostile_copy(real: Path, into: Path, load) -> None:  # type: ignore[no-untyped-def]
    """The scenario's dumps with the names replaced on every rank (the culprit's frames too)."""
    into.mkdir(parents=True)
    for f in sorted(real.iterdir()):
        dump = load(f)
        for e in dump["entries"]:
            e["process_group"] = (GROUP, DESC)
            for frame in e.get("frames") or []:
                if (
                    not frame["filename"].endswith("distributed_c10d.py")
                    and "c10d_logger" not in frame["filename"]
                ):
                    frame["name"] = FUNCTION + frame["name"]
                    frame["filename"] = FILE
        status = dump.get("pg_status") or {}
        dump["pg_status"] = {GROUP if k == "0" else k: v for k, v in status.items()}
        (into / f.name).write_bytes(pickle_bytes(dump))


def test_injected_markup_is_text_in_the_rendered_page(real_dumps, tmp_path: Path) -> None:
    if missing := chromium_missing():
        pytest.fail(missing)
    hostile_copy(real_dumps("skip"), tmp_path / "dumps", real_dumps.load)
    (tmp_path / "src").mkdir()
    out = tmp_path / "report.html"
    # with --source: the hostile file name reaches the "skipped" reasons as well
    assert main([str(tmp_path / "dumps"), "--html", str(out), "--source", str(tmp_path / "src")]) == EXIT_OK
    raw = out.read_text()
    assert GROUP not in raw and FUNCTION not in raw and "<iframe" not in raw and "<img" not in raw

    with Browser(tmp_path) as browser:
        seen = browser.open(out)
        page = seen.page
        assert page.locator(INJECTED).count() == 0
        assert page.title().startswith("frwatch:")  # nothing ran: the title is the page's own
        text = page.locator("body").inner_text()
        assert GROUP in text  # shown as the text it is
        assert '<b id="pwned-fn">' in text and '<iframe id="pwned-file"' in text
        assert "skipped" in page.locator("#code").inner_text()
        assert seen.console_errors == [] and seen.failed == [] and seen.requests == [seen.url]
