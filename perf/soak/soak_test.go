package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rollout"
)

// fixture is the content of an output directory, built from the records
// `delegate process` writes.
type fixture struct {
	arts    []rollout.Artifact
	groups  []rollout.GroupRecord
	summary rollout.Summary
	tail    string // appended to artifacts.jsonl after the records
	extra   []int  // indexes of arts written a second time
}

func art(id, status, reason string, retries int) rollout.Artifact {
	return rollout.Artifact{Version: rollout.ArtifactVersion, ID: id, Status: status, Reason: reason,
		Total: delegate.Totals{Calls: 5, Retries: retries}}
}

func group(id string, members ...string) rollout.GroupRecord {
	g := rollout.GroupRecord{Version: rollout.GroupVersion, ID: id}
	for i, m := range members {
		g.Rollouts = append(g.Rollouts, rollout.Member{ID: m, Index: i})
	}
	return g
}

// clean is a finished run of 2 items × G 2.
// One rollout failed on a timeout and one needed a retry; item t1's group dropped its failed member.
func clean() fixture {
	return fixture{
		arts: []rollout.Artifact{
			art("t0#0.0", rollout.StatusScored, "", 0),
			art("t0#0.1", rollout.StatusScored, "", 2),
			art("t1#0.0", rollout.StatusFailed, "call timeout", 1),
			art("t1#0.1", rollout.StatusScored, "", 0),
		},
		groups: []rollout.GroupRecord{group("t0#0", "t0#0.0", "t0#0.1")},
		summary: rollout.Summary{Version: rollout.SummaryVersion, Complete: true, Items: 2, GroupSize: 2,
			RolloutsPlanned: 4, Rollouts: 4, Groups: 2, GroupsWritten: 1, Retries: 5},
	}
}

