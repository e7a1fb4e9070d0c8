package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// NewAnthropic serves the streaming Messages API (POST /v1/messages, as
// Claude Code calls it with ANTHROPIC_BASE_URL) for script. server is the
// MCP server name whose tools the turns measure.
func NewAnthropic(t testing.TB, server string, script Script) *Server {
	return newServer(t, anthropic{}, server, script)
}

type anthropic struct{}

type anthropicRequest struct {
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
}

type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content"`
}

func blocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func (anthropic) parse(body []byte, server string) (*Turn, bool, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, false, fmt.Errorf("not a Messages request: %w", err)
	}
	if len(req.Tools) == 0 || len(req.Messages) == 0 {
		return nil, false, nil
	}
	t := &Turn{Body: body}
	prefix := "mcp__" + server + "__"
	var defs []json.RawMessage
	var all struct {
		Tools []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(body, &all)
	for i, tool := range req.Tools {
		t.Tools = append(t.Tools, tool.Name)
		if strings.HasPrefix(tool.Name, prefix) {
			defs = append(defs, all.Tools[i])
		}
	}
	for _, d := range defs {
		t.ToolDefinitionBytes += len(d)
	}
	// Deferred tools: only their names reach the model, announced in the
	// system prompt and then in system messages as they come and go, until
	// it searches for a schema.
	var system json.RawMessage
	var withSystem struct {
		System json.RawMessage `json:"system"`
	}
	if json.Unmarshal(body, &withSystem) == nil {
		system = withSystem.System
	}
	deferred := map[string]bool{}
	announce := func(text string) {
		if !strings.Contains(text, "deferred tools") {
			return
		}
		gone := strings.Contains(text, "no longer available")
		for _, name := range mcpName.FindAllString(text, -1) {
			deferred[name] = !gone
		}
	}
	for _, b := range blocks(system) {
		announce(b.Text)
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			continue
		}
		for _, b := range blocks(m.Content) {
			if b.Type == "text" {
				announce(b.Text)
			}
		}
	}
	for name, present := range deferred {
		if present && !slices.Contains(t.Tools, name) {
			t.Tools = append(t.Tools, name)
			if strings.HasPrefix(name, prefix) {
				t.ToolDefinitionBytes += len(name) + 1
			}
		}
	}
	slices.Sort(t.Tools)
	// The results of the model's last calls: the last user message (system
	// messages may follow it).
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "assistant" {
			break
		}
		if m.Role != "user" {
			continue
		}
		for _, b := range blocks(m.Content) {
			if b.Type == "tool_result" {
				t.Results = append(t.Results, resultText(b.Content))
			}
		}
		break
	}
	return t, true, nil
}

func resultText(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		}
	}
	var ref []struct {
		ToolName string `json:"tool_name"`
	}
	if json.Unmarshal(raw, &ref) == nil {
		for _, r := range ref {
			if r.ToolName != "" {
				parts = append(parts, "tool_reference:"+r.ToolName)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func (anthropic) side(w http.ResponseWriter, r *http.Request, body []byte) bool {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"input_tokens":10}`))
		return true
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		var req anthropicRequest
		_ = json.Unmarshal(body, &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"msg_side","type":"message","role":"assistant","model":"scripted","content":[{"type":"text","text":"ok"}],` +
				`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`))
			return true
		}
		anthropic{}.answer(w, 0, Reply{Text: "ok"})
		return true
	}
	return false
}

func (anthropic) answer(w http.ResponseWriter, turn int, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	id := fmt.Sprintf("msg_%d", turn)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": "scripted", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
	}})
	index := 0
	if r.Text != "" || len(r.Calls) == 0 {
		text := r.Text
		if text == "" {
			text = "done"
		}
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": text}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, c := range r.Calls {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", turn, i), "name": c.Name, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{
			"type": "input_json_delta", "partial_json": mustJSON(c.Input)}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	stop := "end_turn"
	if len(r.Calls) > 0 {
		stop = "tool_use"
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 1}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
