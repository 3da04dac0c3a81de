"""Runs one call's code inside Pyodide and describes its outcome as JSON.

Loaded by runner.ts before the memory snapshot is taken, so every worker
starts with this module already imported.
"""

import ast
import base64
import copy
import dataclasses
import datetime
import decimal
import enum
import importlib.abc
import importlib.util
import inspect
import io
import json
import math
import os
import re
import signal
import sys
import textwrap
import traceback
import uuid
from collections.abc import Coroutine

from pyodide.code import CodeRunner, find_imports, should_quiet
from pyodide.ffi import JsNull



class _OffScreen(importlib.abc.MetaPathFinder):
    """Makes matplotlib, when a call first imports it, draw off screen with
    Agg: figures come back as images (take_figures) rather than wait for a
    display there is none of. Set only then, so the environment of code
    that never imports matplotlib is what it always was."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == 'matplotlib':
            os.environ.setdefault('MPLBACKEND', 'Agg')
            sys.meta_path.remove(self)


sys.meta_path.insert(0, _OffScreen())

# Frames of Pyodide's own machinery and of this module: users never see them.
# The same pattern upstream applies to the traceback text, so the text matches.
_MACHINERY = re.compile(
    r' {2}File "(?:/lib/python\d+\.zip/_pyodide/|<mcp-run-python>)[^\n]*\n(?: {4}[^\n]*\n)*'
)


# The namespace of a session's runs, which keeps its globals between them.
_session: dict[str, object] = {'__name__': '__main__'}

# The images of the last run, for take_figures: (MIME type, bytes).
_figures: list[tuple[str, bytes]] = []

# The IPython display methods whose images come back, best first.
_REPRS = (('_repr_png_', 'image/png'), ('_repr_jpeg_', 'image/jpeg'), ('_repr_svg_', 'image/svg+xml'))


class _Interrupt:
    """The SIGINT handler: the supervisor's interrupt (time limit,
    cancellation) becomes a KeyboardInterrupt in the run's own code, the
    frames compiled from main.py, and nowhere else.

    Pyodide looks at the interrupt buffer every so many bytecodes, wherever
    they are: after an await, that can be in the event loop's machinery
    (a promise's callback scheduling the task's next step). Raised there,
    the KeyboardInterrupt is printed as an "Unexpected error" and the step
    is never scheduled: the run never ends and is killed with its worker
    after the grace. So while no frame of the run's code is on the stack
    the interrupt is asked for again (the next check takes it), until one
    is. An interrupt outside a run is stale (one sent as the result was on
    its way) and dropped, or a session's next run would take it."""

    def __init__(self) -> None:
        self.running = False

    def __call__(self, signum: int, frame: object) -> None:
        if not self.running:
            return
        f = frame
        while f is not None:
            if f.f_code.co_filename == 'main.py':
                raise KeyboardInterrupt
            f = f.f_back
        # Into the buffer, which Pyodide reads again within 50 checks:
        # tripped here (_thread.interrupt_main), the signal would be taken
        # again at once, in this handler, without end.
        from _mcp_interrupt import again

        again(signum)


_interrupt = _Interrupt()
signal.signal(signal.SIGINT, _interrupt)


def run(
    code: str, limit: int = 0, error_limit: int = 0, global_variables: dict | None = None, keep: bool = False
) -> str | Coroutine[None, None, str]:
    """Runs code as module __main__ from main.py and returns the result frame.

    global_variables become globals first, as upstream's do; keep runs the
    code in the session's namespace instead of a new one.

    A return value longer than limit bytes, or an error text longer than
    error_limit bytes, is cut (0: no limit); see cut_text.

    Code with top-level await gets a coroutine that returns it instead: the
    common, synchronous case then never waits for the event loop, whose
    scheduling costs milliseconds in a Web Worker.
    """
    namespace = _session if keep else {}
    if 'mcp_tools' in sys.modules:
        namespace.setdefault('mcp_tools', sys.modules['mcp_tools'])  # imported already, as a convenience
    namespace.update(global_variables or {})
    namespace['__name__'] = '__main__'
    _figures.clear()
    _interrupt.running = True
    asynchronous = False
    try:
        runner = _compile(code)
        if runner.code is not None and runner.code.co_flags & inspect.CO_COROUTINE:
            asynchronous = True
            return _run_async(runner, namespace, limit, error_limit)
        return _success(runner.run(namespace), limit)
    except BaseException as e:  # SystemExit and KeyboardInterrupt are run errors too
        return _failure(e, error_limit)
    finally:
        _interrupt.running = asynchronous
        _flush()


