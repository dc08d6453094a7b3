"""What a rank's log says about why it stopped: one :class:`Signal` per recognisable failure line.

Shapes recognised (each pattern below names where its format comes from):

- Python tracebacks (``Traceback (most recent call last):`` ... ``ExcType: message``): the exception type,
  its first message line, the innermost frame of user code (not the standard library, ``site-packages``
  or torch), chained tracebacks keeping the last. A traceback of a lost peer or a timeout
  (``DistBackendError``, gloo's ``Connection closed by peer``) is a consequence, not a cause.
- CUDA errors: out of memory (``torch.OutOfMemoryError: CUDA out of memory``), ``an illegal memory access
  was encountered``, ``uncorrectable ECC error encountered`` (the CUDA runtime's error strings).
- NCCL ``WARN`` lines, ``host:pid:tid [cudaDev] [file:line] NCCL WARN text`` (NCCL's debug.cc format, as
  quoted in NVIDIA/nccl#1405: ``... ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer ... with
  status=12 ...``): network errors (``NET/IB``, ``NET/Socket``, completion errors), ``ncclInternalError``,
  ``ncclRemoteError``, timeouts.
- gloo aborts: ``terminate called after throwing an instance of 'gloo::EnforceNotMet'`` then ``what():
  [enforce fail at .../pair.cc:456] op.preamble.length <= op.nbytes. 116 vs 108. Received data size doesn't
  match expected size.`` (what torch 2.13's gloo prints on the receiver of a larger send, observed with
  the ``size`` workload); ``Gloo connectFullMesh failed``.
- Watchdog timeouts: ``Watchdog caught collective operation timeout: WorkNCCL(...) ran for N
  milliseconds before timing out`` (ProcessGroupNCCL).
- Xid lines of the NVIDIA kernel driver: ``NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has
  fallen off the bus.``
- Lost peers: gloo's ``Connection closed by peer`` / ``Connection reset by peer`` (torch 2.13, observed).

Never a signal: a warning, whatever it says (Python's ``warnings`` format ``path:line: UserWarning: text``
as torch 2.13 prints it, then the ``  warnings.warn(`` source line; a traceback ending in a ``*Warning``;
c10d's ``Warning:`` lines): a warning stops nothing. A traceback the rank survived is read, and
:func:`went_on` says so (causes.py drops it).

Times: an ISO 8601 / RFC 3339 time (Kubernetes' ``timestamps=true`` prefix, Python logging's
``%(asctime)s``) or a glog/c10d prefix (``[E1125 14:39:37.123456 ...]``, the year taken from ``year``)
near the start of a line; a signal takes the latest time at or before its line. torchrun's per-rank line
prefix ``[rank3]:`` names the global rank of the line (older torchrun's ``[default3]:``, the local rank).

Every line is at most ``logtext.MAX_LINE_CHARS`` long and every pattern is anchored or bounded, so a
hostile line costs linear time.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..base.safe_text import printable
from .masking import mask

#: Characters of a message kept.
MAX_MESSAGE = 300
#: Signals kept from one log (a log that repeats one warning a million times stays small).
MAX_SIGNALS = 64


@dataclass(frozen=True)
class Signal:
    """One failure line (or traceback) of a log. ``line`` is its index in the lines scanned; ``kind`` a
    :class:`~frwatch_analyzers.verdict.CauseKind` value; ``primary``: a cause rather than a consequence."""

    kind: str
    message: str
    line: int
    primary: bool
    exception: str = ""
    location: str = ""
    time: float | None = None
    step: int | None = None
    rank: int | None = None
    local_rank: int | None = None
    #: torchrun's summary only: the exit code it names (a positive one: the process exited by itself).
    exit_code: int | None = None
    #: ``time`` came with its zone (an RFC 3339 ``Z`` or offset): comparable with other clocks' epoch times.
    zoned: bool = False


_PREFIX = re.compile(r"^\[(rank|default)(\d{1,7})\]:\s?")
_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T _](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?"
)
_GLOG = re.compile(r"\b[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{1,9})\b")
_STEP = re.compile(r"(?i)\b(?:step|iteration|iter)[\s=:#]{0,3}(\d{1,9})\b")

_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "([^"]{1,1024})", line (\d{1,9})(?:, in (.{1,256}))?$')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]{0,200})(?::\s?(.*))?$")
#: torchrun's own traceback when a rank failed: the launcher reporting its child, never a cause (the
#: ``Root Cause (first observed failure)`` summary after it names the rank and is read as its signal).
_LAUNCHER_EXCEPTION = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
_NOT_USER = ("site-packages/", "dist-packages/", "/torch/", "<frozen", "<string>", "/lib/python3")

_GLOO_ENFORCE = re.compile(r"what\(\):\s+\[enforce fail at ([^\]]{1,512})\]\s?(.*)$")
_GLOO_SIZES = re.compile(r"op\.preamble\.length <= op\.nbytes\. (\d{1,19}) vs (\d{1,19})")
_GLOO_MESH = re.compile(r"Gloo connectFullMesh failed(.*)$")
_NCCL_WARN = re.compile(r"NCCL WARN (.*)$")
_XID = re.compile(r"NVRM: Xid \(([^)]{1,64})\): (\d{1,5})(?:, (.*))?$")
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout|ran for \d{1,12} milliseconds before timing out"
)
#: Python's warning line (``warnings.formatwarning``: ``path:line: Category: message``), or c10d's
#: ``Warning: ...`` (TORCH_WARN). Bounded: a category is a name ending in ``Warning``.
_WARNING = re.compile(r"(?:^|:\d{1,9}: |\] )[A-Za-z_][\w.]{0,120}Warning: |^Warning: ")
_PEER_LOST = re.compile(r"Connection (?:closed|reset) by peer|Broken pipe|Connection refused")
_CUDA = (
    ("cuda_oom", re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")),
    ("cuda_illegal_address", re.compile(r"illegal memory access was encountered|an illegal instruction was")),
    ("cuda_ecc", re.compile(r"uncorrectable ECC error|ECC error encountered")),
)
_NCCL_KINDS = (
    ("nccl_internal_error", re.compile(r"ncclInternalError|[Ii]nternal error")),
    ("nccl_remote_error", re.compile(r"ncclRemoteError|remote process exit|[Rr]emote error")),
    (
        "nccl_network_error",
        re.compile(
            r"NET/|[Cc]ompletion .{0,40}error|IBV_WC|ncclSystemError|[Cc]onnection (?:closed|reset|refused)|[Nn]etwork error|[Ss]ocket"
        ),
    ),
    ("nccl_timeout", re.compile(r"[Tt]ime(?:d )?out")),
)
#: Exceptions that say a peer went away or a collective timed out: consequences of another rank's failure.
_CONSEQUENCE = re.compile(
    r"DistBackendError|DistNetworkError|DistStoreError|Connection (?:closed|reset) by peer|Broken pipe"
    r"|timed out|Timeout|[Ww]atchdog|communicator was aborted|ncclRemoteError|Connection refused"
)


def _message(text: str) -> str:
    """A message as found (masked and made printable once kept: :func:`_finished`)."""
    return text.strip()[: MAX_MESSAGE * 2]


def line_time(body: str, year: int) -> float | None:
    """The time near the start of a line (seconds since the epoch, UTC when no offset is given)."""
    head = body[:80]
    m = _ISO.search(head)
    if m:
        y, mo, d, h, mi, s, frac, tz = m.groups()
        offset = 0
        if tz and tz != "Z":
            sign = -1 if tz[0] == "-" else 1
            digits = tz[1:].replace(":", "")
            offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        t = _epoch(int(y), int(mo), int(d), int(h), int(mi), int(s), frac)
        return t - offset if t is not None else None
    m = _GLOG.search(head)
    if m:
        mo, d, h, mi, s, frac = m.groups()
        return _epoch(year, int(mo), int(d), int(h), int(mi), int(s), frac)
    return None


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None) -> float | None:
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 61 and 1970 <= y < 10000):
        return None
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + (float(f"0.{frac}") if frac else 0.0)


def _strip(line: str) -> tuple[str, int | None, int | None]:
    """A line without torchrun's per-rank prefix (``[rank3]:``, a global rank; ``[default3]:``, a local
    one, from older torchrun's ``--tee``) and a leading RFC 3339 time; and the global and local ranks."""
    rank = local = None
    for _ in range(2):  # the prefix, then (Kubernetes' timestamps=true) a time and the prefix
        m = _PREFIX.match(line)
        if m:
            if m.group(1) == "rank":
                rank = int(m.group(2))
            else:
                local = int(m.group(2))
            line = line[m.end() :]
        t = _ISO.match(line)
        if t is None or line[t.end() : t.end() + 1] != " ":
            break
        line = line[t.end() + 1 :]
    return line, rank, local


