#!/usr/bin/env python3
"""Build frwatch's image as a root filesystem (and, with ``--oci``, an OCI image layout) without a container
engine or a base image: the Dockerfile's build stage runs this same script, and so does the test suite.

    python3 scripts/build_image.py OUT [--oci LAYOUT] [--cache DIR]

1. The Debian packages of ``requirements/image.debs`` (``apt-get download``, checked against apt's SHA256),
   extracted with ``dpkg-deb -x``; ``/etc/passwd`` and ``/etc/group`` with root and frwatch (65532).
2. ``/opt/frwatch``: a virtualenv on Debian's ``/usr/bin/python3.11`` holding ``requirements/image.lock``
   (binary wheels only, ``pip install --target``), byte-compiled with the standard library.
3. frwatch's wheel, built from what the Dockerfile copies (never ``dev/``) with its compiled summarizer
   (``_fastscan``; the build fails without it), installed beside them, and the ``frwatch`` command.

Steps 1 and 2 make the base layer: it is kept in the cache (``$FRWATCH_IMAGE_CACHE``, default
``~/.cache/frwatch/image``) under a key of the package files, the lock and this script, so a second build on the
same machine only does step 3. ``--oci`` writes two layers (base, frwatch), the config (user, entrypoint, env
as in the Dockerfile's last stage: tests/image checks they agree), the manifest and the index.
Needs Python 3.11 with pip (the interpreter running this), apt-get and dpkg-deb (Debian), and root only to
give the files root's ownership (run as root: the Dockerfile's stage and CI are).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEBS = ROOT / "requirements" / "image.debs"
LOCK = ROOT / "requirements" / "image.lock"
#: What the Dockerfile's build stage copies to build frwatch's wheel (tests/image compares the two)
WHEEL_SOURCES = ("pyproject.toml", "setup.py", "README.md", "analyzers", "operator")
UID = GID = 65532
VENV = "/opt/frwatch"
PYTHON = "/usr/bin/python3.11"
SITE = "opt/frwatch/lib/python3.11/site-packages"
#: The image's runtime config: the Dockerfile's last stage says the same (tests/image/test_image_build.py)
CONFIG = {
    "User": f"{UID}:{GID}",
    "Env": [
        "PATH=/opt/frwatch/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONDONTWRITEBYTECODE=1",
        "PYTHONUNBUFFERED=1",
    ],
    "Entrypoint": ["frwatch"],
    "Cmd": ["--help"],
    "WorkingDir": "/tmp",
    "Labels": {
        "org.opencontainers.image.title": "frwatch",
        "org.opencontainers.image.description": "Flight Recorder capture and diagnosis for distributed PyTorch jobs",
        "org.opencontainers.image.licenses": "Apache-2.0",
    },
}


def log(msg: str) -> None:
    print(f"build_image: {msg}", file=sys.stderr, flush=True)


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    out = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"build_image: {' '.join(map(str, argv))} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return out.stdout


def package_names() -> list[str]:
    return [line.strip() for line in DEBS.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _apt_update_once(refreshed: bool, why: str) -> None:
    """A machine without apt's lists (or with lists older than the mirror) gets them once, as root."""
    if refreshed or os.geteuid() != 0:
        sys.exit(f"build_image: {why}\n(as root: apt-get update)")
    log("apt-get update (apt's lists are missing or out of date)")
    run("apt-get", "update", "-qq")


