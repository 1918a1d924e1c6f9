package models

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	"github.com/delegatelab/delegate/nn"
)

// The shipped checkpoints travel inside the binary, so that `delegate
// train` runs from any directory and after `go install`.
//
//go:embed solver/config.json solver/model.safetensors delegator/config.json delegator/model.safetensors peer/config.json peer/model.safetensors planner/config.json planner/model.safetensors router/config.json router/model.safetensors solver-digits/config.json solver-digits/model.safetensors solver-band/config.json solver-band/model.safetensors solver-weak/config.json solver-weak/model.safetensors solver-mid/config.json solver-mid/model.safetensors
var shipped embed.FS

// Names are the shipped models.
var Names = []string{"solver", "delegator", "peer", "planner", "router", "solver-digits", "solver-band", "solver-weak", "solver-mid"}

// Load returns the shipped checkpoint name from the copy embedded in the binary.
// name is one of Names.
func Load(name string) (*nn.Params, map[string]string, error) {
	sub, err := fs.Sub(shipped, name)
	if err != nil || !validName(name) {
		return nil, nil, fmt.Errorf("shipped model %q: there is none (the shipped models are %v)", name, Names)
	}
	return nn.LoadFS(sub, path.Join("shipped", name))
}

func validName(name string) bool {
	for _, n := range Names {
		if n == name {
			return true
		}
	}
	return false
}
