package nn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// A checkpoint is a directory holding two files.
//
//	model.safetensors  the weights in the safetensors format: an 8-byte
//	                   little-endian header length, a JSON header giving each
//	                   tensor's dtype ("F32"), shape and byte range, then the
//	                   raw little-endian float32 data. The header's
//	                   __metadata__ carries "format" ("delegate.nn"),
//	                   "format_version", "config" (the Config as JSON) and
//	                   the caller's own keys.
//	config.json        the Config plus "format_version".
//
// Tensor names follow Meta's Llama checkpoints: tok_embeddings.weight,
// layers.N.attention_norm.weight, layers.N.attention.{wq,wk,wv,wo}.weight,
// layers.N.ffn_norm.weight, layers.N.feed_forward.{w1,w2,w3}.weight,
// norm.weight and, when the output head is untied, output.weight. Each is
// stored (out, in), the layout of Params.
//
// Version history; a fixture of each released version lives in testdata/:
//
//	1  the layout above.
const CheckpointVersion = 1

const (
	ckptWeightsName = "model.safetensors"
	ckptConfigName  = "config.json"
	ckptFormat      = "delegate.nn"
	// ckptMaxHeader bounds the JSON header a loader will read.
	// It is far above what any model here needs, far below what would exhaust
	// memory.
	ckptMaxHeader = 64 << 20
)

// ckptReservedMeta are the metadata keys the format itself uses.
var ckptReservedMeta = []string{"format", "format_version", "config"}

// ckptTensor is one named view of Params.
type ckptTensor struct {
	name  string
	shape []int
	data  []float32
}

// ckptTensors lists p's tensors in the order they are stored.
func ckptTensors(p *Params) []ckptTensor {
	c := p.Config
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	ts := []ckptTensor{{"tok_embeddings.weight", []int{c.Vocab, d}, p.TokenEmb}}
	for i, l := range p.Layers {
		pre := "layers." + strconv.Itoa(i) + "."
		ts = append(ts,
			ckptTensor{pre + "attention_norm.weight", []int{d}, l.AttnNorm},
			ckptTensor{pre + "attention.wq.weight", []int{d, d}, l.Wq},
			ckptTensor{pre + "attention.wk.weight", []int{kv, d}, l.Wk},
			ckptTensor{pre + "attention.wv.weight", []int{kv, d}, l.Wv},
			ckptTensor{pre + "attention.wo.weight", []int{d, d}, l.Wo},
			ckptTensor{pre + "ffn_norm.weight", []int{d}, l.FFNNorm},
			ckptTensor{pre + "feed_forward.w1.weight", []int{h, d}, l.W1},
			ckptTensor{pre + "feed_forward.w2.weight", []int{d, h}, l.W2},
			ckptTensor{pre + "feed_forward.w3.weight", []int{h, d}, l.W3},
		)
	}
	ts = append(ts, ckptTensor{"norm.weight", []int{d}, p.FinalNorm})
	if !c.TiedOutput {
		ts = append(ts, ckptTensor{"output.weight", []int{c.Vocab, d}, p.Output})
	}
	return ts
}

// SafetensorsEntry is one tensor's record in a safetensors header, ours or Hugging Face's.
// The inference engine's loader reads Hugging Face's with
// ParseSafetensorsHeader too.
type SafetensorsEntry struct {
	DType       string `json:"dtype"`
	Shape       []int  `json:"shape"`
	DataOffsets [2]int `json:"data_offsets"`
}

// ckptConfigFile is config.json.
type ckptConfigFile struct {
	FormatVersion int `json:"format_version"`
	Config
}