def fetch_debs(cache: Path, refreshed: bool = False) -> list[Path]:
    """The .deb files of image.debs in apt's current versions, downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    names = package_names()
    # apt's answer changes only with its lists (apt-get update): kept under a key of the lists' times
    lists = sorted(Path("/var/lib/apt/lists").glob("*Packages*"))
    key = hashlib.sha256(repr([names, [(p.name, p.stat().st_mtime_ns) for p in lists]]).encode()).hexdigest()[:16]
    saved = cache / f"uris-{key}.txt"
    if not saved.exists():
        listing = subprocess.run(["apt-get", "download", "--print-uris", *names], capture_output=True, text=True)
        if listing.returncode != 0:
            _apt_update_once(refreshed, f"apt does not know every package of {DEBS.name}: {listing.stderr[-2000:]}")
            return fetch_debs(cache, refreshed=True)
        for old in cache.glob("uris-*.txt"):
            old.unlink(missing_ok=True)
        saved.with_suffix(".tmp").write_text(listing.stdout)
        saved.with_suffix(".tmp").replace(saved)
    wanted = {}  # file name -> sha256
    for line in saved.read_text().splitlines():
        _, filename, _, checksum = line.split()
        wanted[filename] = checksum.split(":", 1)[1].lower()
    if len(wanted) != len(names):
        sys.exit(f"build_image: apt listed {len(wanted)} files for {len(names)} packages")
    missing = [f for f in wanted if not (cache / f).exists()]
    if missing:
        log(f"apt-get download {len(missing)} packages into {cache}")
        stems = [f.split("_", 1)[0] + "=" + f.split("_")[1].replace("%3a", ":") for f in missing]
        got = subprocess.run(["apt-get", "download", *stems], cwd=cache, capture_output=True, text=True)
        if got.returncode != 0:  # e.g. a point release took the listed versions off the mirror
            _apt_update_once(refreshed, f"apt-get download failed: {got.stderr[-2000:]}")
            saved.unlink()
            return fetch_debs(cache, refreshed=True)
    for filename, checksum in wanted.items():
        if hashlib.sha256((cache / filename).read_bytes()).hexdigest() != checksum:
            (cache / filename).unlink()
            sys.exit(f"build_image: {filename} does not match apt's SHA256 (removed; run again)")
    return [cache / f for f in sorted(wanted)]


def base_key(debs: list[Path]) -> str:
    """The base layer's cache key: the package files, the lock and the code that builds the layer."""
    digest = hashlib.sha256()
    code = inspect.getsource(build_base) + inspect.getsource(compile_tree)
    for part in (*(d.name for d in debs), LOCK.read_text(), code):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def compile_tree(tree: Path, *subdirs: str) -> None:
    """Byte-compile ``subdirs`` of ``tree`` with the paths the image sees (the interpreter is 3.11, as the
    image's: the same bytecode magic)."""
    for sub in subdirs:
        run(sys.executable, "-m", "compileall", "-q", "-j", "0", "-s", tree, "-p", "/", tree / sub)


def build_base(debs: list[Path], dest: Path) -> None:
    """Step 1 and 2 into ``dest`` (a new folder)."""
    status = dest / "var" / "lib" / "dpkg" / "status.d"
    status.mkdir(parents=True)
    for deb in debs:
        run("dpkg-deb", "-x", deb, dest)
        control = run("dpkg-deb", "-f", deb)
        (status / deb.name.split("_", 1)[0]).write_text(control)
    etc = dest / "etc"
    (etc / "passwd").write_text(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                f"frwatch:x:{UID}:{GID}::/nonexistent:/usr/sbin/nologin\n")  # fmt: skip
    (etc / "group").write_text(f"root:x:0:\nfrwatch:x:{GID}:\n")
    for folder, mode in (("tmp", 0o1777), ("root", 0o700)):
        (dest / folder).mkdir(exist_ok=True)
        os.chmod(dest / folder, mode)
    if not (dest / PYTHON.lstrip("/")).exists():
        sys.exit(f"build_image: {PYTHON} is not in the packages of {DEBS.name}")
    venv = dest / VENV.lstrip("/")
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "python3", "python3.11"):
        (venv / "bin" / name).symlink_to(PYTHON)
    version = run(dest / PYTHON.lstrip("/"), "-c", "import platform; print(platform.python_version())").strip()
    (venv / "pyvenv.cfg").write_text(f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {version}\n"
                                     f"executable = {PYTHON}\ncommand = {PYTHON} -m venv {VENV}\n")  # fmt: skip
    log(f"pip install -r {LOCK.name} (binary wheels) into {VENV}")
    run(sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--no-compile",
        "--only-binary=:all:", "--target", dest / SITE, "-r", LOCK)  # fmt: skip
    shutil.rmtree(dest / SITE / "bin", ignore_errors=True)  # the dependencies' own commands: not used
    log("byte-compile the standard library and the dependencies")
    compile_tree(dest, "usr/lib/python3.11", SITE)


