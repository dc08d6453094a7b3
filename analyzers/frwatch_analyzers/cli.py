"""``frwatch analyze PATH``: the thin shell around :func:`analyze`. The only place that reads argv.

Exit codes (also in ``--help`` and the README):

- 0: a verdict was made (and, with ``--fail-on``, it is below the threshold);
- 1: with ``--fail-on``, the verdict is at or above the threshold (``problem``: a problem;
  ``inconclusive``: a problem or an inconclusive verdict, no dump included);
- 2: no verdict could be made (the location is unusable, or the arguments are wrong); the reason is on stderr;
- 3: a verdict was made but could not be written (``--out``, ``--report-out``, ``--html``, ``--termination-log``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from .analyze import analyze
from .base.limits import (
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_FILE_SECONDS,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_WORKER_MEMORY_BYTES,
    FILE_SECONDS_PER_MB,
    MAX_WORLD_SIZE,
    MIB,
    Limits,
)
from .base.safe_text import printable
from .report.terminal import render
from .store.layout import split_s3_url
from .store.sources import S3Config, SourceError, s3_client, store_error_text
from .verdict import Status, Verdict
from .verdict_binding import termination_line

EXIT_OK, EXIT_FAILED_ON, EXIT_NO_VERDICT, EXIT_NOT_WRITTEN = 0, 1, 2, 3

#: --fail-on THRESHOLD -> the statuses that fail
FAIL_ON = {
    "problem": {Status.problem},
    "inconclusive": {Status.problem, Status.inconclusive},
}

_EPILOG = """exit codes:
  0  a verdict was made (below the --fail-on threshold, when one is given)
  1  the verdict is at or above the --fail-on threshold
  2  no verdict: the location cannot be read, or the arguments are wrong (the reason is on stderr)
  3  a verdict was made but --out, --report-out, --html or --termination-log could not be written

