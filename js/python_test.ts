// Runs runner_test.py's tests under Pyodide, the runner's modules installed
// as a worker installs them (pymodules.ts).

import { loadPyodide } from "pyodide";
import { installModules } from "./pymodules.ts";
import tests from "./runner_test.py" with { type: "text" };

Deno.test("runner's Python helpers", async (t) => {
  const py = await loadPyodide();
  installModules(py);
  py.runPython(tests, { filename: "runner_test.py" });
  const names: string[] = py.runPython(
    "[n for n, f in dict(globals()).items() if n.startswith('test_') and callable(f)]",
  ).toJs();
  if (names.length === 0) throw new Error("runner_test.py has no tests");
  for (const name of names) {
    await t.step(name, () => {
      py.runPython(`${name}()`); // a PythonError, with its traceback, fails the step
    });
  }
});
