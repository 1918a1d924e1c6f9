// Package openai is the client for OpenAI-compatible Chat Completions endpoints.
// Every remote model in delegate is called through it; it implements delegate.Model.
// It speaks the dialects of OpenAI, vLLM, SGLang, Ollama and llama.cpp, and does not stream.
// It is hand-written on net/http and encoding/json, and retries with backoff.
// docs/client.md lists the fields and error shapes it understands.
package openai
