package local

import (
	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/tokenizer"
)

// HeldBack exports heldBack to the tests.
var HeldBack = heldBack

// NewHFCodecForTest returns the Hugging Face codec's parser.
func NewHFCodecForTest(t *tokenizer.HF, f tokenizer.ChatFormat) (func(ids []int) delegate.Message, error) {
	c, err := newHFCodec(t, f, nil)
	if err != nil {
		return nil, err
	}
	return c.parse, nil
}
