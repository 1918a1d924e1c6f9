package train

import (
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/models"
)

// TestShippedSolverSetting checks that Solver may name a shipped model.
// The digits world's solver loads as the file under models/ does. An
// unknown one is rejected by name.
func TestShippedSolverSetting(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Solver = ShippedPrefix + "solver-digits"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("solver %s: %v", cfg.Solver, err)
	}
	got, err := loadCheckpoint("solver", cfg.Solver)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := models.Load("solver-digits")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Data, want.Data) {
		t.Errorf("shipped:solver-digits loaded other parameters than models.Load's (%d, %d)", len(got.Data), len(want.Data))
	}
	plain, err := loadCheckpoint("solver", "")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(plain.Data, got.Data) {
		t.Error("the shipped solver and solver-digits have the same parameters")
	}
	cfg.Solver = ShippedPrefix + "nothing"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `solver: there is no shipped model "nothing"`) {
		t.Errorf("solver %s: %v, want an error naming it", cfg.Solver, err)
	}
}
