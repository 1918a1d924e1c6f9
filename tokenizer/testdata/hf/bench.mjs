// bench.mjs measures Hugging Face's tokenizers library (Rust, through its
// Node binding) encoding the same input as BenchmarkHFEncode in
// tokenizer/hf_test.go with Qwen2.5's tokenizer.json: the fixture strings
// concatenated into one string, the strings one by one, and the module's
// Go and Markdown files concatenated.
//
//	cd tokenizer/testdata/hf && npm ci && node bench.mjs
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { Tokenizer } from "tokenizers";

const here = new URL(".", import.meta.url).pathname;
const gunzip = (name) => zlib.gunzipSync(fs.readFileSync(here + name)).toString("utf8");
const strings = gunzip("strings.jsonl.gz").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
const corpus = strings.join("");
const tok = Tokenizer.fromString(gunzip("qwen2.5.json.gz"));
const encode = async () => (await tok.encode(corpus, null, { addSpecialTokens: false })).getIds().length;
const ntok = await encode(); // warms the library's word cache
const passes = 5;
const t0 = process.hrtime.bigint();
for (let i = 0; i < passes; i++) await encode();
const sec = Number(process.hrtime.bigint() - t0) / 1e9;
const bytes = Buffer.byteLength(corpus, "utf8");
console.log(`one string: tokenizers ${bytes} bytes ${ntok} tokens: ${((ntok * passes) / sec).toFixed(0)} tokens/s, ${((bytes * passes) / sec / 1e6).toFixed(2)} MB/s (${passes} passes, cache warm)`);

// The strings one by one, as encodeBatch (the library's parallel path, on
// every core) encodes them.
const batch = async () => (await tok.encodeBatch(strings, { addSpecialTokens: false })).reduce((n, e) => n + e.getIds().length, 0);
const nb = await batch();
const t1 = process.hrtime.bigint();
for (let i = 0; i < passes; i++) await batch();
const sec1 = Number(process.hrtime.bigint() - t1) / 1e9;
console.log(`strings: tokenizers encodeBatch ${strings.length} strings ${nb} tokens: ${((nb * passes) / sec1).toFixed(0)} tokens/s (${passes} passes, all cores)`);

// The module's own Go and Markdown files, testdata left out, in path
// order: the "source" corpus of BenchmarkHFEncode.
function walk(dir, out) {
  for (const name of fs.readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    const st = fs.statSync(p);
    if (st.isDirectory()) {
      if (name === "testdata" || name === "node_modules" || name.startsWith(".")) continue;
      walk(p, out);
    } else if (name.endsWith(".go") || name.endsWith(".md")) {
      out.push(fs.readFileSync(p, "utf8"));
    }
  }
  return out;
}
const source = walk(path.join(here, "../../.."), []).join("");
const encodeSource = async () => (await tok.encode(source, null, { addSpecialTokens: false })).getIds().length;
const ns = await encodeSource();
const t2 = process.hrtime.bigint();
for (let i = 0; i < passes; i++) await encodeSource();
const sec2 = Number(process.hrtime.bigint() - t2) / 1e9;
const sbytes = Buffer.byteLength(source, "utf8");
console.log(`source: tokenizers ${sbytes} bytes ${ns} tokens: ${((ns * passes) / sec2).toFixed(0)} tokens/s, ${((sbytes * passes) / sec2 / 1e6).toFixed(2)} MB/s (${passes} passes, cache warm)`);
