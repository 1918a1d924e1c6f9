// Command impl prints the name of the matmul kernel package nn/kernel
// picked on this machine, for the benchmark scripts' headers.
package main

import (
	"fmt"

	"github.com/delegatelab/delegate/nn/kernel"
)

func main() { fmt.Println(kernel.Impl()) }