func (f fixture) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var a strings.Builder
	line := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		a.Write(b)
		a.WriteByte('\n')
	}
	for _, x := range f.arts {
		line(x)
	}
	for _, i := range f.extra {
		line(f.arts[i])
	}
	a.WriteString(f.tail)
	if err := os.WriteFile(filepath.Join(dir, rollout.ArtifactsFile), []byte(a.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Reset()
	for _, g := range f.groups {
		line(g)
	}
	if err := os.WriteFile(filepath.Join(dir, rollout.GroupsFile), []byte(a.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(f.summary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rollout.SummaryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAccountDir(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(f *fixture)
		lost   int
		dup    int
		torn   int
		extra  int
		failed int
	}{
		{"clean", func(*fixture) {}, 0, 0, 0, 0, 1},
		{"an artifact written twice", func(f *fixture) { f.extra = []int{1} }, 0, 1, 0, 0, 1},
		{"a group written twice", func(f *fixture) { f.groups = append(f.groups, f.groups[0]) }, 0, 1, 0, 0, 1},
		{"a recorded rollout missing from the file", func(f *fixture) { f.arts = f.arts[:3] }, 1, 0, 0, 0, 1},
		{"a group naming a rollout the file lacks", func(f *fixture) {
			f.groups[0] = group("t0#0", "t0#0.0", "t0#0.9")
		}, 1, 0, 0, 0, 1},
		{"a torn last line", func(f *fixture) { f.tail = `{"version":1,"id":"t1#0.` }, 0, 0, 1, 0, 1},
		{"an unrecorded rollout in the file", func(f *fixture) {
			f.summary.Rollouts, f.summary.Complete = 3, false
		}, 0, 0, 0, 1, 1},
		{"skipped rollouts are not lost", func(f *fixture) {
			f.arts = f.arts[:2]
			f.summary.Rollouts, f.summary.RolloutsSkipped = 2, 2
		}, 0, 0, 0, 0, 0},
		{"an interrupted run is counted against its state", func(f *fixture) {
			f.arts = f.arts[:3]
			f.summary.Rollouts, f.summary.Complete, f.summary.Groups = 3, false, 1
		}, 0, 0, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clean()
			tt.edit(&f)
			a, err := AccountDir(f.write(t))
			if err != nil {
				t.Fatal(err)
			}
			if a.Lost != tt.lost || a.Duplicated != tt.dup || a.Torn != tt.torn || a.Extra != tt.extra || a.FailedTotal() != tt.failed {
				t.Errorf("lost %d dup %d torn %d extra %d failed %d; want %d %d %d %d %d (problems %q)",
					a.Lost, a.Duplicated, a.Torn, a.Extra, a.FailedTotal(), tt.lost, tt.dup, tt.torn, tt.extra, tt.failed, a.Problems)
			}
			wantClean := tt.lost+tt.dup+tt.torn+tt.extra == 0
			if err := a.Check(); (err == nil) != wantClean {
				t.Errorf("Check() = %v, want clean %v", err, wantClean)
			}
		})
	}
}

func TestAccountCounts(t *testing.T) {
	a, err := AccountDir(clean().write(t))
	if err != nil {
		t.Fatal(err)
	}
	if a.Completed != 3 || a.Failed["call timeout"] != 1 || a.RetriedRollouts != 2 || a.Retries != 5 ||
		a.Planned != 4 || a.Complete != 1 || a.Groups != 2 || a.GroupsWritten != 1 {
		t.Errorf("account = %+v", a)
	}
	var total Account
	total.Add(a)
	total.Add(a)
	if total.Dirs != 2 || total.Completed != 6 || total.Failed["call timeout"] != 2 || total.Retries != 10 {
		t.Errorf("sum of two = %+v", total)
	}
	if got, want := failedLine(map[string]int{"call timeout": 1, "call decode": 3, "panic": 1}), "call decode 3, call timeout 1, panic 1"; got != want {
		t.Errorf("failedLine = %q, want %q", got, want)
	}
}

func TestAccountNeedsSummary(t *testing.T) {
	dir := clean().write(t)
	if err := os.Remove(filepath.Join(dir, rollout.SummaryFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := AccountDir(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("err = %v, want one naming %s", err, dir)
	}
}

func TestParseRSS(t *testing.T) {
	tests := []struct {
		status string
		want   int64
		ok     bool
	}{
		{"Name:\tdelegate\nVmHWM:\t   30000 kB\nVmRSS:\t   25612 kB\nThreads:\t9\n", 25612 << 10, true},
		{"Name:\tdelegate\n", 0, false},
		{"VmRSS:\tlots\n", 0, false},
	}
	for _, tt := range tests {
		got, err := parseRSS(tt.status)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("parseRSS(%q) = %d, %v; want %d, ok %v", tt.status, got, err, tt.want, tt.ok)
		}
	}
}

func TestKillMoments(t *testing.T) {
	d := 10 * time.Minute
	a := killMoments(rand.New(rand.NewPCG(7, 0x50a4)), 5, d)
	b := killMoments(rand.New(rand.NewPCG(7, 0x50a4)), 5, d)
	if !slices.Equal(a, b) || !slices.IsSorted(a) || len(a) != 5 {
		t.Fatalf("moments %v and %v: want the same 5, sorted", a, b)
	}
	for _, m := range a {
		if m < d/20 || m >= d*19/20 {
			t.Errorf("moment %v outside the middle 90%% of %v", m, d)
		}
	}
}

func TestJudgeMemory(t *testing.T) {
	samples := func(rss ...int64) []rssSample {
		out := make([]rssSample, len(rss))
		for i, r := range rss {
			out[i] = rssSample{At: time.Duration(i*5) * time.Second, RSS: r << 20}
		}
		return out
	}
	tests := []struct {
		name  string
		lives []life
		flat  bool
		start int64
	}{
		{"settles after warming up", []life{
			{Index: 0, Duration: 20 * time.Second, Samples: samples(10, 30, 31)},
			{Index: 1, Duration: 60 * time.Second, Samples: samples(12, 25, 30, 31, 32, 33)},
		}, true, 30},
		{"grows", []life{{Index: 0, Duration: 60 * time.Second, Samples: samples(12, 25, 30, 40, 50, 60)}}, false, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := judgeMemory(tt.lives, 10*time.Second)
			if v.Flat != tt.flat || v.Start != tt.start<<20 {
				t.Errorf("verdict %+v; want flat %v from %d MiB", v, tt.flat, tt.start)
			}
		})
	}
}

func TestCountRepairs(t *testing.T) {
	log := "process: ...\nitems 3/40 ...\nrepaired /x/artifacts.jsonl: removed 40 bytes\nrepaired /x/groups.jsonl: removed 9 bytes\n"
	if got := countRepairs(log); got != 2 {
		t.Errorf("countRepairs = %d, want 2", got)
	}
}
