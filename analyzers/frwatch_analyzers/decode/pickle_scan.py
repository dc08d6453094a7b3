"""Why a pickle crashed, hung or exhausted the decoder: a post-mortem, never on the hot path.

The C unpickler decodes real dumps at the speed of the disk, but it cannot be told to stop: a dict key
nested 200k deep crashes it when hashed (a C recursion with no guard), a key built from shared references
takes forever to hash, a memo index asks for gigabytes. When a worker dies on a file, this module walks the
file's opcodes in pure Python (slow, bounded by the same worker limits) and tracks, for every object on the
stack, how deep it nests and how many objects a walk over it would visit, to name what the file does.
"""

from __future__ import annotations

import io
import pickletools
from dataclasses import dataclass

from ..base.safe_text import printable

#: Real dumps nest about 5 deep (dump -> entries -> entry -> frames -> frame -> values).
DEEP = 1000
#: Objects a walk may visit before it counts as a shared-reference bomb (real dumps: about 40 an entry).
WIDE = 100_000_000
#: A memo index beyond this asks the decoder for more than 80 MB of memo table.
MEMO = 10_000_000


@dataclass
class _Obj:
    depth: int = 1
    visits: int = 1  # objects visited by a walk that follows every reference (shared ones again)


class Finding(Exception):
    """What the scan found; the message says it for a person."""


_PUSH_SCALAR = {
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "STRING", "BINSTRING",
    "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8", "NEXT_BUFFER", "NONE",
    "NEWTRUE", "NEWFALSE", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "FLOAT", "BINFLOAT",
    "EMPTY_LIST", "EMPTY_TUPLE", "EMPTY_DICT", "EMPTY_SET",
}  # fmt: skip
_TO_MARK = {"TUPLE", "LIST", "DICT", "FROZENSET"}
_FIXED_TUPLE = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
_CODE = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "PERSID",
         "BINPERSID", "EXT1", "EXT2", "EXT4"}  # fmt: skip


def explain(data: bytes) -> str:
    """What makes ``data`` (a pickle) dangerous to decode, or "" when the scan finds nothing."""
    try:
        _scan(data)
    except Finding as found:
        return str(found)
    except ValueError as exc:  # e.g. a length that claims more bytes than the file holds
        return f"the pickle is malformed: {printable(str(exc), 200)}"
    except Exception:  # noqa: S110 - a malformed pickle: the decoder's own error says more
        pass
    return ""


def _contain(container: _Obj, items: list[_Obj], pos: int, notes: list[str], key: bool = False) -> None:
    """Put ``items`` into ``container`` (shared with the memo: later references see the growth). A key
    that cannot be hashed ends the scan; other findings are noted and the scan goes on to look for one."""
    for item in items:
        container.depth = max(container.depth, item.depth + 1)
        container.visits = min(container.visits + item.visits, WIDE + 1)
    if container.depth > DEEP:
        if key:
            raise Finding(
                f"a dict key nests more than {DEEP} deep (at byte {pos}): hashing it crashes the decoder"
            )
        notes.append(
            f"containers nest more than {DEEP} deep (at byte {pos}); a Flight Recorder dump nests about 5"
        )
    if container.visits > WIDE:
        if key:
            raise Finding(
                f"a dict key is built from shared references: hashing it visits more than {WIDE:,} objects "
                f"(at byte {pos}) and does not end"
            )
        notes.append(
            f"objects built from shared references: walking them visits more than {WIDE:,} objects (at byte {pos})"
        )


def _scan(data: bytes) -> None:
    stack: list[_Obj | None] = []  # None: a mark
    memo: dict[int, _Obj] = {}
    notes: list[str] = []

    def to_mark() -> list[_Obj]:
        items: list[_Obj] = []
        while stack:
            top = stack.pop()
            if top is None:
                return items
            items.append(top)
        raise ValueError("no mark")

    def pop() -> _Obj:
        top = stack.pop()
        if top is None:
            raise ValueError("mark where an object was expected")
        return top

    for op, arg, pos in pickletools.genops(io.BytesIO(data)):
        name = op.name
        p = pos or 0
        if name in _PUSH_SCALAR:
            stack.append(_Obj())
        elif name == "MARK":
            stack.append(None)
        elif name in _TO_MARK:
            items = to_mark()
            obj = _Obj()
            _contain(obj, items, p, notes)
            if name in ("DICT", "FROZENSET"):
                keys = items[1::2] if name == "DICT" else items
                for k in keys:
                    _contain(_Obj(), [k], p, notes, key=True)
            stack.append(obj)
        elif name in _FIXED_TUPLE:
            items = [pop() for _ in range(_FIXED_TUPLE[name])]
            obj = _Obj()
            _contain(obj, items, p, notes)
            stack.append(obj)
        elif name == "APPEND":
            item = pop()
            _contain(stack[-1] or _Obj(), [item], p, notes)
        elif name in ("APPENDS", "SETITEMS", "ADDITEMS"):
            items = to_mark()
            target = stack[-1] or _Obj()
            if name != "APPENDS":
                keys = items[1::2] if name == "SETITEMS" else items
                for k in keys:
                    _contain(_Obj(), [k], p, notes, key=True)
            _contain(target, items, p, notes)
        elif name == "SETITEM":
            value, k = pop(), pop()
            _contain(_Obj(), [k], p, notes, key=True)
            _contain(stack[-1] or _Obj(), [k, value], p, notes)
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            index = int(arg or 0)
            if index > MEMO:
                raise Finding(f"a memo index of {index:,} (at byte {p}): the decoder would allocate a table of "
                              f"{index * 8:,} bytes for it")  # fmt: skip
            memo[index] = stack[-1] or _Obj()
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1] or _Obj()
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo[int(arg or 0)])
        elif name == "POP":
            stack.pop()
        elif name == "POP_MARK":
            to_mark()
        elif name == "DUP":
            stack.append(stack[-1])
        elif name in _CODE or name == "STOP":
            break
        # PROTO, FRAME, READONLY_BUFFER: no change to the stack's objects
        if len(notes) > 1:
            del notes[1:]  # the first finding is the one reported
    if notes:
        raise Finding(notes[0])
