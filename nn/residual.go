package nn

// Add adds y to x elementwise: the residual connection, x += y.
func Add(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}
