package openenv

import (
	"encoding/json"
	"reflect"
	"testing"
)

// plainInputs are reset requests and session params: plain ones, which
// skip the decoder, and others, which it reads or refuses.
var plainInputs = []struct {
	in    string
	plain bool
}{
	{`{"seed":3}`, true},
	{` { "seed" : 3 , "episode_id" : "e-1" } `, true},
	{`{"seed":null,"episode_id":null}`, true},
	{`{}`, true},
	{`{"seed":-4}`, true},
	{`{"seed":3,"seed":5}`, true},
	{`{"episode_id":"é"}`, true},
	{`{"Seed":3}`, false},
	{`{"se\u0065d":3}`, false},
	{`{"seed":1e3}`, false},
	{`{"seed":3.0}`, false},
	{`{"seed":"3"}`, false},
	{`{"seed":99999999999999999999}`, false},
	{`{"episode_id":"a\u0041"}`, false},
	{`{"episode_id":7}`, false},
	{`{"difficulty":"hard"}`, false},
	{`{"seed":3,"difficulty":"hard"}`, false},
	{`[1]`, false},
	{`null`, false},
	{`{"seed":`, false},
}

// TestResetRequestPlain: a plain reset request is read without the
// decoder, as the decoder reads it; any other goes to the decoder.
func TestResetRequestPlain(t *testing.T) {
	for _, tt := range plainInputs {
		t.Run(tt.in, func(t *testing.T) {
			var got ResetRequest
			if ok := got.readPlain([]byte(tt.in)); ok != tt.plain {
				t.Fatalf("readPlain: got %v, want %v", ok, tt.plain)
			}
			checkResetPlain(t, []byte(tt.in))
		})
	}
}

// checkResetPlain fails when readPlain takes b and reads it otherwise
// than the decoder, or UnmarshalJSON reads b otherwise than the decoder.
func checkResetPlain(t *testing.T, b []byte) {
	t.Helper()
	type known ResetRequest
	var want known
	werr := json.Unmarshal(b, &want)
	var plain ResetRequest
	if plain.readPlain(b) {
		if werr != nil || !reflect.DeepEqual(known(plain), want) {
			t.Errorf("readPlain(%s) = %+v, the decoder %+v, %v", b, plain, want, werr)
		}
		extra, err := extraFields(b, "seed", "episode_id")
		if err != nil || extra != nil {
			t.Errorf("readPlain took %s, which has extra fields %v (%v)", b, extra, err)
		}
	}
	var got ResetRequest
	gerr := got.UnmarshalJSON(b)
	if (gerr == nil) != (werr == nil) || (werr == nil && (!reflect.DeepEqual(got.Seed, want.Seed) || !reflect.DeepEqual(got.EpisodeID, want.EpisodeID))) {
		t.Errorf("UnmarshalJSON(%s) = %+v, %v; the decoder %+v, %v", b, got, gerr, want, werr)
	}
}

// TestSessionParamsPlain: plain session params are read without the
// decoder, as the decoder reads them.
func TestSessionParamsPlain(t *testing.T) {
	inputs := []struct {
		in    string
		plain bool
	}{
		{`{"seed":3,"session_id":"0123abcd"}`, true},
		{`{"session_id":"a","session_id":null}`, true},
		{`{"session_id":"a\u0041"}`, false},
		{`{"session_id":"a","extra":1}`, false},
	}
	for _, p := range plainInputs {
		if validJSON([]byte(p.in)) && startsObject([]byte(p.in)) {
			inputs = append(inputs, p)
		}
	}
	for _, tt := range inputs {
		t.Run(tt.in, func(t *testing.T) {
			var got sessionParams
			if ok := got.readPlain([]byte(tt.in)); ok != tt.plain {
				t.Fatalf("readPlain: got %v, want %v", ok, tt.plain)
			}
			checkSessionPlain(t, []byte(tt.in))
		})
	}
}

// checkSessionPlain fails when readPlain takes b, a valid JSON object,
// and reads it otherwise than the decoder.
func checkSessionPlain(t *testing.T, b []byte) {
	t.Helper()
	var plain, want sessionParams
	if !plain.readPlain(b) {
		return
	}
	if err := json.Unmarshal(b, &want); err != nil || !reflect.DeepEqual(plain, want) {
		t.Errorf("readPlain(%s) = %+v, the decoder %+v, %v", b, plain, want, err)
	}
}

// FuzzPlainParams holds the reset request's and the session params'
// plain readers to the decoder.
func FuzzPlainParams(f *testing.F) {
	for _, p := range plainInputs {
		f.Add(p.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		b := []byte(in)
		checkResetPlain(t, b)
		if validJSON(b) && startsObject(b) {
			checkSessionPlain(t, b)
		}
	})
}