limits: every file is decoded in a worker process that may map --worker-memory-mb more memory and take
--file-seconds (plus %(per_mb)s s per MB of the file); a file over a limit, or one that crashes its
worker, is named in bad_files with the reason, and the analysis goes on without it."""


def _positive(kind: type[int] | type[float], top: float | None = None) -> Callable[[str], float]:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0 or (top is not None and value > top):
            raise argparse.ArgumentTypeError(
                f"must be above 0{f' and at most {top:g}' if top else ''}: {text}"
            )
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its error
    return parse


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="frwatch analyze",
        description="Align every rank's Flight Recorder dump and name the earliest point where ranks stopped agreeing.",
        epilog=_EPILOG % {"per_mb": FILE_SECONDS_PER_MB},
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", nargs="?", help="a folder of dumps, one dump file, or s3://bucket/prefix")
    p.add_argument("--format", choices=("text", "json"), default="text", help="what to print (default: text)")
    p.add_argument("--out", help="also write the verdict JSON to FILE or s3://bucket/key")
    p.add_argument("--report-out", help="also write the text report to FILE or s3://bucket/key")
    p.add_argument(
        "--html", help="also write the HTML report (one self-contained page) to FILE or s3://bucket/key"
    )
    p.add_argument(
        "--source",
        help="the training code's folder: the HTML report shows the code where the ranks' paths part (never run)",
    )
    p.add_argument(
        "--fail-on",
        choices=tuple(FAIL_ON),
        help="exit 1 when the verdict is a problem (problem), or a problem or inconclusive (inconclusive)",
    )
    p.add_argument(
        "--world-size",
        type=_positive(int, MAX_WORLD_SIZE),
        help="expected number of ranks (else: manifest, pg_config, files)",
    )
    p.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per core)")
    p.add_argument(
        "--from-dumps",
        action="store_true",
        help="decode every dump, even where its agent left a valid summary (summaries/<rank>.json)",
    )
    p.add_argument(
        "--map-shard",
        metavar="I/N",
        help="map step of a fanned-out analysis: summarise the dumps of ranks r with r %% N == I that have no "
        "valid summary, write them to summaries/<rank>.json, print one JSON line; no verdict",
    )
    p.add_argument(
        "--max-file-mb",
        type=_positive(int),
        default=DEFAULT_MAX_FILE_BYTES // MIB,
        help="refuse dump files larger than this, unread (default: %(default)s)",
    )
    p.add_argument(
        "--worker-memory-mb",
        type=_positive(int),
        default=DEFAULT_WORKER_MEMORY_BYTES // MIB,
        help="memory a worker may map to decode one file (default: %(default)s)",
    )
    p.add_argument(
        "--file-seconds",
        type=_positive(float),
        default=DEFAULT_FILE_SECONDS,
        help=f"seconds one file may take, plus {FILE_SECONDS_PER_MB} s per MB (default: %(default)s)",
    )
    p.add_argument(
        "--deadline-seconds",
        type=_positive(float),
        default=DEFAULT_DEADLINE_SECONDS,
        help="seconds for reading every file; files not read by then are named (default: %(default)s)",
    )
    p.add_argument("--s3-endpoint", help="S3 endpoint URL (default: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)")
    p.add_argument(
        "--termination-log", help="write a one-line summary here (a Kubernetes terminationMessagePath)"
    )
    p.add_argument("--schema", action="store_true", help="print the verdict's JSON schema and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.schema:
        print(json.dumps(Verdict.model_json_schema(), indent=2))
        return EXIT_OK
    if args.source and not Path(args.source).is_dir():
        print(f"frwatch analyze: --source {printable(args.source)} is not a folder", file=sys.stderr)
        return EXIT_NO_VERDICT
    if not args.path:
        print("frwatch analyze: a PATH is needed (a folder, a file or s3://bucket/prefix)", file=sys.stderr)
        return EXIT_NO_VERDICT
    s3 = S3Config.from_env()
    if args.s3_endpoint:
        s3 = S3Config(endpoint_url=args.s3_endpoint, region=s3.region)
    limits = Limits(
        max_file_bytes=args.max_file_mb * MIB,
        worker_memory_bytes=args.worker_memory_mb * MIB,
        file_seconds=args.file_seconds,
        deadline_seconds=args.deadline_seconds,
    )
    if args.map_shard:
        return _map(args.path, args.map_shard, s3, limits, args.jobs)
    try:
        verdict = analyze(
            args.path,
            world_size=args.world_size,
            jobs=args.jobs,
            s3=s3,
            limits=limits,
            from_dumps=args.from_dumps,
        )
    except SourceError as exc:
        print(f"frwatch analyze: no verdict: {printable(str(exc))}", file=sys.stderr)
        return EXIT_NO_VERDICT
    text = render(verdict)
    as_json = verdict.model_dump_json(indent=2)
    # names in the verdict are escaped where they were read; whatever else reaches a terminal is escaped too
    sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    sys.stdout.write(as_json + "\n" if args.format == "json" else text)
    sys.stdout.flush()
    try:
        if args.out:
            _write(args.out, as_json.encode(), s3)
        if args.report_out:
            _write(args.report_out, text.encode(), s3)
        if args.html:
            _write(args.html, _html(verdict, args.source), s3, "text/html; charset=utf-8")
        if args.termination_log:
            summary = printable(f"{verdict.status.value}/{verdict.category.value}: {verdict.headline}")[:3400]
            # with --out: the digest of the bytes written first, binding the stored verdict to this run
            line = termination_line(as_json.encode(), summary) if args.out else summary
            Path(args.termination_log).write_text(line)
    except (OSError, SourceError) as exc:
        print(
            f"frwatch analyze: the verdict was made but could not be written: {printable(str(exc))}",
            file=sys.stderr,
        )
        return EXIT_NOT_WRITTEN
    if args.fail_on and verdict.status in FAIL_ON[args.fail_on]:
        return EXIT_FAILED_ON
    return EXIT_OK


def _map(path: str, shard_text: str, s3: S3Config, limits: Limits, jobs: int) -> int:
    from .summaries.map_shard import Shard, map_shard

    try:
        result = map_shard(path, Shard.parse(shard_text), s3=s3, limits=limits, jobs=jobs or 1)
    except (ValueError, SourceError) as exc:
        print(f"frwatch analyze --map-shard: {printable(str(exc))}", file=sys.stderr)
        return EXIT_NO_VERDICT
    print(result.line(), flush=True)
    return EXIT_OK


def _html(verdict: Verdict, source: str | None) -> bytes:
    from .report.html import render_html  # Jinja2 is imported only when a page is asked for

    return render_html(verdict, Path(source) if source else None).encode()


def _write(target: str, data: bytes, s3: S3Config, content_type: str = "") -> None:
    if target.startswith("s3://"):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            bucket, key = split_s3_url(target)
            extra = {"ContentType": content_type} if content_type else {}
            s3_client(s3).put_object(Bucket=bucket, Key=key, Body=data, **extra)
        except (ValueError, BotoCoreError, ClientError) as exc:
            raise SourceError(f"{target}: {store_error_text(exc)}") from exc
        return
    Path(target).write_bytes(data)


if __name__ == "__main__":
    sys.exit(main())
