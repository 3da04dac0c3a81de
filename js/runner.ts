// The runner: a Web Worker that owns the Pyodide interpreter.
//
// It speaks the bridge protocol (bridge/protocol.go) through its parent,
// worker.ts, which relays every frame unchanged: strings are JSON frames,
// Uint8Arrays are the memory snapshot. Python runs here, off the parent's
// thread, so the parent stays free to stream output while code runs.

/// <reference lib="deno.worker" />

import type { PyodideAPI, PyodideConfig } from "pyodide";
import runnerSource from "./runner.py" with { type: "text" };

/** What the parent tells the runner before anything else. */
export interface Init {
  type: "init";
  /** Directory of the pyodide npm package, symlinks resolved. */
  pyodide: string;
  /** Memory snapshot to restore; absent for a plain load. */
  snapshot?: string;
  /**
   * Compile Pyodide's module, send a standby frame and wait for a restore
   * frame before making the interpreter: what a standby worker holds at
   * rest is a fraction of an interpreter's memory, and its restore a
   * fraction of a start.
   */
  lazy?: boolean;
  /** Load plainly, then send a snapshot instead of serving a run. */
  makeSnapshot?: boolean;
  /**
   * Bytes of output a run may send, and bytes of its return value (cut by
   * runner.py's cut_text); 0 for no limit.
   */
  outputLimit?: number;
  /** Bytes of a run's error text; 0 for no limit. */
  errorLimit?: number;
  /**
   * Serve runs until the supervisor retires the worker, keeping the
   * interpreter's state between them: a session. Otherwise one run.
   */
  session?: boolean;
  /** Set by the parent to interrupt the running code; see worker.ts. */
  interrupt?: Int32Array;
  /**
   * Where this runner writes the time (Date.now()) of each keep-warm
   * rehearsal, which the parent reads to answer pings for it: see worker.ts.
   */
  beat?: BigInt64Array;
  /** The directories whose changes a run sends back: its run frame's watch. */
  watch?: string[];
  /**
   * Pyodide's wasm module, compiled once by the parent for every runner it
   * starts (see worker.ts): a runner on standby holds it, so that its restore
   * is only the instantiation and the snapshot's copy.
   */
  module: WebAssembly.Module;
}

type Stream = "stdout" | "stderr";

const send = (frame: string | Uint8Array) =>
  frame instanceof Uint8Array
    ? self.postMessage(frame, [frame.buffer as ArrayBuffer])
    : self.postMessage(frame);

/** Explains an error that ended the interpreter. */
// deno-lint-ignore no-explicit-any
const describe = (e: any): string =>
  e?.name === "Exit" ? `the interpreter exited with status ${e.status}` : String(e);

const fatal = (error: unknown) => {
  send(JSON.stringify({ type: "fatal", error: String(error) }));
  self.close();
};

/**
 * The output a call may still print, in bytes. Past it, output is counted,
 * not kept or sent: an output bomb costs the bridge nothing.
 */
class Budget {
  dropped = 0;
  constructor(public remaining: number) {}
}

/** Splits one stream's bytes into lines, keeping an unfinished last line. */
class LineSplitter {
  private decoder = new TextDecoder();
  private encoder = new TextEncoder();
  private partial = "";

  constructor(private stream: Stream, private budget: Budget) {}

  write(bytes: Uint8Array): number {
    if (this.budget.remaining < 0) {
      this.budget.dropped += bytes.length;
      return bytes.length;
    }
    const text = this.partial + this.decoder.decode(bytes, { stream: true });
    const lines = text.split("\n");
    this.partial = lines.pop()!;
    this.emit(lines);
    if (this.partial.length > this.budget.remaining) this.exhaust([]); // a line too long to ever fit
    return bytes.length;
  }

  flush() {
    const rest = this.partial + this.decoder.decode();
    this.partial = "";
    if (rest) this.emit([rest]);
  }

  private emit(lines: string[]) {
    const budget = this.budget;
    let kept = 0;
    for (; kept < lines.length; kept++) {
      const size = this.encoder.encode(lines[kept]).length + 1;
      if (size > budget.remaining) break;
      budget.remaining -= size;
    }
    if (kept > 0) {
      send(JSON.stringify({ type: "output", stream: this.stream, lines: lines.slice(0, kept) }));
    }
    if (kept < lines.length) this.exhaust(lines.slice(kept));
  }

