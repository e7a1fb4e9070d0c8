// Package executors will hold the one interface the orchestrator uses to
// launch, resume, stop, inspect and re-attach agent sessions, with one
// subpackage per backend (local process, Docker, remote host) and a shared
// conformance suite (executortest) that every backend runs.
//
// This module is kept separate so that the agentctl module never depends on
// the Docker client; see docs/architecture.md.
package executors