def scan(lines: Sequence[str], *, year: int = 1970) -> list[Signal]:
    """Every failure the lines show, in the order they appear (at most :data:`MAX_SIGNALS`: the last ones).
    A signal's time and step are looked up backwards from its line (at most :data:`LOOK_BACK` lines), so
    the lines without a signal cost one pass of cheap checks."""
    signals: list[Signal] = []
    bodies = [_strip(line) for line in lines]
    i = 0
    while i < len(bodies):
        body, rank, local = bodies[i]
        if body.startswith(_TRACEBACK):
            sig, i = _traceback(bodies, i)
            if sig is not None:
                signals.append(sig)
            continue
        sig = _root_cause(bodies, i) if body.startswith(_ROOT_CAUSE) else _line_signal(body, i, rank)
        sig = replace(sig, local_rank=local) if sig is not None and local is not None else sig
        if sig is not None:
            signals.append(sig)
        i += 1
    return [_finished(sig, lines, bodies, year) for sig in signals[-MAX_SIGNALS:]]


#: Lines looked back from a signal for its time and its step.
LOOK_BACK = 500
#: Lines looked at after a traceback for the rank's going on (:func:`went_on`).
LOOK_AHEAD = 5000


def went_on(lines: Sequence[str], sig: Signal, *, unprefixed: bool) -> str:
    """How the rank of an exception ``sig`` went on after it (""): a later line of its own names a later
    training step than the exception did, so the exception was caught and handled (a retried metrics push),
    not what stopped the rank. Its own lines are those with its ``[rankN]:`` (or ``[defaultN]:``) prefix, and
    ``unprefixed`` lines when the log is one rank's."""
    if not sig.exception or sig.kind == "gloo_abort":
        return ""
    last = sig.step if sig.step is not None else -1
    for j in range(sig.line + 1, min(len(lines), sig.line + 1 + LOOK_AHEAD)):
        body, rank, local = _strip(lines[j])
        if (rank, local) != (sig.rank, sig.local_rank) or (rank is None and local is None and not unprefixed):
            continue
        if body.startswith(_TRACEBACK) or not body.strip():
            continue
        found = _STEP.findall(body[:1024])
        if found and int(found[-1]) > last:
            return f"it went on to step {int(found[-1])} (line {j + 1})"
    return ""


