// An orchestrator agent with a sub-agent as its tool, written with the
// OpenAI Agents SDK for JavaScript, run against a delegate gateway
// session: the delegator routes a world problem, the solver answers each
// question it hands over. Both agents use chat completions at the base
// URL given; nothing else about them knows the gateway.
//
//   node agents.mjs BASE_URL "Dot has 91 jars of 23 coins. ..."
//
// It prints one JSON line: the orchestrator's final output and the
// number of items of the run.
import OpenAI from 'openai';
import { z } from 'zod';
import {
  Agent,
  OpenAIChatCompletionsModel,
  run,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setTracingDisabled,
} from '@openai/agents';

const [baseURL, question] = process.argv.slice(2);
if (!baseURL || !question) {
  console.error('usage: node agents.mjs BASE_URL QUESTION');
  process.exit(2);
}

// The session's base URL carries the session; the key is not checked.
const client = new OpenAI({ baseURL, apiKey: 'session-in-url', maxRetries: 0 });
setDefaultOpenAIClient(client);
setOpenAIAPI('chat_completions');
setTracingDisabled(true); // no trace export to OpenAI

// The models were trained with these system prompts (docs/serve.md).
const solver = new Agent({
  name: 'solver',
  instructions: 'Compute.',
  model: new OpenAIChatCompletionsModel(client, 'solver'),
  modelSettings: { temperature: 0 },
});

const delegator = new Agent({
  name: 'delegator',
  instructions: 'Solve or delegate.',
  model: new OpenAIChatCompletionsModel(client, 'delegator'),
  modelSettings: { temperature: 0 },
  tools: [
    solver.asTool({
      toolName: 'delegate',
      toolDescription: 'Hand one arithmetic question to the solver.',
      parameters: z.object({ question: z.string() }),
      inputBuilder: ({ params }) => params.question,
      // The route hands back the answer without the working.
      customOutputExtractor: (result) => {
        const out = String(result.finalOutput ?? '');
        const m = out.match(/\\boxed\{([^}]*)\}/);
        return m ? m[1] : out;
      },
    }),
  ],
});

const result = await run(delegator, question, { maxTurns: 12 });
console.log(JSON.stringify({ final_output: result.finalOutput, items: result.newItems.length }));
