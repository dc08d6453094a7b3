"""The bridge from the branch to the code (``--source DIR``): on the real gloo workloads the report names
the condition that decides which call a rank makes, its line, and why it differs across ranks; source
files that are missing, huge, binary, not UTF-8 or outside the folder are skipped with a reason; the code
is parsed, never run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.report.html import render_html
from frwatch_analyzers.report.html.bridge import build
from frwatch_analyzers.report.html.guards import Module, why
from frwatch_analyzers.report.html.sourcefiles import MAX_SOURCE_BYTES, SourceTree

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "dev/frwatch_dev/workloads/faulty_training.py"


def line_of(text: str) -> int:
    """The line of the workload that holds ``text`` (found, not hard-coded)."""
    [n] = [i for i, line in enumerate(WORKLOAD.read_text().splitlines(), 1) if text in line]
    return n


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "condition", "kind"),
    [
        ("skip", "if bug and scenario is Scenario.SKIP:", "else of if"),
        ("extra_same_shape", "if bug and scenario is Scenario.EXTRA_SAME_SHAPE:", "if"),
        ("subgroup", "if self.is_culprit_at(step):", "early return"),
    ],
)
def test_the_deciding_condition_and_its_line_on_the_real_workloads(
    scenario: str, condition: str, kind: str, real_dumps, tmp_path: Path
) -> None:
    verdict = analyze(str(real_dumps(scenario)), jobs=1)
    bridge = build(verdict, SourceTree(ROOT / "dev"))
    d = bridge.deciding
    assert d is not None, bridge
    assert (d.path, d.guard.line, d.guard.kind) == (
        "frwatch_dev/workloads/faulty_training.py",
        line_of(condition),
        kind,
    )
    assert condition.removeprefix("if ").rstrip(":") == d.guard.test
    assert d.why.kind == "rank-local state" and d.why.chain[-1] == "self.env.rank", d.why

    page = render_html(verdict, ROOT / "dev")
    assert f"faulty_training.py:{line_of(condition)}</span>" in page and "rank-local state" in page
    assert 'class="l cond"' in page and 'class="l call"' in page  # the condition and the call site, marked


def test_without_source_the_report_says_what_it_would_need(real_dumps) -> None:
    verdict = analyze(str(real_dumps("skip")), jobs=1)
    page = render_html(verdict)
    assert 'id="needs-source"' in page and "--source DIR" in page and str(WORKLOAD) in page


def test_source_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "huge.py").write_bytes(b"x = 1\n" * (MAX_SOURCE_BYTES // 6 + 2))
    (src / "binary.py").write_bytes(b"\x7fELF\x00\x01")
    (src / "latin1.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "secret.py").write_text("TOKEN = 1\n")
    (src / "link.py").symlink_to(tmp_path / "secret.py")
    os.mkfifo(src / "fifo.py")
    (src / "good.py").write_text("def f():\n    return 1\n")
    tree = SourceTree(src)
    reasons = {
        name: tree.find(name).skipped
        for name in (
            "/job/huge.py",
            "/job/binary.py",
            "/job/latin1.py",
            "/job/link.py",
            "/job/fifo.py",
            "/job/../secret.py",
            "/job/missing.py",
        )
    }
    assert reasons["/job/huge.py"].startswith("too large")
    assert reasons["/job/binary.py"].startswith("binary")
    assert reasons["/job/latin1.py"].startswith("not UTF-8")
    assert "outside the source folder" in reasons["/job/link.py"]
    assert reasons["/job/fifo.py"].startswith("not a regular file")
    assert "'..'" in reasons["/job/../secret.py"]
    assert reasons["/job/missing.py"].startswith("no file of that name")
    good = tree.find("/srv/train/job/good.py")
    assert good.text is not None and good.path == "good.py" and not good.skipped


def test_the_code_is_parsed_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\nimport os\nos._exit(3)\n\ndef step(rank):\n    if rank == 0:\n        return\n    sync()\n"
    m = Module(code)
    located = m.locate(8)
    assert located is not None and [(g.kind, g.test) for g in located.guards] == [
        ("early return", "rank == 0")
    ]
    assert why(m, located.guards[0], located.node).kind == "rank-local state"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("code", "line", "kind", "reads"),
    [
        (
            "def f(loss):\n    if torch.isnan(loss).any():\n        return\n    g()\n",
            4,
            "early return",
            "the rank's data",
        ),
        (
            "def f():\n    try:\n        g()\n    except OSError:\n        h()\n",
            5,
            "except",
            "a caught exception",
        ),
        ("def f(n):\n    for i in range(n):\n        g()\n", 3, "for", ""),
        (
            "import os\ndef f():\n    local = int(os.environ['LOCAL_RANK'])\n    while local > 0:\n        g()\n",
            5,
            "while",
            "rank-local state",
        ),
    ],
)
def test_what_each_kind_of_condition_reads(code: str, line: int, kind: str, reads: str) -> None:
    m = Module(code)
    located = m.locate(line)
    assert located is not None
    g = located.guards[-1]
    assert g.kind == kind and why(m, g, located.node).kind == reads


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "said"), [("cpu_stuck", "stuck on the CPU side"), ("crash", "died before")]
)
def test_a_rank_that_did_not_choose_another_path_gets_no_deciding_condition(
    scenario: str, said: str, real_dumps
) -> None:
    verdict = analyze(str(real_dumps(scenario)), jobs=1)
    bridge = build(verdict, SourceTree(ROOT / "dev"))
    assert bridge.deciding is None and said in bridge.notes[0] and "none is named" in bridge.notes[0]
    assert any(s.excerpt is not None for s in bridge.sides)  # the code at the call sites is still shown


@pytest.mark.slow
def test_a_crash_shows_the_line_that_raised_from_the_rank_s_log(real_dumps, tmp_path: Path) -> None:
    run = real_dumps.run("crash")
    folder = tmp_path / "crash"
    folder.mkdir()
    for f in run.dump_dir.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    for r in run.ranks:
        (folder / f"rank{r.rank}.log").write_text(r.log)
    verdict = analyze(str(folder), world_size=4, jobs=1)
    bridge = build(verdict, SourceTree(ROOT / "dev"))
    [raised] = bridge.raised
    line = line_of('raise ValueError(f"corrupt sample')
    assert raised.rank == verdict.missing_dumps[0] and raised.location == f"faulty_training.py:{line}"
    assert raised.excerpt is not None and raised.excerpt.function == "load_batch"
    assert [(x.number, x.mark) for x in raised.excerpt.lines if x.mark] == [(line, "call")]
    assert build(verdict, SourceTree(tmp_path)).raised[0].skipped.startswith("faulty_training.py: no file")
