package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/toolscope/toolscope/internal/toolapi"
)

type gitlabClient struct {
	c *gitlab.Client
}

func newGitLab(baseURL, token string, hc *http.Client) (*gitlabClient, error) {
	// No client-side retries: a rate-limited answer reaches the agent with
	// its retry-after, and the Limiter keeps the connection quiet until then.
	c, err := gitlab.NewClient(token, gitlab.WithBaseURL(baseURL), gitlab.WithHTTPClient(hc), gitlab.WithoutRetries())
	if err != nil {
		return nil, fmt.Errorf("GitLab client: %w", err)
	}
	return &gitlabClient{c: c}, nil
}

func glErr(err error) error {
	if err == nil {
		return nil
	}
	var er *gitlab.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return classify("GitLab", er.Response.StatusCode, er.Message, retryAfter(er.Response))
	}
	if errors.Is(err, gitlab.ErrNotFound) {
		return classify("GitLab", http.StatusNotFound, "", 0)
	}
	return transportError("GitLab", err)
}

func (g *gitlabClient) CurrentUser(ctx context.Context) (string, error) {
	u, _, err := g.c.Users.CurrentUser(gitlab.WithContext(ctx))
	if err != nil {
		return "", glErr(err)
	}
	return u.Username, nil
}

func glChange(mr *gitlab.BasicMergeRequest) Change {
	state := mr.State
	if state == "opened" {
		state = "open"
	}
	return Change{
		Number: mr.IID, URL: mr.WebURL, Title: mr.Title, State: state, Draft: mr.Draft,
		Source: mr.SourceBranch, Target: mr.TargetBranch, HeadSHA: mr.SHA,
	}
}

func (g *gitlabClient) Create(ctx context.Context, repo Repo, in CreateInput) (Change, error) {
	title := in.Title
	if in.Draft && !strings.HasPrefix(strings.ToLower(title), "draft:") {
		title = "Draft: " + title // GitLab marks drafts by title
	}
	base := in.Base
	if base == "" {
		p, _, err := g.c.Projects.GetProject(repo.Path, nil, gitlab.WithContext(ctx))
		if err != nil {
			return Change{}, glErr(err)
		}
		base = p.DefaultBranch
	}
	mr, _, err := g.c.MergeRequests.CreateMergeRequest(repo.Path, &gitlab.CreateMergeRequestOptions{
		Title: &title, Description: &in.Body, SourceBranch: &in.Branch, TargetBranch: &base,
	}, gitlab.WithContext(ctx))
	if err != nil {
		return Change{}, glErr(err)
	}
	return glChange(&mr.BasicMergeRequest), nil
}

func (g *gitlabClient) Status(ctx context.Context, repo Repo, number int64) (Status, error) {
	mr, _, err := g.c.MergeRequests.GetMergeRequest(repo.Path, number, nil, gitlab.WithContext(ctx))
	if err != nil {
		return Status{}, glErr(err)
	}
	st := Status{Change: glChange(&mr.BasicMergeRequest), Mergeable: mr.DetailedMergeStatus, CheckRuns: []toolapi.Check{},
		Reviews: []toolapi.Review{}, RequestedReviewers: []string{}}
	for _, u := range mr.Reviewers {
		st.RequestedReviewers = append(st.RequestedReviewers, u.Username)
	}
	var states []string
	if p := mr.HeadPipeline; p != nil {
		st.CheckRuns = append(st.CheckRuns, toolapi.Check{Name: "pipeline #" + strconv.FormatInt(p.ID, 10), Status: p.Status})
		states = append(states, p.Status)
	}
	st.Checks = overall(states)
	approvals, _, err := g.c.MergeRequests.GetMergeRequestApprovals(repo.Path, number, gitlab.WithContext(ctx))
	if err != nil {
		return Status{}, glErr(err)
	}
	st.Approved = approvals.Approved && len(approvals.ApprovedBy) > 0
	for _, a := range approvals.ApprovedBy {
		if a.User != nil {
			st.Reviews = append(st.Reviews, toolapi.Review{User: a.User.Username, State: "approved"})
		}
	}
	comments, err := g.Comments(ctx, repo, number)
	if err != nil {
		return Status{}, err
	}
	unresolved := map[string]bool{}
	for _, c := range comments {
		if !c.Resolved && c.Resolvable {
			unresolved[c.ThreadID] = true
		}
	}
	st.UnresolvedThreads = len(unresolved)
	return st, nil
}

