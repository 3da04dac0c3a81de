// Packages: wheels installed into the interpreter, and compiled to bytecode
// by a compile worker.

import type { PyodideAPI } from "pyodide";
import { send } from "./frames.ts";
import type { PackageFile } from "./files.ts";
import type { PyRunner } from "./run.ts";

/**
 * Answers a compile frame: the compiled frame, then the archive of the
 * wheel's bytecode that bytecode.py's compile_wheel made (see there). When
 * compiling a module ends the interpreter, the error names that module.
 */
export function compileWheel(
  runner: PyRunner,
  files: PackageFile[],
  data: Uint8Array[],
  limit: number,
  skip: string[],
) {
  if (files.length !== 1) {
    return send(JSON.stringify({ type: "compiled", error: "a compile frame names one wheel" }));
  }
  let frame: string;
  let archive: Uint8Array | undefined;
  const state = {
    module: "",
    /** The module whose compile begins, or "" as it ends: see compile_wheel. */
    compiling(module: string) {
      state.module = module;
      send(JSON.stringify({ type: "compiling", module }));
    },
  };
  try {
    const made = runner.compile_wheel(data[0], files[0].install_dir ?? "", limit, skip, state);
    try {
      [frame, archive] = made.toJs();
    } finally {
      made.destroy();
    }
  } catch (e) {
    const names = state.module ? [state.module] : [];
    return send(JSON.stringify({ type: "compiled", error: String(e), names }));
  }
  send(frame);
  if (archive) send(archive);
}

/** The part of Pyodide's private API that installs a package from bytes. */
export interface Installer {
  install(
    data: Uint8Array,
    filename: string,
    dir: string,
    metadata: Map<string, string>,
  ): Promise<void>;
  package_loader: { get_install_dir(target?: string): string };
}

/**
 * Installs package files, in order, with the installer Pyodide's own
 * loadPackage uses: it unpacks into the lock file's install directory and
 * loads shared libraries, which unpackArchive does not. The bytes need no
 * file permission.
 */
export async function install(
  py: PyodideAPI,
  files: PackageFile[],
  data: Uint8Array[],
): Promise<string> {
  const api = (py as unknown as { _api: Installer })._api;
  const metadata = new Map([["INSTALLER", "mcp-run-python"]]);
  try {
    for (const [i, file] of files.entries()) {
      await api.install(
        data[i],
        file.name,
        api.package_loader.get_install_dir(file.install_dir),
        metadata,
      );
    }
    py.runPython("import importlib; importlib.invalidate_caches()");
    return JSON.stringify({ type: "installed" });
  } catch (e) {
    return JSON.stringify({ type: "installed", error: String(e) });
  }
}
