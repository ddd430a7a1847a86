// Drive `safe-mcp terminal`'s file tools with the official TypeScript MCP SDK, as a coding
// agent's client would: write, read, edit (with a dry run), and a refusal. The SDK checks
// every result's structuredContent against the tool's outputSchema on its own.
//
// usage: node file_tools_client.mjs SDK_DIR SAFE_MCP_BINARY POLICY_FILE
// Exits non-zero on any mismatch.
import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, binary, policy] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(sdkDir), "index.js"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

function check(cond, what) {
  if (!cond) {
    console.error(`mismatch: ${what}`);
    process.exit(1);
  }
}

const transport = new StdioClientTransport({ command: binary, args: ["terminal", "--config", policy], env: {} });
const client = new Client({ name: "ts-file-tools", version: "1" });
await client.connect(transport);
const { tools } = await client.listTools();
for (const name of ["read_file", "write_file", "edit_file"]) {
  check(tools.some((t) => t.name === name && t.outputSchema), `${name} is listed with an outputSchema`);
}
const calls = [
  ["write_file", { path: "src/index.js", content: "export const answer = 41;\n" }, "OK"],
  ["read_file", { path: "src/index.js" }, "OK"],
  ["edit_file", { path: "src/index.js", edits: [{ old_text: "41", new_text: "42" }], dry_run: true }, "OK"],
  ["edit_file", { path: "src/index.js", edits: [{ old_text: "41", new_text: "42" }] }, "OK"],
  ["edit_file", { path: "src/index.js", edits: [{ old_text: "41", new_text: "43" }] }, "CONFLICT"],
  ["write_file", { path: "../outside.js", content: "x" }, "PATH_ESCAPE"],
];
for (const [name, args, expected] of calls) {
  const result = await client.callTool({ name, arguments: args });
  const envelope = result.structuredContent;
  check(envelope, `${name}: structuredContent`);
  check(envelope.code === expected, `${name} ${JSON.stringify(args)}: ${envelope.code} != ${expected}: ${envelope.reason}`);
  check(result.isError === !envelope.ok, `${name}: isError`);
  if (name === "edit_file" && expected === "OK") {
    check(envelope.detail.diff.includes("+export const answer = 42;"), `${name}: the diff`);
  }
}
await client.close();
console.log(`typescript sdk: ${calls.length} file-tool results validated`);