# The statement that makes a last expression the return value, as Pyodide's
# CodeRunner writes it (_pyodide._base._last_expr_to_raise): CodeRunner.run
# catches the exception, which Pyodide puts into builtins under that name.
_RETURN = ast.parse('raise ___EvalCodeResultException[0](x)').body[0]


def _compile(code: str) -> CodeRunner:
    """CodeRunner(code, ...).compile() with the settings of eval_code_async,
    which upstream used: the same code object, byte for byte, in 0.2 ms
    rather than 0.5 for `1+1`. Pyodide deep-copies a template of the return
    statement, most of the time, and tokenizes the code for a trailing
    semicolon, which code with no `;` in it cannot have."""
    runner = CodeRunner(
        code,
        filename='main.py',
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        return_mode='none',
        quiet_trailing_semicolon=False,
    )
    body = runner.ast.body
    quiet = ';' in code and should_quiet(textwrap.dedent(code))
    if body and isinstance(body[-1], ast.Expr | ast.Await) and not quiet:
        # Copies of the two nodes that change; compile only reads the rest.
        call = copy.copy(_RETURN.exc)
        call.args = [body[-1].value]
        body[-1] = copy.copy(_RETURN)
        body[-1].exc = call
    return runner.compile()


async def _run_async(runner: CodeRunner, namespace: dict[str, object], limit: int, error_limit: int) -> str:
    try:
        return _success(await runner.run_async(namespace), limit)
    except BaseException as e:
        return _failure(e, error_limit)
    finally:
        _interrupt.running = False
        _flush()


def _success(value: object, limit: int) -> str:
    _figures.extend(_display(value))
    if value is None:
        return '{"type":"result","status":"success"}'
    is_str = isinstance(value, str)
    # str.__str__ makes a subclass a plain str, whose len and encode the
    # value's class cannot override to slip past the limit.
    text = str.__str__(value) if is_str else dump_json(value)
    cut = cut_text(text, limit)
    if cut is not None:
        kept, size = cut
        return f'{{"type":"result","status":"success","return_string":true,"return_value":{_string(kept)},"return_cut":{size}}}'
    # The indented value goes into the frame as it is: the Go side keeps its
    # bytes, so what the client sees is exactly what was dumped here.
    if is_str:
        return f'{{"type":"result","status":"success","return_string":true,"return_value":{_string(text)}}}'
    return f'{{"type":"result","status":"success","return_string":false,"return_value":{text}}}'


def _display(value: object) -> list[tuple[str, bytes]]:
    """The image of a last-expression value that has one, by the IPython
    display protocol (PIL images, sympy plots and many more): its first
    method that gives one. A method that fails gives none; the value's text
    is the result either way."""
    if value is None or isinstance(value, type):
        return []
    for method, mime in _REPRS:
        try:
            data = getattr(value, method, None)
            data = data() if callable(data) else None
            if isinstance(data, tuple):  # (data, metadata)
                data = data[0]
            if isinstance(data, str):
                data = data.encode() if mime == 'image/svg+xml' else base64.b64decode(data)
            if isinstance(data, (bytes, bytearray)) and data:
                return [(mime, bytes(data))]
        except Exception:
            continue
    return []


def take_figures() -> list[tuple[str, bytes]]:
    """The images of the last run: its last value's, then every matplotlib
    figure left open, as PNG (shown ones included: the Agg backend shows
    nothing and closes nothing). The figures are closed, so a session's next
    run does not send them again."""
    figures = list(_figures)
    _figures.clear()
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is not None:
        try:
            for number in plt.get_fignums():
                data = io.BytesIO()
                plt.figure(number).savefig(data, format='png')
                figures.append(('image/png', data.getvalue()))
            plt.close('all')
        except Exception as e:
            print(f'figures could not be saved: {e}', file=sys.stderr)
    return figures


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


