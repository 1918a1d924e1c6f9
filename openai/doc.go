// Package openai is the client for OpenAI-compatible Chat Completions
// endpoints, the backend through which every remote model in delegate is
// called. It implements delegate.Model.
//
// It was written against the wire formats of OpenAI's API, vLLM's
// OpenAI-compatible server, SGLang, Ollama's /v1 endpoint and llama.cpp's
// server. It posts to BaseURL + "/chat/completions" without streaming and
// understands, besides the common fields (messages with tool calls and tool
// results, tools, tool_choice, temperature, top_p, max_tokens, stop, seed,
// n, logprobs, top_logprobs, usage with prompt_tokens_details.cached_tokens):
//
//   - vLLM's return_tokens_as_token_ids request field (sent when
//     Config.TokenIDs is set and logprobs are requested) and the
//     "token_id:N" tokens it produces, turned into delegate.TokenLogprob.TokenID;
//   - vLLM's prompt_token_ids response field, kept as
//     delegate.Response.PromptTokenIDs;
//   - error bodies in OpenAI's shape {"error":{"message","type","code"}},
//     vLLM's older flat shape {"object":"error","message","type","code"},
//     a bare {"error":"text"}, and non-JSON bodies;
//   - tool-call arguments sent as a JSON object instead of a string (some
//     local servers do this), kept as the object's JSON text;
//   - tool calls without an id (some local servers omit it), given the id
//     "call_<choice>_<index>" so that tool results can name them;
//   - an error object in a 200 body (some proxies answer so), reported as
//     an error with the object's type and, when its code is an HTTP status,
//     that status;
//   - the Retry-After header (seconds or HTTP date) and OpenAI's
//     retry-after-ms header.
//
// delegate.Request.ToolChoice may be "auto", "none", "required" or, beyond
// those, the name of one offered tool, which is sent as
// {"type":"function","function":{"name":...}} to force that call. The
// penalties, logit_bias, parallel_tool_calls and response_format are sent
// as given, and StrictToolCalls as each function's strict flag: the server
// enforces them or refuses.
//
// The client does not stream, sends max_tokens (not OpenAI's newer
// max_completion_tokens, which some of the other servers lack) and drops
// fields that delegate.Message has no place for (refusal,
// reasoning_content).
//
// The client is hand-written on net/http and encoding/json: requests are
// encoded once per call and resent unchanged on retries, responses are
// decoded straight from the body, and all clients that are not given their
// own *http.Client share one http.Transport with a generous idle pool.
package openai
