"""The text of a run's outcome: its return value as JSON, cut to a limit,
and its error as Python prints it.

Installed as _mcp_encode by boot.ts, before _mcp_runner, which uses it.
"""

import dataclasses
import datetime
import decimal
import enum
import json
import math
import re
import sys
import traceback
import uuid

from pyodide.ffi import JsNull

# Frames of Pyodide's own machinery and of the runner's modules: users never
# see them.
# The same pattern upstream applies to the traceback text, so the text matches.
_MACHINERY = re.compile(
    r' {2}File "(?:/lib/python\d+\.zip/_pyodide/|<mcp-run-python>)[^\n]*\n(?: {4}[^\n]*\n)*'
)

def cut_text(text: str, limit: int) -> tuple[str, int] | None:
    """text's first limit bytes and its whole size in bytes, or None when it fits.

    text is what the client would see: a return value's (a str itself,
    anything else its indented JSON) or an error's. It is cut here, before
    the frame is built, so that nothing oversized crosses the bridge or
    reaches the Go side's memory. The cut falls on a character boundary; the
    Go side (supervisor/call.go) adds the note that says what was cut, and
    sends a cut value as a str: cut JSON is no longer JSON.
    """
    # Values that surely fit are never encoded: a code point is at most 4
    # bytes in UTF-8, and one of an ASCII str (a flag CPython keeps) is 1.
    if limit <= 0 or len(text) * 4 <= limit or (text.isascii() and len(text) <= limit):
        return None
    # surrogatepass: a str may hold lone surrogates, which have no UTF-8 form.
    data = text.encode('utf-8', 'surrogatepass')
    if len(data) <= limit:
        return None
    end = limit
    while end > 0 and data[end] & 0xC0 == 0x80:  # back to the start of a character
        end -= 1
    return data[:end].decode('utf-8', 'surrogatepass'), len(data)


def format_error(e: BaseException) -> str:
    """The traceback as Python prints it, without Pyodide's frames."""
    return _MACHINERY.sub('', ''.join(traceback.format_exception(e)))


def dump_json(value: object) -> str:
    """JSON with a 2-space indent, following pydantic_core's to_json conventions."""
    return _encode(_jsonable(value, set()), '')


def _encode(v: object, indent: str) -> str:
    # By hand rather than json.dumps: floats must be written as serde_json
    # (pydantic_core) writes them, which json.dumps cannot be told to do.
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, list):
        if not v:
            return '[]'
        inner = indent + '  '
        return '[\n' + ',\n'.join(inner + _encode(x, inner) for x in v) + '\n' + indent + ']'
    if isinstance(v, dict):
        if not v:
            return '{}'
        inner = indent + '  '
        items = (f'{inner}{json_string(k)}: {_encode(x, inner)}' for k, x in v.items())
        return '{\n' + ',\n'.join(items) + '\n' + indent + '}'
    if isinstance(v, str):
        return json_string(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return _digits(v)
    return json.dumps(v)


def _digits(n: int) -> str:
    """str(n) of any length, as pydantic_core writes an int. Python refuses
    past sys.get_int_max_str_digits() digits (4300 by default), a guard for
    servers converting untrusted text; this int is the call's own, its
    conversion bounded by the call's time limit. The guard is lifted only
    for the ints it refuses, so a long list of small ones costs no more."""
    try:
        return str(n)
    except ValueError:
        pass
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return str(n)
    finally:
        sys.set_int_max_str_digits(limit)


def json_string(s: str) -> str:
    """s as a JSON string, its characters as they are: the frame is UTF-8."""
    return json.dumps(s, ensure_ascii=False)


def _float(x: float) -> str:
    """Formats x as Rust's ryu does: shortest digits, exponent past 1e16 and below 1e-5."""
    if x == 0:
        return '-0.0' if math.copysign(1, x) < 0 else '0.0'
    sign, digit_tuple, e = decimal.Decimal(repr(x)).normalize().as_tuple()
    d = ''.join(map(str, digit_tuple))
    s = '-' if sign else ''
    kk = len(d) + e  # position of the decimal point
    if 0 <= e and kk <= 16:
        return f'{s}{d}{"0" * e}.0'
    if 0 < kk <= 16:
        return f'{s}{d[:kk]}.{d[kk:]}'
    if -5 < kk <= 0:
        return f'{s}0.{"0" * -kk}{d}'
    return f'{s}{d[0]}{"." + d[1:] if len(d) > 1 else ""}e{kk - 1}'


def _key(k: object) -> str:
    # As pydantic_core makes a key: numbers by str(), so float('nan') is
    # 'nan' and 1e20 is '1e+20' (a value is written as _float says).
    if isinstance(k, str):
        return k
    if isinstance(k, bool):
        return 'true' if k else 'false'
    if isinstance(k, enum.Enum):
        return _key(k.value)
    if isinstance(k, (int, float)):
        return _digits(k)
    if isinstance(k, (decimal.Decimal, uuid.UUID)):
        return str(k)
    if isinstance(k, bytes):
        return _utf8(k)
    if isinstance(k, tuple):
        return ','.join(_key(x) for x in k)
    if isinstance(k, (datetime.date, datetime.time)):
        return _iso(k)
    return repr(k) if k is not None else 'None'


def _utf8(b: bytes) -> str:
    try:
        return b.decode()
    except UnicodeDecodeError as e:
        raise ValueError(
            f'the return value cannot be JSON: bytes {b[e.start:e.end]!r} at index {e.start} are not UTF-8 text'
        ) from None


def _iso(v: datetime.date | datetime.time) -> str:
    text = v.isoformat()
    return text[:-6] + 'Z' if text.endswith('+00:00') else text


def _duration(d: datetime.timedelta) -> str:
    sign = '-' if d < datetime.timedelta(0) else ''
    d = abs(d)
    seconds = d.seconds + d.microseconds / 1e6
    text = f'{sign}P'
    if d.days:
        text += f'{d.days}D'
    if seconds or not d.days:
        text += 'T' + (f'{seconds:g}' if d.microseconds else str(d.seconds)) + 'S'
    return text


def _jsonable(v: object, active: set[int]) -> object:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, enum.Enum):
        return _jsonable(v.value, active)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _utf8(bytes(v))
    if isinstance(v, (decimal.Decimal, uuid.UUID)):
        return str(v)
    if isinstance(v, (datetime.date, datetime.time)):
        return _iso(v)
    if isinstance(v, datetime.timedelta):
        return _duration(v)
    if isinstance(v, (dict, list, tuple, set, frozenset)) or dataclasses.is_dataclass(v):
        if id(v) in active:
            raise ValueError('Circular reference detected (id repeated)')
        active.add(id(v))
        try:
            if isinstance(v, dict):
                return {_key(k): _jsonable(x, active) for k, x in v.items()}
            if dataclasses.is_dataclass(v) and not isinstance(v, type):
                return {f.name: _jsonable(getattr(v, f.name), active) for f in dataclasses.fields(v)}
            if isinstance(v, (list, tuple, set, frozenset)):
                return [_jsonable(x, active) for x in v]
        finally:
            active.discard(id(v))
    module = type(v).__module__
    if hasattr(v, 'model_dump_json') and hasattr(type(v), 'model_fields'):
        return json.loads(v.model_dump_json())  # a pydantic model
    if module == 'numpy':
        if type(v).__name__ in {'ndarray', 'matrix'}:
            return _jsonable(v.tolist(), active)
        return _jsonable(v.item(), active)
    if module == 'pyodide.ffi':
        if isinstance(v, JsNull):
            return None  # JavaScript's null, which has no to_py
        return _jsonable(v.to_py(), active)
    return repr(v)