def _failure(e: BaseException, limit: int) -> str:
    error = format_error(e)
    frame = {'type': 'result', 'status': 'run-error', 'error': error}
    cut = cut_text(error, limit)
    if cut is not None:
        frame['error'], frame['error_cut'] = cut
    return json.dumps(frame)


def _flush() -> None:
    # The code may have closed or replaced the streams: that is its own
    # business and must not end the worker before its result is sent.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def imports(code: str, hide=()) -> str:
    """The imports frame: modules code imports that cannot be imported yet.

    Modules under the top-level names in hide count as missing even when
    importable: a worker restored with a learned set answers as a plain
    interpreter would (the supervisor then installs nothing twice)."""
    hide = set(hide)
    try:
        names = find_imports(code)
    except Exception:
        # SyntaxError, or RecursionError and MemoryError for hostile
        # nesting: the run reports it.
        names = []
    missing = []
    for name in names:
        if name.partition('.')[0] in hide:
            missing.append(name)
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return json.dumps({'type': 'imports', 'names': missing})


def warm_install() -> None:
    """Installs a tiny wheel into a scratch directory, the way calls install
    theirs. Run while the memory snapshot is made, it moves the installer's
    first-use costs (measured: 180-300 ms for the first wheel, 40-80 ms for
    importlib.invalidate_caches, which imports importlib.metadata) out of
    every call that installs packages."""
    import io
    import tempfile
    import zipfile

    from pyodide._package_loader import unpack_buffer
    from pyodide.ffi import to_js

    data = io.BytesIO()
    with zipfile.ZipFile(data, 'w') as z:
        z.writestr('mcp_warm/__init__.py', '')
        z.writestr('mcp_warm-0.dist-info/METADATA', 'Metadata-Version: 2.1\nName: mcp-warm\nVersion: 0\n')
        z.writestr('mcp_warm-0.dist-info/WHEEL', 'Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
        z.writestr('mcp_warm-0.dist-info/RECORD', '')
    with tempfile.TemporaryDirectory() as scratch:
        unpack_buffer(
            to_js(data.getvalue()),
            filename='mcp_warm-0-py3-none-any.whl',
            extract_dir=scratch,
            metadata={'INSTALLER': 'mcp-run-python'},
            calculate_dynlibs=True,
        )
    importlib.invalidate_caches()


# The largest module compile_wheel compiles: real ones are far smaller
# (sympy's largest is about 1 MB), and compiling takes time and memory in
# proportion. A larger one imports from source, as without bytecode.
_MAX_MODULE_SOURCE = 4 << 20


def compile_wheel(
    data: object, install_dir: str, limit: int, skip: object, state: object
) -> tuple[str, bytes | None]:
    """The compiled frame for a wheel (a Uint8Array's proxy), and a zip of
    its modules' bytecode: unchecked-hash .pyc files (PEP 552), named as the
    import system looks for them, __pycache__/<module>.<cache tag>.pyc beside
    each module. Installed with the sources (which tracebacks show), they are
    used without a look at the sources or their times, so a fresh interpreter
    imports the package without compiling it again, and without its compile
    warnings (a SyntaxWarning for an invalid escape sequence) in the output.

    Only a compile worker calls it, where no user code has run: see
    supervisor/bytecode.go. compile() runs none of the package's code, but
    its source is hostile: a module that does not compile (a syntax error,
    nesting past the parser's or the compiler's limits, more than
    _MAX_MODULE_SOURCE bytes) is skipped and imports from source, and more
    than limit bytes of bytecode in all is an error. Nesting that the
    parser and compiler take (a chain of 10^5 additions) can still exhaust
    the wasm stack and end the interpreter, and a few hundred KiB of
    or-patterns take the compiler gigabytes or minutes:
    state.compiling(name), a JavaScript function, tells the supervisor each
    module as its compile begins ('' as it ends), so that it can stop one
    that takes too long or too much and compile the wheel again skipping
    the modules in skip. This is what
    py_compile.compile does with PycInvalidationMode.UNCHECKED_HASH, without
    its round trip through files.
    """
    import marshal
    import warnings
    import zipfile

    from pyodide._package_loader import get_install_dir

    tag = sys.implementation.cache_tag
    if not tag or sys.pycache_prefix or sys.flags.optimize:
        # The import system would look for other names, or elsewhere.
        return json.dumps({'type': 'compiled', 'error': 'this interpreter does not read __pycache__'}), None
    site = get_install_dir(install_dir or None)
    skip = set(skip)
    archive = io.BytesIO()
    modules = skipped = total = 0
    with (
        zipfile.ZipFile(io.BytesIO(data.to_bytes())) as wheel,
        zipfile.ZipFile(archive, 'w', zipfile.ZIP_STORED) as out,
    ):
        for info in wheel.infolist():
            name = info.filename
            top = name.partition('/')[0]
            if info.is_dir() or not name.endswith('.py') or top.endswith(('.dist-info', '.data')):
                continue
            parts = name.split('/')
            bad = '\\' in name or any(p in ('', '.', '..') for p in parts)
            if bad or info.file_size > _MAX_MODULE_SOURCE or name in skip:
                skipped += 1
                continue
            source = wheel.read(info)
            state.compiling(name)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter('ignore')
                    code = compile(source, f'{site}/{name}', 'exec', dont_inherit=True)
            except Exception:  # SyntaxError, RecursionError, MemoryError, ...
                skipped += 1
                continue
            finally:
                state.compiling('')
            pyc = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, 'little') + importlib.util.source_hash(source)
            pyc += marshal.dumps(code)
            del code
            total += len(pyc)
            if total > limit:
                return json.dumps(
                    {'type': 'compiled', 'error': f'the bytecode is larger than the limit of {limit} bytes'}
                ), None
            out.writestr(importlib.util.cache_from_source(name), pyc)
            modules += 1
    frame = {
        'type': 'compiled',
        'tag': tag,
        'magic': importlib.util.MAGIC_NUMBER.hex(),
        'modules': modules,
        'skipped': skipped,
    }
    return json.dumps(frame), archive.getvalue() if modules else None