// Save writes p to the checkpoint directory dir, creating it if needed.
// meta holds the caller's own metadata, such as a step count or a data set
// name; its keys must not be "format", "format_version" or "config". Each
// file is written to a temporary name and renamed into place, weights
// first. So a crash never leaves a half-written file under the final name.
// Save does not modify p and may run concurrently with other readers of p.
func Save(dir string, p *Params, meta map[string]string) error {
	if err := p.Config.Validate(); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", dir, err)
	}
	if len(p.Data) != p.Config.Size() {
		return fmt.Errorf("save checkpoint %s: params hold %d values, config needs %d", dir, len(p.Data), p.Config.Size())
	}
	for _, k := range ckptReservedMeta {
		if _, ok := meta[k]; ok {
			return fmt.Errorf("save checkpoint %s: metadata key %q is reserved", dir, k)
		}
	}
	cfgJSON, err := json.Marshal(p.Config)
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	md := map[string]string{
		"format":         ckptFormat,
		"format_version": strconv.Itoa(CheckpointVersion),
		"config":         string(cfgJSON),
	}
	for k, v := range meta {
		md[k] = v
	}
	header, err := ckptHeader(ckptTensors(p), md)
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", dir, err)
	}
	err = ckptWriteAtomic(filepath.Join(dir, ckptWeightsName), func(w io.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		return ckptWriteFloats(w, p.Data)
	})
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	cfgFile, err := json.MarshalIndent(ckptConfigFile{CheckpointVersion, p.Config}, "", "  ")
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", dir, err)
	}
	err = ckptWriteAtomic(filepath.Join(dir, ckptConfigName), func(w io.Writer) error {
		_, err := w.Write(append(cfgFile, '\n'))
		return err
	})
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// ckptHeader builds the safetensors JSON header, tensors in storage order.
// It pads with spaces to a multiple of 8 bytes so the data is aligned. The
// tensors must be contiguous in that order, as Params lays them out.
func ckptHeader(ts []ckptTensor, md map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"__metadata__":`)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vj, err := json.Marshal(md[k])
		if err != nil {
			return nil, err
		}
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	off := 0
	for _, t := range ts {
		n := 4 * len(t.data)
		e, err := json.Marshal(SafetensorsEntry{"F32", t.shape, [2]int{off, off + n}})
		if err != nil {
			return nil, err
		}
		off += n
		b.WriteString(`,"` + t.name + `":`)
		b.Write(e)
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), nil
}

// ckptWriteFloats writes v as little-endian float32, bit for bit.
func ckptWriteFloats(w io.Writer, v []float32) error {
	buf := make([]byte, 0, 64<<10)
	for len(v) > 0 {
		n := min(len(v), cap(buf)/4)
		buf = buf[:4*n]
		for i, x := range v[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		v = v[n:]
	}
	return nil
}

// ckptWriteAtomic writes path through a temporary file in the same
// directory, synced and renamed into place.
func ckptWriteAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()           // already failing; the close error adds nothing
			os.Remove(f.Name()) // best effort: the temporary file is garbage either way
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}

// Load reads the checkpoint in dir written by Save. It returns the
// parameters and the caller's metadata, without the format's own keys. Its
// errors name the file, the tensor or field, and both values. It fails when:
//   - the format version is not CheckpointVersion;
//   - config.json and the weights disagree on the config;
//   - a tensor is missing, unexpected, or of another dtype or shape;
//   - a byte range is out of bounds, overlaps or leaves a gap;
//   - the file is truncated;
//   - a weight is NaN or infinite.
func Load(dir string) (*Params, map[string]string, error) {
	return LoadFS(os.DirFS(dir), dir)
}

// LoadFS is Load from the directory "." of fsys, such as a checkpoint
// embedded in the binary. Errors refer to that directory as name. The
// weights file must support io.ReaderAt, as os and embed files do.
func LoadFS(fsys fs.FS, name string) (*Params, map[string]string, error) {
	cfgPath := filepath.Join(name, ckptConfigName)
	b, err := fs.ReadFile(fsys, ckptConfigName)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", cfgPath, err)
	}
	c, err := ckptParseConfig(b)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", cfgPath, err)
	}
	wPath := filepath.Join(name, ckptWeightsName)
	f, err := fsys.Open(ckptWeightsName)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", wPath, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", wPath, err)
	}
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return nil, nil, fmt.Errorf("checkpoint %s: the file system's files cannot be read at an offset", wPath)
	}
	// Check the config against the file's size before allocating, so that a
	// config.json asking for absurd sizes fails instead of exhausting memory.
	if need := 4 * ckptValues(c); need > float64(st.Size()) {
		return nil, nil, fmt.Errorf("checkpoint %s: truncated: config needs %.0f bytes of weights, the file holds %d", wPath, need, st.Size())
	}
	p, err := Alloc(c)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", cfgPath, err)
	}
	meta, err := ckptReadWeights(io.NewSectionReader(ra, 0, st.Size()), p)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", wPath, err)
	}
	return p, meta, nil
}

// ckptValues is Config.Size computed in float64, which cannot overflow
// whatever a config file says.
func ckptValues(c Config) float64 {
	d, kv, h := float64(c.Dim), float64(c.KVDim()), float64(c.Hidden)
	layer := 2*d + 2*d*d + 2*kv*d + 3*h*d
	n := float64(c.Vocab)*d + float64(c.Layers)*layer + d
	if !c.TiedOutput {
		n += float64(c.Vocab) * d
	}
	return n
}

func ckptParseConfig(b []byte) (Config, error) {
	var probe struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return Config{}, fmt.Errorf("parse: %w", err)
	}
	if probe.FormatVersion == nil {
		return Config{}, errors.New("no format_version field")
	}
	if *probe.FormatVersion != CheckpointVersion {
		return Config{}, fmt.Errorf("format_version is %d, this build reads version %d: load it with a build that matches or re-save it", *probe.FormatVersion, CheckpointVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f ckptConfigFile
	if err := dec.Decode(&f); err != nil {
		return Config{}, fmt.Errorf("parse: %w", err)
	}
	if err := f.Config.Validate(); err != nil {
		return Config{}, err
	}
	return f.Config, nil
}

// ckptReadWeights fills p from the safetensors file f and returns the
// caller's metadata.
func ckptReadWeights(f *io.SectionReader, p *Params) (map[string]string, error) {
	size := f.Size()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, fmt.Errorf("truncated: file is %d bytes, shorter than the 8-byte header length", size)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen > ckptMaxHeader {
		return nil, fmt.Errorf("header length %d exceeds the limit of %d bytes", hlen, ckptMaxHeader)
	}
	if int64(hlen) > size-8 {
		return nil, fmt.Errorf("truncated: header length %d exceeds the %d bytes after it", hlen, size-8)
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	entries, md, err := ParseSafetensorsHeader(header)
	if err != nil {
		return nil, err
	}
	if md == nil {
		return nil, errors.New("header has no __metadata__")
	}
	meta, err := ckptCheckMeta(md, p.Config)
	if err != nil {
		return nil, err
	}
	dataStart := 8 + int64(hlen)
	dataLen := size - dataStart
	ts := ckptTensors(p)
	if err := ckptCheckEntries(entries, p.Config, ts, dataLen); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	for _, t := range ts {
		e := entries[t.name]
		r := io.NewSectionReader(f, dataStart+int64(e.DataOffsets[0]), int64(e.DataOffsets[1]-e.DataOffsets[0]))
		dst := t.data
		for len(dst) > 0 {
			k := min(len(dst), len(buf)/4)
			if _, err := io.ReadFull(r, buf[:4*k]); err != nil {
				return nil, fmt.Errorf("tensor %s: read: %w", t.name, err)
			}
			for i := range k {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
			}
			dst = dst[k:]
		}
		if err := ckptCheckFinite(t); err != nil {
			return nil, err
		}
	}
	return meta, nil
}

// ckptCheckFinite fails on the first NaN or infinite value of t.
// The error names the tensor, the flat index and the index per dimension.
// Otherwise a model whose weights diverged in training loads and answers
// garbage.
func ckptCheckFinite(t ckptTensor) error {
	for i, x := range t.data {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			idx := make([]int, len(t.shape))
			r := i
			for d := len(t.shape) - 1; d >= 0; d-- {
				idx[d] = r % t.shape[d]
				r /= t.shape[d]
			}
			return fmt.Errorf("tensor %s holds %v at index %d (element %v of shape %v): not a usable model (a training run that diverged writes such weights)", t.name, x, i, idx, t.shape)
		}
	}
	return nil
}

// ParseSafetensorsHeader reads a safetensors header key by key.
// The header is the JSON object after the 8-byte length. Reading key by key
// catches a duplicated name rather than silently overwriting it. It returns
// the tensors' records and the __metadata__ strings, nil when there are none.
func ParseSafetensorsHeader(header []byte) (map[string]SafetensorsEntry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("header is not a JSON object")
	}
	entries := map[string]SafetensorsEntry{}
	var md map[string]string
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("parse header: %w", err)
		}
		name := tok.(string) // object keys are always strings
		if name == "__metadata__" {
			if seenMeta {
				return nil, nil, errors.New("header holds __metadata__ twice")
			}
			seenMeta = true
			if err := dec.Decode(&md); err != nil {
				return nil, nil, fmt.Errorf("parse header __metadata__: %w", err)
			}
			continue
		}
		if _, ok := entries[name]; ok {
			return nil, nil, fmt.Errorf("header holds tensor %s twice", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("parse header tensor %s: %w", name, err)
		}
		ed := json.NewDecoder(bytes.NewReader(raw))
		ed.DisallowUnknownFields()
		var e SafetensorsEntry
		if err := ed.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("parse header tensor %s: %w", name, err)
		}
		entries[name] = e
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("parse header: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("parse header: data after the JSON object")
	}
	if !seenMeta {
		md = nil // absent, which our own format does not allow (ckptCheckMeta) and Hugging Face's does
	}
	return entries, md, nil
}

// ckptCheckMeta checks the format's own metadata against config.json and
// returns the rest.
func ckptCheckMeta(md map[string]string, want Config) (map[string]string, error) {
	if md["format"] != ckptFormat {
		return nil, fmt.Errorf("metadata format is %q, want %q", md["format"], ckptFormat)
	}
	if v := md["format_version"]; v != strconv.Itoa(CheckpointVersion) {
		return nil, fmt.Errorf("metadata format_version is %q, this build reads version %d: load it with a build that matches or re-save it", v, CheckpointVersion)
	}
	var got Config
	dec := json.NewDecoder(bytes.NewReader([]byte(md["config"])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		return nil, fmt.Errorf("metadata config: %w", err)
	}
	if got != want {
		gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
		for i := range gv.NumField() {
			if gv.Field(i).Interface() != wv.Field(i).Interface() {
				tag, _, _ := strings.Cut(gv.Type().Field(i).Tag.Get("json"), ",")
				return nil, fmt.Errorf("metadata config %s is %v, config.json says %v", tag, gv.Field(i).Interface(), wv.Field(i).Interface())
			}
		}
	}
	meta := map[string]string{}
	for k, v := range md {
		if !slices.Contains(ckptReservedMeta, k) {
			meta[k] = v
		}
	}
	return meta, nil
}

// ckptCheckEntries checks every header entry against the tensors the config calls for.
// The byte ranges must also tile the data region exactly.
func ckptCheckEntries(entries map[string]SafetensorsEntry, c Config, ts []ckptTensor, dataLen int64) error {
	want := make(map[string]bool, len(ts))
	for _, t := range ts {
		want[t.name] = true
		e, ok := entries[t.name]
		if !ok {
			return fmt.Errorf("missing tensor %s", t.name)
		}
		if e.DType != "F32" {
			return fmt.Errorf("tensor %s has dtype %s, want F32", t.name, e.DType)
		}
		if !slices.Equal(e.Shape, t.shape) {
			return fmt.Errorf("tensor %s has shape %v, config wants %v", t.name, e.Shape, t.shape)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || int64(end-b) != 4*int64(len(t.data)) {
			return fmt.Errorf("tensor %s has data_offsets [%d %d], shape %v needs %d bytes", t.name, b, end, t.shape, 4*len(t.data))
		}
		if int64(end) > dataLen {
			return fmt.Errorf("truncated: tensor %s ends at byte %d of the data, which holds %d bytes", t.name, end, dataLen)
		}
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		if !want[name] {
			return fmt.Errorf("unexpected tensor %s: config has layers %d, tied_output %v", name, c.Layers, c.TiedOutput)
		}
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := entries[names[i]].DataOffsets[0], entries[names[j]].DataOffsets[0]
		return a < b || a == b && names[i] < names[j]
	})
	var at int64
	prev := "the start of the data"
	for _, name := range names {
		o := entries[name].DataOffsets
		switch {
		case int64(o[0]) < at:
			return fmt.Errorf("tensor %s at data_offsets [%d %d] overlaps %s", name, o[0], o[1], prev)
		case int64(o[0]) > at:
			return fmt.Errorf("gap of %d bytes between %s and tensor %s", int64(o[0])-at, prev, name)
		}
		at, prev = int64(o[1]), "tensor "+name
	}
	if at != dataLen {
		return fmt.Errorf("data region holds %d bytes, tensors cover %d", dataLen, at)
	}
	return nil
}

// ReadMeta returns the caller's metadata of the checkpoint in dir, as Save was given it.
// It reads only config.json and the weights file's header, checked as Load
// checks them.
func ReadMeta(dir string) (map[string]string, error) {
	cfgPath := filepath.Join(dir, ckptConfigName)
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", cfgPath, err)
	}
	c, err := ckptParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", cfgPath, err)
	}
	wPath := filepath.Join(dir, ckptWeightsName)
	f, err := os.Open(wPath)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", wPath, err)
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, fmt.Errorf("checkpoint %s: truncated: no header length", wPath)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen > ckptMaxHeader {
		return nil, fmt.Errorf("checkpoint %s: header length %d exceeds the limit of %d bytes", wPath, hlen, ckptMaxHeader)
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, fmt.Errorf("checkpoint %s: read header: %w", wPath, err)
	}
	_, md, err := ParseSafetensorsHeader(header)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", wPath, err)
	}
	meta, err := ckptCheckMeta(md, c)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", wPath, err)
	}
	return meta, nil
}
