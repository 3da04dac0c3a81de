// How the runner sends frames to the supervisor: through its parent,
// worker.ts, which reads each frame's type and passes it on unchanged.

/// <reference lib="deno.worker" />

/** Sends a frame: a string is a JSON frame, a Uint8Array a binary one, its buffer given away. */
export const send = (frame: string | Uint8Array) =>
  frame instanceof Uint8Array
    ? self.postMessage(frame, [frame.buffer as ArrayBuffer])
    : self.postMessage(frame);

/** Explains an error that ended the interpreter. */
// deno-lint-ignore no-explicit-any
export const describe = (e: any): string =>
  e?.name === "Exit" ? `the interpreter exited with status ${e.status}` : String(e);

/** Tells the supervisor the runner cannot go on, and ends it. */
export const fatal = (error: unknown) => {
  send(JSON.stringify({ type: "fatal", error: String(error) }));
  self.close();
};
