package standin_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/delegatelab/delegate/standin"
)

// A stand-in answering after 5 ms, with 1% of requests rate-limited.
func Example() {
	sc := standin.DefaultConfig()
	sc.Latency, sc.Faults = 5*time.Millisecond, standin.FaultRates{RateLimit: 0.01}
	s, err := standin.New(sc)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := s.Close(); err != nil {
			fmt.Println(err)
		}
	}()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(s.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"any","messages":[{"role":"user","content":"Hello"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"finish_reason":"stop"`))
	st := s.Stats()
	fmt.Println(st.Requests, st.Answers[standin.KindPlain])
	// Output:
	// 200 true
	// 1 1
}