def reseed() -> None:
    """Gives a new interpreter random state of its own, before any user code.

    Modules seed their generators from os.urandom when they are imported,
    and those imported before the memory snapshot was taken (random,
    tempfile's names by warm_install, numpy's with a set of packages) would
    otherwise give every interpreter restored from it the same numbers. The
    str hash seed is the snapshot's too, but it cannot change: every dict
    already made holds hashes made with it. os.urandom is the browser's
    crypto.getRandomValues, which Deno feeds from the system.
    """
    if (rng := sys.modules.get('random')) is not None:
        rng.seed()
    if (tmp := sys.modules.get('tempfile')) is not None:
        tmp._name_sequence = None  # made again, with a generator seeded anew
    if (np := sys.modules.get('numpy.random')) is not None and callable(getattr(np, 'seed', None)):
        np.seed()  # the legacy global generator's; default_rng() seeds itself


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
        items = (f'{inner}{_string(k)}: {_encode(x, inner)}' for k, x in v.items())
        return '{\n' + ',\n'.join(items) + '\n' + indent + '}'
    if isinstance(v, str):
        return _string(v)
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


def _string(s: str) -> str:
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


class ToolError(Exception):
    """A tool of another MCP server failed, or could not be called: the
    message is the tool's own, or says why the call did not happen."""


_TOOLS_DOC = """The tools of other MCP servers, as async functions: await
mcp_tools.<server>.<tool>(name=value, ...). A call returns the tool's
structured content (a dict) when it has some, else its text; a tool that
fails raises mcp_tools.ToolError."""

_JSON_TYPES = {
    'string': str,
    'integer': int,
    'number': (int, float),
    'boolean': bool,
    'array': (list, tuple),
    'object': dict,
}


def _identifier(name: str) -> str:
    # The same mapping as the Go side's toolbox.Identifier, which names the
    # functions in run_python_code's description.
    return re.sub(r'[^A-Za-z0-9_]', '_', name)


