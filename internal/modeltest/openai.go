package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// NewResponses serves the streaming Responses API (POST /v1/responses, as
// Codex calls it through a custom model provider with wire_api =
// "responses") for script. server is the MCP server name whose tools the
// turns measure.
func NewResponses(t testing.TB, server string, script Script) *Server {
	return newServer(t, responses{}, server, script)
}

// CodexProvider returns the codex -c overrides that make s Codex's model
// provider (no OPENAI_BASE_URL: Codex does not honour it), the form
// docs/agents.md shows for a gateway.
func (s *Server) CodexProvider() []string {
	return []string{
		"-c", "model_provider=scripted",
		"-c", fmt.Sprintf(`model_providers.scripted={name="scripted", base_url="%s/v1", wire_api="responses", env_key="OPENAI_API_KEY"}`, s.URL),
	}
}

type responses struct{}

type responsesTool struct {
	Type  string            `json:"type"`
	Name  string            `json:"name"`
	Tools []json.RawMessage `json:"tools"`
}

func (responses) parse(body []byte, server string) (*Turn, bool, error) {
	var req struct {
		Tools []json.RawMessage `json:"tools"`
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, false, fmt.Errorf("not a Responses request: %w", err)
	}
	// Codex offers tools in the request's tools, and in additional_tools
	// items of its input (namespaces of function tools).
	tools := slices.Clone(req.Tools)
	for _, raw := range req.Input {
		var item struct {
			Type  string            `json:"type"`
			Tools []json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(raw, &item) == nil && item.Type == "additional_tools" {
			tools = append(tools, item.Tools...)
		}
	}
	if len(tools) == 0 || len(req.Input) == 0 {
		return nil, false, nil
	}
	t := &Turn{Body: body}
	for _, raw := range tools {
		var tool responsesTool
		_ = json.Unmarshal(raw, &tool)
		if tool.Type != "namespace" {
			t.Tools = append(t.Tools, tool.Name)
			continue
		}
		if tool.Name == "mcp__"+server {
			t.ToolDefinitionBytes += len(raw)
		}
		for _, inner := range tool.Tools {
			var it responsesTool
			_ = json.Unmarshal(inner, &it)
			t.Tools = append(t.Tools, tool.Name+"."+it.Name)
		}
	}
	// Deferred namespaces are named in a developer message, their tools
	// not at all until loaded.
	for _, m := range deferredNamespace.FindAllSubmatch(body, -1) {
		t.Deferred = append(t.Deferred, string(m[1]))
		if string(m[1]) == "mcp__"+server {
			t.ToolDefinitionBytes += len("- ") + len(m[1]) + 1
		}
	}
	// The results of the model's last calls: the trailing outputs.
	for i := len(req.Input) - 1; i >= 0; i-- {
		var item struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal(req.Input[i], &item)
		if strings.HasSuffix(item.Type, "_call") {
			continue
		}
		if !strings.HasSuffix(item.Type, "_call_output") {
			break
		}
		t.Results = append([]string{outputText(item.Output)}, t.Results...)
	}
	return t, true, nil
}

var deferredNamespace = regexp.MustCompile(`\\n- (mcp__[A-Za-z0-9_-]+)`)

func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var texts []string
		for _, p := range parts {
			texts = append(texts, p.Text)
		}
		return strings.Join(texts, "\n")
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
		return obj.Content
	}
	return string(raw)
}

func (responses) side(w http.ResponseWriter, r *http.Request, _ []byte) bool {
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[],"models":[]}`))
		return true
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		responses{}.answer(w, 0, Reply{Text: "ok"})
		return true
	}
	return false
}

func (responses) answer(w http.ResponseWriter, turn int, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	id := fmt.Sprintf("resp_%d", turn)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id, "object": "response", "status": "in_progress"}})
	var items []map[string]any
	if r.Text != "" || len(r.Calls) == 0 {
		text := r.Text
		if text == "" {
			text = "done"
		}
		items = append(items, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", turn), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	for i, c := range r.Calls {
		if c.Code != "" {
			item := map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_%d_%d", turn, i), "call_id": fmt.Sprintf("call_%d_%d", turn, i),
				"name": c.Name, "input": c.Code, "status": "completed"}
			if c.Namespace != "" {
				item["namespace"] = c.Namespace
			}
			items = append(items, item)
			continue
		}
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", turn, i), "call_id": fmt.Sprintf("call_%d_%d", turn, i),
			"name": c.Name, "arguments": mustJSON(c.Input), "status": "completed"}
		if c.Namespace != "" {
			item["namespace"] = c.Namespace
		}
		items = append(items, item)
	}
	for i, item := range items {
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": item})
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
	}
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "object": "response", "status": "completed",
		"usage": map[string]any{"input_tokens": 1, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 1,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 2}}})
}
