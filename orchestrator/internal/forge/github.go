package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v82/github"

	"github.com/toolscope/toolscope/internal/toolapi"
)

type githubClient struct {
	c       *github.Client
	graphql string
}

func newGitHub(baseURL, token string, hc *http.Client) (*githubClient, error) {
	c := github.NewClient(hc).WithAuthToken(token)
	base, err := url.Parse(strings.TrimRight(baseURL, "/") + "/")
	if err != nil {
		return nil, fmt.Errorf("GitHub API base URL: %w", err)
	}
	c.BaseURL = base
	// GraphQL: api.github.com/graphql; GitHub Enterprise: HOST/api/graphql.
	gql := *base
	if p := strings.TrimSuffix(base.Path, "/"); strings.HasSuffix(p, "/api/v3") {
		gql.Path = strings.TrimSuffix(p, "/v3") + "/graphql"
	} else {
		gql.Path = p + "/graphql"
	}
	return &githubClient{c: c, graphql: gql.String()}, nil
}

// ghErr converts a go-github failure.
func ghErr(err error) error {
	if err == nil {
		return nil
	}
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		return classify("GitHub", http.StatusForbidden, rl.Message, time.Until(rl.Rate.Reset.Time))
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		wait := time.Minute
		if abuse.RetryAfter != nil {
			wait = *abuse.RetryAfter
		}
		return classify("GitHub", http.StatusTooManyRequests, abuse.Message, wait)
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		msg := er.Message
		for _, e := range er.Errors {
			if e.Message != "" {
				msg += "; " + e.Message
			} else if e.Field != "" {
				msg += fmt.Sprintf("; %s %s", e.Field, e.Code)
			}
		}
		return classify("GitHub", er.Response.StatusCode, msg, retryAfter(er.Response))
	}
	return transportError("GitHub", err)
}

func retryAfter(r *http.Response) time.Duration {
	if r == nil {
		return 0
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil {
		return time.Duration(s) * time.Second
	}
	return 0
}

func split(repo Repo) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo.Path, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", &Error{Code: CodeInvalid, Message: fmt.Sprintf("%q is not an owner/name GitHub repository", repo.Path)}
	}
	return owner, name, nil
}

func (g *githubClient) CurrentUser(ctx context.Context) (string, error) {
	u, _, err := g.c.Users.Get(ctx, "")
	if err != nil {
		return "", ghErr(err)
	}
	return u.GetLogin(), nil
}

func ghChange(pr *github.PullRequest) Change {
	state := pr.GetState()
	if pr.GetMerged() || pr.MergedAt != nil {
		state = "merged"
	}
	return Change{
		Number: int64(pr.GetNumber()), URL: pr.GetHTMLURL(), Title: pr.GetTitle(), State: state, Draft: pr.GetDraft(),
		Source: pr.GetHead().GetRef(), Target: pr.GetBase().GetRef(), HeadSHA: pr.GetHead().GetSHA(),
	}
}

func (g *githubClient) Create(ctx context.Context, repo Repo, in CreateInput) (Change, error) {
	owner, name, err := split(repo)
	if err != nil {
		return Change{}, err
	}
	base := in.Base
	if base == "" {
		r, _, err := g.c.Repositories.Get(ctx, owner, name)
		if err != nil {
			return Change{}, ghErr(err)
		}
		base = r.GetDefaultBranch()
	}
	pr, _, err := g.c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{
		Title: &in.Title, Head: &in.Branch, Base: &base, Body: &in.Body, Draft: &in.Draft,
	})
	if err != nil {
		return Change{}, ghErr(err)
	}
	return ghChange(pr), nil
}

func (g *githubClient) Status(ctx context.Context, repo Repo, number int64) (Status, error) {
	owner, name, err := split(repo)
	if err != nil {
		return Status{}, err
	}
	pr, _, err := g.c.PullRequests.Get(ctx, owner, name, int(number))
	if err != nil {
		return Status{}, ghErr(err)
	}
	st := Status{Change: ghChange(pr), Mergeable: pr.GetMergeableState(), CheckRuns: []toolapi.Check{}, Reviews: []toolapi.Review{},
		RequestedReviewers: []string{}}
	for _, u := range pr.RequestedReviewers {
		st.RequestedReviewers = append(st.RequestedReviewers, u.GetLogin())
	}
	var states []string
	opts := &github.ListCheckRunsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		runs, resp, err := g.c.Checks.ListCheckRunsForRef(ctx, owner, name, st.HeadSHA, opts)
		if err != nil {
			return Status{}, ghErr(err)
		}
		for _, r := range runs.CheckRuns {
			s := r.GetStatus()
			if s == "completed" {
				s = r.GetConclusion()
			}
			st.CheckRuns = append(st.CheckRuns, toolapi.Check{Name: r.GetName(), Status: s})
			states = append(states, s)
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	st.Checks = overall(states)

	latest := map[string]string{}
	var order []string
	ropts := &github.ListOptions{PerPage: 100}
	for {
		reviews, resp, err := g.c.PullRequests.ListReviews(ctx, owner, name, int(number), ropts)
		if err != nil {
			return Status{}, ghErr(err)
		}
		for _, r := range reviews {
			user := r.GetUser().GetLogin()
			if _, seen := latest[user]; !seen {
				order = append(order, user)
			}
			if r.GetState() != "COMMENTED" || latest[user] == "" {
				latest[user] = r.GetState()
			}
		}
		if resp.NextPage == 0 {
			break
		}
		ropts.Page = resp.NextPage
	}
	approvals, changes := 0, 0
	for _, user := range order {
		st.Reviews = append(st.Reviews, toolapi.Review{User: user, State: strings.ToLower(latest[user])})
		switch latest[user] {
		case "APPROVED":
			approvals++
		case "CHANGES_REQUESTED":
			changes++
		}
	}
	st.Approved = approvals > 0 && changes == 0
	if st.UnresolvedThreads, err = g.unresolvedThreads(ctx, owner, name, number); err != nil {
		return Status{}, err
	}
	return st, nil
}

// unresolvedThreads asks GraphQL, the only GitHub API that knows whether a
// review thread is resolved.
func (g *githubClient) unresolvedThreads(ctx context.Context, owner, name string, number int64) (int, error) {
	query := `query($owner:String!,$name:String!,$number:Int!,$after:String){repository(owner:$owner,name:$name){` +
		`pullRequest(number:$number){reviewThreads(first:100,after:$after){nodes{isResolved} pageInfo{hasNextPage endCursor}}}}}`
	unresolved := 0
	var after *string
	for {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{
			"owner": owner, "name": name, "number": number, "after": after}})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.graphql, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := g.c.Client().Do(req)
		if err != nil {
			return 0, transportError("GitHub", err)
		}
		var out struct {
			Data struct {
				Repository struct {
					PullRequest struct {
						ReviewThreads struct {
							Nodes    []struct{ IsResolved bool }
							PageInfo struct {
								HasNextPage bool
								EndCursor   string
							}
						}
					}
				}
			}
			Errors []struct{ Message string }
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, classify("GitHub", resp.StatusCode, "GraphQL review threads", retryAfter(resp))
		}
		if err != nil || len(out.Errors) > 0 {
			return 0, &Error{Code: CodeFailed, Message: "GitHub GraphQL could not list review threads"}
		}
		threads := out.Data.Repository.PullRequest.ReviewThreads
		for _, n := range threads.Nodes {
			if !n.IsResolved {
				unresolved++
			}
		}
		if !threads.PageInfo.HasNextPage {
			return unresolved, nil
		}
		cursor := threads.PageInfo.EndCursor
		after = &cursor
	}
}

