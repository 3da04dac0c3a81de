package install

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// TestCompileWatch: a compile is stopped when one of its modules takes
// longer than moduleTimeout or its worker passes the memory limit, and the
// failure names that module, so that the wheel is compiled again without
// it; time between modules is no module's, and the wheel's own limit, or a
// failure of the worker's, names none.
func TestCompileWatch(t *testing.T) {
	tests := []struct {
		name string
		// run tells the watch what the worker would, waiting as it goes.
		run        func(c *compileWatch)
		stopped    bool
		wantModule string // of a *bridge.CompileError; "" for none
	}{
		{"fast modules", func(c *compileWatch) {
			for range 3 {
				c.compiling("p/a.py")
				time.Sleep(moduleTimeout - time.Second)
				c.compiling("")
			}
		}, false, ""},
		{"slow module", func(c *compileWatch) {
			c.compiling("p/a.py")
			c.compiling("")
			c.compiling("p/slow.py")
			time.Sleep(moduleTimeout)
		}, true, "p/slow.py"},
		{"slow between modules", func(c *compileWatch) {
			c.compiling("p/a.py")
			c.compiling("")
			time.Sleep(moduleTimeout)
		}, false, ""},
		{"over memory in a module", func(c *compileWatch) {
			c.compiling("p/big.py")
			c.overMemory()
		}, true, "p/big.py"},
		{"over memory between modules", func(c *compileWatch) {
			c.overMemory()
		}, true, ""},
		{"slow wheel", func(c *compileWatch) {
			for range compileTimeout / (moduleTimeout / 2) {
				c.compiling("p/a.py")
				time.Sleep(moduleTimeout / 2)
			}
		}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, c := watchCompile(context.Background())
				defer c.stop()
				tt.run(c)
				synctest.Wait()
				if stopped := ctx.Err() != nil; stopped != tt.stopped {
					t.Fatalf("stopped: %v, want %v", stopped, tt.stopped)
				}
				if !tt.stopped {
					return
				}
				err := c.failure(ctx, ctx.Err())
				var ce *bridge.CompileError
				named := errors.As(err, &ce)
				switch {
				case tt.wantModule != "":
					if !named || ce.Module != tt.wantModule {
						t.Errorf("failure = %v, want a CompileError naming %s", err, tt.wantModule)
					}
				case named || !errors.Is(err, context.Canceled):
					t.Errorf("failure = %v, want the compile's own error, naming no module", err)
				}
			})
		})
	}
}
