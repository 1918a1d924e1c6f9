// Package openenv serves environments over OpenEnv's protocol, which
// TRL's environment_factory speaks, and is a client of it.
//
// The protocol is a Gym-style reset, step and state over HTTP and over a
// WebSocket. Over HTTP each request gets a fresh environment, as in
// OpenEnv's own server: /reset, /step and /state keep nothing between
// requests. An episode lives on a WebSocket at /ws, one per connection.
// MCP is served at /mcp: one JSON-RPC request a POST, or a WebSocket of
// them on one environment.
// Server serves any Environment; Delegation is the environment of package
// world's delegation tasks; Client and Session speak to a server.
// docs/openenv.md tells what of OpenEnv is served and how to train on it.
package openenv
