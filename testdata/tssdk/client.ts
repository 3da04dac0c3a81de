// A client of mcp-run-python built on the official MCP TypeScript SDK (npm
// @modelcontextprotocol/sdk, pinned below; deno.lock pins its dependencies).
// cmd/mcp-run-python/e2e_tssdk_test.go runs it against a server started with
// --return-mode json --tasks --sampling --elicitation on each transport:
//
//	deno run --no-config --lock=deno.lock --frozen-lockfile -A client.ts \
//	  [--bearer TOKEN] (stdio COMMAND [ARG...] | sse URL | streamable-http URL)
//
// It drives the three features of issue 28 through the SDK's own API, so that
// what the SDK does with them (tracks progress tokens, validates
// structuredContent against the listed outputSchema, polls tasks) is tested,
// not what a hand-made request would show; and, as issue 39's client, answers
// code's questions with a scripted model and person through the SDK's own
// sampling and elicitation handlers (this SDK speaks protocols up to
// 2025-11-25: the server asks it during the call). It prints one JSON line of what it
// saw and leaves the judging to the Go test; a scenario that throws reports its
// error in place of its findings, so that one failure hides no other.

// Deno finds no types for the SDK's subpaths ending in .js (its exports map
// "./*" to "./dist/esm/*.d.ts", so to "sse.js.d.ts"): each names its .d.ts.
import { Client } from "npm:@modelcontextprotocol/sdk@1.32.2/client";
// @ts-types="npm:@modelcontextprotocol/sdk@1.32.2/client/sse"
import { SSEClientTransport } from "npm:@modelcontextprotocol/sdk@1.32.2/client/sse.js";
// @ts-types="npm:@modelcontextprotocol/sdk@1.32.2/client/stdio"
import { StdioClientTransport } from "npm:@modelcontextprotocol/sdk@1.32.2/client/stdio.js";
// @ts-types="npm:@modelcontextprotocol/sdk@1.32.2/client/streamableHttp"
import { StreamableHTTPClientTransport } from "npm:@modelcontextprotocol/sdk@1.32.2/client/streamableHttp.js";
// @ts-types="npm:@modelcontextprotocol/sdk@1.32.2/shared/transport"
import type { Transport } from "npm:@modelcontextprotocol/sdk@1.32.2/shared/transport.js";
// @ts-types="npm:@modelcontextprotocol/sdk@1.32.2/types"
import {
  type CallToolResult,
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  type Progress,
} from "npm:@modelcontextprotocol/sdk@1.32.2/types.js";

/** The tool every scenario calls. */
const toolName = "run_python_code";

/** How often the cancel scenario polls for its task to be running, in ms. */
const pollMs = 100;

/** What a call returned, as the Go test compares it. */
interface CallReport {
  isError: boolean;
  /** The first text content. */
  text: string;
  structuredContent?: Record<string, unknown>;
}

/** What one scenario found, or the error that stopped it. */
type Scenario<T> = T | { error: string };

/** The line the script prints. */
interface Report {
  /** run_python_code as tools/list showed it. */
  tool: { outputSchema: boolean; taskSupport?: string };
  /** A plain call with onprogress: the notes heard before its result. */
  progress: Scenario<{ notes: Progress[]; result: CallReport }>;
  /** Plain calls of each kind; the SDK validated each structuredContent. */
  structured: Scenario<{ calls: Record<string, CallReport> }>;
  /** A call the SDK made a task by itself (the tool offers taskSupport). */
  task: Scenario<{
    taskId: string;
    /** From sending tools/call to the task's creation. */
    createdMs: number;
    statuses: string[];
    statusMessages: string[];
    result: CallReport;
    /** The ids tasks/list showed afterwards. */
    listed: string[];
  }>;
  /** A task cancelled while its code runs. */
  cancel: Scenario<{ status: string; streamError: string }>;
  /** A call whose code asks the model and the person. */
  ask: Scenario<{ result: CallReport; sampled: number; elicited: number }>;
  /** What the SDK reported through Client.onerror while the scenarios ran. */
  errors: string[];
}

/** The transport the command line asks for. */
function transportFrom(args: string[]): Transport {
  let bearer: string | undefined;
  if (args[0] === "--bearer") {
    bearer = args[1];
    args = args.slice(2);
  }
  const [kind, target, ...rest] = args;
  const requestInit: RequestInit | undefined = bearer
    ? { headers: { Authorization: `Bearer ${bearer}` } }
    : undefined;
  switch (kind) {
    case "stdio":
      // The SDK passes only a default environment (HOME, PATH, ...): the
      // server gets its configuration from its flags alone.
      return new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
    case "sse":
      return new SSEClientTransport(new URL(target), { requestInit });
    case "streamable-http":
      return new StreamableHTTPClientTransport(new URL(target), { requestInit });
  }
  throw new Error(
    "usage: client.ts [--bearer TOKEN] (stdio COMMAND [ARG...] | sse URL | streamable-http URL)",
  );
}

/** The parts of a result the Go test compares. */
function report(result: CallToolResult): CallReport {
  const first = result.content[0];
  return {
    isError: result.isError ?? false,
    text: first?.type === "text" ? first.text : "",
    structuredContent: result.structuredContent,
  };
}

