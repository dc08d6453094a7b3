"""The HTML report in a real headless browser (Debian's chromium, driven by playwright), for the demo's
scenarios from real gloo ranks (with each rank's log): the page shows the branch and the culprit (and its pod
and node from the manifest), a crash's exception and raising line, a lane expands, and the page logs no console error and makes no request but its own.

Screenshots go to the test's folder, and also to ``$FRWATCH_SCREENSHOTS`` when it is set (the ones in
docs/ were made that way: ``FRWATCH_SCREENSHOTS=docs/screenshots pytest tests/htmlreport -k browser``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from frwatch_analyzers.cli import EXIT_OK, main
from frwatch_analyzers.store.manifest import Manifest, PodRecord
from frwatch_analyzers.verdict import Verdict
from frwatch_dev.testing.browser import Browser, Seen, chromium_missing

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["skip", "subgroup", "crash", "cpu_stuck"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if missing := chromium_missing():
        pytest.fail(missing)
    with Browser(tmp_path_factory.mktemp("chromium")) as b:
        yield b


def with_manifest(run, into: Path, world_size: int = 4) -> Path:  # type: ignore[no-untyped-def]
    """The dumps of a scenario beside a manifest.json (rank r ran in pod llama-worker-r on node gpu-node-r)
    and each rank's captured output as ``rank<r>.log``."""
    into.mkdir(parents=True)
    for f in run.dump_dir.iterdir():
        shutil.copy(f, into / f.name)
    for r in run.ranks:
        (into / f"rank{r.rank}.log").write_text(r.log)
    pods = [PodRecord(pod=f"llama-worker-{r}", node=f"gpu-node-{r}", ranks=[r]) for r in range(world_size)]
    (into / "manifest.json").write_text(Manifest(world_size=world_size, pods=pods).model_dump_json())
    return into


def report(folder: Path, out: Path, *extra: str) -> Verdict:
    assert (
        main([str(folder), "--html", str(out / "report.html"), "--out", str(out / "verdict.json"), *extra])
        == EXIT_OK
    )
    return Verdict.model_validate_json((out / "verdict.json").read_text())


def screenshot(seen: Seen, tmp_path: Path, name: str) -> None:
    seen.page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    if target := os.environ.get("FRWATCH_SCREENSHOTS"):
        Path(target).mkdir(parents=True, exist_ok=True)
        seen.page.screenshot(path=str(Path(target) / f"report-{name}.png"), full_page=True)


def assert_clean(seen: Seen) -> None:
    assert seen.console_errors == [] and seen.failed == []
    assert seen.requests == [seen.url]  # self-contained: nothing else is fetched


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_page_shows_the_branch_and_the_culprit_with_its_pod_and_node(
    scenario: str, real_dumps, browser: Browser, tmp_path: Path
) -> None:
    folder = with_manifest(real_dumps.run(scenario), tmp_path / "dumps")
    verdict = report(folder, tmp_path, "--source", str(ROOT / "dev"))
    assert verdict.earliest_branch is not None and verdict.culprit_ranks, verdict.headline
    [culprit] = verdict.culprit_ranks

    seen = browser.open(tmp_path / "report.html")
    page = seen.page
    branch = page.locator("#branch h2").inner_text()
    assert (
        f"#{verdict.earliest_branch.seq}" in branch and verdict.earliest_branch.process_group.name in branch
    )
    marked = page.locator("#branch .side.culprit")
    assert marked.count() == 1 and f"rank {culprit}" in marked.inner_text()
    assert "culprit" in marked.locator(".badge").inner_text()
    row = page.locator("#places tr.place-culprit")
    assert row.count() == 1
    assert [row.locator("td").nth(i).inner_text() for i in (1, 2, 3)] == [
        f"rank {culprit}",
        f"llama-worker-{culprit}",
        f"gpu-node-{culprit}",
    ]

    lane = page.locator("#timelines details.lane").first
    assert lane.get_attribute("open") is None and not lane.locator(".more").is_visible()
    lane.locator("summary").click()
    lane.locator(".more").wait_for(state="visible")
    assert lane.get_attribute("open") is not None and "rank(s)" in lane.locator(".more").inner_text()
    assert page.locator("#timelines .head .cell.branch").count() >= 1
    assert page.locator("#next li").count() == len(verdict.next_steps)
    if scenario == "crash":  # the log's exception, and the line that raised in the code
        assert "ValueError: corrupt sample" in page.locator("#causes").inner_text()
        assert "raise ValueError(" in page.locator("#code .raised .l.call").inner_text()
    screenshot(seen, tmp_path, scenario)
    assert_clean(seen)
    page.close()