def last_step(lines: Sequence[str]) -> int | None:
    """The last training step the last :data:`LOOK_BACK` lines name (a killed process's last words)."""
    for line in reversed(lines[-LOOK_BACK:]):
        found = _STEP.findall(line[:1024])
        if found:
            return int(found[-1])
    return None


def _finished(
    sig: Signal, lines: Sequence[str], bodies: Sequence[tuple[str, int | None, int | None]], year: int
) -> Signal:
    """A kept signal with its message masked and made printable, and its time and step."""
    time, step, zoned = sig.time, None, False
    for j in range(sig.line, max(-1, sig.line - LOOK_BACK), -1):
        if time is None:
            time = line_time(lines[j], year)
            zoned = time is not None and _zoned(lines[j])
        if step is None and sig.step is None:
            found = _STEP.findall(bodies[j][0][:1024])
            step = int(found[-1]) if found else None
        if time is not None and (step is not None or sig.step is not None):
            break
    return replace(
        sig, message=printable(mask(sig.message), MAX_MESSAGE), time=time, step=sig.step or step, zoned=zoned
    )


def _zoned(line: str) -> bool:
    """Does the time :func:`line_time` reads at the start of ``line`` carry its zone? (glog's does not.)"""
    m = _ISO.search(line[:80])
    return m is not None and m.group(8) is not None


_ROOT_CAUSE = "Root Cause (first observed failure):"
_FIELD = re.compile(r"^\s{1,8}(time|rank|exitcode|traceback)\s{0,16}:\s?(.{0,512})$")
_EXIT_KINDS = {-9: "killed", -11: "segfault", -15: "terminated"}


def _root_cause(bodies: Sequence[tuple[str, int | None, int | None]], start: int) -> Signal | None:
    """torchrun's error summary (``ChildFailedError``: ``Root Cause (first observed failure):``, then
    ``time : 2023-08-01_01:06:47``, ``rank : 4 (local_rank: 4)``, ``exitcode : -9 (pid: 208585)``,
    ``traceback : Signal 9 (SIGKILL) received by PID 208585``): the rank torchrun saw fail first."""
    fields: dict[str, str] = {}
    for body, _, _ in bodies[start + 1 : start + 10]:
        m = _FIELD.match(body)
        if m:
            fields.setdefault(m.group(1), m.group(2).strip())
    rank_m = re.match(r"(\d{1,7})", fields.get("rank", ""))
    code_m = re.match(r"(-?\d{1,4})", fields.get("exitcode", ""))
    if rank_m is None or code_m is None:
        return None
    code = int(code_m.group(1))
    kind = _EXIT_KINDS.get(code, "exit_code")
    trace = fields.get("traceback", "")
    text = f"torchrun: rank {rank_m.group(1)} failed first with exit code {code}" + (
        f" ({trace})" if trace and not trace.startswith("To enable traceback") else ""
    )
    return Signal(
        kind,
        _message(text),
        start,
        kind in ("killed", "segfault"),
        rank=int(rank_m.group(1)),
        time=line_time(fields.get("time", ""), 1970),
        exit_code=code,
    )


