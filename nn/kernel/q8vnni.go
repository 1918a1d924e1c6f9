package kernel

import (
	"encoding/binary"
	"math"
)

// q8_0 panels: the layout of a q8_0 Packed where the CPU has AVX-512 VNNI.
// Like a float32 Packed, it keeps 16 rows of W to a panel, one row per
// lane of a ZMM register. Panel q is k/32 blocks of q8PanelBlockBytes
// each. A block starts with the 16 rows' scales as float32, widened once
// at load. Eight chunks of 64 bytes follow. Chunk c holds values 4c to
// 4c+3 of the block for each row in turn, each plus 128: VPDPBUSD wants its
// weights unsigned. Rows past n are zero.
//
// The activations are quantised to q8PanelActBytes a block: the float32
// scale dx, then -128 times the sum of the 32 values as an int32, then the
// values. Starting each row's integer sum at that correction makes it
// exact: Σ(q+128)·x - 128·Σx = Σq·x. Each row then adds (dq·dx)·sum to a
// float32 running total, block after block, one fused multiply-add.

const (
	// q8PanelBlockBytes is the bytes of one block of one panel.
	q8PanelBlockBytes = nr*4 + nr*Q8Block
	// q8PanelActBytes is the bytes of one block of activations.
	q8PanelActBytes = 4 + 4 + Q8Block
)

// q8PanelsFunc computes the 16 outputs of each of panels panels for one row of activations.
// w holds the panels, x the row's blocks, and out receives 16·panels values.
type q8PanelsFunc func(blocks, panels int, w, x []byte, out []float32)

// q8Panels4Func is q8PanelsFunc for four rows of activations xstride bytes apart.
// Row r's outputs go to out[r·ldo:].
type q8Panels4Func func(blocks, panels int, w, x []byte, xstride int, out []float32, ldo int)

// activeQ8Panels and activeQ8Panels4 are the VNNI kernels; nil where the CPU
// lacks them, and then q8_0 Packeds keep llama.cpp's layout.
var (
	activeQ8Panels  q8PanelsFunc
	activeQ8Panels4 q8Panels4Func
)

// q8PanelBytes is the bytes of one panel of k values a row.
func q8PanelBytes(k int) int { return k / Q8Block * q8PanelBlockBytes }

// setQ8PanelRow stores row j of W, q8_0 blocks in llama.cpp's layout, in w's panels.
func (w *Packed) setQ8PanelRow(j int, row []byte) {
	panel := w.q8[j/nr*q8PanelBytes(w.k):]
	r := j % nr
	for b := range w.k / Q8Block {
		src := row[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
		dst := panel[b*q8PanelBlockBytes : (b+1)*q8PanelBlockBytes]
		d := F16ToFloat32(binary.LittleEndian.Uint16(src))
		binary.LittleEndian.PutUint32(dst[4*r:], math.Float32bits(d))
		for c := range Q8Block / 4 {
			for t := range 4 {
				dst[nr*4+c*4*nr+4*r+t] = src[2+4*c+t] ^ 0x80
			}
		}
	}
}

// q8PanelRow writes row j's values, d·q exactly, into dst.
func (w *Packed) q8PanelRow(dst []float32, j int) {
	panel := w.q8[j/nr*q8PanelBytes(w.k):]
	r := j % nr
	for b := range w.k / Q8Block {
		blk := panel[b*q8PanelBlockBytes : (b+1)*q8PanelBlockBytes]
		d := math.Float32frombits(binary.LittleEndian.Uint32(blk[4*r:]))
		for c := range Q8Block / 4 {
			for t := range 4 {
				dst[b*Q8Block+4*c+t] = d * float32(int8(blk[nr*4+c*4*nr+4*r+t]^0x80))
			}
		}
	}
}

// quantizePanelAct writes x (a multiple of 32 values) as activation blocks
// for the VNNI kernels into dst. It rounds as quantizeAct does. Where the
// VNNI kernels run, it is AVX-512 assembly with the same bytes
// (TestQuantizePanelActTwins).
var quantizePanelAct = goQuantizePanelAct

// goQuantizePanelAct is the portable quantizePanelAct.
func goQuantizePanelAct(dst []byte, x []float32) {
	for b := 0; b < len(x)/Q8Block; b++ {
		out := dst[b*q8PanelActBytes : (b+1)*q8PanelActBytes]
		d := quantizeBlock(out[8:8+Q8Block], x[b*Q8Block:(b+1)*Q8Block])
		var sum int32
		for _, q := range out[8 : 8+Q8Block] {
			sum += int32(int8(q))
		}
		binary.LittleEndian.PutUint32(out, math.Float32bits(d))
		binary.LittleEndian.PutUint32(out[4:], uint32(-128*sum))
	}
}

// matMulQ8Panels is matMulQ8Rows for a Packed in q8_0 panels, x quantised by quantizePanelAct.
// Rows of x go four at a time over tiles of panels that stay in L2
// meanwhile; the rest one at a time. A row's outputs are the same bits in
// either kernel, so they do not depend on m or on the column split.
func matMulQ8Panels(dst []float32, xq []byte, m int, w *Packed, j0, j1 int) {
	k, n := w.k, w.n
	blocks := k / Q8Block
	if blocks == 0 {
		for i := range m {
			clear(dst[i*n+j0 : i*n+j1])
		}
		return
	}
	rb := blocks * q8PanelActBytes
	pb := q8PanelBytes(k)
	q0, q1 := j0/nr, (j1+nr-1)/nr
	full := (j1 - j0) / nr // whole panels; a last one past n is cut short
	tile := max(1, (256<<10)/pb)
	var tail [4 * nr]float32
	m4 := m / 4 * 4
	for t := q0; t < q1; t += tile {
		t1 := min(t+tile, q1)
		tf := min(t1, q0+full) // panels of the tile that fit dst whole
		for i := 0; i < m4; i += 4 {
			x := xq[i*rb : (i+4)*rb]
			if tf > t {
				activeQ8Panels4(blocks, tf-t, w.q8[t*pb:tf*pb], x, rb, dst[i*n+t*nr:], n)
			}
			if tf < t1 {
				activeQ8Panels4(blocks, 1, w.q8[tf*pb:t1*pb], x, rb, tail[:], nr)
				for r := range 4 {
					copy(dst[(i+r)*n+tf*nr:(i+r)*n+j1], tail[r*nr:])
				}
			}
		}
		for i := m4; i < m; i++ {
			x := xq[i*rb : (i+1)*rb]
			if tf > t {
				activeQ8Panels(blocks, tf-t, w.q8[t*pb:tf*pb], x, dst[i*n+t*nr:])
			}
			if tf < t1 {
				activeQ8Panels(blocks, 1, w.q8[tf*pb:t1*pb], x, tail[:nr])
				copy(dst[i*n+tf*nr:i*n+j1], tail[:nr])
			}
		}
	}
}
