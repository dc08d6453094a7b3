"""Reading the training code a frame names, from a folder the user gives (``--source DIR``), as hostile input.

A frame's file name comes from a dump: it may be absolute, relative, point outside the folder, or name a
link, a device, a huge or a binary file. :func:`find` maps it to a file *inside* the folder by its path's
suffixes (``/srv/job/train/loop.py`` -> ``DIR/srv/job/train/loop.py``, ``DIR/job/train/loop.py``, ...),
refuses anything whose real path leaves the folder (links, ``..``), and reads at most ``MAX_SOURCE_BYTES``
of a regular UTF-8 text file. Nothing is ever executed or imported: the code is only parsed (:mod:`.guards`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

#: A source file larger than this is skipped (a generated or minified file, or no source at all).
MAX_SOURCE_BYTES = 2 * 1024 * 1024
#: How many path suffixes of a frame's file name are tried under the folder.
MAX_SUFFIXES = 12
#: How many entries of the folder a search by bare file name looks at (a log names ``train.py:42`` only).
MAX_WALK = 20_000


@dataclass(frozen=True)
class Source:
    """A file's text, or the reason it was skipped."""

    name: str  # the frame's file name, as the dump gives it
    path: str = ""  # the file found, relative to the folder
    text: str | None = None
    skipped: str = ""


class SourceTree:
    """The files of one folder, read once each."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._cache: dict[str, Source] = {}

    def find(self, name: str) -> Source:
        if name not in self._cache:
            self._cache[name] = self._find(name)
        return self._cache[name]

    def find_named(self, base: str) -> Source:
        """A file known only by its bare name (``train.py``): the one file of that name in the folder (links
        not followed, at most ``MAX_WALK`` entries looked at); none, or more than one, is a reason."""
        if not base or "/" in base or "\\" in base or base in (".", ".."):
            return self.find(base)
        key = f"//{base}"
        if key not in self._cache:
            found: list[Path] = []
            seen = 0
            for folder, dirs, files in os.walk(self.root, followlinks=False):
                seen += len(dirs) + len(files)
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                if base in files:
                    found.append(Path(folder, base))
                if seen > MAX_WALK or len(found) > 1:
                    break
            if len(found) == 1:
                rel = str(found[0].relative_to(self.root))
                self._cache[key] = self._find(rel)
            else:
                why = (
                    "more than one file of that name"
                    if found
                    else f"no file of that name under {self.root.name}/"
                )
                self._cache[key] = Source(base, skipped=why)
        return self._cache[key]

    def _find(self, name: str) -> Source:
        if not name or "\x00" in name or len(name) > 4096:
            return Source(name, skipped="no usable file name in the frame")
        parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("/", "")]
        if ".." in parts:
            return Source(name, skipped="the file name climbs out with '..': not read")
        reason = f"no file of that name under {self.root.name}/"
        for i in range(max(0, len(parts) - MAX_SUFFIXES), len(parts)):
            candidate = self.root.joinpath(*parts[i:])
            try:
                info = os.lstat(candidate)
            except (OSError, ValueError):
                continue
            return self._read(name, candidate, info)
        return Source(name, skipped=reason)

    def _read(self, name: str, candidate: Path, info: os.stat_result) -> Source:
        rel = str(candidate.relative_to(self.root))
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            return Source(name, rel, skipped="a broken or looping link: not read")
        if real != self.root and self.root not in real.parents:
            return Source(name, rel, skipped="it leads outside the source folder (a link): not read")
        try:
            info = os.stat(real)
        except OSError as exc:
            return Source(name, rel, skipped=f"cannot stat it: {exc.strerror}")
        if not stat.S_ISREG(info.st_mode):
            return Source(name, rel, skipped="not a regular file: not read")
        if info.st_size > MAX_SOURCE_BYTES:
            return Source(
                name, rel, skipped=f"too large ({info.st_size} bytes, limit {MAX_SOURCE_BYTES}): not read"
            )
        try:
            with open(real, "rb") as f:  # a bounded read of a checked regular file
                data = f.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            return Source(name, rel, skipped=f"cannot read it: {exc.strerror}")
        if len(data) > MAX_SOURCE_BYTES:
            return Source(name, rel, skipped=f"too large (over {MAX_SOURCE_BYTES} bytes): not read")
        if b"\x00" in data:
            return Source(name, rel, skipped="binary (it holds NUL bytes): not read")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Source(name, rel, skipped=f"not UTF-8 text (byte {exc.start}): not read")
        return Source(name, rel, text=text)
