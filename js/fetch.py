"""HTTP over JavaScript's fetch, for http.client, urllib.request and urllib3,
within the worker's network policy.

Installed as _mcp_http by boot.ts: importing it routes the clients.
"""

import importlib.abc
import io
import json
import sys


# Python's own HTTP clients reach the network through JavaScript's fetch:
# Pyodide's sockets reach nothing ("[Errno 23] Host is unreachable").
# urllib3 2.x (and so requests) has a backend of its own for that, which
# fetches synchronously with pyodide.ffi.run_sync: it works because the run
# is entered through callPromising (run.ts). http.client, and
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
