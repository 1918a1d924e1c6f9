package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/tokenizer"
)

func ExampleLoadHF() {
	tok, err := tokenizer.LoadHF("testdata/hf/gpt2.json.gz") // a tokenizer.json, gzip-compressed or not
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("Hello, world!<|endoftext|>")
	fmt.Println(ids)
	text, err := tok.Decode(ids)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// [15496 11 995 0 50256]
	// "Hello, world!<|endoftext|>"
}

func ExampleRenderChat() {
	msgs := []delegate.Message{
		delegate.System("Be brief."),
		delegate.User("What is 47*28?"),
	}
	text, err := tokenizer.RenderChat(tokenizer.ChatQwen25, msgs, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(text)
	// Output:
	// <|im_start|>system
	// Be brief.<|im_end|>
	// <|im_start|>user
	// What is 47*28?<|im_end|>
	// <|im_start|>assistant
}