def set_tools(spec: str) -> None:
    """Makes the mcp_tools module of the tools in spec (a JSON array of
    supervisor.ToolSpec), replacing the last one."""
    module = type(sys)('mcp_tools', _TOOLS_DOC)
    module.ToolError = ToolError
    servers: dict[str, object] = {}
    for tool in json.loads(spec):
        server = _identifier(tool['server'])
        if server not in servers:
            servers[server] = type(sys)(f'mcp_tools.{server}', f'The tools of the MCP server {tool["server"]!r}.')
            setattr(module, server, servers[server])
        if 'down' in tool:  # omitted unless the server is down
            servers[server].__getattr__ = _down_tools(tool['server'], tool['down'])
            continue
        setattr(servers[server], _identifier(tool['name']), _tool_function(tool))
    sys.modules['mcp_tools'] = module


def _down_tools(server: str, reason: str) -> object:
    """The module __getattr__ of a server that listed no tools yet (down
    since the start): any of its tools is a function whose call goes to the
    trusted side, which calls it if the server is back, and else says why not,
    raised as ToolError, rather than an AttributeError that hides why."""
    from _mcp_tools_bridge import call as bridge_call

    def tool(name: str) -> object:
        if name.startswith('_'):
            raise AttributeError(f'module {f"mcp_tools.{_identifier(server)}"!r} has no attribute {name!r}')

        async def call(**arguments: object) -> object:
            reply = json.loads(await bridge_call(server, name, json.dumps(arguments)))
            if reply.get('error'):
                raise ToolError(reply['error'])
            return reply.get('value')

        call.__name__ = call.__qualname__ = name
        call.__module__ = f'mcp_tools.{_identifier(server)}'
        call.__doc__ = f'A tool of the MCP server {server!r}, which was down when this run started: {reason}'
        return call

    return tool


def _tool_function(tool: dict) -> object:
    from _mcp_tools_bridge import call as bridge_call

    server, name = tool['server'], tool['name']
    schema = tool.get('input_schema') or {}
    properties = schema.get('properties') or {}
    required = [p for p in schema.get('required') or [] if isinstance(p, str)]
    closed = schema.get('additionalProperties') is False
    qualified = f'mcp_tools.{_identifier(server)}.{_identifier(name)}'

    async def call(**arguments: object) -> object:
        # What a Python function would refuse is refused here, before the
        # call leaves the sandbox; the trusted side checks the whole schema.
        missing = [p for p in required if p not in arguments]
        if missing:
            raise TypeError(f'{qualified}() missing required argument(s): {", ".join(missing)}')
        unknown = [k for k in arguments if k not in properties]
        if closed and unknown:
            raise TypeError(f'{qualified}() got unexpected argument(s): {", ".join(unknown)}')
        for key, value in arguments.items():
            declared = (properties.get(key) or {}).get('type')
            kind = _JSON_TYPES.get(declared) if isinstance(declared, str) else None
            if kind is not None and (not isinstance(value, kind) or kind is not bool and isinstance(value, bool)):
                want = properties[key]['type']
                raise TypeError(f'{qualified}(): argument {key} must be {want}, not {type(value).__name__}')
        reply = json.loads(await bridge_call(server, name, json.dumps(arguments)))
        if reply.get('error'):
            raise ToolError(reply['error'])
        return reply.get('value')

    call.__name__ = call.__qualname__ = _identifier(name)
    call.__module__ = f'mcp_tools.{_identifier(server)}'
    params = []
    lines = [tool.get('description') or f'The tool {name!r} of the MCP server {server!r}.']
    if properties:
        lines.append('\nArguments:')
    for key in sorted(properties, key=lambda p: (p not in required, p)):
        prop = properties[key] if isinstance(properties[key], dict) else {}
        need = 'required' if key in required else 'optional'
        text = f'  {key} ({prop.get("type", "any")}, {need})'
        if prop.get('description'):
            text += f': {prop["description"]}'
        lines.append(text)
        if key.isidentifier():
            default = inspect.Parameter.empty if key in required else None
            params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default))
    call.__doc__ = '\n'.join(lines)
    call.__signature__ = inspect.Signature(params)
    return call


