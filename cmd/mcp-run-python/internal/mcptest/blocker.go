package mcptest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BlockCode is the code that a Blocker holds.
const BlockCode = "block"

// Blocked is what a Blocker saw of a held call's end.
type Blocked struct {
	Cause error     // context.Cause of the call's context when it was cancelled
	At    time.Time // when
}

// Blocker is a FakeRunner.Block that holds calls of BlockCode until their
// context ends or Release is closed, and records which came first. Other
// code runs at once.
type Blocker struct {
	started   chan struct{} // a held call started
	cancelled chan Blocked  // a held call's context ended
	// Released receives a released call's context error (nil: intact).
	Released chan error
	// Release, closed by the test, lets the held calls finish.
	Release chan struct{}
}

// NewBlocker returns a Blocker with room for 16 calls.
func NewBlocker() *Blocker {
	return &Blocker{
		started:   make(chan struct{}, 16),
		cancelled: make(chan Blocked, 16),
		Released:  make(chan error, 16),
		Release:   make(chan struct{}),
	}
}

// Block is a FakeRunner.Block: it holds calls of BlockCode.
func (b *Blocker) Block(ctx context.Context, code string) error {
	if code != BlockCode {
		return nil
	}
	b.started <- struct{}{}
	select {
	case <-ctx.Done():
		b.cancelled <- Blocked{Cause: context.Cause(ctx), At: time.Now()}
		return fmt.Errorf("run: %w", ctx.Err())
	case <-b.Release:
		b.Released <- ctx.Err()
		return nil
	}
}

// WaitStarted waits for a held call to start.
func (b *Blocker) WaitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-b.started:
	case <-Context(t).Done():
		t.Fatal("the call did not start")
	}
}

// WaitCancelled waits for a held call's context to end.
func (b *Blocker) WaitCancelled(t *testing.T) Blocked {
	t.Helper()
	select {
	case c := <-b.cancelled:
		return c
	case err := <-b.Released:
		t.Fatalf("the call was released (context error %v), not cancelled", err)
	case <-Context(t).Done():
		t.Fatal("the call's context was not cancelled")
	}
	return Blocked{}
}

// WaitReleased waits for a held call to be released and returns its
// context's error then; it fails the test if the context ended first.
func (b *Blocker) WaitReleased(t *testing.T) error {
	t.Helper()
	select {
	case err := <-b.Released:
		return err
	case c := <-b.cancelled:
		t.Fatalf("the call was cancelled (%v), not released", c.Cause)
	case <-Context(t).Done():
		t.Fatal("the call was not released")
	}
	return nil
}