func (g *gitlabClient) Comments(ctx context.Context, repo Repo, number int64) ([]toolapi.Comment, error) {
	out := []toolapi.Comment{}
	opts := &gitlab.ListMergeRequestDiscussionsOptions{ListOptions: gitlab.ListOptions{PerPage: 100}}
	for {
		discussions, resp, err := g.c.Discussions.ListMergeRequestDiscussions(repo.Path, number, opts, gitlab.WithContext(ctx))
		if err != nil {
			return nil, glErr(err)
		}
		for _, d := range discussions {
			for _, n := range d.Notes {
				if n.System {
					continue
				}
				c := toolapi.Comment{ThreadID: d.ID, ID: strconv.FormatInt(n.ID, 10), Author: n.Author.Username, Body: n.Body,
					Resolved: n.Resolved, Resolvable: n.Resolvable}
				if n.Position != nil {
					c.Path, c.Line = n.Position.NewPath, int(n.Position.NewLine)
				}
				out = append(out, c)
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func (g *gitlabClient) Reply(ctx context.Context, repo Repo, number int64, threadID, body string) (toolapi.Comment, error) {
	n, _, err := g.c.Discussions.AddMergeRequestDiscussionNote(repo.Path, number, threadID,
		&gitlab.AddMergeRequestDiscussionNoteOptions{Body: &body}, gitlab.WithContext(ctx))
	if err != nil {
		return toolapi.Comment{}, glErr(err)
	}
	return toolapi.Comment{ThreadID: threadID, ID: strconv.FormatInt(n.ID, 10), Author: n.Author.Username, Body: n.Body,
		Resolved: n.Resolved, Resolvable: n.Resolvable}, nil
}

func (g *gitlabClient) RequestReviewers(ctx context.Context, repo Repo, number int64, usernames []string) ([]string, error) {
	mr, _, err := g.c.MergeRequests.GetMergeRequest(repo.Path, number, nil, gitlab.WithContext(ctx))
	if err != nil {
		return nil, glErr(err)
	}
	ids := []int64{}
	for _, u := range mr.Reviewers {
		ids = append(ids, u.ID)
	}
	for _, name := range usernames {
		users, _, err := g.c.Users.ListUsers(&gitlab.ListUsersOptions{Username: &name}, gitlab.WithContext(ctx))
		if err != nil {
			return nil, glErr(err)
		}
		if len(users) == 0 {
			return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("GitLab has no user %q", name)}
		}
		if !slices.Contains(ids, users[0].ID) {
			ids = append(ids, users[0].ID)
		}
	}
	updated, _, err := g.c.MergeRequests.UpdateMergeRequest(repo.Path, number, &gitlab.UpdateMergeRequestOptions{ReviewerIDs: &ids},
		gitlab.WithContext(ctx))
	if err != nil {
		return nil, glErr(err)
	}
	out := []string{}
	for _, u := range updated.Reviewers {
		out = append(out, u.Username)
	}
	return out, nil
}

// Observe is one GET of the merge request: state, head, reviewers, head
// pipeline, and detailed_merge_status ("mergeable": pipeline and
// approvals satisfied).
func (g *gitlabClient) Observe(ctx context.Context, repo Repo, number int64) (Observation, error) {
	mr, _, err := g.c.MergeRequests.GetMergeRequest(repo.Path, number, nil, gitlab.WithContext(ctx))
	if err != nil {
		return Observation{}, glErr(err)
	}
	ch := glChange(&mr.BasicMergeRequest)
	o := Observation{State: ch.State, HeadSHA: ch.HeadSHA, URL: ch.URL, Checks: "none",
		Reviewers: ObservedReviewers{Valid: mr.Reviewers != nil, Usernames: []string{}}}
	for _, u := range mr.Reviewers {
		o.Reviewers.Usernames = append(o.Reviewers.Usernames, u.Username)
	}
	if p := mr.HeadPipeline; p != nil {
		o.Checks = overall([]string{p.Status})
	}
	o.Green = mr.DetailedMergeStatus == "mergeable" && (o.Checks == "passing" || o.Checks == "none")
	return o, nil
}

func (g *gitlabClient) Reviewers(ctx context.Context, repo Repo, number int64) ([]string, error) {
	reviewers, _, err := g.c.MergeRequests.GetMergeRequestReviewers(repo.Path, number, gitlab.WithContext(ctx))
	if err != nil {
		return nil, glErr(err)
	}
	out := []string{}
	for _, r := range reviewers {
		if r.User != nil {
			out = append(out, r.User.Username)
		}
	}
	return out, nil
}

func (g *gitlabClient) Merge(ctx context.Context, repo Repo, number int64) error {
	_, _, err := g.c.MergeRequests.AcceptMergeRequest(repo.Path, number, nil, gitlab.WithContext(ctx))
	return glErr(err)
}