/** Runs a scenario, turning what it throws into its report. */
async function scenario<T>(run: () => Promise<T>): Promise<Scenario<T>> {
  try {
    return await run();
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

/** Calls run_python_code plainly, with the SDK's own checks. */
async function call(client: Client, args: Record<string, unknown>): Promise<CallReport> {
  return report(await client.callTool({ name: toolName, arguments: args }) as CallToolResult);
}

/** The code of the ask scenario: a batch, a question, and two for the person. */
const askCode = `answers = llm_query_batched(["a", "b", "c"], system="Answer.")
name = ask_user("Your name?")
age = ask_user("Your age?", {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]})
[llm_query("one"), *answers, name, age]`;

async function main(): Promise<void> {
  const errors: string[] = [];
  const client = new Client({ name: "mcp-run-python-tssdk", version: "1.0.0" }, {
    capabilities: { sampling: {}, elicitation: {} },
  });
  client.onerror = (err) => errors.push(err.message);
  // A scripted model and person: "re: " and the prompt; "Ada", or age 36
  // for a form that asks it.
  let sampled = 0, elicited = 0;
  client.setRequestHandler(CreateMessageRequestSchema, (request) => {
    sampled++;
    const content = request.params.messages[0]?.content;
    const prompt = content && !Array.isArray(content) && content.type === "text"
      ? content.text
      : "";
    return {
      role: "assistant",
      model: "scripted",
      content: { type: "text", text: `re: ${prompt}` },
    };
  });
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    elicited++;
    const properties = "requestedSchema" in request.params
      ? request.params.requestedSchema.properties
      : {};
    return { action: "accept", content: "age" in properties ? { age: 36 } : { answer: "Ada" } };
  });
  const transport = transportFrom(Deno.args);
  await client.connect(transport);

  // listTools caches the outputSchema callTool validates against, and the
  // taskSupport that makes callToolStream start a task.
  const listed = (await client.listTools()).tools.find((t) => t.name === toolName);
  const tool = {
    outputSchema: listed?.outputSchema !== undefined,
    taskSupport: listed?.execution?.taskSupport,
  };

  const progress = await scenario(async () => {
    const notes: Progress[] = [];
    const result = await client.callTool(
      { name: toolName, arguments: { python_code: "import time\ntime.sleep(1.5)\n'done'" } },
      undefined,
      { onprogress: (p) => notes.push(p) },
    );
    // Copied at once: what came before the result.
    return { notes: [...notes], result: report(result as CallToolResult) };
  });

  const structured = await scenario(async () => ({
    calls: {
      success: await call(client, { python_code: "print('hi')\n{'a': [1, 2.5, None]}" }),
      run_error: await call(client, { python_code: "print('before')\nprint(unknown)" }),
      tool_error: await call(client, {}),
    },
  }));

  const task = await scenario(async () => {
    const start = Date.now();
    let taskId = "", createdMs = -1;
    const statuses: string[] = [], statusMessages: string[] = [];
    let result: CallReport | undefined;
    const stream = client.experimental.tasks.callToolStream({
      name: toolName,
      arguments: { python_code: "import time\ntime.sleep(2)\nprint('slept')\n'done'" },
    }, CallToolResultSchema);
    for await (const m of stream) {
      switch (m.type) {
        case "taskCreated":
          taskId = m.task.taskId;
          createdMs = Date.now() - start;
          break;
        case "taskStatus":
          statuses.push(m.task.status);
          if (m.task.statusMessage) statusMessages.push(m.task.statusMessage);
          break;
        case "result":
          result = report(m.result as CallToolResult);
          break;
        case "error":
          throw m.error;
      }
    }
    if (result === undefined) throw new Error("the task's stream ended without a result");
    const tasks = (await client.experimental.tasks.listTasks()).tasks;
    return {
      taskId,
      createdMs,
      statuses,
      statusMessages,
      result,
      listed: tasks.map((t) => t.taskId),
    };
  });

  const cancel = await scenario(async () => {
    const stream = client.experimental.tasks.callToolStream(
      { name: toolName, arguments: { python_code: "while True: pass" } },
      CallToolResultSchema,
    );
    const first = await stream.next();
    if (first.done || first.value.type !== "taskCreated") {
      throw new Error(`the call's first message: ${JSON.stringify(first.value)}, want its task`);
    }
    const id = first.value.task.taskId;
    // Cancelled once its code runs, as a user would cancel it.
    while (!(await client.experimental.tasks.getTask(id)).statusMessage?.startsWith("running: ")) {
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
    const { status } = await client.experimental.tasks.cancelTask(id);
    let streamError = "";
    for await (const m of stream) {
      if (m.type === "error") streamError = m.error.message;
    }
    return { status, streamError };
  });

  const ask = await scenario(async () => {
    const result = await call(client, { python_code: askCode });
    return { result, sampled, elicited };
  });

  const out: Report = { tool, progress, structured, task, cancel, ask, errors: [...errors] };
  console.log(JSON.stringify(out));
  // A client done with its session ends it (a no-op without one: stateless).
  // That also ends the server's standalone GET stream, without which deno
  // was seen to stay alive after close once that stream had carried
  // notifications (here notifications/tasks/status), its fetch aborted.
  if (transport instanceof StreamableHTTPClientTransport) await transport.terminateSession();
  await client.close();
}

await main();
