// Command genflags writes docs/FLAGS.md, the flag reference, from the
// program's flag set: `make docs` (go generate) runs it, and
// config.TestFlagsDocCurrent fails when the committed file differs.
package main

import (
	"fmt"
	"os"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genflags FILE")
		os.Exit(2)
	}
	doc, err := config.FlagReference()
	if err == nil {
		err = os.WriteFile(os.Args[1], doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genflags:", err)
		os.Exit(1)
	}
}
