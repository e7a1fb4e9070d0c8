// An MCP client on the official TypeScript SDK, used by the interop tests
// (mcptest.TSClient): agentctl's and the orchestrator's hosted endpoint's.
// It connects to a session over streamable HTTP or stdio,
// prints one JSON line per event on stdout, and exits when stdin closes.
//
//   node client.mjs http URL TOKEN
//   node client.mjs stdio COMMAND [ARG...]   (env passed through: AGENTCTL_TEST_MAIN)
//
// Lines: {"event":"ready","protocol":P,"names":[...]}
//        {"event":"changed","names":[...]}   after each tools/list_changed
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, ...rest] = process.argv.slice(2);
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

let transport;
if (mode === "http") {
  const [url, token] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else if (mode === "stdio") {
  const [command, ...args] = rest;
  transport = new StdioClientTransport({
    command,
    args,
    env: { ...getDefaultEnvironment(), AGENTCTL_TEST_MAIN: process.env.AGENTCTL_TEST_MAIN ?? "" },
    stderr: "inherit",
  });
} else {
  console.error(`usage: client.mjs http URL TOKEN | stdio COMMAND [ARG...]`);
  process.exit(2);
}

const client = new Client({ name: "toolscope-ts-interop", version: "1.0.0" });
const names = async () => (await client.listTools()).tools.map((t) => t.name).sort();

// Notifications are handled one at a time, in order.
let queue = Promise.resolve();
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  queue = queue.then(async () => say({ event: "changed", names: await names() }));
});

await client.connect(transport);
say({ event: "ready", protocol: transport.protocolVersion ?? null, names: await names(), instructions: client.getInstructions() ?? null });

process.stdin.resume();
process.stdin.on("end", async () => {
  await queue;
  await client.close();
  process.exit(0);
});