def cached_base(cache: Path, debs: list[Path]) -> Path:
    base = cache / f"base-{base_key(debs)}"
    if not base.exists():
        tmp = Path(tempfile.mkdtemp(prefix="base-", dir=cache))
        try:
            build_base(debs, tmp / "rootfs")
            (tmp / "rootfs").rename(base)  # atomic: a concurrent build of the same key wins or loses whole
        except OSError:
            if not base.exists():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return base


def build_frwatch(stage: Path, isolated: bool) -> None:
    """Step 3 into ``stage`` (the frwatch layer: its site-packages files and the command). ``isolated``: pip
    fetches the build backend (pyproject's build-system) instead of using the running environment's."""
    work = Path(tempfile.mkdtemp(prefix="frwatch-wheel-"))
    try:
        src = work / "src"
        for name in WHEEL_SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
            else:
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, src / name)
        log("build frwatch's wheel (compiles the summarizer's extension)")
        isolation = [] if isolated else ["--no-build-isolation"]
        run(sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps", *isolation,
            "--wheel-dir", work / "wheels", src)  # fmt: skip
        [wheel] = (work / "wheels").glob("frwatch-*.whl")
        run(sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--no-compile",
            "--target", stage / SITE, wheel)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not list((stage / SITE / "frwatch_analyzers" / "decode").glob("_fastscan.*.so")):
        sys.exit("build_image: the wheel holds no compiled _fastscan (a C compiler and Python's headers are needed)")
    shutil.rmtree(stage / SITE / "bin", ignore_errors=True)
    [info] = (stage / SITE).glob("frwatch-*.dist-info")
    entry_points = (info / "entry_points.txt").read_text()
    scripts = entry_points.split("[console_scripts]", 1)[1].split("\n[", 1)[0]
    commands = re.findall(r"^(\S+)\s*=\s*(\S+):(\S+)$", scripts, re.M)
    assert any(name == "frwatch" for name, _, _ in commands), "frwatch's console script"
    for name, module, function in commands:  # as pip writes them, with the image's interpreter
        command = stage / VENV.lstrip("/") / "bin" / name
        command.parent.mkdir(parents=True, exist_ok=True)
        command.write_text(f"#!{VENV}/bin/python\nimport sys\nfrom {module} import {function}\n"
                           f"if __name__ == '__main__':\n    sys.exit({function}())\n")  # fmt: skip
        command.chmod(0o755)
    compile_tree(stage, SITE)


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_layer(tree: Path, blobs: Path) -> tuple[dict[str, object], str]:
    """A gzip layer of ``tree`` (sorted, root-owned, no timestamps in gzip) into ``blobs``: its descriptor
    and its diff_id (the digest of the uncompressed tar)."""
    raw = blobs / "layer.tar.tmp"
    with tarfile.open(raw, "w", format=tarfile.PAX_FORMAT) as tar:
        for child in sorted(tree.iterdir()):
            tar.add(child, arcname=child.name, filter=_root_owned)
    diff_id = "sha256:" + hashlib.sha256(raw.read_bytes()).hexdigest()
    packed = blobs / "layer.tar.gz.tmp"
    with raw.open("rb") as src, gzip.GzipFile(packed, "wb", compresslevel=1, mtime=0) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    raw.unlink()
    return _blob(packed, blobs, "application/vnd.oci.image.layer.v1.tar+gzip"), diff_id


