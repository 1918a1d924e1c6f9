//go:build !amd64 || purego

package kernel

// archQ8Dot4: no q8_0 assembly here.
func archQ8Dot4() q8Dot4Func { return nil }

// archQ8Panels: no q8_0 assembly here.
func archQ8Panels() (q8PanelsFunc, q8Panels4Func) { return nil, nil }

// archQuantizePanelAct: no q8_0 assembly here.
func archQuantizePanelAct() func(dst []byte, x []float32) { return nil }
