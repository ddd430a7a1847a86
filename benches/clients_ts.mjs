// Benchmark safe-mcp beside the Python peer through the official TypeScript MCP client.
//
// usage: node benches/clients_ts.mjs SDK_DIR OURS_BINARY OURS_POLICY PEER_BINARY PEER_DIR [CALLS] [ROUNDS]
// SDK_DIR holds node_modules/@modelcontextprotocol/sdk (benches/clients.py installs it).
// Prints one markdown row per server, `rounds [[peer, ours], …]` (each round's run p50s),
// and whatever the client printed about schemas.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [sdkDir, ours, policy, peer, peerDir, callsArg, roundsArg] = process.argv.slice(2);
const calls = Number(callsArg ?? 200);
const rounds = Number(roundsArg ?? 5);
const order = Array.from({ length: rounds }, (_, r) => (r % 2 === 0 ? ["peer", "ours"] : ["ours", "peer"])).flat();
const require = createRequire(path.join(path.resolve(sdkDir), "index.js"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const warnings = [];
const warn = console.warn;
console.warn = (...a) => { warnings.push(a.join(" ")); };

function rss(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
    return Number(line.split(/\s+/)[1]) / 1024;
  } catch { return 0; }
}

async function session(server) {
  const t = performance.now();
  const transport = server === "ours"
    ? new StdioClientTransport({ command: ours, args: ["terminal", "--config", policy], env: {} })
    : new StdioClientTransport({ command: peer, args: [], env: { ALLOW_COMMANDS: "echo" } });
  const client = new Client({ name: "bench", version: "1" });
  await client.connect(transport);
  return { client, transport, cold: performance.now() - t };
}

const call = (client, server) => server === "ours"
  ? client.callTool({ name: "run_command", arguments: { command: "echo hi" } })
  : client.callTool({ name: "shell_execute", arguments: { command: ["echo", "hi"], directory: peerDir } });

const q = (v, p) => v[Math.min(v.length - 1, Math.round((v.length - 1) * p))];
const results = {};
for (const server of order) {
  const colds = [];
  for (let i = 0; i < 5; i++) { const s = await session(server); colds.push(s.cold); await s.client.close(); }
  const { client, transport } = await session(server);
  await client.listTools();
  for (let i = 0; i < 20; i++) await call(client, server);
  const lat = [];
  for (let i = 0; i < calls; i++) { const t = performance.now(); await call(client, server); lat.push(performance.now() - t); }
  let t = performance.now();
  for (let i = 0; i < calls / 2; i++) await call(client, server);
  const serial = (calls / 2) / ((performance.now() - t) / 1000);
  t = performance.now();
  let n = 0;
  for (let i = 0; i < Math.max(1, calls / 32); i++) { await Promise.all(Array.from({ length: 16 }, () => call(client, server))); n += 16; }
  const parallel = n / ((performance.now() - t) / 1000);
  const mem = rss(transport.pid);
  await client.close();
  lat.sort((a, b) => a - b); colds.sort((a, b) => a - b);
  (results[server] ??= []).push({ cold: q(colds, 0.5), p50: q(lat, 0.5), p99: q(lat, 0.99), serial, parallel, mem });
}
const med = (rows, k) => rows.map((r) => r[k]).sort((a, b) => a - b)[Math.floor(rows.length / 2)];
for (const server of ["peer", "ours"]) {
  const r = results[server];
  console.log(`| TypeScript SDK | ${server} | ${med(r, "cold").toFixed(1)} ms | ${med(r, "p50").toFixed(2)} ms | ${med(r, "p99").toFixed(2)} ms | ${med(r, "serial").toFixed(0)} | ${med(r, "parallel").toFixed(0)} | ${med(r, "mem").toFixed(1)} MiB |`);
}
const o = results.ours, p = results.peer;
console.log(`| TypeScript SDK | ours vs peer | ${(med(p, "cold") / med(o, "cold")).toFixed(1)}× faster | ${(med(p, "p50") / med(o, "p50")).toFixed(2)}× faster | | | ${(med(o, "parallel") / med(p, "parallel")).toFixed(1)}× | |`);
console.log(`rounds ${JSON.stringify(o.map((r, i) => [p[i].p50, r.p50]))}`);
console.warn = warn;
console.log(`client warnings: ${warnings.filter((w) => /format|schema/i.test(w)).length === 0 ? "none about schemas" : warnings.join(" | ")}`);
