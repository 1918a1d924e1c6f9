package models_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/nn"
)

// TestLoadEmbeddedMatchesFiles: the embedded copy of each shipped model is
// the checkpoint in this directory, weight for weight.
func TestLoadEmbeddedMatchesFiles(t *testing.T) {
	for _, name := range models.Names {
		t.Run(name, func(t *testing.T) {
			got, meta, err := models.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			want, wantMeta, err := nn.Load(filepath.Join(".", name))
			if err != nil {
				t.Fatal(err)
			}
			if got.Config != want.Config || len(got.Data) != len(want.Data) || meta["model"] != wantMeta["model"] {
				t.Fatalf("embedded %+v (%d values, meta %v), files %+v (%d values, meta %v)", got.Config, len(got.Data), meta, want.Config, len(want.Data), wantMeta)
			}
			for i := range got.Data {
				if got.Data[i] != want.Data[i] {
					t.Fatalf("value %d: embedded %v, file %v", i, got.Data[i], want.Data[i])
				}
			}
		})
	}
	if _, _, err := models.Load("oracle"); err == nil || !strings.Contains(err.Error(), "oracle") {
		t.Errorf("Load(oracle) = %v, want an error naming it", err)
	}
}
