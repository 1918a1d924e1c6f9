// The route strategy written by hand with the official openai client,
// streamed, against a delegate gateway session: the delegator is offered
// the delegate tool, each call it makes is answered by a streamed solver
// call, until the delegator answers.
//
//   node client.mjs BASE_URL "Dot has 91 jars of 23 coins. ..."
//
// It prints one JSON line: the final answer, the tool calls made and the
// chunks streamed.
import OpenAI from 'openai';

const [baseURL, question] = process.argv.slice(2);
if (!baseURL || !question) {
  console.error('usage: node client.mjs BASE_URL QUESTION');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: 'session-in-url', maxRetries: 0 });
const tools = [{
  type: 'function',
  function: {
    name: 'delegate',
    description: 'Hand one arithmetic question to the solver.',
    parameters: { type: 'object', properties: { question: { type: 'string' } }, required: ['question'] },
  },
}];

let chunks = 0;

// stream runs one streamed completion and gathers its text and tool calls.
async function stream(params) {
  const s = await client.chat.completions.create({ ...params, stream: true, temperature: 0 });
  let content = '';
  const calls = [];
  for await (const chunk of s) {
    chunks++;
    const delta = chunk.choices[0]?.delta ?? {};
    content += delta.content ?? '';
    for (const tc of delta.tool_calls ?? []) {
      const c = (calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
      c.id += tc.id ?? '';
      c.function.name += tc.function?.name ?? '';
      c.function.arguments += tc.function?.arguments ?? '';
    }
  }
  return { content, calls };
}

const messages = [{ role: 'user', content: question }];
const asked = [];
for (let turn = 0; turn < 8; turn++) {
  const { content, calls } = await stream({ model: 'delegator', messages, tools });
  if (calls.length === 0) {
    console.log(JSON.stringify({ final_output: content, questions: asked, chunks }));
    process.exit(0);
  }
  messages.push({ role: 'assistant', content: content || null, tool_calls: calls });
  for (const c of calls) {
    const q = JSON.parse(c.function.arguments).question;
    asked.push(q);
    const r = await stream({ model: 'solver', messages: [{ role: 'user', content: q }] });
    const m = r.content.match(/\\boxed\{([^}]*)\}/);
    messages.push({ role: 'tool', tool_call_id: c.id, content: m ? m[1] : r.content });
  }
}
console.error('the delegator did not answer in 8 turns');
process.exit(1);