# Python's own HTTP clients reach the network through JavaScript's fetch:
# Pyodide's sockets reach nothing ("[Errno 23] Host is unreachable").
# urllib3 2.x (and so requests) has a backend of its own for that, which
# fetches synchronously with pyodide.ffi.run_sync: it works because the run
# is entered through callPromising (runner.ts). http.client, and
# urllib.request on it, are routed the same way, as pyodide-http does in
# browsers: a connection's socket stands in for one, keeps the request's
# bytes and, when the response is read, fetches and hands back the
# response's bytes, which http.client then parses as from a server. The
# worker's network permissions apply to fetch as to everything else; what
# they refuse is told as the server's flags, not Deno's.

# Request headers fetch sets itself; the response's body comes decoded and whole.
_OWN_HEADERS = frozenset({'host', 'connection', 'content-length', 'transfer-encoding', 'accept-encoding'})
_DECODED_HEADERS = frozenset({'content-encoding', 'content-length', 'transfer-encoding'})


def _refused(host: str, port: int, denied: bool = False) -> PermissionError | None:
    """The error for a request to host:port that the network policy refuses,
    told from the worker's permissions as a connection is made (as a socket
    is refused); None if it is allowed. denied: fetch refused it already (a
    name allowed that resolves to an address the policy denies)."""
    import js

    def state(host: str) -> str:
        return js.Deno.permissions.querySync(js.JSON.parse(json.dumps({'name': 'net', 'host': host}))).state

    authority = f'[{host}]:{port}' if ':' in host else f'{host}:{port}'
    try:
        if state(authority) == 'granted' and not denied:
            return None
        default = state('example.com:443') == 'granted'
    except Exception:
        return None  # fetch tells
    if default:
        why = (
            'by default code reaches the internet but not this machine, its private networks, '
            'link-local or cloud metadata addresses; the server would need --allow-net '
            f'{authority} (or --allow-private-net for private networks)'
        )
    else:
        why = "code reaches only the hosts of the server's --allow-net, and none with --disable-networking"
    return PermissionError(f'network access to {authority} refused by the network policy: {why}')


def _fetch(scheme: str, host: str, port: int, timeout: object, raw: bytes) -> bytes:
    """Sends the HTTP/1.1 request raw with fetch and returns the response as
    HTTP/1.1 bytes."""
    import socket

    import js
    from pyodide.ffi import JsException, can_run_sync, run_sync, to_js

    head, _, body = raw.partition(b'\r\n\r\n')
    request_line, *lines = head.decode('latin-1').split('\r\n')
    method, target = request_line.split(' ')[:2]
    headers, chunked = [], False
    for line in lines:
        key, _, value = line.partition(':')
        key, value = key.strip(), value.strip()
        if key.lower() == 'transfer-encoding' and 'chunked' in value.lower():
            chunked = True
        if key.lower() not in _OWN_HEADERS:
            headers.append([key, value])
    if chunked:
        body = _dechunk(body)
    host_text = f'[{host}]' if ':' in host else host
    default_port = 443 if scheme == 'https' else 80
    authority = host_text if port == default_port else f'{host_text}:{port}'
    url = target if target.startswith(('http://', 'https://')) else f'{scheme}://{authority}{target}'  # a proxy's
    if not can_run_sync():
        raise OSError(f'{url}: a synchronous request cannot be made here; use pyodide.http.pyfetch')
    init: dict[str, object] = {'method': method, 'headers': headers, 'redirect': 'manual'}
    if body and method not in ('GET', 'HEAD'):
        init['body'] = to_js(body)
    if timeout is socket._GLOBAL_DEFAULT_TIMEOUT:
        timeout = socket.getdefaulttimeout()
    if isinstance(timeout, (int, float)):
        init['signal'] = js.AbortSignal.timeout(max(1, int(timeout * 1000)))
    try:
        response = run_sync(js.fetch(url, to_js(init, dict_converter=js.Object.fromEntries)))
        data = run_sync(response.arrayBuffer()).to_bytes()
    except JsException as e:
        name = getattr(e, 'name', '')
        if name == 'NotCapable':  # a name that resolves to a denied address
            raise _refused(host, port, denied=True) or PermissionError(f'{url}: {e}') from None
        if name in ('TimeoutError', 'AbortError'):
            raise TimeoutError(f'{url}: timed out') from None
        raise ConnectionError(f'{url}: {e}') from None
    import http.client

    reason = response.statusText or http.client.responses.get(response.status, '')
    out = [f'HTTP/1.1 {response.status} {reason}']
    for key, value in response.headers.entries():
        if key.lower() not in _DECODED_HEADERS:
            out.append(f'{key}: {value}')
    out.append(f'Content-Length: {len(data)}')
    return ('\r\n'.join(out) + '\r\n\r\n').encode('latin-1', 'replace') + data


