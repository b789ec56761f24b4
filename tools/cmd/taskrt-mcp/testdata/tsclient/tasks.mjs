// tasks.mjs drives taskrt-mcp's protocol-level tasks (MCP 2025-11-25) with the
// official TypeScript SDK client (client.experimental.tasks), for
// TestTypeScriptClientTasks.
//
//   node tasks.mjs stdio BINARY
//   node tasks.mjs http  URL
//
// Its first line of input is "MARK1 MARK2": markers the commands export, so that
// the test can find every process they start (on stdin, not in argv or the
// environment, where they would mark this process and the server too). It
// prints one JSON object per line ({"step": …}); at each {"step":"checkpoint"}
// it waits for a line on stdin, so that the Go test can look at the machine's
// processes before it goes on.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { createInterface } from 'node:readline';

const [mode, target] = process.argv.slice(2);
const out = (step, data) => process.stdout.write(JSON.stringify({ step, ...data }) + '\n');
const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();
const checkpoint = async (name) => {
  out('checkpoint', { name });
  await lines.next();
};
const [mark1, mark2] = (await lines.next()).value.split(' ');
const marked = (mark, script) => `export MCPTEST_MARK=${mark}; ${script}`; // as proctest.Marked
const errorOf = async (f) => {
  try {
    await f();
    return null;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
};

async function connect(name) {
  const client = new Client({ name, version: '1' });
  const transport = mode === 'stdio'
    ? new StdioClientTransport({ command: target, args: [], stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(target));
  await client.connect(transport);
  return { client, transport };
}

async function end({ client, transport }) {
  if (mode === 'http') await transport.terminateSession();
  await client.close();
}

// first runs a task-augmented call to its creation and stops following it.
async function first(client, command) {
  const stream = client.experimental.tasks.callToolStream({ name: 'bash', arguments: { command } }, undefined, { task: { ttl: 60000 } });
  const it = stream[Symbol.asyncIterator]();
  const { value } = await it.next();
  await it.return();
  return value;
}

const a = await connect('ts-a');
const b = await connect('ts-b');
const tools = await a.client.listTools(); // caches execution.taskSupport
out('connected', {
  tasks: a.client.getServerCapabilities().tasks ?? null,
  execution: Object.fromEntries(tools.tools.map((t) => [t.name, t.execution?.taskSupport ?? null])),
  protocolVersion: a.transport.protocolVersion ?? null,
});

// 1. create → get (working) → result, the SDK's own loop: callToolStream polls
//    tasks/get every pollInterval and collects with tasks/result.
const messages = [];
for await (const m of a.client.experimental.tasks.callToolStream({ name: 'bash', arguments: { command: 'echo hello from a task' } })) {
  messages.push(m.type === 'result' ? { type: m.type, result: m.result }
    : m.type === 'error' ? { type: m.type, error: String(m.error) }
      : { type: m.type, task: m.task });
}
const foreground = await a.client.callTool({ name: 'bash', arguments: { command: 'echo hello from a task' } });
out('stream', { messages, foreground });

// 2. a long task: get, list, isolation from the other session, cancel.
const created = await first(a.client, marked(mark1, 'sleep 600'));
const id = created.task.taskId;
out('created', { task: created.task });
out('get', { task: await a.client.experimental.tasks.getTask(id) });
out('list', { tasks: (await a.client.experimental.tasks.listTasks()).tasks });
out('foreign', {
  get: await errorOf(() => b.client.experimental.tasks.getTask(id)),
  result: await errorOf(() => b.client.experimental.tasks.getTaskResult(id, CallToolResultSchema)),
  cancel: await errorOf(() => b.client.experimental.tasks.cancelTask(id)),
  unknown: await errorOf(() => b.client.experimental.tasks.getTask('no-such-task-id')),
  list: (await b.client.experimental.tasks.listTasks()).tasks,
});
await checkpoint('running');
out('cancel', { task: await a.client.experimental.tasks.cancelTask(id) });
out('cancelled-result', { result: await a.client.experimental.tasks.getTaskResult(id, CallToolResultSchema) });
out('after-cancel', {
  task: await a.client.experimental.tasks.getTask(id),
  again: await errorOf(() => a.client.experimental.tasks.cancelTask(id)),
});
await checkpoint('cancelled');

// 3. a task still running when its session ends.
const orphan = await first(a.client, marked(mark2, 'sleep 600'));
out('orphan', { task: orphan.task });
await checkpoint('before-end');
await end(a);
await end(b);
await checkpoint('ended');
out('done', {});
process.exit(0);
