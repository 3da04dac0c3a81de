// One call's run: the code, its tool calls and fetches, and its outcome
// sent back.

import type { PyodideAPI } from "pyodide";
import { describe, send } from "./frames.ts";
import { type Scan, scanAll, sendFiles } from "./files.ts";
import type { Budget, LineSplitter } from "./output.ts";
import type { Init } from "./runner.ts";

/**
 * The requests of the running code that wait for the supervisor's answer:
 * its tool calls (tool_call frames, answered by tool_result) and its rounds
 * of questions (ask frames, answered by answer). The answer is the frame as
 * sent: tools.py and ask.py read it.
 */
export class Replies {
  private waiting = new Map<number, (frame: string) => void>();
  private last = 0;

  constructor(private post: (frame: string) => void = send) {}

  /** Sends the frame of a new id, made by frame, and waits for its answer. */
  request(frame: (id: number) => string): Promise<string> {
    return new Promise((resolve) => {
      const id = ++this.last;
      this.waiting.set(id, resolve);
      this.post(frame(id));
    });
  }

  /** Answers request id; an answer to no request (a stale one, after an interrupt) is dropped. */
  settle(id: number, frame: string) {
    this.waiting.get(id)?.(frame);
    this.waiting.delete(id);
  }
}

/** runner.py's run: a result frame, or a coroutine's awaitable for top-level await. */
export type PyRun = (
  code: string,
  limit: number,
  errorLimit: number,
  globals: unknown,
  keep: boolean,
  ask?: string,
) => string | Promise<string>;

/** The runner's Python modules, as this thread calls them: runner.py's. */
export interface PyRunner {
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
export interface RunFrame {
  code: string;
  /** Values of globals set before the code runs. */
  globals?: Record<string, unknown>;
  /** Directories whose changed files are sent back after the run. */
  watch?: string[];
  /** Bytes of changed files sent back; past it files are listed only. */
  files_limit?: number;
  /** The tools the code may call: tools.py makes the mcp_tools module of them. */
  tools?: unknown[];
  /** What the code may ask, and the limits: see bridge.AskSpec and ask.py. */
  ask?: Record<string, unknown>;
}

/**
 * Runs one call's code and sends its outcome with post: files, then the
 * result (a rehearsal's post drops them). Returns the watched files as sent
 * back, for a session's next run to start from: what its code did between
 * runs goes back with that run, a file it removed once a run had ended
 * included.
 */
export async function run(
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
    // (fetch.py's _fetch), and urllib3's Emscripten backend wants it. The
    // promise adopts a coroutine's for top-level await.
    result = await runner.run.callPromising(
      msg.code ?? "", // Go leaves an empty field out
      init.outputLimit ?? 0,
      init.errorLimit ?? 0,
      globals,
      !!init.session,
      msg.ask ? JSON.stringify(msg.ask) : undefined,
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
 * a fetch (run_sync, as urllib3 and fetch.py's http.client do, or an
 * await) runs no bytecode, so Pyodide never looks at the interrupt buffer:
 * it would be killed with its worker after the grace, however long the
 * server takes. While a call runs, every fetch of this thread gets its
 * signal, aborted within 50 ms of an interrupt; Python then takes the
 * interrupt as it resumes.
 */
export class FetchAborts {
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
