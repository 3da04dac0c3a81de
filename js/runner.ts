// The runner: a Web Worker that owns the Pyodide interpreter. This module
// is its dispatcher: it boots the interpreter (boot.ts), keeps it warm, and
// answers the supervisor's frames with the parts that do the work: a call's
// run (run.ts), its files (files.ts), its output (output.ts) and packages
// (packages.ts).
//
// It speaks the bridge protocol (bridge/protocol.go) through its parent,
// worker.ts. The parent passes the runner's frames on unread: strings are
// JSON frames, Uint8Arrays the memory snapshot and compiled bytecode. Of
// the supervisor's, it reads each JSON frame's type: it answers a ping for
// a runner that rehearsed lately, sets the interrupt buffer for an
// interrupt, and replaces the runner for a recycle; the rest, and every
// binary frame, it passes on unchanged. Python runs here, off the parent's
// thread, so the parent stays free to stream output while code runs.

/// <reference lib="deno.worker" />

import { load, snapshot } from "./boot.ts";
import { Incoming, put, type Scan, scanAll } from "./files.ts";
import { describe, fatal, send } from "./frames.ts";
import { Budget, LineSplitter } from "./output.ts";
import { compileWheel, install } from "./packages.ts";
import { FetchAborts, type PyRunner, Replies, run, type RunFrame } from "./run.ts";

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
   * encode.py's cut_text); 0 for no limit.
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
  const out = new LineSplitter("stdout", budget, send);
  const err = new LineSplitter("stderr", budget, send);
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

  // Tool calls of the code (code mode) and its rounds of questions go out
  // as frames and their answers come back during the run: see
  // bridge.ToolCall and bridge.AskFrame. ask.py sends a round's questions
  // as JSON, spliced in unparsed.
  const toolCalls = new Replies();
  py.registerJsModule("_mcp_tools_bridge", {
    call: (server: string, tool: string, args: string) =>
      toolCalls.request((id) =>
        JSON.stringify({ type: "tool_call", id, server, tool, args: JSON.parse(args) })
      ),
  });
  const asks = new Replies();
  py.registerJsModule("_mcp_ask_bridge", {
    ask: (questions: string) =>
      asks.request((id) => `{"type":"ask","id":${id},"questions":${questions}}`),
  });
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
      let complete: boolean;
      try {
        complete = incoming.add(e.data);
      } catch (e) {
        return fatal((e as Error).message);
      }
      if (complete) await receive();
      return;
    }
    const msg = JSON.parse(e.data);
    if (msg.type === "tool_result") return toolCalls.settle(msg.id, e.data);
    if (msg.type === "answer") return asks.settle(msg.id, e.data);
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
