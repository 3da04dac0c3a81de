package mcpserver

// MCP progress (DESIGN 1.5): a tools/call whose _meta carries a
// progressToken hears what its call is doing as notifications/progress,
// on the same path as its log notifications (see logging.go), so they too
// reach the client before the result on every transport.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// progressInterval is the least time between two progress notifications of
// a call: at most four a second, so that a download, which reports every
// chunk, cannot flood the client.
const progressInterval = 250 * time.Millisecond

// maxQueuedNotes bounds the notes waiting for their turn. Only a change of
// phase adds one, and a call changes phase a handful of times.
const maxQueuedNotes = 16

// maxProgressTokenBytes bounds a request's progressToken: a call keeps its
// token while it waits and runs, and sends it back in every progress
// notification, one a second; a client numbers its requests or names them
// with a short id.
const maxProgressTokenBytes = 256

// maxSafeToken is the largest integer token every client reads back
// exactly: a JavaScript number, as mcp-go's float64, holds integers up to
// 2^53-1 exactly.
const maxSafeToken = 1<<53 - 1

// progressNote is one notification to send.
type progressNote struct {
	phase   supervisor.ProgressPhase
	spent   time.Duration
	limit   time.Duration
	message string
}

// progressSender sends one call's progress notifications, rate-limited: a
// note waits until progressInterval has passed since the last one sent, and
// while it waits a later note of the same phase replaces it (the latest
// wins), while one of another phase queues behind it (no change of phase
// is lost). The supervisor's events only queue notes, so they never wait on
// the client; one goroutine of the sender's writes them.
//
// progress is the call's time spent against its time limit, in seconds,
// and total the limit when there is one: a client can draw the bar of a
// call that ends by its time limit. MCP wants progress to grow with every
// notification, so a note whose time did not move (a queued call's clock
// stands still) gets a millisecond more than the last.
type progressSender struct {
	ctx      context.Context
	n        Notifier
	token    mcp.ProgressToken
	interval time.Duration
	log      *zap.Logger

	mu      sync.Mutex
	queue   []progressNote
	closing bool

	wake chan struct{} // buffered: a note queued, or closing
	done chan struct{} // closed when the goroutine has sent its last
}

// newProgressSender starts the sender of a call with token on n.
func newProgressSender(ctx context.Context, n Notifier, token mcp.ProgressToken, interval time.Duration, log *zap.Logger) *progressSender {
	s := &progressSender{
		ctx: ctx, n: n, token: token, interval: interval, log: log,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go s.loop()
	return s
}

// progressSink returns the sender of the call of req, or nil when its
// request carries no progressToken.
func (h *runPythonCodeHandler) progressSink(ctx context.Context, req mcp.CallToolRequest) *progressSender {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	n := notifierFrom(ctx)
	if n == nil {
		n = fallbackNotifier{}
	}
	return newProgressSender(ctx, n, req.Params.Meta.ProgressToken, progressInterval, h.log)
}

// checkProgressToken checks a progressToken as mcp-go decodes it: nil (no
// token), a string or a number.
func checkProgressToken(token mcp.ProgressToken) error {
	switch token := token.(type) {
	case nil:
		return nil
	case string:
		if len(token) > maxProgressTokenBytes {
			return fmt.Errorf("invalid _meta.progressToken: a string of %d bytes, more than the %d a progress token may have", len(token), maxProgressTokenBytes)
		}
		return nil
	case float64:
		if token != math.Trunc(token) || math.Abs(token) > maxSafeToken {
			return fmt.Errorf("invalid _meta.progressToken %v: expected a string or an integer of at most 2^53-1", token)
		}
		return nil
	}
	return fmt.Errorf("invalid _meta.progressToken: expected a string or an integer, got %s", jsonType(token))
}

// onProgress returns the call's Request.OnProgress: nil without a sender.
func (s *progressSender) onProgress() func(supervisor.ProgressEvent) {
	if s == nil {
		return nil
	}
	return s.event
}

// event queues the note of ev. It never waits on the client.
func (s *progressSender) event(ev supervisor.ProgressEvent) {
	note := progressNote{phase: ev.Phase, spent: ev.Spent, limit: ev.Limit, message: progressMessage(ev)}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	last := len(s.queue) - 1
	if last >= 0 && (s.queue[last].phase == note.phase || len(s.queue) >= maxQueuedNotes) {
		s.queue[last] = note
	} else {
		s.queue = append(s.queue, note)
	}
	s.mu.Unlock()
	s.poke()
}

// poke wakes the goroutine, unless it is awake already.
func (s *progressSender) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close sends the notes still queued, at once, and returns once the last
// is written: after it, the call's result may go. Later events are
// dropped. It does nothing on a nil sender.
func (s *progressSender) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}