  /** Counts lines that do not fit, and the unfinished one, as dropped: the budget is spent. */
  private exhaust(lines: string[]) {
    for (const l of lines) this.budget.dropped += this.encoder.encode(l).length + 1;
    this.budget.dropped += this.encoder.encode(this.partial).length;
    this.partial = "";
    this.budget.remaining = -1;
  }
}

/** Emscripten's settings, as Pyodide hands them to createPyodideModule. */
type Settings = Parameters<NonNullable<PyodideConfig["createPyodideModule"]>>[0];

/**
 * A snapshot file, its head read and checked (supervisor/snapshotfile.go
 * says its format): Pyodide's header, and the runs of non-zero pages of the
 * wasm memory, whose bytes follow in the file.
 */
interface SnapshotFile {
  file: Deno.FsFile;
  /** Pyodide's own header: its magic, build id and JSON, which it checks. */
  header: Uint8Array;
  /** Bytes of the wasm memory the snapshot holds. */
  memory: number;
  /** The runs, as [start, end) byte offsets in the memory, in order. */
  runs: [number, number][];
}

/** Reads into all of bytes from file, or throws. */
function readFull(file: Deno.FsFile, bytes: Uint8Array): Uint8Array {
  for (let at = 0; at < bytes.length;) {
    const n = file.readSync(bytes.subarray(at));
    if (!n) throw new Error("the snapshot file ends early");
    at += n;
  }
  return bytes;
}

/**
 * Opens the snapshot file at path and reads its head, checked as
 * snapshotfile.go's readSnapshotLayout checks it: a file of another format
 * (an older version's) or one cut short throws, and the worker loads
 * plainly while the supervisor makes the snapshot again.
 */
function openSnapshot(path: string): SnapshotFile {
  const file = Deno.openSync(path);
  try {
    const size = file.statSync().size;
    const head = new DataView(readFull(file, new Uint8Array(32)).buffer);
    const magic = new TextDecoder().decode(head.buffer.slice(0, 8));
    const bad = (why: string) => new Error(`${path} is not a snapshot of this format: ${why}`);
    if (magic !== "mrpysnap") throw bad("no mrpysnap at its start");
    if (head.getUint32(8, true) !== 1) throw bad(`version ${head.getUint32(8, true)}, not 1`);
    const page = head.getUint32(12, true);
    if (page !== 4096) throw bad(`pages of ${page} bytes`);
    const prefix = head.getUint32(16, true), count = head.getUint32(20, true);
    const memory = Number(head.getBigUint64(24, true));
    const pages = Math.ceil(memory / page);
    let total = 32 + 8 * count + prefix;
    if (memory > 2 ** 32 || count > pages || total > size) throw bad("its head does not fit it");
    const table = new DataView(readFull(file, new Uint8Array(8 * count)).buffer);
    const runs: [number, number][] = [];
    for (let i = 0, next = 0; i < count; i++) {
      const first = table.getUint32(8 * i, true), n = table.getUint32(8 * i + 4, true);
      if (n === 0 || first < next || first + n > pages) throw bad(`run ${i} out of place`);
      next = first + n;
      runs.push([first * page, Math.min(next * page, memory)]);
      total += runs[i][1] - runs[i][0];
    }
    if (total !== size) throw bad(`${size} bytes where its head says ${total}`);
    return { file, header: readFull(file, new Uint8Array(prefix)), memory, runs };
  } catch (e) {
    file.close();
    throw e;
  }
}

/**
 * Whether any byte of memory in [from, to) is not zero, to - from a
 * positive multiple of 16: 16 bytes at a time, four times as fast as the
 * loop in JavaScript (2 ms for the 10 MiB of a fresh instance's stack that
 * a snapshot has as zero, against 4-7). The module, in the text format:
 *
 *   (module (import "e" "m" (memory 0))
 *     (func (export "z") (param $from i32) (param $to i32) (result i32)
 *       (local $any v128)
 *       (loop
 *         (local.set $any (v128.or (local.get $any) (v128.load (local.get $from))))
 *         (br_if 0 (i32.lt_u
 *           (local.tee $from (i32.add (local.get $from) (i32.const 16))) (local.get $to))))
 *       (v128.any_true (local.get $any))))
 */
