// Counts characters and tokens of the text blocks benches/text_blocks.py wrote, with a real
// tokenizer from the npm registry (gpt-tokenizer: OpenAI's o200k_base and cl100k_base).
// Usage: node benches/count_tokens.mjs BEFORE.json [AFTER.json]
// (gpt-tokenizer must be installed where node finds it: `npm install gpt-tokenizer@3`.)
import { readFileSync } from "node:fs";
import { encode as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { encode as cl100k } from "gpt-tokenizer/encoding/cl100k_base";

const runs = process.argv.slice(2).map((f) => JSON.parse(readFileSync(f, "utf8")));
const label = (r) => `${r.tool} ${r.args.command ?? r.args.path ?? ""}`.trim();
const count = (t) => [t.length, o200k(t).length, cl100k(t).length];
const rows = runs[0].map((r, i) => [label(r), ...runs.map((run) => count(run[i].text))]);
const head = runs.length === 2 ? "| call | before chars | before tokens (o200k / cl100k) | after chars | after tokens (o200k / cl100k) |\n|---|---:|---:|---:|---:|" : "| call | chars | tokens (o200k / cl100k) |\n|---|---:|---:|";
console.log(head);
const total = runs.map(() => [0, 0, 0]);
for (const [name, ...counts] of rows) {
  counts.forEach((c, k) => c.forEach((v, j) => (total[k][j] += v)));
  console.log(`| \`${name}\` | ${counts.map(([ch, o, c]) => `${ch} | ${o} / ${c}`).join(" | ")} |`);
}
console.log(`| **all** | ${total.map(([ch, o, c]) => `${ch} | ${o} / ${c}`).join(" | ")} |`);
