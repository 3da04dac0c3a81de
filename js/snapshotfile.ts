// The snapshot file (supervisor/internal/runtimefiles/snapshotfile.go says its format): its head
// checked, and its pages restored into a fresh instance's memory.

/**
 * A snapshot file, its head read and checked (supervisor/internal/runtimefiles/snapshotfile.go
 * says its format): Pyodide's header, and the runs of non-zero pages of the
 * wasm memory, whose bytes follow in the file.
 */
export interface SnapshotFile {
  file: Deno.FsFile;
  /** Pyodide's own header: its magic, build id and JSON, which it checks. */
  header: Uint8Array;
  /** Bytes of the wasm memory the snapshot holds. */
  memory: number;
  /** The runs, as [start, end) byte offsets in the memory, in order. */
  runs: [number, number][];
}

/** Reads into all of bytes from file, or throws. */
export function readFull(file: Deno.FsFile, bytes: Uint8Array): Uint8Array {
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
export function openSnapshot(path: string): SnapshotFile {
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
export const nonZero = Uint8Array.of(
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
export function restorePages(snap: SnapshotFile, memory: WebAssembly.Memory, brk: number) {
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
