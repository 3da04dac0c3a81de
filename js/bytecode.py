"""Compiling a wheel's modules to bytecode, in a compile worker.

Installed as _mcp_bytecode by boot.ts, before _mcp_runner, which uses it.
"""

import importlib.util
import io
import json
import sys


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
    supervisor/internal/install/bytecode.go. compile() runs none of the package's code, but
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
