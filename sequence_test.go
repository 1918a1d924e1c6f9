package delegate

import (
	"slices"
	"testing"
)

// seqTrace builds a trace of two turns of one conversation by the role "strong".
// Each turn carries the prompt ids its backend reported.
func seqTrace(firstPrompt, secondPrompt []int) *Trace {
	user := Message{Role: RoleUser, Content: "q"}
	out1 := Message{Role: RoleAssistant, Content: "a1"}
	tool := Message{Role: RoleTool, Content: "r", ToolCallID: "c1"}
	out2 := Message{Role: RoleAssistant, Content: "a2"}
	lp := func(ids ...int) []TokenLogprob {
		var out []TokenLogprob
		for _, id := range ids {
			out = append(out, TokenLogprob{TokenID: id, Logprob: -0.5})
		}
		return out
	}
	root := &Node{ID: 0, Name: "route", Children: []*Node{
		{ID: 1, Name: "turn", Role: "strong", Model: "m", Messages: []Message{user}, Output: &out1,
			PromptTokenIDs: firstPrompt, Logprobs: lp(7, 8)},
		{ID: 2, Name: "turn", Role: "strong", Model: "m", Messages: []Message{user, out1, tool}, Output: &out2,
			PromptTokenIDs: secondPrompt, Logprobs: lp(9)},
	}}
	return &Trace{Root: root}
}

func TestSequencesMergeOrSplitOnTokenIDs(t *testing.T) {
	t.Run("ids extend: one sequence", func(t *testing.T) {
		seqs := Sequences(seqTrace([]int{1, 2}, []int{1, 2, 7, 8, 3, 4}), "strong")
		if len(seqs) != 1 {
			t.Fatalf("%d sequences, want 1", len(seqs))
		}
		s := seqs[0]
		if want := []int{1, 2, 7, 8, 3, 4, 9}; !slices.Equal(s.Tokens, want) {
			t.Errorf("tokens %v, want %v", s.Tokens, want)
		}
		if want := []int{MaskIgnore, MaskIgnore, 7, 8, MaskIgnore, MaskIgnore, 9}; !slices.Equal(s.Masks, want) {
			t.Errorf("masks %v, want %v", s.Masks, want)
		}
		if s.Split || len(s.Calls) != 2 {
			t.Errorf("split %v, calls %v", s.Split, s.Calls)
		}
	})
	t.Run("ids re-rendered: a new sample", func(t *testing.T) {
		// The second prompt renders the first turn's output as 70 80,
		// not the generated 7 8: gluing would train on ids never seen.
		seqs := Sequences(seqTrace([]int{1, 2}, []int{1, 2, 70, 80, 3, 4}), "strong")
		if len(seqs) != 2 {
			t.Fatalf("%d sequences, want 2", len(seqs))
		}
		if seqs[0].Split || !seqs[1].Split {
			t.Errorf("split flags %v, %v; want false, true", seqs[0].Split, seqs[1].Split)
		}
		if want := []int{1, 2, 7, 8}; !slices.Equal(seqs[0].Tokens, want) {
			t.Errorf("first tokens %v, want %v", seqs[0].Tokens, want)
		}
		if want := []int{1, 2, 70, 80, 3, 4, 9}; !slices.Equal(seqs[1].Tokens, want) {
			t.Errorf("second tokens %v, want %v", seqs[1].Tokens, want)
		}
		if want := []int{MaskIgnore, MaskIgnore, MaskIgnore, MaskIgnore, MaskIgnore, MaskIgnore, 9}; !slices.Equal(seqs[1].Masks, want) {
			t.Errorf("second masks %v, want %v", seqs[1].Masks, want)
		}
		if n := len(seqs[1].Messages); n != 4 || !seqs[1].Messages[3].Trained || seqs[1].Messages[1].Trained {
			t.Errorf("second sequence's messages %+v: want the whole conversation, only the last turn trained", seqs[1].Messages)
		}
	})
	t.Run("no ids: messages kept, tokens dropped", func(t *testing.T) {
		seqs := Sequences(seqTrace(nil, nil), "strong")
		if len(seqs) != 1 || seqs[0].NoTokens == "" || len(seqs[0].Tokens) != 0 {
			t.Fatalf("sequences %+v", seqs)
		}
	})
}

func TestSequencePolicyVersionIsTheOldest(t *testing.T) {
	tr := seqTrace([]int{1, 2}, []int{1, 2, 7, 8, 3, 4})
	v3, v2 := 3, 2
	calls := tr.Calls()
	calls[0].PolicyVersion, calls[1].PolicyVersion = &v3, &v2
	seqs := Sequences(tr, "strong")
	if len(seqs) != 1 || seqs[0].PolicyVersion == nil || *seqs[0].PolicyVersion != 2 {
		t.Fatalf("sequences %+v: want one of version 2, the older call's", seqs)
	}
	if v3 != 3 {
		t.Error("the call's version was changed")
	}
}

// A weak model's call between two turns of the strong model's conversation
// does not split it: each role's sequences are those of the role alone,
// in the order of their first calls, as the episode's samples are.
func TestSequencesOfTwoRolesInterleaved(t *testing.T) {
	tr := seqTrace([]int{1, 2}, []int{1, 2, 7, 8, 3, 4})
	turn1, turn2 := tr.Root.Children[0], tr.Root.Children[1]
	turn2.ID = 3
	weak := &Node{ID: 2, Name: "delegate", Role: "weak", Model: "w", Messages: []Message{{Role: RoleUser, Content: "47*28"}},
		Output: &Message{Role: RoleAssistant, Content: "1316"}, PromptTokenIDs: []int{5}, Logprobs: []TokenLogprob{{TokenID: 6, Logprob: -1}}}
	tr.Root.Children = []*Node{turn1, weak, turn2}
	seqs := Sequences(tr, "strong", "weak")
	var calls [][]int
	for _, s := range seqs {
		calls = append(calls, s.Calls)
	}
	if want := [][]int{{1, 3}, {2}}; !slices.EqualFunc(calls, want, slices.Equal) {
		t.Fatalf("sequences of calls %v, want %v", calls, want)
	}
	e := NewEpisode(tr, "t", "strong", []string{"strong", "weak"})
	if len(e.Samples) != len(seqs) {
		t.Fatalf("%d samples, %d sequences: want one sequence per sample", len(e.Samples), len(seqs))
	}
	for i, sm := range e.Samples {
		if !slices.Equal(sm.Calls, seqs[i].Calls) {
			t.Errorf("sample %d has calls %v, sequence %d %v", i, sm.Calls, i, seqs[i].Calls)
		}
	}
}
