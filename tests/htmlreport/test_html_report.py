"""The HTML report as a page: self-contained, no script, a strict CSP; lanes of alike ranks (never one row
per rank), the branch side by side with the culprit's side marked, the consequences as a chain, the
suspects with their pods and nodes; ``frwatch analyze DIR --html FILE`` writes it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.cli import EXIT_NO_VERDICT, EXIT_OK, main
from frwatch_analyzers.report.html import render_html
from frwatch_analyzers.store.manifest import Manifest, PodRecord
from frwatch_dev.dumps import world


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Tags:
    t = Tags()
    t.feed(page)
    return t


def manifest_for(n: int, per_pod: int) -> Manifest:
    pods = [
        PodRecord(
            pod=f"llama-worker-{p}", node=f"node-{p // 2}", ranks=list(range(p * per_pod, (p + 1) * per_pod))
        )
        for p in range(n // per_pod)
    ]
    return Manifest(world_size=n, pods=pods)


def test_a_skip_in_64_ranks_is_two_lanes_with_the_culprit_side_marked_and_its_pod_and_node() -> None:
    dumps = world(64).all_reduce(steps=20).rank(37).skips(12).dumps()
    verdict = analyze_dumps(dumps, manifest=manifest_for(64, 8))
    page = render_html(verdict)
    tags = parse(page)

    assert not [
        t for t, _ in tags.tags if t in ("script", "iframe", "object", "embed", "link", "img", "form")
    ]
    assert not [a for _, attrs in tags.tags for a in attrs if a.startswith("on")]  # no event handler
    csp = next(
        a["content"] for t, a in tags.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    )
    assert csp is not None and "default-src 'none'" in csp and "script-src" not in csp and "unsafe" not in csp
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched from anywhere

    [tl] = verdict.timelines
    assert tl.branch_seq == verdict.earliest_branch.seq  # type: ignore[union-attr]
    assert len(tl.lanes) <= 3 and sum(len(lane.ranks) for lane in tl.lanes) == 64
    culprit_lanes = [lane for lane in tl.lanes if lane.culprit]
    assert [lane.ranks for lane in culprit_lanes] == [[37]] and culprit_lanes[0].nodes == ["node-2"]
    lanes = [a for t, a in tags.tags if t == "details" and "lane" in (a.get("class") or "")]
    assert len(lanes) == len(tl.lanes) and "culprit" in (lanes[0].get("class") or "")
    sides = [a for t, a in tags.tags if t == "div" and (a.get("class") or "").startswith("side")]
    assert [("culprit" in (a["class"] or "")) for a in sides].count(True) == 1

    [place] = [p for p in verdict.places if p.role == "culprit"]
    assert (place.ranks, place.pod, place.node) == ([37], "llama-worker-4", "node-2")
    text = " ".join(tags.text)
    assert "llama-worker-4" in text and "node-2" in text and "rank 37" in text
    assert "--source DIR" in text  # without the code it says what it would need


def test_ranks_are_ranges_and_lanes_stay_few_at_2048_ranks() -> None:
    dumps = world(2048, buffer_size=32).all_reduce(steps=20).rank(2000).stops_at(21).dumps()
    verdict = analyze_dumps(dumps)
    page = render_html(verdict)
    assert sum(len(tl.lanes) for tl in verdict.timelines) <= 4
    assert "ranks 0-1999,2001-2047" in page
    assert len(page) < 200_000  # a page, not a rank table: it does not grow with the ranks
    assert page.count('<details class="lane') <= 4


def test_the_consequences_are_drawn_as_a_chain_from_the_root() -> None:
    w = world(8).group("tp", ranks=[0, 1]).repeat(6, lambda s: s.all_reduce(group="tp").all_reduce())
    verdict = analyze_dumps(w.rank(1).skips(4, group="tp").dumps())
    page = render_html(verdict)
    chain = page[page.index('<ol class="chain">') : page.index("</ol>", page.index('<ol class="chain">'))]
    assert chain.count("<li") == len(verdict.findings) >= 2
    assert 'class="root"' in chain and chain.index("root") < chain.index(
        'data-why="', chain.index("root") + 5
    )


def test_cli_writes_the_page_and_refuses_a_source_that_is_not_a_folder(tmp_path: Path) -> None:
    world(4).all_reduce(steps=6).rank(2).op_at(4, "all_gather").write(tmp_path / "dumps")
    out = tmp_path / "report.html"
    assert main([str(tmp_path / "dumps"), "--html", str(out)]) == EXIT_OK
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "rank 2" in page and "<script" not in page
    assert (
        main([str(tmp_path / "dumps"), "--html", str(out), "--source", str(tmp_path / "nope")])
        == EXIT_NO_VERDICT
    )


def test_every_case_of_the_conformance_corpus_renders_a_page_with_its_branch_in_view() -> None:
    from frwatch_dev.dumps.corpus import cases
    from frwatch_dev.dumps.corpus_evidence import verdict_of

    for case in cases():
        verdict = verdict_of(case)  # a case about its files (garbage, names) through the files
        page = render_html(verdict)
        assert page.rstrip().endswith("</html>") and "<script" not in page, case.name
        for tl in verdict.timelines:
            assert all(len(lane.cells) == len(tl.seqs) for lane in tl.lanes), case.name
            if tl.branch_seq is not None:
                assert tl.branch_seq in tl.seqs, case.name  # the branch is always drawn
