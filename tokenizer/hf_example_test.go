package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/tokenizer"
)

func ExampleLoadHF() {
	tok, err := tokenizer.LoadHF("testdata/hf/qwen2.5.json.gz") // a tokenizer.json, gzip-compressed or not
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("<|im_start|>user\nHello, world!<|im_end|>")
	fmt.Println(ids)
	text, err := tok.Decode(ids)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// [151644 872 198 9707 11 1879 0 151645]
	// "<|im_start|>user\nHello, world!<|im_end|>"
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
