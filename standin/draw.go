package standin

import (
	"math"
	"time"
)

// splitmix64 is one step of the SplitMix64 generator: a good 64-bit mix of x.
// It is cheap enough to run per request with no shared state.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// draws is a tiny counter-based generator.
// The i-th value of a stream is a pure function of its key and i,
// so a request's draws depend only on the seed and its arrival number.
type draws struct {
	key uint64
	i   uint64
}

// float returns the next value, uniform on [0, 1).
func (d *draws) float() float64 {
	d.i++
	return float64(splitmix64(d.key^splitmix64(d.i))>>11) / (1 << 53)
}

// latency draws one latency for the configured jitter; the mean is always
// c.Latency.
func (c *Config) latency(d *draws) time.Duration {
	l := float64(c.Latency)
	if l == 0 {
		return 0
	}
	s := c.Spread
	var v float64
	switch c.Jitter {
	case JitterUniform:
		v = l * (1 + s*(2*d.float()-1))
	case JitterExp:
		v = l*(1-s) - l*s*math.Log(1-d.float())
	case JitterLognormal:
		// Box-Muller: u1 in (0, 1] keeps the log finite.
		u1, u2 := 1-d.float(), d.float()
		z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
		v = l * math.Exp(s*z-s*s/2)
	default:
		v = l
	}
	if v < 0 {
		v = 0
	}
	if v > float64(math.MaxInt64/2) {
		v = float64(math.MaxInt64 / 2)
	}
	return time.Duration(v)
}

// fault picks the fault of a request from one uniform draw, or faultNone.
func (f *FaultRates) pick(u float64) fault {
	for _, k := range []struct {
		p float64
		f fault
	}{
		{f.RateLimit, faultRateLimit}, {f.ServerError, faultServerError}, {f.Reset, faultReset},
		{f.Truncated, faultTruncated}, {f.Slow, faultSlow}, {f.Garbage, faultGarbage},
	} {
		if u < k.p {
			return k.f
		}
		u -= k.p
	}
	return faultNone
}

// fault is a kind of injected failure.
type fault int

const (
	faultNone fault = iota
	faultRateLimit
	faultServerError
	faultReset
	faultTruncated
	faultSlow
	faultGarbage
)
