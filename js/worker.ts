// The worker process's main thread: the bridge between the Go supervisor and
// the runner (runner.ts), which runs Python in a Web Worker.
//
// The supervisor writes a Config as one line of JSON to stdin; the secret
// travels that way so it never shows in argv or the environment. This thread
// dials the supervisor's websocket, proves itself with the secret, then relays
// frames both ways. The runner's go to the supervisor unread. Of the
// supervisor's, each JSON frame is parsed for its type: this thread answers a
// ping for a runner that rehearsed lately, sets the interrupt buffer for an
// interrupt and replaces the runner for a recycle; every other frame, and
// every binary one, goes to the runner unchanged. The rest of the protocol
// lives in the runner (runner.ts) and bridge/protocol.go.
//
// The supervisor keeps stdin open for as long as it wants the worker, and the
// operating system closes it when the supervisor dies, however it dies: the
// end of stdin, like the end of the bridge connection, ends this process. That
// is the rule that leaves no worker behind on every platform
// (supervisor/proc).

import type { Init } from "./runner.ts";

/** Read from stdin; see supervisor/internal/worker/process.go. */
interface Config {
  /** One-time secret for the bridge's hello frame. */
  secret: string;
  /** The bridge's websocket URL: ws://127.0.0.1:PORT/, or a placeholder for `socket`. */
  bridge: string;
  /**
   * The Unix socket the bridge listens on, where deno has them. Only this
   * process may open it: the runner has no read or write permission on it.
   */
  socket?: string;
  /** Passed to the runner. */
  init: Init;
  /** The runner's permissions: never more than this process has. */
  permissions: Deno.PermissionOptionsObject;
}

const stdin = Deno.stdin.readable.pipeThrough(new TextDecoderStream()).getReader();
let head = "";
while (!head.includes("\n")) {
  const { value, done } = await stdin.read();
  if (done) Deno.exit(0); // the supervisor went away before it said anything
  head += value;
}
const config: Config = JSON.parse(head.slice(0, head.indexOf("\n")));
(async () => {
  while (!(await stdin.read()).done);
  Deno.exit(0);
})();

// Deno's WebSocket takes an HTTP client, whose proxy may be a Unix socket.
const ws = config.socket
  ? new WebSocket(config.bridge, {
    client: Deno.createHttpClient({ proxy: { transport: "unix", path: config.socket } }),
  })
  : new WebSocket(config.bridge);
ws.binaryType = "arraybuffer";
const opened = new Promise<void>((resolve, reject) => {
  ws.onopen = () => resolve();
  ws.onerror = () => reject(new Error(`cannot reach the bridge at ${config.bridge}`));
});

// Pyodide's wasm module, compiled once for every runner this process starts
// (WebAssembly.compile is about half of a runner's start), while the socket
// opens.
const module = WebAssembly.compile(Deno.readFileSync(`${config.init.pyodide}/pyodide.asm.wasm`));
const SIGINT = 2;

// Frames wait for the hello; promise callbacks keep them in order.
const hello = opened.then(() => ws.send(JSON.stringify({ type: "hello", secret: config.secret })));

/** A runner and what it shares with this thread. */
interface Runner {
  worker: Worker;
  /**
   * Pyodide checks it between bytecodes, so this thread can stop Python
   * code while the runner's thread is busy with it.
   */
  interrupt: Int32Array;
  /** When the runner last rehearsed a call: see answersPing. */
  beat: BigInt64Array;
}

/**
 * How recent a runner's last rehearsal must be for this thread to answer a
 * ping for it. A runner waiting for its call rehearses every 250 ms, and
 * nothing but our own code has run in it, so a recent one is alive. A
 * stopped process answers nothing either way. Relaying the ping instead
 * costs a warm call two more thread hops (0.5-0.7 ms of 3.4); a runner
 * whose rehearsals stopped (a session's, after its first run, or one
 * wedged) still gets it and must answer itself.
 */
const beatFresh = 1000;

/** Reports whether r rehearsed within beatFresh milliseconds. */
const answersPing = (r: Runner) => {
  const age = Date.now() - Number(Atomics.load(r.beat, 0));
  return age >= 0 && age < beatFresh; // a clock set back makes no runner fresh
};

/**
 * Starts a runner, with nothing of any runner before it: a new Worker is a
 * new V8 isolate, with its own globals, modules, timers and interpreter.
 * Only the current runner's frames are relayed: one ended may still have
 * posted some, which must not pass for the next one's.
 */
function start(): Runner {
  const worker = new Worker(new URL("./runner.ts", import.meta.url), {
    type: "module",
    // deno-lint-ignore no-explicit-any
    deno: { permissions: config.permissions } as any,
  });
  const r = {
    worker,
    interrupt: new Int32Array(new SharedArrayBuffer(4)),
    beat: new BigInt64Array(new SharedArrayBuffer(8)),
  };
  worker.onmessage = (e: MessageEvent<string | Uint8Array>) => {
    if (runner === r) hello.then(() => ws.send(e.data));
  };
  worker.onerror = (e: ErrorEvent) => {
    e.preventDefault();
    if (runner !== r) return;
    hello.then(() => {
      ws.send(JSON.stringify({ type: "fatal", error: `runner: ${e.message}` }));
      ws.close();
    });
  };
  module.then((m) =>
    worker.postMessage({ ...config.init, interrupt: r.interrupt, beat: r.beat, module: m })
  );
  return r;
}

let runner = start();

ws.onmessage = (e: MessageEvent<string | ArrayBuffer>) => {
  if (typeof e.data !== "string") {
    return runner.worker.postMessage(new Uint8Array(e.data), [e.data]); // a wheel
  }
  const msg = JSON.parse(e.data);
  switch (msg.type) {
    case "ping":
      if (!answersPing(runner)) return runner.worker.postMessage(e.data);
      return hello.then(() => ws.send('{"type":"pong"}'));
    case "interrupt":
      return Atomics.store(runner.interrupt, 0, SIGINT);
    case "recycle":
      // The runner's call is over: it ends, and a new one starts for the
      // next call. terminate() stops no busy loop and no Worker the runner
      // made: the supervisor counts this process's threads and kills it if
      // any such thread is left (supervisor/internal/worker/recycle.go). The nonce, which
      // no runner sees, marks where the old runner's frames end.
      runner.worker.terminate();
      runner = start();
      return ws.send(JSON.stringify({ type: "recycled", nonce: msg.nonce }));
    default:
      return runner.worker.postMessage(e.data);
  }
};
// The supervisor closes the socket to retire a worker; nothing outlives it.
ws.onclose = () => Deno.exit(0);