def _blob(path: Path, blobs: Path, media_type: str) -> dict[str, object]:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    size = path.stat().st_size
    path.replace(blobs / digest)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": size}


def _json_blob(doc: dict[str, object], blobs: Path, media_type: str) -> dict[str, object]:
    tmp = blobs / "doc.tmp"
    tmp.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))
    return _blob(tmp, blobs, media_type)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_oci(layout: Path, base: Path, stage: Path, cache: Path, tag: str) -> None:
    """An OCI image layout: the base layer (cached beside the base) and the frwatch layer."""
    if layout.exists():
        shutil.rmtree(layout)
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    saved = cache / f"{base.name}.layer.json"
    if saved.exists() and (cache / f"{base.name}.layer").exists():
        base_layer, base_diff = json.loads(saved.read_text())
        _link_or_copy(cache / f"{base.name}.layer", blobs / str(base_layer["digest"]).split(":", 1)[1])
    else:
        base_layer, base_diff = write_layer(base, blobs)
        _link_or_copy(blobs / str(base_layer["digest"]).split(":", 1)[1], cache / f"{base.name}.layer.tmp")
        (cache / f"{base.name}.layer.tmp").replace(cache / f"{base.name}.layer")
        saved.write_text(json.dumps([base_layer, base_diff]))
    app_layer, app_diff = write_layer(stage, blobs)
    arch = run("dpkg", "--print-architecture").strip()
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", "0"))))
    config = {
        "architecture": arch, "os": "linux", "created": created, "config": CONFIG,
        "rootfs": {"type": "layers", "diff_ids": [base_diff, app_diff]},
        "history": [{"created": created, "created_by": f"scripts/build_image.py: {DEBS.name} and {LOCK.name}"},
                    {"created": created, "created_by": "scripts/build_image.py: frwatch's wheel"}],
    }  # fmt: skip
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": _json_blob(config, blobs, "application/vnd.oci.image.config.v1+json"),
        "layers": [base_layer, app_layer],
    }  # fmt: skip
    descriptor = _json_blob(manifest, blobs, "application/vnd.oci.image.manifest.v1+json")
    descriptor["annotations"] = {"org.opencontainers.image.ref.name": tag}
    descriptor["platform"] = {"architecture": arch, "os": "linux"}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [descriptor]}, indent=1))
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the root filesystem to write (replaced)")
    parser.add_argument("--oci", type=Path, help="also write an OCI image layout here (replaced)")
    parser.add_argument("--no-build-isolation", action="store_true",
                        help="build frwatch's wheel with this environment's setuptools (>= 68)")
    parser.add_argument("--tag", default="dev", help="the layout's ref name (default: dev)")
    default_cache = Path(os.environ.get("FRWATCH_IMAGE_CACHE", Path.home() / ".cache" / "frwatch" / "image"))
    parser.add_argument("--cache", type=Path, default=default_cache, help=f"default: {default_cache}")
    args = parser.parse_args()
    if sys.version_info[:2] != (3, 11):
        sys.exit("build_image: run it with Python 3.11 (the image's python3.11: the same bytecode and ABI)")
    started = time.monotonic()
    cache = args.cache.resolve()
    debs = fetch_debs(cache / "debs")
    base = cached_base(cache, debs)
    stage = Path(tempfile.mkdtemp(prefix="frwatch-layer-"))
    stage.chmod(0o755)  # cp -a gives its mode to the image's /
    try:
        build_frwatch(stage, isolated=not args.no_build_isolation)
        out = args.out.resolve()
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        # hard links to the cached base (nothing in the image is written in place), then the frwatch layer
        run("cp", "-al", base, out)
        run("cp", "-a", f"{stage}/.", out)
        if args.oci:
            write_oci(args.oci.resolve(), base, stage, cache, args.tag)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    log(f"{args.out} in {time.monotonic() - started:.0f} s" + (f", OCI layout {args.oci}" if args.oci else ""))


if __name__ == "__main__":
    main()
