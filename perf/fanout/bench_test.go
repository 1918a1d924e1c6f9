package main

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/delegatelab/delegate/standin"
)

// BenchmarkRollout measures one rollout of each arm against an in-process
// stand-in with no latency. The stand-in's own work is in the figures too,
// the same for both arms (the same requests), so the difference between
// the arms is the client's: allocations per rollout are its least noisy
// measure.
func BenchmarkRollout(b *testing.B) {
	s, err := standin.New(standin.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(""); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	}()
	for _, mk := range []func(*http.Client) (arm, error){
		func(hc *http.Client) (arm, error) { return newBareArm(s.URL(), hc) },
		func(hc *http.Client) (arm, error) { return newStrategyArm(s.URL(), hc) },
	} {
		var dials atomic.Int64
		tr := newTransport(64, &dials)
		a, err := mk(&http.Client{Transport: tr})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(a.name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := a.rollout(context.Background(), requestText(1)); err != nil {
					b.Fatal(err)
				}
			}
		})
		tr.CloseIdleConnections()
	}
}
