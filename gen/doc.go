// Package gen is the root of toolscope's generated protobuf code.
//
// Everything under gen/toolscope is produced by `make generate` from the
// buf module in proto/ and is committed; never edit it by hand. The protoc
// plugins are pinned by the `tool` directives in this module's go.mod, so
// the generator and the protobuf runtime always carry the same version.
//
//   - toolscope/orchestrator/v1: the orchestrator's public API.
//   - toolscope/agentctl/v1: the orchestrator-to-agentctl contract.
package gen
