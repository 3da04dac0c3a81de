// Unit tests of run.ts's Replies: the requests of the running code that wait
// for the supervisor's answers.

import { deepStrictEqual } from "node:assert/strict";
import { Replies } from "./run.ts";

Deno.test("Replies: each answer settles its own request, once", async () => {
  const sent: string[] = [];
  const replies = new Replies((frame) => sent.push(frame));
  const first = replies.request((id) => `{"type":"ask","id":${id}}`);
  const second = replies.request((id) => `{"type":"ask","id":${id}}`);
  deepStrictEqual(sent, ['{"type":"ask","id":1}', '{"type":"ask","id":2}']);
  replies.settle(2, "two");
  replies.settle(2, "two again"); // dropped: answered already
  replies.settle(7, "stale"); // dropped: no such request
  replies.settle(1, "one");
  deepStrictEqual(await Promise.all([first, second]), ["one", "two"]);
});
