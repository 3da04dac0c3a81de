// Booting Pyodide: plainly, or from a memory snapshot through its private
// hooks; and making the snapshot.

import type { PyodideAPI, PyodideConfig } from "pyodide";
import { fatal, send } from "./frames.ts";
import { Incoming } from "./files.ts";
import { install } from "./packages.ts";
import { installModules } from "./pymodules.ts";
import type { Init } from "./runner.ts";
import { openSnapshot, restorePages, type SnapshotFile } from "./snapshotfile.ts";

/** Emscripten's settings, as Pyodide hands them to createPyodideModule. */
type Settings = Parameters<NonNullable<PyodideConfig["createPyodideModule"]>>[0];

/**
 * Loads Pyodide with options, its wasm module instantiated from module, the
 * one the parent compiled; from the snapshot file snap, if given. A
 * snapshot holds the whole wasm memory, and one taken after imports that
 * grew it (a snapshot with --deps loaded) is larger than a fresh
 * instance's: Pyodide copies it into the fresh memory without growing that
 * first, and fails. Its module exports its memory, so only the
 * instantiation can be reached to grow it, before Emscripten makes its
 * views of the memory.
 *
 * Pyodide is given the snapshot's header alone, and its restore
 * (API.restoreSnapshot), which checks the header and copies the memory
 * that follows it, is wrapped to read the memory with restorePages: a
 * restore then reads and writes only the non-zero pages, 17 of 30 MiB.
 *
 * Pyodide's own instantiateWasm would read pyodide.asm.wasm again as Pyodide
 * makes its settings (9 MiB, on every restore), only to instantiate those
 * bytes. It starts that read unless a global WasmOffsetConverter exists (its
 * way to leave the instantiation to Emscripten; nothing else of Pyodide 314
 * reads it), so one exists while loadPyodide makes the settings, and
 * createPyodideModule, which receives them, puts this instantiateWasm in.
 * Should Pyodide drop that check, it reads the bytes in vain but still runs
 * this. The two imports Pyodide's adds are its marker of a JavaScript error,
 * made as Pyodide makes them where its small wasm-gc module for them does not
 * compile; a missing or new import fails the instantiation, loudly.
 */
export async function loadPyodideWith(
  init: Init,
  module: WebAssembly.Module,
  snap: SnapshotFile | undefined,
  options: PyodideConfig,
): Promise<PyodideAPI> {
  const bytes = snap?.memory ?? 0;
  const [{ loadPyodide }, { default: create }] = await Promise.all([
    import(`file://${init.pyodide}/pyodide.mjs`),
    import(`file://${init.pyodide}/pyodide.asm.mjs`),
  ]);
  const failed = Promise.withResolvers<never>();
  const instantiateWasm = (
    imports: { env: Record<string, unknown> },
    receive: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void,
  ) => {
    const error = Symbol("error marker");
    imports.env.Jsv_GetError_import = () => error;
    imports.env.JsvError_Check = (value: unknown) => value === error;
    WebAssembly.instantiate(module, imports as WebAssembly.Imports).then((instance) => {
      const memory = instance.exports.memory;
      if (memory instanceof WebAssembly.Memory && memory.buffer.byteLength < bytes) {
        memory.grow(Math.ceil((bytes - memory.buffer.byteLength) / 65536));
      }
      receive(instance, module);
    }, failed.reject); // Emscripten would wait forever
    return {};
  };
  // Pyodide's module, once made: where its restore is wrapped.
  // deno-lint-ignore no-explicit-any
  const wrapRestore = (m: any) => {
    const api = m.API, restore = api?.restoreSnapshot;
    if (typeof restore !== "function") {
      throw new Error("Pyodide has no API.restoreSnapshot to wrap");
    }
    api.restoreSnapshot = (header: Uint8Array) => {
      const json = restore(header); // its memory part is empty: nothing copied
      restorePages(snap!, m.memory, m._sbrk?.(0) >>> 0 || snap!.memory);
      restored = true;
      return json;
    };
    return m;
  };
  let restored = false;
  const global = globalThis as { WasmOffsetConverter?: unknown };
  global.WasmOffsetConverter = true;
  try {
    const py = await Promise.race([
      loadPyodide({
        ...options,
        ...(snap && { _loadSnapshot: snap.header }),
        indexURL: `${init.pyodide}/`,
        // Emscripten's Module is this very object: Pyodide reads it back.
        createPyodideModule: (settings: Settings) => {
          delete global.WasmOffsetConverter;
          Object.assign(settings, { instantiateWasm });
          return snap ? create(settings).then(wrapRestore) : create(settings);
        },
      }),
      failed.promise,
    ]);
    // An interpreter booted on a fresh memory would not be the snapshot's.
    if (snap && !restored) throw new Error("Pyodide did not restore the snapshot");
    return py;
  } finally {
    delete global.WasmOffsetConverter;
  }
}

/**
 * Boots the interpreter: from init's snapshot when there is one and it
 * restores, plainly otherwise; restored says which.
 */
export async function load(
  init: Init,
  module: WebAssembly.Module,
): Promise<{ py: PyodideAPI; restored: boolean }> {
  if (init.snapshot && !init.makeSnapshot) {
    let snap: SnapshotFile | undefined;
    try {
      snap = openSnapshot(init.snapshot);
      const py = await loadPyodideWith(init, module, snap, {});
      return { py, restored: true };
    } catch (e) {
      // A stale or damaged snapshot must not take the service down: a plain
      // load is slower but always works.
      console.error(`snapshot restore failed, loading plainly: ${e}`);
    } finally {
      snap?.file.close();
    }
  }
  const py = await loadPyodideWith(init, module, undefined, { _makeSnapshot: init.makeSnapshot });
  // The runner's modules go into the snapshot, so restored workers skip this.
  installModules(py);
  return { py, restored: false };
}

/**
 * Makes the memory snapshot: after a throwaway run and install (the code
 * paths and imports of a run and of an install are then part of the
 * snapshot, and every call skips their first-use costs), it reports ready,
 * takes the packages that install frames bring, and on the snapshot frame
 * imports the modules it names and sends the snapshot. Those modules are
 * then loaded in every interpreter restored from it; the files of their
 * packages, which live outside the wasm memory, are installed again there.
 */
export async function snapshot(py: PyodideAPI) {
  const python = await py.runPythonAsync(`import _mcp_runner, platform
_mcp_runner.warm_install()
await _mcp_runner.run("import asyncio\\nawait asyncio.sleep(0)\\n1 + 1")
platform.python_version()`);
  send(JSON.stringify({ type: "ready", python }));
  let incoming: Incoming | null = null;
  self.onmessage = async (e: MessageEvent<string | Uint8Array>) => {
    if (e.data instanceof Uint8Array) {
      if (!incoming) return fatal("a binary frame arrived unannounced");
      try {
        if (!incoming.add(e.data)) return;
      } catch (e) {
        return fatal((e as Error).message);
      }
    } else {
      const msg = JSON.parse(e.data);
      if (msg.type === "snapshot") {
        try {
          // Best effort: a call that imports a module that failed sees why.
          py.runPython(`def _mcp_import(names):
    import importlib
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:
            pass
_mcp_import(${JSON.stringify(msg.names ?? [])})
del _mcp_import`);
          return send(py.makeMemorySnapshot());
        } catch (e) {
          return fatal(e);
        }
      }
      if (msg.type !== "install") return fatal(`unexpected frame ${msg.type}`);
      incoming = new Incoming("install", msg.files ?? [], []);
      if (!incoming.complete) return;
    }
    const { files, data } = incoming!;
    incoming = null;
    send(await install(py, files, data));
  };
}
