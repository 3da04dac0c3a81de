import { deepStrictEqual, throws } from "node:assert/strict";
import { type Change, diff, Incoming, type Scan } from "./files.ts";

Deno.test("Incoming reassembles files from chunks", async (t) => {
  const bytes = (...b: number[]) => Uint8Array.from(b);
  const tests: {
    name: string;
    sizes: number[];
    chunks: Uint8Array[];
    /** What add reported for each chunk. */
    complete: boolean[];
    data: Uint8Array[];
  }[] = [
    {
      name: "one file in two chunks",
      sizes: [3],
      chunks: [bytes(1, 2), bytes(3)],
      complete: [false, true],
      data: [bytes(1, 2, 3)],
    },
    {
      name: "each file's chunks, in order",
      sizes: [2, 1],
      chunks: [bytes(1), bytes(2), bytes(3)],
      complete: [false, false, true],
      data: [bytes(1, 2), bytes(3)],
    },
    {
      name: "empty files take no chunk",
      sizes: [0, 2, 0, 1, 0],
      chunks: [bytes(1, 2), bytes(3)],
      complete: [false, true],
      data: [bytes(), bytes(1, 2), bytes(), bytes(3), bytes()],
    },
  ];
  for (const tt of tests) {
    await t.step(tt.name, () => {
      const files = tt.sizes.map((size, i) => ({ name: `f${i}`, size }));
      const incoming = new Incoming("put", files, []);
      deepStrictEqual(incoming.complete, false);
      deepStrictEqual(tt.chunks.map((c) => incoming.add(c)), tt.complete);
      deepStrictEqual(incoming.data, tt.data);
    });
  }
});

Deno.test("Incoming of no bytes is complete at once", () => {
  deepStrictEqual(new Incoming("put", [], ["/d"]).complete, true);
  deepStrictEqual(
    new Incoming("install", [{ name: "a" }, { name: "b", size: 0 }], []).complete,
    true,
  );
});

Deno.test("Incoming refuses bytes beyond the files announced", async (t) => {
  const tests: { name: string; sizes: number[]; chunks: number[] }[] = [
    { name: "a chunk across two files", sizes: [1, 1], chunks: [2] },
    { name: "a chunk past the last file", sizes: [1], chunks: [1, 1] },
    { name: "a chunk when no file has bytes", sizes: [0], chunks: [1] },
  ];
  for (const tt of tests) {
    await t.step(tt.name, () => {
      const incoming = new Incoming(
        "install",
        tt.sizes.map((size) => ({ name: "w.whl", size })),
        [],
      );
      const last = tt.chunks.pop()!;
      for (const n of tt.chunks) incoming.add(new Uint8Array(n));
      throws(() => incoming.add(new Uint8Array(last)), /beyond the files announced/);
    });
  }
});

/** A scan of dir: files as [path, size, mtime]. */
const scan = (dir: string, files: [string, number, number][], cut = false): Scan => ({
  dir,
  files: new Map(files.map(([p, size, mtime]) => [p, { size, mtime }])),
  cut,
});

Deno.test("diff", async (t) => {
  const tests: {
    name: string;
    before: Scan[];
    after: Scan[];
    limit?: number;
    changes: Change[];
    cut?: string[];
  }[] = [
    {
      name: "nothing changed",
      before: [scan("/w", [["/w/a", 1, 5]])],
      after: [scan("/w", [["/w/a", 1, 5]])],
      changes: [],
    },
    {
      name: "created, changed in size or time, deleted; sorted, deletions last",
      before: [scan("/w", [["/w/a", 1, 5], ["/w/b", 1, 5], ["/w/c", 1, 5], ["/w/0", 1, 5]])],
      after: [scan("/w", [["/w/d", 4, 9], ["/w/b", 2, 5], ["/w/a", 1, 6], ["/w/0", 1, 5]])],
      changes: [
        { path: "/w/a", size: 1 },
        { path: "/w/b", size: 2 },
        { path: "/w/d", size: 4 },
        { path: "/w/c", deleted: true },
      ],
    },
    {
      name: "files past the limit are omitted, later smaller ones still fit",
      before: [scan("/w", [])],
      after: [scan("/w", [["/w/a", 3, 1], ["/w/b", 5, 1], ["/w/c", 2, 1]])],
      limit: 5,
      changes: [
        { path: "/w/a", size: 3 },
        { path: "/w/b", size: 5, omitted: true },
        { path: "/w/c", size: 2 },
      ],
    },
    {
      name: "nested watched directories report a file once",
      before: [scan("/w", [["/w/s/x", 1, 1]]), scan("/w/s", [["/w/s/x", 1, 1]])],
      after: [scan("/w", [["/w/s/y", 1, 1]]), scan("/w/s", [["/w/s/y", 1, 1]])],
      changes: [{ path: "/w/s/y", size: 1 }, { path: "/w/s/x", deleted: true }],
    },
    {
      name: "a file that moved between watched directories is not deleted",
      before: [scan("/a", [["/a/f", 1, 1]]), scan("/b", [])],
      after: [scan("/a", []), scan("/b", [["/a/f", 1, 1]])],
      changes: [],
    },
    {
      name: "nothing counts as deleted where a scan was cut",
      before: [scan("/a", [["/a/f", 1, 1]], true), scan("/b", [["/b/f", 1, 1]])],
      after: [scan("/a", [["/a/g", 1, 1]]), scan("/b", [["/b/f", 1, 1]], true)],
      changes: [{ path: "/a/g", size: 1 }],
      cut: ["/a", "/b"],
    },
  ];
  for (const tt of tests) {
    await t.step(tt.name, () => {
      deepStrictEqual(diff(tt.before, tt.after, tt.limit ?? Infinity), {
        changes: tt.changes,
        cut: tt.cut ?? [],
      });
    });
  }
});
