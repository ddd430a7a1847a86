// Where the TypeScript MCP client's time goes on one result: ours beside the peer's.
//
// usage: node benches/client_profile_ts.mjs SDK_DIR OURS_BINARY PEER_BINARY [CALLS]
// SDK_DIR holds node_modules/@modelcontextprotocol/sdk (benches/clients.py installs it).
// Runs CALLS run_command("echo hi") calls (shell_execute for the peer) under the V8 CPU
// profiler (node:inspector), once per server, and sums each sampled function's self time
// into groups by where it lives: outputSchema validation (ajv), message models (zod), the
// SDK, node's streams and event loop, idle (waiting for the server), the rest. Prints
// microseconds per call per group.
import { createRequire } from "node:module";
import { Session } from "node:inspector/promises";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const [sdkDir, ours, peer, callsArg] = process.argv.slice(2);
const calls = Number(callsArg ?? 300);
const require = createRequire(path.join(path.resolve(sdkDir), "index.js"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const box = mkdtempSync(path.join(os.tmpdir(), "safe-mcp-profile-ts-"));
mkdirSync(path.join(box, "jail"));
const policy = path.join(box, "policy.toml");
writeFileSync(policy, 'audit_log = "audit.jsonl"\n[terminal]\njail_root = "jail"\n[terminal.allowlist]\ncommands = ["echo"]\n');

const GROUPS = [
  ["outputSchema validation (ajv)", (u) => u.includes("/ajv")],
  ["message models (zod)", (u) => u.includes("/zod")],
  ["the SDK", (u) => u.includes("@modelcontextprotocol")],
  ["node streams and event loop", (u) => u.startsWith("node:") || u === ""],
];

async function profile(server) {
  const transport = server === "ours"
    ? new StdioClientTransport({ command: ours, args: ["terminal", "--config", policy], env: {} })
    : new StdioClientTransport({ command: peer, args: [], env: { ALLOW_COMMANDS: "echo" } });
  const client = new Client({ name: "profile", version: "1" });
  await client.connect(transport);
  await client.listTools();
  const call = () => server === "ours"
    ? client.callTool({ name: "run_command", arguments: { command: "echo hi" } })
    : client.callTool({ name: "shell_execute", arguments: { command: ["echo", "hi"], directory: path.join(box, "jail") } });
  for (let i = 0; i < 20; i++) await call();
  const inspector = new Session();
  inspector.connect();
  await inspector.post("Profiler.enable");
  await inspector.post("Profiler.setSamplingInterval", { interval: 50 });
  await inspector.post("Profiler.start");
  for (let i = 0; i < calls; i++) await call();
  const { profile: p } = await inspector.post("Profiler.stop");
  inspector.disconnect();
  await client.close();
  // Self time per node: each sample is one node, timeDeltas[i] the time before it.
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const totals = {};
  p.samples.forEach((id, i) => {
    const node = byId.get(id);
    const fn = node.callFrame.functionName;
    const url = node.callFrame.url;
    const group = fn === "(idle)" ? "idle (waiting for the server)"
      : fn === "(garbage collector)" ? "garbage collector"
      : (GROUPS.find(([, match]) => match(url)) ?? ["the rest"])[0];
    totals[group] = (totals[group] ?? 0) + (p.timeDeltas[i] ?? 0);
  });
  return Object.fromEntries(Object.entries(totals).map(([g, us]) => [g, us / calls]));
}

const rows = { ours: await profile("ours"), peer: await profile("peer") };
const groups = [...new Set([...Object.keys(rows.ours), ...Object.keys(rows.peer)])]
  .sort((a, b) => (rows.ours[b] ?? 0) - (rows.ours[a] ?? 0));
console.log(`client time per call under the V8 profiler, TypeScript SDK, ${calls} calls (µs)\n`);
console.log("| group | ours | peer |");
console.log("|---|---|---|");
for (const g of groups) console.log(`| ${g} | ${(rows.ours[g] ?? 0).toFixed(0)} | ${(rows.peer[g] ?? 0).toFixed(0)} |`);
const sum = (r) => Object.values(r).reduce((a, b) => a + b, 0);
console.log(`| all | ${sum(rows.ours).toFixed(0)} | ${sum(rows.peer).toFixed(0)} |`);
