// Package a2a serves every agent of every workspace as an A2A agent (A2A
// v1.0.1 over JSON-RPC, and the v0.3 method names and shapes for clients
// that send no A2A-Version header).
//
// An A2A task is a chat turn (work.KindTurn) and a contextId is a session
// opened for outside input (chat.NewSession.External), so tasks get their
// lifecycle from the turn executor and the claim protocol, survive restarts
// and are visible from every instance: every answer is read from the store.
// See docs/architecture.md, "A2A".
package a2a
