"""``frwatch analyze PATH``: the thin shell around :func:`analyze`. The only place that reads argv.

Exit 0 whenever a verdict was produced, whatever it says; 2 when none could be (with the reason).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .analyze import analyze
from .layout import split_s3_url
from .report import render
from .safe_load import DEFAULT_MAX_BYTES
from .sources import S3Config, SourceError, s3_client
from .verdict import Verdict


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="frwatch analyze",
        description="Align every rank's Flight Recorder dump and name the earliest point where ranks stopped agreeing.",
    )
    p.add_argument("path", nargs="?", help="a folder of dumps, one dump file, or s3://bucket/prefix")
    p.add_argument("--format", choices=("text", "json"), default="text", help="what to print (default: text)")
    p.add_argument("--out", help="also write the verdict JSON to FILE or s3://bucket/key")
    p.add_argument("--report-out", help="also write the text report to FILE or s3://bucket/key")
    p.add_argument(
        "--world-size", type=int, help="expected number of ranks (else: manifest, pg_config, files)"
    )
    p.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per core)")
    p.add_argument(
        "--max-file-mb",
        type=int,
        default=DEFAULT_MAX_BYTES // (1024 * 1024),
        help="refuse dump files larger than this (default: %(default)s)",
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
        return 0
    if not args.path:
        print("frwatch analyze: a PATH is needed (a folder, a file or s3://bucket/prefix)", file=sys.stderr)
        return 2
    s3 = S3Config.from_env()
    if args.s3_endpoint:
        s3 = S3Config(endpoint_url=args.s3_endpoint, region=s3.region)
    try:
        verdict = analyze(
            args.path,
            world_size=args.world_size,
            jobs=args.jobs,
            max_bytes=args.max_file_mb * 1024 * 1024,
            s3=s3,
        )
    except SourceError as exc:
        print(f"frwatch analyze: no verdict: {exc}", file=sys.stderr)
        return 2
    text = render(verdict)
    as_json = verdict.model_dump_json(indent=2)
    sys.stdout.write(as_json + "\n" if args.format == "json" else text)
    try:
        if args.out:
            _write(args.out, as_json.encode(), s3)
        if args.report_out:
            _write(args.report_out, text.encode(), s3)
        if args.termination_log:
            Path(args.termination_log).write_text(
                f"{verdict.status.value}/{verdict.category.value}: {verdict.headline}"[:3500]
            )
    except (OSError, SourceError) as exc:
        print(f"frwatch analyze: the verdict was made but could not be written: {exc}", file=sys.stderr)
        return 3
    return 0


def _write(target: str, data: bytes, s3: S3Config) -> None:
    if target.startswith("s3://"):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            bucket, key = split_s3_url(target)
            s3_client(s3).put_object(Bucket=bucket, Key=key, Body=data)
        except (ValueError, BotoCoreError, ClientError) as exc:
            raise SourceError(f"{target}: {exc}") from exc
        return
    Path(target).write_bytes(data)


if __name__ == "__main__":
    sys.exit(main())
