// The runner's Python modules, installed into an interpreter.

import type { PyodideAPI } from "pyodide";
import ask from "./ask.py" with { type: "text" };
import bytecode from "./bytecode.py" with { type: "text" };
import encode from "./encode.py" with { type: "text" };
import fetch from "./fetch.py" with { type: "text" };
import runner from "./runner.py" with { type: "text" };
import tools from "./tools.py" with { type: "text" };

/** The modules as sys.modules names them, each after the modules it imports. */
const modules: [string, string][] = [
  ["_mcp_encode", encode],
  ["_mcp_tools", tools],
  ["_mcp_http", fetch],
  ["_mcp_bytecode", bytecode],
  ["_mcp_ask", ask],
  ["_mcp_runner", runner],
];

/**
 * Installs the runner's modules into py's sys.modules. Their code is
 * compiled as <mcp-run-python>, the file name whose frames tracebacks leave
 * out (encode.py's _MACHINERY), and is in no file the run's code could read.
 */
export function installModules(py: PyodideAPI) {
  py.globals.set("_mcp_sources", JSON.stringify(modules));
  py.runPython(`
import json, sys, types
for _n, _s in json.loads(_mcp_sources):
    _m = types.ModuleType(_n)
    exec(compile(_s, "<mcp-run-python>", "exec"), _m.__dict__)
    sys.modules[_n] = _m
del _n, _s, _m, _mcp_sources
`);
}