// loop sends the queued notes, each progressInterval after the last, until
// close; then it sends what is left without waiting.
func (s *progressSender) loop() {
	defer close(s.done)
	var sent time.Time // of the last note; zero before the first
	var lastMillis int64
	failed := false
	for {
		s.mu.Lock()
		empty, closing := len(s.queue) == 0, s.closing
		s.mu.Unlock()
		if empty && closing {
			return
		}
		if empty {
			<-s.wake
			continue
		}
		if wait := s.interval - time.Since(sent); !closing && !sent.IsZero() && wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-s.wake: // closing, or a note for the queue: look again
				timer.Stop()
				continue
			}
		}
		s.mu.Lock()
		note := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		if failed {
			continue
		}
		millis := max(note.spent.Milliseconds(), lastMillis+1)
		lastMillis, sent = millis, time.Now()
		msg, err := progressNotification(s.token, millis, note)
		if err == nil {
			err = s.n.Notify(s.ctx, msg)
		}
		if err != nil {
			// The client is gone or stalled; stop trying for this call.
			failed = true
			s.log.Debug("progress notification not delivered", zap.Error(err))
		}
	}
}

// progressNotification returns the JSON-RPC notification of note, with
// progress in seconds (millis thousandths of one).
func progressNotification(token mcp.ProgressToken, millis int64, note progressNote) ([]byte, error) {
	params := mcp.ProgressNotificationParams{
		ProgressToken: token,
		Progress:      float64(millis) / 1000,
		Total:         note.limit.Seconds(),
		Message:       note.message,
	}
	msg, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": mcp.MethodNotificationProgress, "params": params})
	if err != nil {
		return nil, fmt.Errorf("encode progress notification: %w", err)
	}
	return msg, nil
}

// progressMessage is the short message of ev, such as "running: 3s of 60s".
func progressMessage(ev supervisor.ProgressEvent) string {
	switch ev.Phase {
	case supervisor.PhasePreparing:
		return "preparing: " + ev.Step
	case supervisor.PhaseQueued:
		return fmt.Sprintf("queued: %s in line for a worker", ordinal(ev.Place))
	case supervisor.PhaseResolving:
		return "resolving " + strings.Join(ev.Packages, ", ")
	case supervisor.PhaseDownloading:
		if ev.Size > 0 {
			return fmt.Sprintf("downloading %s: %s of %s", ev.File, humanize.Bytes(uint64(ev.Bytes)), humanize.Bytes(uint64(ev.Size)))
		}
		return fmt.Sprintf("downloading %s: %s", ev.File, humanize.Bytes(uint64(ev.Bytes)))
	case supervisor.PhaseInstalling:
		return "installing " + strings.Join(ev.Packages, ", ")
	case supervisor.PhaseRunning:
		spent := strconv.FormatInt(int64(ev.Spent/time.Second), 10) + "s"
		if ev.Limit > 0 {
			return "running: " + spent + " of " + strconv.FormatFloat(ev.Limit.Seconds(), 'f', -1, 64) + "s"
		}
		return "running: " + spent
	case supervisor.PhaseAsking:
		return askingMessage(ev)
	}
	return string(ev.Phase)
}

// askingMessage is the message of a round of questions waiting, such as
// "waiting for the model: 3 of 50" (the call's questions so far, of its
// limit), "waiting for the model: 64 at once, 64 of 100" for a batch.
func askingMessage(ev supervisor.ProgressEvent) string {
	msg := "waiting for " + ev.Asking + ": "
	if ev.Questions > 1 {
		msg += strconv.Itoa(ev.Questions) + " at once, "
	}
	msg += strconv.Itoa(ev.Asked)
	if ev.AskLimit > 0 {
		msg += " of " + strconv.Itoa(ev.AskLimit)
	}
	return msg
}

// ordinal is n as "1st", "2nd", "3rd", "4th"...
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
