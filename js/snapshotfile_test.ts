import { deepStrictEqual, match, throws } from "node:assert/strict";
import { openSnapshot, restorePages } from "./snapshotfile.ts";

/** The parts of a snapshot file's head (supervisor/internal/runtimefiles/snapshotfile.go), each one a test may spoil. */
interface Head {
  magic?: string;
  version?: number;
  page?: number;
  memory: number;
  /** [first page, pages] */
  runs: [number, number][];
  header: Uint8Array;
}

/** A snapshot file's bytes: head, then each run's bytes from memory. */
function encode(h: Head, memory: Uint8Array, cut = 0): Uint8Array {
  const head = new DataView(new ArrayBuffer(32 + 8 * h.runs.length));
  new Uint8Array(head.buffer).set(new TextEncoder().encode(h.magic ?? "mrpysnap"));
  head.setUint32(8, h.version ?? 1, true);
  head.setUint32(12, h.page ?? 4096, true);
  head.setUint32(16, h.header.length, true);
  head.setUint32(20, h.runs.length, true);
  head.setBigUint64(24, BigInt(h.memory), true);
  const parts = [new Uint8Array(head.buffer), h.header];
  for (const [i, [first, n]] of h.runs.entries()) {
    head.setUint32(32 + 8 * i, first, true);
    head.setUint32(36 + 8 * i, n, true);
    parts.push(memory.subarray(first * 4096, Math.min((first + n) * 4096, h.memory)));
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all.subarray(0, all.length - cut);
}

/** Calls f with the path of a temporary file of bytes, removed after. */
function withFile<T>(bytes: Uint8Array, f: (path: string) => T): T {
  const path = Deno.makeTempFileSync({ prefix: "snapshot-test-" });
  try {
    Deno.writeFileSync(path, bytes);
    return f(path);
  } finally {
    Deno.removeSync(path);
  }
}

/** Three pages of memory, the middle one zero: two runs. */
function sample(): { head: Head; memory: Uint8Array } {
  const memory = new Uint8Array(3 * 4096);
  for (let i = 0; i < 4096; i++) {
    memory[i] = i % 251 + 1;
    memory[2 * 4096 + i] = i % 13 + 1;
  }
  const head = { memory: memory.length, runs: [[0, 1], [2, 1]] as [number, number][] };
  return { head: { ...head, header: new TextEncoder().encode("pyodide header") }, memory };
}

Deno.test("openSnapshot reads a good head", () => {
  const { head, memory } = sample();
  const snap = withFile(encode(head, memory), (path) => {
    const snap = openSnapshot(path);
    snap.file.close(); // before the file is removed, which Windows refuses for an open file
    return snap;
  });
  deepStrictEqual(snap.header, head.header);
  deepStrictEqual(snap.memory, 3 * 4096);
  deepStrictEqual(snap.runs, [[0, 4096], [8192, 12288]]);
});

Deno.test("openSnapshot refuses what is not a snapshot of this format", async (t) => {
  const { head, memory } = sample();
  const tests: { name: string; bytes: Uint8Array; error: RegExp }[] = [
    {
      name: "another magic",
      bytes: encode({ ...head, magic: "pyodide!" }, memory),
      error: /no mrpysnap/,
    },
    { name: "another version", bytes: encode({ ...head, version: 2 }, memory), error: /version 2/ },
    { name: "another page size", bytes: encode({ ...head, page: 65536 }, memory), error: /pages/ },
    { name: "cut short", bytes: encode(head, memory, 1), error: /bytes where its head says/ },
    {
      name: "a byte too many",
      bytes: new Uint8Array([...encode(head, memory), 0]),
      error: /bytes where its head says/,
    },
    {
      name: "shorter than a head",
      bytes: encode(head, memory).subarray(0, 20),
      error: /ends early/,
    },
    {
      name: "runs out of order",
      bytes: encode({ ...head, runs: [[2, 1], [0, 1]] }, memory),
      error: /run 1 out of place/,
    },
    {
      name: "an empty run",
      bytes: encode({ ...head, runs: [[0, 0], [2, 1]] }, memory),
      error: /run 0 out of place/,
    },
    {
      name: "a run past the memory",
      bytes: encode({ ...head, memory: 2 * 4096, runs: [[0, 1], [2, 1]] }, memory),
      error: /run 1 out of place|does not fit/,
    },
    {
      name: "more runs than pages",
      bytes: encode({ ...head, memory: 4096, runs: [[0, 1], [2, 1]] }, memory),
      error: /does not fit/,
    },
    {
      name: "a memory past 4 GiB",
      bytes: encode({ ...head, memory: 2 ** 32 + 4096 }, memory),
      error: /does not fit/,
    },
  ];
  for (const tt of tests) {
    await t.step(tt.name, () => {
      withFile(tt.bytes, (path) =>
        throws(() => openSnapshot(path), (e: Error) => {
          match(e.message, /is not a snapshot of this format|ends early/);
          match(e.message, tt.error);
          return true;
        }));
    });
  }
});

Deno.test("restorePages leaves the memory as the snapshot had it", async (t) => {
  const { head, memory } = sample();
  // The memory restored into is larger, as a fresh instance's is.
  const tests: { name: string; brk: number; dirty: number[]; want: (m: Uint8Array) => void }[] = [
    {
      name: "fresh memory",
      brk: 3 * 4096,
      dirty: [],
      want: (m) => deepStrictEqual(m.subarray(0, 3 * 4096), memory),
    },
    {
      name: "bytes below the break the snapshot has as zero are cleared",
      brk: 3 * 4096,
      dirty: [4096, 4096 + 4095, 3 * 4096 - 1],
      want: (m) => deepStrictEqual(m.subarray(0, 3 * 4096), memory),
    },
    {
      name: "bytes above the break are left alone",
      brk: 4096,
      dirty: [4096 + 17],
      want: (m) => {
        deepStrictEqual(m.subarray(0, 4096), memory.subarray(0, 4096));
        deepStrictEqual(m[4096 + 17], 0xee);
        deepStrictEqual(m.subarray(2 * 4096, 3 * 4096), memory.subarray(2 * 4096));
      },
    },
  ];
  for (const tt of tests) {
    await t.step(tt.name, () => {
      const wasm = new WebAssembly.Memory({ initial: 1 });
      const heap = new Uint8Array(wasm.buffer);
      for (const at of tt.dirty) heap[at] = 0xee;
      withFile(encode(head, memory), (path) => {
        const snap = openSnapshot(path);
        try {
          restorePages(snap, wasm, tt.brk);
        } finally {
          snap.file.close();
        }
      });
      tt.want(new Uint8Array(wasm.buffer));
    });
  }
});
