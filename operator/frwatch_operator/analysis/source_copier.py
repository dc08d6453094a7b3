"""The program the source step's init container runs with the training image's own Python: it copies the
source files a verdict's frames name, bounded, into the pod's emptyDir. Self-contained (standard library
only, Python 3.8 syntax): the operator passes this module's text as ``python3 -I -S -c TEXT DEST MAX_BYTES
MAX_TOTAL TERMINATION_LOG -- PATH...``, so no frwatch code, shell or ``cp`` has to be in the image. Training images hold
Python (the code the frames name is Python); ``-I -S`` ignores the image's ``PYTHON*`` variables, user
site and ``site`` (no ``.pth`` file runs).

What it copies is hostile-shaped input (file names from dumps, via the operator, which bounds the list with
:func:`normalise` first) and the image is the tenant's; so each path is checked again here:

- absolute, at most :data:`MAX_PATH` characters, no NUL or control character, no ``.`` or ``..`` segment,
  not under ``/proc``, ``/sys``, ``/dev`` or ``/run`` (nothing there is code);
- no link anywhere on the path (``os.path.realpath`` equals the path): a link could lead anywhere;
- a regular file (``O_NOFOLLOW``, checked again on the open file), at most ``MAX_BYTES`` bytes, read with
  one bounded read; no NUL byte (binary) and valid UTF-8;
- at most ``MAX_TOTAL`` bytes copied in all; each copy is new (``O_EXCL``) under ``DEST`` at its own path
  (``/app/train.py`` -> ``DEST/app/train.py``), read-only.

A file that fails a check is skipped with its reason. It prints one line per file and, in its termination
message (``TERMINATION_LOG``: the file the kubelet provides, opened, never created), ``copied N of M files``
and the skipped ones with their reasons (at most 4096 bytes). Exit 0 when it ran (some files may be skipped), 2 on wrong arguments.
"""

import os
import stat
import sys

#: The longest path copied (characters).
MAX_PATH = 1024
#: Trees nothing is copied from: the kernel's and the runtime's, never code.
REFUSED_ROOTS = ("/proc", "/sys", "/dev", "/run")
_TERMINATION_LIMIT = 4096


def normalise(name):  # type: (str) -> tuple[str, str]
    """``(path, "")``: the path to copy, or ``("", reason)`` when it is not one."""
    if not isinstance(name, str) or not name:
        return "", "no file name"
    if len(name) > MAX_PATH:
        return "", f"file name longer than {MAX_PATH} characters"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "", "control character in the file name"
    if not name.startswith("/"):
        return "", "not an absolute path (the image's files are named from its root)"
    parts = [p for p in name.split("/") if p]
    if any(p in (".", "..") for p in parts):
        return "", "'.' or '..' in the path"
    if not parts:
        return "", "the root is no file"
    path = "/" + "/".join(parts)
    for root in REFUSED_ROOTS:
        if path == root or path.startswith(root + "/"):
            return "", f"under {root}: not code"
    return path, ""


def copy_one(path, dest, max_bytes, budget):  # type: (str, str, int, int) -> tuple[int, str]
    """Copy ``path`` to ``dest + path``; ``(bytes copied, "")`` or ``(0, reason)``."""
    path, why = normalise(path)
    if why:
        return 0, why
    try:
        if os.path.realpath(path) != path:
            return 0, "a link is on its path: not copied"
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return 0, "not in the image"
    except OSError as exc:
        return 0, f"cannot open it: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return 0, "not a regular file"
        if info.st_size > max_bytes:
            return 0, f"too large ({info.st_size} bytes, limit {max_bytes})"
        data = os.read(fd, max_bytes + 1)
    except OSError as exc:
        return 0, f"cannot read it: {exc.strerror or exc}"
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return 0, f"too large (over {max_bytes} bytes)"
    if len(data) > budget:
        return 0, "over the copy's total of bytes"
    if b"\x00" in data:
        return 0, "binary (it holds NUL bytes)"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return 0, f"not UTF-8 text (byte {exc.start})"
    target = os.path.join(dest, path.lstrip("/"))
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o444)
    except FileExistsError:
        return 0, "named twice"
    except OSError as exc:
        return 0, f"cannot write the copy: {exc.strerror or exc}"
    try:
        os.write(out, data)
    finally:
        os.close(out)
    return len(data), ""


def main(argv):  # type: (list[str]) -> int
    """``DEST MAX_BYTES MAX_TOTAL TERMINATION_LOG -- PATH...``."""
    if len(argv) < 5 or argv[4] != "--" or not argv[1].isdigit() or not argv[2].isdigit():
        sys.stderr.write("usage: copier DEST MAX_BYTES MAX_TOTAL TERMINATION_LOG -- PATH...\n")
        return 2
    dest, max_bytes, budget, termination_log = argv[0], int(argv[1]), int(argv[2]), argv[3]
    paths = argv[5:]
    copied, skipped = 0, []
    for path in paths:
        size, why = copy_one(path, dest, max_bytes, budget)
        if why:
            skipped.append(f"{path[:200]} ({why})")
            sys.stdout.write(f"skipped {path[:200]!r}: {why}\n")
        else:
            copied += 1
            budget -= size
            sys.stdout.write(f"copied {path!r} ({size} bytes)\n")
    summary = f"copied {copied} of {len(paths)} files"
    if skipped:
        summary += "; skipped: " + "; ".join(skipped)
    sys.stdout.write(summary + "\n")
    try:  # the file the kubelet provides: opened, never created (run elsewhere, the log has it)
        fd = os.open(termination_log, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return 0
    try:
        os.write(fd, summary.encode("utf-8", "replace")[:_TERMINATION_LIMIT])
    except OSError:
        pass
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
