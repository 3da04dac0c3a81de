import { deepStrictEqual } from "node:assert/strict";
import { Budget, LineSplitter } from "./output.ts";

/** Writes each of writes to a splitter, flushes it, and returns its frames and budget. */
function split(limit: number, writes: (string | Uint8Array)[]) {
  const frames: unknown[] = [];
  const budget = new Budget(limit);
  const s = new LineSplitter("stdout", budget, (f) => frames.push(JSON.parse(f)));
  const encoder = new TextEncoder();
  for (const w of writes) s.write(typeof w === "string" ? encoder.encode(w) : w);
  s.flush();
  return { frames, remaining: budget.remaining, dropped: budget.dropped };
}

const lines = (...l: string[]) => ({ type: "output", stream: "stdout", lines: l });
const snake = new TextEncoder().encode("🐍\n"); // 4 bytes and a newline

Deno.test("LineSplitter", async (t) => {
  const tests: {
    name: string;
    limit: number;
    writes: (string | Uint8Array)[];
    frames: unknown[];
    remaining: number;
    dropped: number;
  }[] = [
    {
      name: "lines of one write in one frame",
      limit: Infinity,
      writes: ["a\nb\n"],
      frames: [lines("a", "b")],
      remaining: Infinity,
      dropped: 0,
    },
    {
      name: "a line across writes waits for its end",
      limit: 100,
      writes: ["ab", "c\nd"],
      frames: [lines("abc"), lines("d")],
      remaining: 100 - 4 - 2,
      dropped: 0,
    },
    {
      name: "a character split across writes",
      limit: 100,
      writes: [snake.subarray(0, 2), snake.subarray(2)],
      frames: [lines("🐍")],
      remaining: 95,
      dropped: 0,
    },
    {
      name: "a line that exactly fits",
      limit: 4,
      writes: ["abc\n"],
      frames: [lines("abc")],
      remaining: 0,
      dropped: 0,
    },
    {
      name: "lines past the budget are counted, not sent",
      limit: 5,
      writes: ["abc\ndefg\nh\n", "more\n"],
      frames: [lines("abc")],
      remaining: -1,
      dropped: 5 + 2 + 5,
    },
    {
      name: "an unfinished line too long to ever fit",
      limit: 3,
      writes: ["abcdef"],
      frames: [],
      remaining: -1,
      dropped: 6,
    },
    {
      name: "budget counts bytes, not characters",
      limit: 9,
      writes: ["🐍\n🐍\n"],
      frames: [lines("🐍")],
      remaining: -1,
      dropped: 5,
    },
    {
      name: "the unfinished last line goes at the flush",
      limit: 100,
      writes: ["a\nend"],
      frames: [lines("a"), lines("end")],
      remaining: 100 - 2 - 4,
      dropped: 0,
    },
  ];
  for (const tt of tests) {
    await t.step(tt.name, () => {
      deepStrictEqual(split(tt.limit, tt.writes), {
        frames: tt.frames,
        remaining: tt.remaining,
        dropped: tt.dropped,
      });
    });
  }
});

Deno.test("LineSplitter: stdout and stderr share a budget", () => {
  const frames: unknown[] = [];
  const budget = new Budget(6);
  const out = new LineSplitter("stdout", budget, (f) => frames.push(JSON.parse(f)));
  const err = new LineSplitter("stderr", budget, (f) => frames.push(JSON.parse(f)));
  const encoder = new TextEncoder();
  out.write(encoder.encode("ab\n"));
  err.write(encoder.encode("cd\n"));
  out.write(encoder.encode("ef\n"));
  deepStrictEqual(frames, [lines("ab"), { type: "output", stream: "stderr", lines: ["cd"] }]);
  deepStrictEqual([budget.remaining, budget.dropped], [-1, 3]);
});