def _traceback(bodies: Sequence[tuple[str, int | None, int | None]], start: int) -> tuple[Signal | None, int]:
    """The traceback starting at ``start``: its signal (at its exception line) and the index after it."""
    frames: list[tuple[str, int]] = []
    i = start + 1
    rank, local = bodies[start][1], bodies[start][2]
    while i < len(bodies):
        body = bodies[i][0]
        m = _FRAME.match(body)
        if m:
            frames.append((m.group(1), int(m.group(2))))
            i += 1
            continue
        if body.startswith((" ", "\t")) or not body.strip():
            i += 1  # a source line, carets, or a blank line inside the traceback
            continue
        break
    if i >= len(bodies):
        return None, i
    exc = _EXCEPTION.match(bodies[i][0])
    if exc is None:
        return None, i
    name, text = exc.group(1), (exc.group(2) or "")
    # torchrun reporting its child; a warning raised (-W error) or printed with a stack: never a cause
    if name == _LAUNCHER_EXCEPTION or name.endswith("Warning"):
        return None, i + 1
    user = [f for f in frames if not any(part in f[0] for part in _NOT_USER)] or frames
    location = f"{user[-1][0].rsplit('/', 1)[-1]}:{user[-1][1]}" if user else ""
    step_m = _STEP.findall(text[:1024])
    kind, primary = _exception_kind(name, text)
    sig = Signal(
        kind,
        _message(f"{name}: {text}" if text else name),
        i,
        primary,
        printable(name, 200),
        printable(location, 300),
        step=int(step_m[-1]) if step_m else None,
        rank=rank,
        local_rank=local,
    )
    return sig, i + 1


def _exception_kind(name: str, text: str) -> tuple[str, bool]:
    both = f"{name}: {text}"
    for kind, pattern in _CUDA:
        if pattern.search(both):
            return kind, True
    if "ncclInternalError" in both:
        return "nccl_internal_error", False
    if _WATCHDOG.search(both):
        return "watchdog_timeout", False
    if _CONSEQUENCE.search(both):
        return "peer_lost", False
    return "exception", True


def _line_signal(body: str, i: int, rank: int | None) -> Signal | None:
    """The signal of one line outside a traceback (None: it is none; a warning never is one)."""
    if "Warning: " in body and _WARNING.search(body):
        return None
    if "NCCL WARN" in body:
        m = _NCCL_WARN.search(body)
        text = m.group(1) if m else body
        kind = next((k for k, p in _NCCL_KINDS if p.search(text)), "nccl_warn")
        return Signal(kind, _message(f"NCCL WARN {text}"), i, False, rank=rank)
    if "enforce fail at" in body:
        m = _GLOO_ENFORCE.search(body)
        if m:
            sizes = _GLOO_SIZES.search(m.group(2))
            text = m.group(2)
            if sizes:
                text = (
                    f"received {sizes.group(1)} bytes where {sizes.group(2)} were expected (a peer sent a "
                    "larger tensor than this rank posted: a collective mismatch)"
                )
            return Signal(
                "gloo_abort",
                _message(f"gloo aborted the process: {text}"),
                i,
                True,
                "gloo::EnforceNotMet",
                printable(m.group(1).rsplit("/", 1)[-1], 200),
                rank=rank,
            )
    if "connectFullMesh" in body:
        m = _GLOO_MESH.search(body)
        if m:
            return Signal(
                "gloo_connect", _message(f"Gloo connectFullMesh failed{m.group(1)}"), i, True, rank=rank
            )
    if "NVRM: Xid" in body:
        m = _XID.search(body)
        if m:
            text = f"Xid {m.group(2)} on {m.group(1)}" + (f": {m.group(3)}" if m.group(3) else "")
            return Signal("xid", _message(text), i, True, rank=rank)
    if ("before timing out" in body or "Watchdog caught" in body) and _WATCHDOG.search(body):
        return Signal("watchdog_timeout", _message(body), i, False, rank=rank)
    for kind, pattern in _CUDA:
        if ("CUDA" in body or "ECC" in body or "illegal" in body) and pattern.search(body):
            return Signal(kind, _message(body), i, True, rank=rank)
    if "Fatal Python error: Segmentation fault" in body:
        return Signal("segfault", _message(body), i, True, rank=rank)
    lost = (
        _PEER_LOST.search(body) if ("by peer" in body or "Broken pipe" in body or "refused" in body) else None
    )
    if lost:
        return Signal("peer_lost", _message(body[max(0, lost.start() - 120) :]), i, False, rank=rank)
    return None
