"""Runs one call's code inside Pyodide and describes its outcome as JSON.

Installed as _mcp_runner by boot.ts, after the modules it uses, before the
memory snapshot is taken: every worker starts with them already imported.
The runner's TypeScript calls this module's functions (run.ts's PyRunner),
set_tools and compile_wheel included.
"""

import ast
import base64
import copy
import importlib.abc
import importlib.util
import inspect
import io
import json
import os
import signal
import sys
import textwrap
from collections.abc import Coroutine

import _mcp_ask
import _mcp_http  # noqa: F401 (importing it routes HTTP through fetch)
from _mcp_bytecode import compile_wheel  # noqa: F401 (the runner calls it here)
from _mcp_encode import cut_text, dump_json, format_error, json_string
from _mcp_tools import set_tools  # noqa: F401 (the runner calls it here)
from pyodide.code import CodeRunner, find_imports, should_quiet


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
    code: str,
    limit: int = 0,
    error_limit: int = 0,
    global_variables: dict | None = None,
    keep: bool = False,
    ask: str | None = None,
) -> str | Coroutine[None, None, str]:
    """Runs code as module __main__ from main.py and returns the result frame.

    global_variables become globals first, as upstream's do; keep runs the
    code in the session's namespace instead of a new one. ask, the run
    frame's bridge.AskSpec as JSON, defines llm_query and the rest for the
    run (see _mcp_ask); None leaves the interpreter as it is.

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
    if ask is not None:
        _mcp_ask.enable(ask)
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
        if not asynchronous:
            _mcp_ask.disable()
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
        _mcp_ask.disable()
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
        return f'{{"type":"result","status":"success","return_string":true,"return_value":{json_string(kept)},"return_cut":{size}}}'
    # The indented value goes into the frame as it is: the Go side keeps its
    # bytes, so what the client sees is exactly what was dumped here.
    if is_str:
        return f'{{"type":"result","status":"success","return_string":true,"return_value":{json_string(text)}}}'
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
