package nn

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var ckptUpdate = flag.Bool("ckpt-update", false, "rewrite the checkpoint fixture of the current format version")

func ckptTestConfig(tied bool) Config {
	return Config{Vocab: 8, Dim: 8, Layers: 2, Heads: 2, KVHeads: 1, Hidden: 12, Context: 16, TiedOutput: tied}.WithDefaults()
}

func ckptTestParams(t *testing.T, c Config, seed uint64) *Params {
	t.Helper()
	p, err := Alloc(c)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(seed)
	return p
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, tied := range []bool{false, true} {
		t.Run(map[bool]string{false: "untied", true: "tied"}[tied], func(t *testing.T) {
			p := ckptTestParams(t, ckptTestConfig(tied), 7)
			// Values a lossy path would change: signed zero, subnormals, the
			// largest finite values (NaN and infinities are refused on load:
			// TestCheckpointLoadRejectsNonFinite).
			p.Data[0] = math.MaxFloat32
			p.Data[1] = float32(math.Copysign(0, -1))
			p.Data[2] = -math.MaxFloat32
			p.Data[3] = math.Float32frombits(1)
			dir := filepath.Join(t.TempDir(), "ckpt")
			meta := map[string]string{"step": "42", "note": "ünïcode \"quoted\""}
			if err := Save(dir, p, meta); err != nil {
				t.Fatal(err)
			}
			q, gotMeta, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if q.Config != p.Config {
				t.Errorf("config = %+v, want %+v", q.Config, p.Config)
			}
			if !reflect.DeepEqual(gotMeta, meta) {
				t.Errorf("meta = %v, want %v", gotMeta, meta)
			}
			if len(q.Data) != len(p.Data) {
				t.Fatalf("got %d values, want %d", len(q.Data), len(p.Data))
			}
			for i := range p.Data {
				if got, want := math.Float32bits(q.Data[i]), math.Float32bits(p.Data[i]); got != want {
					t.Fatalf("Data[%d] bits = %#x, want %#x", i, got, want)
				}
			}
			if tied && &q.Output[0] != &q.TokenEmb[0] {
				t.Error("loaded tied model does not share its output head with the embedding")
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 2 {
				t.Errorf("checkpoint dir holds %d files, want 2 (no temporaries left)", len(entries))
			}
		})
	}
}

func TestCheckpointLoadRejectsNonFinite(t *testing.T) {
	c := ckptTestConfig(false)
	tests := []struct {
		name  string
		value float32
		set   func(p *Params) []float32 // the tensor the bad value goes into
		index int
		want  string
	}{
		{"nan in the embedding", float32(math.NaN()), func(p *Params) []float32 { return p.TokenEmb }, 0,
			"tensor tok_embeddings.weight holds NaN at index 0 (element [0 0] of shape [8 8])"},
		{"+inf in a layer", float32(math.Inf(1)), func(p *Params) []float32 { return p.Layers[1].W2 }, 13,
			"tensor layers.1.feed_forward.w2.weight holds +Inf at index 13 (element [1 1] of shape [8 12])"},
		{"-inf in the output head", float32(math.Inf(-1)), func(p *Params) []float32 { return p.Output }, 62,
			"tensor output.weight holds -Inf at index 62 (element [7 6] of shape [8 8])"},
		{"nan payload in the final norm", math.Float32frombits(0x7fc00123), func(p *Params) []float32 { return p.FinalNorm }, 5,
			"tensor norm.weight holds NaN at index 5 (element [5] of shape [8])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ckptTestParams(t, c, 3)
			tt.set(p)[tt.index] = tt.value
			// A later value is bad too: the error names the first.
			p.Output[len(p.Output)-1] = float32(math.NaN())
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := Save(dir, p, nil); err != nil {
				t.Fatal(err)
			}
			for _, load := range []struct {
				name string
				fn   func() error
			}{
				{"Load", func() error { _, _, err := Load(dir); return err }},
				{"LoadFS", func() error { _, _, err := LoadFS(os.DirFS(dir), dir); return err }},
			} {
				err := load.fn()
				if err == nil {
					t.Fatalf("%s: got nil error, want one naming %q", load.name, tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
					t.Errorf("%s: error = %q, want it to contain %q and the directory", load.name, err, tt.want)
				}
			}
		})
	}
}

func TestCheckpointValuesMatchSize(t *testing.T) {
	for _, tied := range []bool{false, true} {
		c := ckptTestConfig(tied)
		if got, want := ckptValues(c), float64(c.Size()); got != want {
			t.Errorf("tied=%v: ckptValues = %v, Size = %v", tied, got, want)
		}
	}
}

func TestCheckpointSaveRejects(t *testing.T) {
	p := ckptTestParams(t, ckptTestConfig(false), 1)
	if err := Save(t.TempDir(), p, map[string]string{"config": "x"}); err == nil || !strings.Contains(err.Error(), `"config" is reserved`) {
		t.Errorf("reserved meta key: err = %v", err)
	}
	short := &Params{Config: p.Config, Data: p.Data[:10]}
	if err := Save(t.TempDir(), short, nil); err == nil || !strings.Contains(err.Error(), "params hold 10 values") {
		t.Errorf("short params: err = %v", err)
	}
}

// ckptFixtureValue is the value of Data[i] in the version-1 fixture: exact
// in float32, distinct, of both signs.
func ckptFixtureValue(i int) float32 { return float32(i%97-48) / 64 }

func TestCheckpointFixtureV1(t *testing.T) {
	dir := filepath.Join("testdata", "checkpoint-v1")
	c := Config{Vocab: 6, Dim: 4, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 6, Context: 8, RopeTheta: 10000, NormEps: 1e-5}
	wantMeta := map[string]string{"step": "3"}
	if *ckptUpdate {
		if CheckpointVersion != 1 {
			t.Fatal("the version-1 fixture is released; add a fixture for the new version instead")
		}
		p, err := Alloc(c)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Data {
			p.Data[i] = ckptFixtureValue(i)
		}
		if err := Save(dir, p, wantMeta); err != nil {
			t.Fatal(err)
		}
	}
	p, meta, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Config != c {
		t.Errorf("config = %+v, want %+v", p.Config, c)
	}
	if !reflect.DeepEqual(meta, wantMeta) {
		t.Errorf("meta = %v, want %v", meta, wantMeta)
	}
	for i, v := range p.Data {
		if v != ckptFixtureValue(i) {
			t.Fatalf("Data[%d] = %v, want %v", i, v, ckptFixtureValue(i))
		}
	}
	// Saving the same model today must give the released bytes.
	again := t.TempDir()
	if err := Save(again, p, meta); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ckptWeightsName, ckptConfigName} {
		got, err1 := os.ReadFile(filepath.Join(again, name))
		want, err2 := os.ReadFile(filepath.Join(dir, name))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s written today differs from the released version-1 fixture", name)
		}
	}
}