def _dechunk(body: bytes) -> bytes:
    out, rest = bytearray(), body
    while rest:
        size, _, rest = rest.partition(b'\r\n')
        n = int(size.split(b';')[0] or b'0', 16)
        if n == 0:
            break
        out += rest[:n]
        rest = rest[n + 2 :]
    return bytes(out)


class _FetchSocket:
    """The socket of an http.client connection: see _fetch."""

    def __init__(self, conn: object, scheme: str) -> None:
        self._conn = conn
        self._scheme = scheme
        self._out = bytearray()

    def sendall(self, data: bytes) -> None:
        self._out += data

    def makefile(self, mode: str = 'rb', *args: object, **kwargs: object) -> io.BytesIO:
        raw, self._out = bytes(self._out), bytearray()
        conn = self._conn
        return io.BytesIO(_fetch(self._scheme, conn.host, conn.port, conn.timeout, raw))

    def settimeout(self, timeout: object) -> None:
        self._conn.timeout = timeout

    def setsockopt(self, *args: object) -> None:
        pass

    def close(self) -> None:
        pass


def _route_http() -> None:
    import http.client

    def connect(self: http.client.HTTPConnection) -> None:
        sys.audit('http.client.connect', self, self.host, self.port)
        if (refused := _refused(self.host, self.port)) is not None:
            raise refused
        https = isinstance(self, getattr(http.client, 'HTTPSConnection', ()))
        self.sock = _FetchSocket(self, 'https' if https else 'http')

    http.client.HTTPConnection.connect = connect
    if hasattr(http.client, 'HTTPSConnection'):
        http.client.HTTPSConnection.connect = connect


_route_http()


# urllib3's Emscripten backend: the module whose fetches are policed.
_URLLIB3_FETCH = 'urllib3.contrib.emscripten.fetch'


class _PoliceUrllib3(importlib.abc.MetaPathFinder):
    """Makes urllib3's Emscripten backend, when it is imported, tell a
    request the network policy refuses as such (_refused), rather than as
    Deno's "Requires net access" or a connection error."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if name != _URLLIB3_FETCH:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, 'find_spec'):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, 'exec_module'):
            exec_module = spec.loader.exec_module

            def police(module: object) -> None:
                exec_module(module)
                _police_urllib3(module)

            spec.loader.exec_module = police
        return spec


def _police_urllib3(fetch: object) -> None:
    import urllib.parse

    send = getattr(fetch, 'send_jspi_request', None)
    refusal = getattr(fetch, '_RequestError', None)
    if send is None or refusal is None:
        return  # another urllib3: its own errors stand

    def send_jspi_request(request: object, streaming: bool) -> object:
        url = urllib.parse.urlsplit(request.url)
        host, port = url.hostname or '', url.port or (443 if url.scheme == 'https' else 80)
        refused = _refused(host, port)
        if refused is None:
            try:
                return send(request, streaming)
            except refusal as e:
                if 'Requires net access' not in str(e.message):  # Deno's NotCapable
                    raise
                refused = _refused(host, port, denied=True)
                if refused is None:
                    raise
        raise refusal(message=str(refused), request=request, response=None)

    fetch.send_jspi_request = send_jspi_request


sys.meta_path.insert(0, _PoliceUrllib3())