const nonZero = Uint8Array.of(
  ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // magic, version
  ...[0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f], // types: (i32, i32) -> i32
  ...[0x02, 0x08, 0x01, 0x01, 0x65, 0x01, 0x6d, 0x02, 0x00, 0x00], // imports: e.m, a memory
  ...[0x03, 0x02, 0x01, 0x00], // functions: one of type 0
  ...[0x07, 0x05, 0x01, 0x01, 0x7a, 0x00, 0x00], // exports: z, function 0
  ...[0x0a, 0x25, 0x01, 0x23, 0x01, 0x01, 0x7b], // code: one body, a v128 local
  ...[0x03, 0x40], // loop
  ...[0x20, 0x02, 0x20, 0x00, 0xfd, 0x00, 0x04, 0x00, 0xfd, 0x50, 0x21, 0x02],
  ...[0x20, 0x00, 0x41, 0x10, 0x6a, 0x22, 0x00, 0x20, 0x01, 0x49, 0x0d, 0x00],
  ...[0x0b, 0x20, 0x02, 0xfd, 0x53, 0x0b], // end; v128.any_true; end
);

/**
 * Writes the snapshot's memory into memory, the fresh instance's: each run
 * is read from the file straight into place, with no buffer of the file
 * and no copy (Pyodide's own restore copied the whole memory from one).
 * Fresh wasm memory is zero, and nothing writes above the break (brk,
 * where malloc's heap ends) before the restore; below it, a page that the
 * snapshot has as zero is cleared where it is not zero already. It is read
 * rather than cleared: most of them are the unused part of the 10 MiB
 * stack, and a page never written stays out of the process's memory.
 */
