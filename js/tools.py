"""The mcp_tools module: the tools of other MCP servers, which a run's code
calls through the runner (run.ts's ToolCalls).

Installed as _mcp_tools by boot.ts, before _mcp_runner, which uses it.
"""

import inspect
import json
import re
import sys


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
