package strategy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// renderRequest writes a call's messages (and the tools offered, for route)
// as plain text for a golden file.
func renderRequest(n *delegate.Node, tools []delegate.Tool) string {
	var b strings.Builder
	for _, tool := range tools {
		fmt.Fprintf(&b, "### tool %s\n%s\n%s\n\n", tool.Name, tool.Description, tool.Parameters)
	}
	for _, m := range n.Messages {
		fmt.Fprintf(&b, "### %s", m.Role)
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " (answers %s)", m.ToolCallID)
		}
		b.WriteString("\n")
		if m.Content != "" {
			b.WriteString(m.Content + "\n")
		}
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "-> %s %s(%s)\n", tc.ID, tc.Name, tc.Arguments)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -run Golden -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s: rendered messages differ from %s (run with -update if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", name, path, got, want)
	}
}

// TestGoldenPrompts checks every stage's messages of every strategy against golden files.
// It renders them for the fixtures' fixed inputs and compares with
// testdata/golden/<strategy>_<stage>.txt.
func TestGoldenPrompts(t *testing.T) {
	type stage struct {
		file string
		path []string // node names from the root
	}
	delegator, subagent := decomposeFixture("<|end_subtask|>")
	strong, weak := routeFixture()
	leader, peer := leadFixture()
	runs := []struct {
		name   string
		roles  Roles
		req    string
		stages []stage
	}{
		{NameSingle, Roles{Single: agent("", fake("single-model", modeltest.Reply("42 + 3 = 45.\nFinal answer: 45")))}, mathRequest,
			[]stage{{"single_answer", []string{NodeAnswer}}}},
		{NameDecompose, decomposeRoles(delegator, subagent), testRequest, []stage{
			{"decompose_plan", []string{NodePlan, NodeDelegator}},
			{"decompose_subagent", []string{NodeSubagents, SubagentNode(2)}},
			{"decompose_aggregate", []string{NodeAggregate, NodeDelegator}},
		}},
		{NameRoute, routeRoles(strong, weak), mathRequest, []stage{
			{"route_strong_turn1", []string{TurnNode(1), NodeStrong}},
			{"route_weak", []string{TurnNode(1), DelegateNode("call_a")}},
			{"route_strong_turn2", []string{TurnNode(2), NodeStrong}},
		}},
		{NameLead, Roles{Leader: agent("", leader), Peers: []delegate.Agent{agent("", peer)}}, mathRequest, []stage{
			{"lead_peer_round0", []string{RoundNode(0), PeerNode(1)}},
			{"lead_leader_round0", []string{RoundNode(0), NodeLeader}},
			{"lead_peer_round1", []string{RoundNode(1), PeerNode(2)}},
			{"lead_leader_round1", []string{RoundNode(1), NodeLeader}},
		}},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			tr := mustRun(t, mustNew(t, r.name, r.roles, DefaultConfig()), r.req)
			if tr.Failure != "" {
				t.Fatalf("failure = %q", tr.Failure)
			}
			for _, st := range r.stages {
				n := tr.Root
				for _, name := range st.path {
					n = child(t, n, name)
				}
				var tools []delegate.Tool
				if n.Name == NodeStrong {
					tools = []delegate.Tool{DelegateTool}
				}
				checkGolden(t, st.file, renderRequest(n, tools))
			}
		})
	}
}
