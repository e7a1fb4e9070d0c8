package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/modeltest"
)

// BenchmarkModelContextCost: the bytes of toolscope's tool definitions
// that the real agent CLIs send their model in each request, per provider
// set, read at the agent tests' scripted model endpoints on the agent's
// first turn (mcpserver.ContextCost is the same surface as tools/list
// returns it). Claude Code defers MCP tools (their names, a line each,
// until the model loads a schema); Codex defers the whole server (its
// namespace's name, once). One launch per run and set: the figure is a
// size, not a time.
func BenchmarkModelContextCost(b *testing.B) {
	done := modeltest.Steps(func(*modeltest.Turn) modeltest.Reply { return modeltest.Reply{Text: "done"} })
	// world starts a world whose agents reach the model through env, with
	// the task's providers those of set.
	world := func(b *testing.B, gitlab bool, env ...string) *agentWorld {
		w := newAgentWorld(b, env...)
		if gitlab {
			w.srv.ok(b, "source", "add", w.task, "--repo", w.glID)
		}
		return w
	}
	for _, agent := range []struct {
		name string
		run  func(b *testing.B, gitlab bool) *modeltest.Turn
	}{
		{"claude-code", func(b *testing.B, gitlab bool) *modeltest.Turn {
			model := modeltest.NewAnthropic(b, "toolscope", done)
			w := world(b, gitlab, "ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY="+agentModelKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
			w.launch(b, []string{"--agent", "claude-code", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "--", "-p", "Fix the login bug.", "--output-format", "json"})
			require.NotEmpty(b, model.Turns())
			return model.Turns()[0]
		}},
		{"codex", func(b *testing.B, gitlab bool) *modeltest.Turn {
			model := modeltest.NewResponses(b, "toolscope", done)
			w := world(b, gitlab, "OPENAI_API_KEY="+agentModelKey)
			w.launch(b, []string{"--agent", "codex", "--", "exec", "--skip-git-repo-check", "Fix the login bug."}, model.CodexProvider()...)
			require.NotEmpty(b, model.Turns())
			return model.Turns()[0]
		}},
	} {
		for _, set := range []struct {
			name   string
			gitlab bool
		}{{"github", false}, {"github+gitlab", true}} {
			b.Run(agent.name+"/"+set.name, func(b *testing.B) {
				var turn *modeltest.Turn
				for b.Loop() {
					turn = agent.run(b, set.gitlab)
				}
				b.ReportMetric(float64(turn.ToolDefinitionBytes), "bytes")
				b.ReportMetric(float64(turn.ToolDefinitionBytes)/4, "tokens~")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