// ckptSplit returns a safetensors file's header as a generic JSON object and
// its data bytes.
func ckptSplit(t *testing.T, path string) (map[string]any, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var h map[string]any
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	return h, b[8+n:]
}

func ckptJoin(t *testing.T, path string, h map[string]any, data []byte) {
	t.Helper()
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(append(out, hb...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointLoadErrors(t *testing.T) {
	entry := func(h map[string]any, name string) map[string]any { return h[name].(map[string]any) }
	editHeader := func(edit func(h map[string]any, data []byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, ckptWeightsName)
			h, data := ckptSplit(t, path)
			data = edit(h, data)
			ckptJoin(t, path, h, data)
		}
	}
	editMeta := func(key, value string) func(t *testing.T, dir string) {
		return editHeader(func(h map[string]any, data []byte) []byte {
			h["__metadata__"].(map[string]any)[key] = value
			return data
		})
	}
	editFile := func(name string, edit func([]byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, name)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		want    string
	}{
		{"wrong shape", editHeader(func(h map[string]any, d []byte) []byte {
			entry(h, "layers.1.feed_forward.w1.weight")["shape"] = []int{8, 12}
			return d
		}), "model.safetensors: tensor layers.1.feed_forward.w1.weight has shape [8 12], config wants [12 8]"},
		{"wrong dtype", editHeader(func(h map[string]any, d []byte) []byte {
			entry(h, "norm.weight")["dtype"] = "F16"
			return d
		}), "tensor norm.weight has dtype F16, want F32"},
		{"missing tensor", editHeader(func(h map[string]any, d []byte) []byte {
			delete(h, "norm.weight")
			return d
		}), "missing tensor norm.weight"},
		{"extra tensor", editHeader(func(h map[string]any, d []byte) []byte {
			h["extra.weight"] = map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int{len(d), len(d) + 4}}
			return append(d, 0, 0, 0, 0)
		}), "unexpected tensor extra.weight: config has layers 2, tied_output false"},
		{"unknown entry field", editHeader(func(h map[string]any, d []byte) []byte {
			entry(h, "norm.weight")["bogus"] = 1
			return d
		}), `parse header tensor norm.weight: json: unknown field "bogus"`},
		{"offsets overlap", editHeader(func(h map[string]any, d []byte) []byte {
			entry(h, "layers.0.attention.wv.weight")["data_offsets"] = entry(h, "layers.0.attention.wk.weight")["data_offsets"]
			return d
		}), "overlaps tensor layers.0.attention.wk.weight"},
		{"offsets size lie", editHeader(func(h map[string]any, d []byte) []byte {
			entry(h, "norm.weight")["data_offsets"] = []int{0, 4}
			return d
		}), "tensor norm.weight has data_offsets [0 4], shape [8] needs 32 bytes"},
		{"trailing bytes", editHeader(func(h map[string]any, d []byte) []byte { return append(d, 1, 2, 3, 4) }),
			"data region holds"},
		{"truncated data", editFile(ckptWeightsName, func(b []byte) []byte { return b[:len(b)-10] }),
			"truncated: tensor output.weight ends at byte"},
		{"truncated file", editFile(ckptWeightsName, func(b []byte) []byte { return b[:20] }),
			"truncated: config needs 4512 bytes of weights, the file holds 20"},
		{"header length lies", editFile(ckptWeightsName, func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b, uint64(len(b)-7))
			return b
		}), "truncated: header length 6553 exceeds the 6552 bytes after it"},
		{"header not json", editFile(ckptWeightsName, func(b []byte) []byte {
			copy(b[8:], "[")
			return b
		}), "header is not a JSON object"},
		{"metadata version", editMeta("format_version", "2"),
			`metadata format_version is "2", this build reads version 1`},
		{"metadata config disagrees", editMeta("config", `{"vocab":8,"dim":16,"layers":2,"heads":2,"kv_heads":1,"hidden":12,"context":16,"tied_output":false,"rope_theta":10000,"norm_eps":1e-5}`),
			"metadata config dim is 16, config.json says 8"},
		{"config version", editFile(ckptConfigName, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"format_version": 1`), []byte(`"format_version": 2`), 1)
		}), "config.json: format_version is 2, this build reads version 1"},
		{"config unknown key", editFile(ckptConfigName, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"vocab"`), []byte(`"vocab_size": 3, "vocab"`), 1)
		}), `unknown field "vocab_size"`},
		{"config invalid", editFile(ckptConfigName, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"heads": 2`), []byte(`"heads": 3`), 1)
		}), "dim 8 must be a positive multiple of heads 3"},
		{"config too large", editFile(ckptConfigName, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"vocab": 8`), []byte(`"vocab": 800000000000`), 1)
		}), "config needs 51200000004000 bytes of weights, the file holds"},
		{"config missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, ckptConfigName)); err != nil {
				t.Fatal(err)
			}
		}, "config.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Save(dir, ckptTestParams(t, ckptTestConfig(false), 3), nil); err != nil {
				t.Fatal(err)
			}
			tt.corrupt(t, dir)
			_, _, err := Load(dir)
			if err == nil {
				t.Fatalf("Load succeeded, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// FuzzCheckpointWeights feeds arbitrary bytes as model.safetensors to the loader.
// With the fixture's config, it must return an error or a model, never
// panic or allocate beyond the header limit.
func FuzzCheckpointWeights(f *testing.F) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "checkpoint-v1", ckptWeightsName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture)
	f.Add(fixture[:len(fixture)/2])
	f.Add([]byte{})
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 2), "{}"...))
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 60), `{"__metadata__":{},"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`...))
	c := Config{Vocab: 6, Dim: 4, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 6, Context: 8, RopeTheta: 10000, NormEps: 1e-5}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Alloc(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ckptReadWeights(io.NewSectionReader(bytes.NewReader(b), 0, int64(len(b))), p); err == nil && !bytes.Equal(b, fixture) {
			// Another file may load only if it holds a valid header for c.
			if _, _, perr := ParseSafetensorsHeader(b[8 : 8+binary.LittleEndian.Uint64(b)]); perr != nil {
				t.Fatalf("loaded a file whose header does not parse: %v", perr)
			}
		}
	})
}
