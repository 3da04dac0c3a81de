package pool

import (
	"fmt"

	"go.uber.org/zap"
)

// workerState is where a worker of the pool is in its life. Every worker of
// the pool is in exactly one state, held by its member under the pool's
// lock, and moves only along the edges that may allows (as containerd's
// init_state.go does for a process): counts, health and metrics are read
// from the states, never kept beside them.
//
//	from       to                        who moves it, and why
//	starting   standby, ready            startOne: started, on standby or restored
//	starting   dying                     offer: started for addresses gone by, or after close
//	starting   gone                      startOne: the start failed
//	standby    restoring                 restoreAhead: restored ahead of calls
//	restoring  ready                     watchRestore: the restore ended
//	warm       busy                      acquire, dispatch: taken by a call
//	warm       dying                     evictIdle, retireStale, trimRestored, close
//	warm       gone                      watchIdle, acquire, dispatch: died while warm
//	busy       standby, restoring, ready acquire: handed over as its call gave up (offer)
//	busy       recycling                 retire: its call ended, its process serves the next
//	busy       dying                     retire, discard: its call ended; offer after close
//	recycling  standby, restoring, ready recycleOne: its new runner started
//	recycling  dying                     recycleOne: the recycle failed; offer after close
//	dying      gone                      reap: killed
//
// where warm is any of standby, restoring and ready.
type workerState int

const (
	stateStarting  workerState = iota // start was called: no worker yet
	stateStandby                      // warm, its interpreter not made nor asked for (see Readiness)
	stateRestoring                    // warm, its interpreter being made
	stateReady                        // warm, its interpreter made
	stateBusy                         // a call's, until it retires the worker
	stateRecycling                    // its call over, its process starts a runner for the next (see Hooks.Recycle)
	stateDying                        // being killed: it still counts against Workers
	stateGone                         // out of the pool: its member is dropped
)

// String names the state, for logs.
func (s workerState) String() string {
	switch s {
	case stateStarting:
		return "starting"
	case stateStandby:
		return "standby"
	case stateRestoring:
		return "restoring"
	case stateReady:
		return "ready"
	case stateBusy:
		return "busy"
	case stateRecycling:
		return "recycling"
	case stateDying:
		return "dying"
	case stateGone:
		return "gone"
	}
	return fmt.Sprintf("workerState(%d)", int(s))
}

// coming reports whether a worker in s will be warm unless it fails: started
// or recycled.
func (s workerState) coming() bool { return s == stateStarting || s == stateRecycling }

// warm reports whether a worker in s is idle in the pool, for a call to take.
func (s workerState) warm() bool {
	return s == stateStandby || s == stateRestoring || s == stateReady
}

// may reports whether a worker in s may move to next: the table in
// workerState's comment.
func (s workerState) may(next workerState) bool {
	switch s {
	case stateStarting:
		return next == stateStandby || next == stateReady || next == stateDying || next == stateGone
	case stateStandby:
		return next == stateRestoring || next == stateBusy || next == stateDying || next == stateGone
	case stateRestoring:
		return next == stateReady || next == stateBusy || next == stateDying || next == stateGone
	case stateReady:
		return next == stateBusy || next == stateDying || next == stateGone
	case stateBusy:
		return next.warm() || next == stateRecycling || next == stateDying
	case stateRecycling:
		return next.warm() || next == stateDying
	case stateDying:
		return next == stateGone
	}
	return false // gone is the end
}

// warmState is the warm state of a worker of readiness r.
func warmState(r Readiness) workerState {
	switch r {
	case OnStandby:
		return stateStandby
	case Restoring:
		return stateRestoring
	}
	return stateReady
}

// member is a worker of the pool and its state: the pool's one record of it.
type member[W Worker] struct {
	w     W      // the zero W while starting
	kind  string // the kind asked for while starting; the worker's own once started
	state workerState
	// principal is whom the worker serves while busy.
	principal string
}

// move moves m to state next, and drops it from the pool once gone. An edge
// that may does not allow is a bug: it is logged at DPanic level (a panic in
// development and tests) and refused, m staying where it was. p.mu must be
// held.
func (p *Pool[W]) move(m *member[W], next workerState) bool {
	if !m.state.may(next) {
		p.log.DPanic("a worker of the pool moved along no edge of its states",
			zap.Stringer("from", m.state), zap.Stringer("to", next), zap.String("kind", m.kind))
		return false
	}
	m.state = next
	if next == stateGone {
		if i := p.index(m); i >= 0 {
			p.members = append(p.members[:i], p.members[i+1:]...)
		}
	}
	return true
}

// index returns m's place in p.members, or -1. p.mu must be held.
func (p *Pool[W]) index(m *member[W]) int {
	for i, x := range p.members {
		if x == m {
			return i
		}
	}
	return -1
}

// find returns the member of w, or nil when w is not the pool's. p.mu
// must be held.
func (p *Pool[W]) find(w W) *member[W] {
	for _, m := range p.members {
		if m.state != stateStarting && m.w == w {
			return m
		}
	}
	return nil
}

// count returns how many members are in one of states. p.mu must be held.
func (p *Pool[W]) count(states ...workerState) int {
	n := 0
	for _, m := range p.members {
		for _, s := range states {
			if m.state == s {
				n++
			}
		}
	}
	return n
}