func ghComment(c *github.PullRequestComment) toolapi.Comment {
	thread := c.GetID()
	if c.InReplyTo != nil {
		thread = c.GetInReplyTo()
	}
	return toolapi.Comment{
		ThreadID: strconv.FormatInt(thread, 10), ID: strconv.FormatInt(c.GetID(), 10), Author: c.GetUser().GetLogin(),
		Body: c.GetBody(), Path: c.GetPath(), Line: c.GetLine(), Resolvable: true,
	}
}

func (g *githubClient) Comments(ctx context.Context, repo Repo, number int64) ([]toolapi.Comment, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	out := []toolapi.Comment{}
	opts := &github.PullRequestListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		comments, resp, err := g.c.PullRequests.ListComments(ctx, owner, name, int(number), opts)
		if err != nil {
			return nil, ghErr(err)
		}
		for _, c := range comments {
			out = append(out, ghComment(c))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func (g *githubClient) Reply(ctx context.Context, repo Repo, number int64, threadID, body string) (toolapi.Comment, error) {
	owner, name, err := split(repo)
	if err != nil {
		return toolapi.Comment{}, err
	}
	id, err := strconv.ParseInt(threadID, 10, 64)
	if err != nil {
		return toolapi.Comment{}, &Error{Code: CodeInvalid, Message: fmt.Sprintf("thread_id %q is not a GitHub comment id", threadID)}
	}
	c, _, err := g.c.PullRequests.CreateCommentInReplyTo(ctx, owner, name, int(number), body, id)
	if err != nil {
		return toolapi.Comment{}, ghErr(err)
	}
	return ghComment(c), nil
}

func (g *githubClient) RequestReviewers(ctx context.Context, repo Repo, number int64, usernames []string) ([]string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	pr, _, err := g.c.PullRequests.RequestReviewers(ctx, owner, name, int(number), github.ReviewersRequest{Reviewers: usernames})
	if err != nil {
		return nil, ghErr(err)
	}
	out := []string{}
	for _, u := range pr.RequestedReviewers {
		out = append(out, u.GetLogin())
	}
	return out, nil
}

// Observe is one GET of the pull request: state, head, requested
// reviewers, and mergeable_state ("clean": checks and reviews satisfied;
// "unstable": failing checks).
func (g *githubClient) Observe(ctx context.Context, repo Repo, number int64) (Observation, error) {
	owner, name, err := split(repo)
	if err != nil {
		return Observation{}, err
	}
	pr, _, err := g.c.PullRequests.Get(ctx, owner, name, int(number))
	if err != nil {
		return Observation{}, ghErr(err)
	}
	ch := ghChange(pr)
	o := Observation{State: ch.State, HeadSHA: ch.HeadSHA, URL: ch.URL, Checks: "pending",
		Reviewers: ObservedReviewers{Valid: pr.RequestedReviewers != nil, Usernames: []string{}}}
	for _, u := range pr.RequestedReviewers {
		o.Reviewers.Usernames = append(o.Reviewers.Usernames, u.GetLogin())
	}
	switch pr.GetMergeableState() {
	case "clean":
		o.Checks, o.Green = "passing", true
	case "unstable":
		o.Checks = "failing"
	}
	return o, nil
}

func (g *githubClient) Reviewers(ctx context.Context, repo Repo, number int64) ([]string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	r, _, err := g.c.PullRequests.ListReviewers(ctx, owner, name, int(number), nil)
	if err != nil {
		return nil, ghErr(err)
	}
	out := []string{}
	for _, u := range r.Users {
		out = append(out, u.GetLogin())
	}
	return out, nil
}

func (g *githubClient) Merge(ctx context.Context, repo Repo, number int64) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	_, _, err = g.c.PullRequests.Merge(ctx, owner, name, int(number), "", nil)
	return ghErr(err)
}
