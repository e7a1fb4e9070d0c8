package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

const (
	e2eGitHubToken = "ghp_E2ESECRETGITHUBTOKEN000111222"
	e2eGitLabToken = "glpat-E2ESECRETGITLABTOKEN000111"
)

// callStructured calls a tool through MCP and decodes its structured result.
func callStructured[T any](t *testing.T, c *mcptest.Client, tool string, args map[string]any) T {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError, "%s: %v", tool, res.Content[0].(*mcp.TextContent).Text)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestAgentDrivesPullAndMergeRequests is the acceptance scenario:
// an agent-side MCP client on a task with one GitHub and one GitLab
// repository creates a PR and an MR, reads their status and comments,
// replies, requests reviewers and sets automation — end to end through
// agentctl, the orchestrator-opened stream and the handlers, against the
// fake providers.
func TestAgentDrivesPullAndMergeRequests(t *testing.T) {
	t.Parallel()
	gh := forgetest.NewGitHub(t, e2eGitHubToken, "octo-bot")
	gh.AddRepo("acme/api", "main", "fix-login")
	gl := forgetest.NewGitLab(t, e2eGitLabToken, "gl-bot")
	gl.AddProject("acme/platform/web", "main", "fix-login")
	gl.AddUser("erin")

	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServerEnv(t, dataDir, []string{"E2E_GH_TOKEN=" + e2eGitHubToken, "E2E_GL_TOKEN=" + e2eGitLabToken},
		"--agentctl", executortest.Agentctl(t))
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	connected := srv.ok(t, "workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "E2E_GH_TOKEN")
	assert.Contains(t, connected, "as octo-bot", "connect validated the token and recorded the username")
	srv.ok(t, "workspace", "connect", ws, "--provider", "gitlab", "--base-url", gl.URL, "--token-env", "E2E_GL_TOKEN")
	r := srv.run(t, "workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "E2E_UNSET")
	assert.Equal(t, 5, r.code)
	assert.Contains(t, r.stderr, "E2E_UNSET")

	ghRepo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	glRepo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/platform/web")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", ghRepo)
	srv.ok(t, "source", "add", task, "--repo", glRepo)
	sid := srv.launchLocal(t, task)

	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")
	assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))

	si := callStructured[toolapi.SessionInfo](t, c, "session_info", nil)
	assert.Equal(t, []toolapi.Account{{Provider: "github", Username: "octo-bot", Validated: true}, {Provider: "gitlab", Username: "gl-bot", Validated: true}}, si.Accounts)

	pr := callStructured[toolapi.ChangeRequest](t, c, toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login", "title": "Fix login", "body": "Fixes #1"})
	mr := callStructured[toolapi.ChangeRequest](t, c, toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "Fix login", "draft": true})
	assert.Equal(t, ghRepo, pr.RepositoryID)
	assert.Equal(t, glRepo, mr.RepositoryID)
	assert.True(t, mr.Draft)

	gh.Update("acme/api", int(pr.Number), func(p *forgetest.GitHubPull) { p.Checks = [][3]string{{"ci", "in_progress", ""}} })
	ghThread := strconv.FormatInt(gh.AddComment("acme/api", int(pr.Number), "alice", "please add a test", "login.go", 10), 10)
	glThread := gl.AddDiscussion("acme/platform/web", mr.Number, "frank", "rename this", "login.go", 4)

	prStatus := callStructured[toolapi.ChangeStatus](t, c, toolapi.GitHubPRStatus, nil)
	assert.Equal(t, "pending", prStatus.Checks)
	assert.Equal(t, 1, prStatus.UnresolvedThreads)
	mrStatus := callStructured[toolapi.ChangeStatus](t, c, toolapi.GitLabMRStatus, nil)
	assert.Equal(t, "open", mrStatus.State)
	assert.Equal(t, 1, mrStatus.UnresolvedThreads)

	prComments := callStructured[toolapi.Comments](t, c, toolapi.GitHubPRComments, nil)
	require.Len(t, prComments.Comments, 1)
	assert.Equal(t, ghThread, prComments.Comments[0].ThreadID)
	mrComments := callStructured[toolapi.Comments](t, c, toolapi.GitLabMRDiscussions, nil)
	require.Len(t, mrComments.Comments, 1)
	callStructured[toolapi.Comment](t, c, toolapi.GitHubPRReply, map[string]any{"thread_id": ghThread, "body": "added"})
	callStructured[toolapi.Comment](t, c, toolapi.GitLabMRReply, map[string]any{"thread_id": glThread, "body": "renamed"})

	assert.Equal(t, []string{"carol"}, callStructured[toolapi.ReviewersResult](t, c, toolapi.GitHubPRRequestReviewers,
		map[string]any{"reviewers": []string{"carol"}}).RequestedReviewers)
	assert.Equal(t, []string{"erin"}, callStructured[toolapi.ReviewersResult](t, c, toolapi.GitLabMRRequestReviewers,
		map[string]any{"reviewers": []string{"erin"}}).RequestedReviewers)

	set := callStructured[toolapi.AutomationResult](t, c, toolapi.GitHubPRSetAutomation, map[string]any{"auto_merge": true, "auto_fix_checks": true})
	assert.True(t, set.Automation.AutoMerge)
	assert.True(t, callStructured[toolapi.AutomationResult](t, c, toolapi.GitHubPRAutomation, nil).Automation.AutoFixChecks)
	callStructured[toolapi.AutomationResult](t, c, toolapi.GitLabMRSetAutomation, map[string]any{"prompt_on_merged": false})
	assert.False(t, callStructured[toolapi.AutomationResult](t, c, toolapi.GitLabMRAutomation, nil).Automation.PromptOnMerged)

	// What the providers received.
	ghPR, ok := gh.PullRequest("acme/api", int(pr.Number))
	require.True(t, ok)
	assert.Equal(t, []string{"carol"}, ghPR.Requested)
	assert.Len(t, ghPR.Comments, 2, "the comment and its reply")
	glMR, ok := gl.MergeRequest("acme/platform/web", mr.Number)
	require.True(t, ok)
	assert.Len(t, glMR.Reviewers, 1)

	// The tokens never show in the orchestrator's output.
	srv.stop(t)
	for _, secret := range []string{e2eGitHubToken, e2eGitLabToken} {
		assert.NotContains(t, srv.logs.String(), secret)
		assert.False(t, strings.Contains(connected, secret))
	}
}
