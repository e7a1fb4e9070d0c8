package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
)

func (a *app) sourcePolicy(conn *grpc.ClientConn) pb.SourcePolicyServiceClient {
	return pb.NewSourcePolicyServiceClient(conn)
}

var policyNames = map[string]pb.AgentSourcePolicy{
	"allow":   pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_ALLOW,
	"deny":    pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_DENY,
	"approve": pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_APPROVE,
}

func policyName(p pb.AgentSourcePolicy) string {
	for name, v := range policyNames {
		if v == p {
			return name
		}
	}
	return "allow" // a server from before the policy existed
}

var requestStateNames = map[string]pb.SourceRequestState{
	"pending":  pb.SourceRequestState_SOURCE_REQUEST_STATE_PENDING,
	"approved": pb.SourceRequestState_SOURCE_REQUEST_STATE_APPROVED,
	"rejected": pb.SourceRequestState_SOURCE_REQUEST_STATE_REJECTED,
	"all":      pb.SourceRequestState_SOURCE_REQUEST_STATE_UNSPECIFIED,
}

func requestStateName(s pb.SourceRequestState) string {
	for name, v := range requestStateNames {
		if v == s && name != "all" {
			return name
		}
	}
	return "unknown"
}

// setPolicyCmd is `workspace set-policy`.
func (a *app) setPolicyCmd() *cobra.Command {
	var agentSources string
	cmd := &cobra.Command{
		Use:   "set-policy WORKSPACE --agent-sources allow|deny|approve",
		Short: "Set what happens to repositories a workspace's agents attach themselves (task_add_sources)",
		Long: `Set the workspace's policy for agent-initiated source additions:

  allow    the agent's batch is attached at once (the default)
  deny     it is refused with the code source_addition_denied; the agent is told to ask a person
  approve  it is held as a source request until a person runs 'toolscope source approve' or
           'toolscope source reject'; the agent learns the outcome through task_inbox

Switching to deny rejects the workspace's pending requests (their agents are told).
Switching to allow or approve leaves them for a person to decide. Repositories a
person attaches ('toolscope source add') never go through the policy.`,
		Args: ExactArgs("WORKSPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, ok := policyNames[strings.ToLower(strings.TrimSpace(agentSources))]
			if !ok {
				return Usagef("invalid --agent-sources %q: use allow, deny or approve", agentSources)
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.sourcePolicy(conn).SetAgentSourcePolicy(ctx, &pb.SetAgentSourcePolicyRequest{WorkspaceId: args[0], Policy: p})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					printWorkspace(w, resp.GetWorkspace())
					for _, r := range resp.GetRejected() {
						fmt.Fprintf(w, "  rejected pending request\t%s\ton task %s\n", r.GetId(), r.GetTaskId())
					}
				})
			})
		},
	}
	cmd.Flags().StringVar(&agentSources, "agent-sources", "", "allow, deny or approve")
	return cmd
}

// sourceRequestCmds are `source requests|approve|reject`.
func (a *app) sourceRequestCmds() []*cobra.Command {
	var taskID, workspaceID, state string
	list := &cobra.Command{
		Use:   "requests [--task TASK | --workspace WORKSPACE] [--state pending|approved|rejected|all]",
		Short: "List the source requests agents made under the approve policy (pending ones by default)",
		Args:  ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, ok := requestStateNames[strings.ToLower(strings.TrimSpace(state))]
			if !ok {
				return Usagef("invalid --state %q: use pending, approved, rejected or all", state)
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.sourcePolicy(conn).ListSourceRequests(ctx, &pb.ListSourceRequestsRequest{TaskId: taskID, WorkspaceId: workspaceID, State: st})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printSourceRequests(w, resp.GetRequests()) })
			})
		},
	}
	list.Flags().StringVar(&taskID, "task", "", "only this task's requests")
	list.Flags().StringVar(&workspaceID, "workspace", "", "only this workspace's requests")
	list.Flags().StringVar(&state, "state", "pending", "pending, approved, rejected or all")
	approve := &cobra.Command{
		Use:   "approve REQUEST",
		Short: "Approve a pending source request: its repositories are attached as one batch and the agent is told",
		Args:  ExactArgs("REQUEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.sourcePolicy(conn).ApproveSourceRequest(ctx, &pb.ApproveSourceRequestRequest{RequestId: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					r := resp.GetRequest()
					fmt.Fprintf(w, "approved %s: attached %d of %d repositories\n", r.GetId(), len(r.GetAttachedRepositoryIds()), len(r.GetRepositoryIds()))
					if resp.GetTask() != nil {
						printTask(w, resp.GetTask())
					}
					printPushes(w, resp.GetPushes())
				})
			})
		},
	}
	var reason string
	reject := &cobra.Command{
		Use:   "reject REQUEST [--reason TEXT]",
		Short: "Reject a pending source request; the agent is told, with the reason",
		Args:  ExactArgs("REQUEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.sourcePolicy(conn).RejectSourceRequest(ctx, &pb.RejectSourceRequestRequest{RequestId: args[0], Reason: reason})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { fmt.Fprintf(w, "rejected %s\n", resp.GetRequest().GetId()) })
			})
		},
	}
	reject.Flags().StringVar(&reason, "reason", "", "why, for the agent (at most 500 characters)")
	return []*cobra.Command{list, approve, reject}
}

func printSourceRequests(w io.Writer, reqs []*pb.SourceRequest) {
	fmt.Fprintln(w, "ID\tTASK\tSTATE\tREPOSITORIES\tREQUESTED BY\tDECIDED BY\tREASON")
	for _, r := range reqs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.GetId(), r.GetTaskId(), requestStateName(r.GetState()),
			strings.Join(r.GetRepositoryIds(), ","), r.GetRequestedBy(), orDash(r.GetDecidedBy()), orDash(r.GetReason()))
	}
}

func printPushes(w io.Writer, pushes []*pb.SessionPush) {
	if len(pushes) > 0 {
		fmt.Fprintln(w, "  sessions") // a line of its own ends the repositories' columns
	}
	for _, p := range pushes {
		if p.GetOk() {
			fmt.Fprintf(w, "    pushed to session\t%s\t%s (generation %d)\n", p.GetSessionId(),
				providerList(p.GetApplied()), p.GetApplied().GetGeneration())
		} else {
			fmt.Fprintf(w, "    push FAILED for session\t%s\t%s; it keeps its old tools and needs repair ('toolscope session resume %s')\n",
				p.GetSessionId(), p.GetError(), p.GetSessionId())
		}
	}
}
