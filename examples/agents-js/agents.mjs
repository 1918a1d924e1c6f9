// An orchestrator agent with a sub-agent as its tool, written with the
// OpenAI Agents SDK for JavaScript, run against a delegate gateway
// session: the delegator routes a world problem, the solver answers each
// question it hands over. Both agents use chat completions at the base
// URL given; nothing else about them knows the gateway.
//
//   node agents.mjs BASE_URL "Dot has 91 jars of 23 coins. ..." [MAX_TURNS]
//
// It prints one JSON line: the orchestrator's final output and the
// number of items of the run. A run the model fails (a malformed or
// invalid tool call, too many turns, a refusal) ends as a real app's
// would: the line says "failed" with the error, and the exit status is
// 0, so that its runner can end the session with reward 0. Any other
// error (the server's, the network's) exits 1 after a "error" line.
import OpenAI from 'openai';
import { z } from 'zod';
import {
  Agent,
  MaxTurnsExceededError,
  ModelBehaviorError,
  ModelRefusalError,
  OpenAIChatCompletionsModel,
  run,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setTracingDisabled,
} from '@openai/agents';

const [baseURL, question, maxTurnsArg = '12'] = process.argv.slice(2);
const maxTurns = Number(maxTurnsArg);
if (!baseURL || !question || !Number.isInteger(maxTurns) || maxTurns < 1) {
  console.error('usage: node agents.mjs BASE_URL QUESTION [MAX_TURNS]');
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

try {
  const result = await run(delegator, question, { maxTurns });
  console.log(JSON.stringify({ final_output: result.finalOutput, items: result.newItems.length }));
} catch (err) {
  const modelFailed = err instanceof ModelBehaviorError ||
    err instanceof MaxTurnsExceededError ||
    err instanceof ModelRefusalError;
  const what = `${err?.name ?? 'Error'}: ${err?.message ?? String(err)}`;
  console.log(JSON.stringify(modelFailed ? { failed: what } : { error: what }));
  process.exitCode = modelFailed ? 0 : 1;
}