function restorePages(snap: SnapshotFile, memory: WebAssembly.Memory, brk: number) {
  const heap = new Uint8Array(memory.buffer);
  const scan = new WebAssembly.Module(nonZero); // a fifth of a millisecond
  const { z } = new WebAssembly.Instance(scan, { e: { m: memory } }).exports as {
    z: (from: number, to: number) => number;
  };
  const dirty = (from: number, to: number) => {
    const whole = to - (to - from) % 16; // a memory's length is a multiple of 64 KiB
    return (whole > from && z(from, whole) !== 0) || heap.subarray(whole, to).some((b) => b !== 0);
  };
  const clear = (from: number, to: number) => {
    to = Math.min(to, Math.ceil(brk / 4096) * 4096);
    if (from >= to || !dirty(from, to)) return;
    for (let page = from; page < to; page += 4096) {
      const end = Math.min(page + 4096, to);
      if (dirty(page, end)) heap.fill(0, page, end);
    }
  };
  let end = 0;
  for (const [start, stop] of snap.runs) {
    clear(end, start);
    readFull(snap.file, heap.subarray(start, stop));
    end = stop;
  }
  clear(end, snap.memory);
}

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
async function loadPyodideWith(
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

async function load(
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
  // The runner module goes into the snapshot, so restored workers skip this.
  py.globals.set("_mcp_source", runnerSource);
  py.runPython(`
import sys, types
_m = types.ModuleType("_mcp_runner")
exec(compile(_mcp_source, "<mcp-run-python>", "exec"), _m.__dict__)
sys.modules["_mcp_runner"] = _m
del _m, _mcp_source
`);
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
async function snapshot(py: PyodideAPI) {
  const python = await py.runPythonAsync(`import _mcp_runner, platform
_mcp_runner.warm_install()
await _mcp_runner.run("import asyncio\\nawait asyncio.sleep(0)\\n1 + 1")
platform.python_version()`);
  send(JSON.stringify({ type: "ready", python }));
  let incoming: Incoming | null = null;
  self.onmessage = async (e: MessageEvent<string | Uint8Array>) => {
    if (e.data instanceof Uint8Array) {
      if (!incoming) return fatal("a binary frame arrived unannounced");
      if (!incoming.add(e.data)) return;
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

/** Waits for the supervisor's restore frame: see Init.lazy. */
const restoreAsked = () =>
  new Promise<void>((resolve) => {
    self.onmessage = (e: MessageEvent<string | Uint8Array>) => {
      const type = typeof e.data === "string" ? JSON.parse(e.data).type : "binary";
      if (type !== "restore") return fatal(`unexpected frame ${type} on standby`);
      self.onmessage = null;
      resolve();
    };
  });

async function serve(init: Init) {
  // Before the interpreter exists, so that what it looks up is the wrapper.
  const aborts = new FetchAborts();
  const module = init.module;
  if (init.lazy) {
    send('{"type":"standby"}');
    await restoreAsked();
  }
  const { py, restored } = await load(init, module);
  if (init.makeSnapshot) return await snapshot(py);
  const budget = new Budget(init.outputLimit || Infinity);
  const out = new LineSplitter("stdout", budget);
  const err = new LineSplitter("stderr", budget);
  py.setStdout({ write: (b: Uint8Array) => out.write(b) });
  py.setStderr({ write: (b: Uint8Array) => err.write(b) });
  const runner: PyRunner = py.pyimport("_mcp_runner");
  // Restored or not, every interpreter gets random state of its own.
  runner.reseed();
  const python = py.runPython("import platform; platform.python_version()");
  // Every interpreter is a new V8 isolate, whose JavaScript (Pyodide's and
  // ours) runs slowly until it has run, and again once it has idled: a
  // `1+1` call's run took 4-6 ms in the runner 0.6 s after the last run,
  // 0.8 ms right after one (a bare evaluation every 250 ms, as before, kept
  // it at 4-6). So a throwaway call rehearses the paths of one before the
  // ready frame, where nobody waits, and every 250 ms until a call comes:
  // about 0.4% of a core. It goes through run() itself, with its frames
  // dropped, no interrupt buffer (one sent early waits for the real run)
  // and a namespace of its own: a warm call's own JavaScript, compiled and
  // run before, then took 0.45 ms less than when only Python was rehearsed.
  // It watches nothing: a big mount's scan every 250 ms would cost more
  // than it saves. A rehearsal may end well after it began: during an
  // install, one ended after the call's run had begun and took that run's
  // fetch aborts with it. So the next starts only once it has ended, the
  // call's run waits for it, and the beat (see worker.ts) says when one
  // ended.
  const drill = { ...init, interrupt: undefined, session: false };
  const drillFrame: RunFrame = { code: "1+1", watch: [] };
  let drilling: Promise<void> | undefined;
  const rehearse = () => {
    if (drilling) return;
    runner.imports("1+1", []);
    drilling = run(py, runner, drill, drillFrame, new Budget(Infinity), [], [], aborts, () => {})
      .then(() => {
        drilling = undefined;
        if (init.beat) Atomics.store(init.beat, 0, BigInt(Date.now()));
      }, fatal);
  };
  rehearse();
  send(JSON.stringify({ type: "ready", python, snapshot: restored }));
  const keepWarm = setInterval(rehearse, 250);

  // Tool calls of the code (code mode) go out as frames and their answers
  // come back during the run: see bridge.ToolCall.
  const toolCalls = new ToolCalls();
  py.registerJsModule("_mcp_tools_bridge", { call: toolCalls.call });
  // runner.py's SIGINT handler puts an interrupt it cannot take yet back.
  py.registerJsModule("_mcp_interrupt", {
    again: (signal: number) => init.interrupt && Atomics.store(init.interrupt, 0, signal),
  });

  // Before a run, a worker may be asked for the code's imports, given
  // wheels to install and files to put into its file system; the bytes
  // arrive as binary frames after the frame that announces them.
  let incoming: Incoming | null = null;
  // Of the compile frame whose wheel is arriving.
  let compileLimit = 0;
  let compileSkip: string[] = [];
  let running = false;
  let ran = false;
  // The watched files before the next run. A session's: as its last run
  // sent them back. A fresh interpreter's: scanned ahead while it waits for
  // its call, so that its run need not (0.2-0.3 ms of a warm call); an
  // install or a put may change them, and its run scans after all.
  let seen: Scan[] | undefined = init.session || !init.watch?.length
    ? undefined
    : scanAll(py, init.watch);
  self.onmessage = async (e: MessageEvent<string | Uint8Array>) => {
    if (e.data instanceof Uint8Array) {
      if (!incoming) return fatal("a binary frame arrived unannounced");
      if (incoming.add(e.data)) await receive();
      return;
    }
    const msg = JSON.parse(e.data);
    if (msg.type === "tool_result") return toolCalls.settle(msg.id, e.data);
    if (running) return fatal("a frame arrived during a run");
    if (ran) return; // one run: a fresh interpreter per call
    switch (msg.type) {
      case "ping": // relayed when the main thread cannot answer for this runner (worker.ts)
        return send('{"type":"pong"}');
      case "imports":
        return send(runner.imports(msg.code ?? "", msg.names ?? []));
      case "install":
      case "put":
        incoming = new Incoming(msg.type, msg.files ?? [], msg.dirs ?? [], msg.readonly ?? []);
        if (incoming.complete) await receive();
        return;
      case "compile": // only ever sent to a compile worker: see compileWheel
        compileLimit = msg.limit ?? 0;
        compileSkip = msg.names ?? [];
        incoming = new Incoming(msg.type, msg.files ?? [], []);
        if (incoming.complete) await receive();
        return;
      case "run":
        break;
      default:
        return fatal(`unexpected frame ${msg.type}`);
    }
    ran = !init.session;
    clearInterval(keepWarm);
    running = true;
    await drilling;
    const same = JSON.stringify(msg.watch ?? []) === JSON.stringify(init.watch ?? []);
    seen = await run(py, runner, init, msg, budget, [out, err], same ? seen : undefined, aborts);
    running = false;
  };
  const receive = async () => {
    const { type, files, dirs, readOnly, data } = incoming!;
    incoming = null;
    if (type === "compile") return compileWheel(runner, files, data, compileLimit, compileSkip);
    if (!init.session) seen = undefined;
    send(
      type === "install" ? await install(py, files, data) : put(py, dirs, readOnly, files, data),
    );
  };
}

/**
 * The files announced by an install or put frame, as their bytes arrive:
 * in chunks (bridge.ChunkSize), a file's before the next one's, each into
 * its own buffer of the announced size.
 */
class Incoming {
  readonly data: Uint8Array[];
  private file = 0;
  private offset = 0;

  constructor(
    readonly type: "install" | "put" | "compile",
    readonly files: PackageFile[],
    /** Directories a put makes, even when no file goes into them. */
    readonly dirs: string[],
    /** Those of dirs that the code may not change: read-only mounts. */
    readonly readOnly: string[] = [],
  ) {
    this.data = files.map((f) => new Uint8Array(f.size ?? 0));
    this.skipEmpty();
  }

  /** Every announced byte has arrived. */
  get complete(): boolean {
    return this.file >= this.files.length;
  }

  /** Takes the next chunk and reports whether every file is complete. */
  add(chunk: Uint8Array): boolean {
    const buf = this.data[this.file];
    if (!buf || this.offset + chunk.length > buf.length) {
      fatal("a binary frame beyond the files announced");
      return false;
    }
    buf.set(chunk, this.offset);
    this.offset += chunk.length;
    if (this.offset === buf.length) {
      this.file++;
      this.offset = 0;
      this.skipEmpty();
    }
    return this.complete;
  }

  private skipEmpty() {
    while (this.file < this.files.length && this.data[this.file].length === 0) this.file++;
  }
}

/**
 * The tool calls of the running code, waiting for their answers. The
 * answer of a call is its tool_result frame, as sent: runner.py reads it.
 */
class ToolCalls {
  private waiting = new Map<number, (frame: string) => void>();
  private last = 0;

  call = (server: string, tool: string, args: string): Promise<string> =>
    new Promise((resolve) => {
      const id = ++this.last;
      this.waiting.set(id, resolve);
      send(JSON.stringify({ type: "tool_call", id, server, tool, args: JSON.parse(args) }));
    });

  /** Answers call id; an answer to no call (a stale one, after an interrupt) is dropped. */
  settle(id: number, frame: string) {
    this.waiting.get(id)?.(frame);
    this.waiting.delete(id);
  }
}

/** runner.py's run: a result frame, or a coroutine's awaitable for top-level await. */
type PyRun = (
  code: string,
  limit: number,
  errorLimit: number,
  globals: unknown,
  keep: boolean,
) => string | Promise<string>;

/** runner.py, as this thread calls it. */
interface PyRunner {
  run: PyRun & { callPromising: (...args: Parameters<PyRun>) => Promise<string> };
  imports(code: string, hide: string[]): string;
  set_tools(spec: string): void;
  take_figures(): { length: number; toJs(): [string, Uint8Array][]; destroy(): void };
  reseed(): void;
  compile_wheel(
    data: Uint8Array,
    installDir: string,
    limit: number,
    skip: string[],
    state: { compiling(module: string): void },
  ): { toJs(): [string, Uint8Array | undefined]; destroy(): void };
}

/** A run frame; see bridge.RunFrame. */
interface RunFrame {
  code: string;
  /** Values of globals set before the code runs. */
  globals?: Record<string, unknown>;
  /** Directories whose changed files are sent back after the run. */
  watch?: string[];
  /** Bytes of changed files sent back; past it files are listed only. */
  files_limit?: number;
  /** The tools the code may call: runner.py makes the mcp_tools module of them. */
  tools?: unknown[];
}

/**
 * Runs one call's code and sends its outcome with post: files, then the
 * result (a rehearsal's post drops them). Returns the watched files as sent
 * back, for a session's next run to start from: what its code did between
 * runs goes back with that run, a file it removed once a run had ended
 * included.
 */
async function run(
  py: PyodideAPI,
  runner: PyRunner,
  init: Init,
  msg: RunFrame,
  budget: Budget,
  streams: LineSplitter[],
  seen: Scan[] | undefined,
  aborts: FetchAborts,
  post: (frame: string | Uint8Array) => void = send,
): Promise<Scan[]> {
  // Only now does Python watch the interrupt buffer. The time limit starts
  // with the call, so on a loaded machine an interrupt can overtake a late
  // run frame; it waits in the buffer for the run instead of being taken
  // by an idle evaluation. A session's earlier run may have left one there
  // after its result was sent: the supervisor sends an interrupt only
  // before the result it waits for, so what is in the buffer now is stale.
  if (init.interrupt) {
    if (init.session) Atomics.store(init.interrupt, 0, 0);
    py.setInterruptBuffer(init.interrupt);
  }
  if (msg.tools) runner.set_tools(JSON.stringify(msg.tools));
  const before = seen ?? scanAll(py, msg.watch ?? []);
  let sent = before;
  let result: string;
  let ended = false;
  const globals = msg.globals ? py.toPy(msg.globals) : undefined;
  // A rehearsal has none: it must leave the call's fetch aborts alone.
  if (init.interrupt) aborts.start(init.interrupt);
  try {
    // The return value is cut to the limit in Python, before the frame
    // exists: an oversized value never crosses to this thread or the
    // bridge. Entered through callPromising, where Python may block on a
    // promise (pyodide.ffi.run_sync, with JSPI): its HTTP clients fetch so
    // (runner.py's _fetch), and urllib3's Emscripten backend wants it. The
    // promise adopts a coroutine's for top-level await.
    result = await runner.run.callPromising(
      msg.code ?? "", // Go leaves an empty field out
      init.outputLimit ?? 0,
      init.errorLimit ?? 0,
      globals,
      !!init.session,
    );
  } catch (e) {
    // Only the interpreter's own end gets here (os._exit, a wasm trap):
    // Python exceptions are part of the result.
    result = JSON.stringify({ type: "fatal", error: describe(e) });
    ended = true;
  } finally {
    if (init.interrupt) aborts.stop();
  }
  for (const s of streams) s.flush();
  if (budget.dropped > 0) {
    post(JSON.stringify({ type: "output", stream: "stdout", dropped: budget.dropped }));
  }
  if (!ended) {
    globals?.destroy();
    try {
      sent = sendFiles(py, runner, before, msg, post);
    } catch (e) {
      // An interrupt that came as the files were gathered, or code that
      // broke the file system: the result still goes, without them.
      post(
        JSON.stringify({
          type: "output",
          stream: "stderr",
          lines: [`files could not be sent back: ${e}`],
        }),
      );
    }
    if (init.session) {
      // Between runs nothing may take an interrupt: no evaluation expects one.
      if (init.interrupt) py.setInterruptBuffer(undefined as unknown as Int32Array);
      budget.remaining = init.outputLimit || Infinity;
      budget.dropped = 0;
    }
  }
  post(result);
  return sent;
}

/**
 * Ends the code's fetches when its call is interrupted. Code that waits on
 * a fetch (run_sync, as urllib3 and runner.py's http.client do, or an
 * await) runs no bytecode, so Pyodide never looks at the interrupt buffer:
 * it would be killed with its worker after the grace, however long the
 * server takes. While a call runs, every fetch of this thread gets its
 * signal, aborted within 50 ms of an interrupt; Python then takes the
 * interrupt as it resumes.
 */
class FetchAborts {
  /** The running call's interrupt buffer; unset between calls. */
  private interrupt?: Int32Array;
  private controller?: AbortController;
  private poll?: ReturnType<typeof setInterval>;

  constructor() {
    const fetch = globalThis.fetch;
    globalThis.fetch = (input: RequestInfo | URL, options?: RequestInit) => {
      const signal = this.signal();
      if (!signal) return fetch(input, options);
      const own = options?.signal ?? (input instanceof Request ? input.signal : undefined);
      return fetch(input, { ...options, signal: own ? AbortSignal.any([own, signal]) : signal });
    };
  }

  start(interrupt: Int32Array) {
    this.interrupt = interrupt;
  }

  /**
   * The signal of the running call's fetches, made at its first fetch:
   * most calls make none, and a warm call is short enough for the cost of
   * a timer to show.
   */
  private signal(): AbortSignal | undefined {
    const interrupt = this.interrupt;
    if (!interrupt) return undefined;
    if (!this.controller) {
      const controller = this.controller = new AbortController();
      const check = () => {
        if (Atomics.load(interrupt, 0) !== 0) {
          controller.abort(new DOMException("the call was interrupted", "AbortError"));
        }
      };
      check();
      this.poll = setInterval(check, 50);
    }
    return this.controller.signal;
  }

  stop() {
    clearInterval(this.poll);
    this.interrupt = this.controller = this.poll = undefined;
  }
}

/** What a file looked like before the run, to tell what the run changed. */
type Stat = { size: number; mtime: number };

/** Most files looked at in one watched directory: a bound on the cost of a hostile tree. */
const maxScan = 10_000;

/** The regular files under a watched directory; cut when there were more than maxScan. */
interface Scan {
  dir: string;
  files: Map<string, Stat>;
  cut: boolean;
}

/**
 * The regular files under each watched directory. Symlinks are neither
 * followed nor reported: the host never gets one. __pycache__ is Python's
 * own and not reported either.
 */
function scanAll(py: PyodideAPI, dirs: string[]): Scan[] {
  if (dirs.length === 0) return []; // nothing watched (--files=false): no look at the file system
  const FS = py.FS;
  return dirs.map((d) => {
    const scan: Scan = { dir: d.replace(/\/+$/, ""), files: new Map(), cut: false };
    const walk = (dir: string) => {
      let names: string[];
      try {
        names = FS.readdir(dir);
      } catch {
        return; // not there (yet)
      }
      for (const name of names) {
        if (name === "." || name === ".." || name === "__pycache__") continue;
        if (scan.files.size >= maxScan) {
          scan.cut = true;
          return;
        }
        const path = `${dir}/${name}`;
        const st = FS.lstat(path);
        if (FS.isDir(st.mode)) walk(path);
        else if (FS.isFile(st.mode)) scan.files.set(path, { size: st.size, mtime: +st.mtime });
      }
    };
    walk(scan.dir);
    return scan;
  });
}

/** One entry of a files frame; see bridge.Change. */
interface Change {
  path: string;
  size?: number;
  deleted?: boolean;
  omitted?: boolean;
}

/**
 * Sends the files frame: the files the run created, changed or deleted in
 * the watched directories, and the figures it made; then the bytes of each
 * changed file within the limit and of each figure, in that order.
 * Returns the watched files it compared with before.
 */
function sendFiles(
  py: PyodideAPI,
  runner: PyRunner,
  before: Scan[],
  msg: RunFrame,
  post: (frame: string | Uint8Array) => void,
): Scan[] {
  const changes: Change[] = [];
  const data: Uint8Array[] = [];
  const after = scanAll(py, msg.watch ?? []);
  if (msg.watch?.length) {
    let left = msg.files_limit || Infinity;
    const was = (path: string) => before.find((b) => b.files.has(path))?.files.get(path);
    // Watched directories may nest: each file is reported once.
    const now = new Map(after.flatMap((a) => [...a.files]));
    for (const [path, st] of [...now].sort(([a], [b]) => a < b ? -1 : 1)) {
      const old = was(path);
      if (old && old.size === st.size && old.mtime === st.mtime) continue;
      if (st.size > left) {
        changes.push({ path, size: st.size, omitted: true });
        continue;
      }
      left -= st.size;
      changes.push({ path, size: st.size });
      data.push(py.FS.readFile(path));
    }
    const gone = new Set<string>();
    for (const [i, b] of before.entries()) {
      if (b.cut || after[i]!.cut) {
        // A file not seen may be past the cut rather than gone: deleting
        // it on the host would lose data the code never touched.
        post(JSON.stringify({
          type: "output",
          stream: "stderr",
          lines: [
            `[more than ${maxScan} files under ${b.dir}: only the first were looked at, and none there counts as deleted]`,
          ],
        }));
        continue;
      }
      for (const path of b.files.keys()) {
        if (!now.has(path) && !gone.has(path)) gone.add(path);
      }
    }
    for (const path of gone) changes.push({ path, deleted: true });
  }
  const figures: { mime_type: string; size: number }[] = [];
  const made = runner.take_figures();
  try {
    // Most runs make none, and converting even an empty list cost 0.4 ms
    // of a warm call: Pyodide's conversion runs cold in a fresh isolate.
    for (const [mime, bytes] of made.length > 0 ? made.toJs() : []) {
      figures.push({ mime_type: mime, size: bytes.length });
      data.push(bytes);
    }
  } finally {
    made.destroy();
  }
  if (changes.length === 0 && figures.length === 0) return after;
  post(JSON.stringify({ type: "files", changes, figures }));
  for (const d of data) post(d);
  return after;
}

/** Writes files the supervisor put, and leaves their times at 0 so that any write by the code shows. */
function put(
  py: PyodideAPI,
  dirs: string[],
  readOnly: string[],
  files: PackageFile[],
  data: Uint8Array[],
): string {
  const FS = py.FS;
  try {
    for (const dir of dirs) FS.mkdirTree(dir);
    for (const [i, file] of files.entries()) {
      const path = file.name;
      FS.mkdirTree(path.slice(0, path.lastIndexOf("/")) || "/");
      FS.writeFile(path, data[i]!);
      FS.utime(path, 0, 0);
    }
    const writable = dirs.filter((d) => !readOnly.includes(d));
    for (const dir of readOnly) protect(py, dir, writable);
    return JSON.stringify({ type: "put" });
  } catch (e) {
    return JSON.stringify({ type: "put", error: String(e) });
  }
}

/**
 * Makes the tree at dir read-only, but for the writable mounts in it: what
 * the code would change there raises OSError(EROFS) in Python, as on a
 * read-only mount, instead of vanishing (a read-only mount's changes never
 * go back to the host). Emscripten ignores permission bits, so each node's
 * operations refuse instead: creating, removing, renaming, opening for
 * writing, changing attributes; and a rename into the tree, which only the
 * source directory's operations see, is refused by a wrapper of FS.rename.
 */
function protect(py: PyodideAPI, dir: string, writable: string[]) {
  const FS = py.FS;
  const refuse = () => {
    throw new FS.ErrnoError(py.ERRNO_CODES.EROFS);
  };
  if (!FS.readOnlyDirs) {
    const dirs = new WeakSet();
    const rename = FS.rename;
    FS.rename = (from: string, to: string) => {
      if (dirs.has(FS.lookupPath(to, { parent: true }).node)) refuse();
      return rename(from, to);
    };
    FS.readOnlyDirs = dirs;
  }
  const walk = (path: string) => {
    const node = FS.lookupPath(path).node;
    if (FS.isDir(node.mode)) {
      FS.readOnlyDirs.add(node);
      node.node_ops = {
        ...node.node_ops,
        mknod: refuse,
        rename: refuse,
        unlink: refuse,
        rmdir: refuse,
        symlink: refuse,
        setattr: refuse,
      };
      for (const name of FS.readdir(path)) {
        const child = `${path}/${name}`;
        if (name !== "." && name !== ".." && !writable.includes(child)) walk(child);
      }
    } else if (FS.isFile(node.mode)) {
      const open = node.stream_ops.open;
      node.node_ops = { ...node.node_ops, setattr: refuse };
      node.stream_ops = {
        ...node.stream_ops,
        // O_WRONLY or O_RDWR: refused when opened, not at the first write.
        open: (stream: { flags: number }) => (stream.flags & 3 ? refuse() : open?.(stream)),
        write: refuse,
      };
    }
  };
  walk(dir);
}

/**
 * Answers a compile frame: the compiled frame, then the archive of the
 * wheel's bytecode that runner.py's compile_wheel made (see there). When
 * compiling a module ends the interpreter, the error names that module.
 */
function compileWheel(
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

/** A package file of an install frame; see bridge.File. */
interface PackageFile {
  name: string;
  install_dir?: string;
  /** Bytes; they follow in chunks. */
  size?: number;
}

/** The part of Pyodide's private API that installs a package from bytes. */
interface Installer {
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
async function install(py: PyodideAPI, files: PackageFile[], data: Uint8Array[]): Promise<string> {
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

// The interpreter's exit (os._exit) in async code surfaces only as an unhandled rejection,
// and the run's promise never settles: report it, or the call would hang.
// Anything else, such as a KeyboardInterrupt, is already part of a result.
self.addEventListener("unhandledrejection", (e: PromiseRejectionEvent) => {
  e.preventDefault();
  if (e.reason?.name === "Exit") {
    fatal(describe(e.reason));
  }
});

self.onmessage = (e: MessageEvent<Init>) => {
  self.onmessage = null;
  serve(e.data).catch(fatal);
};
