package kafkatoxic

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Actions of the kafka toxic.
const (
	DropRequest      = "drop_request"      // the request never reaches the broker
	DropResponse     = "drop_response"     // the broker handles it; its answer never reaches the client
	Delay            = "delay"             // the answer reaches the client delay_ms late
	Error            = "error"             // the answer's error codes are replaced by error_code
	DuplicateRequest = "duplicate_request" // the broker gets the request twice; the client sees one answer
)

var actions = map[string]bool{DropRequest: true, DropResponse: true, Delay: true, Error: true, DuplicateRequest: true}

// onResponse says whether the action is carried out on the answer (by the downstream toxic).
func onResponse(action string) bool {
	return action == DropResponse || action == Delay || action == Error
}

// Stats is what one fault did, over every link and connection it is on: its evidence.
type Stats struct {
	// Seen counts the matching requests (the fault's API) that went by while the fault was on.
	Seen int64 `json:"seen"`
	// Acted counts the RPCs the action was carried out on; by version ("SyncGroup v5": 2).
	Acted     int64            `json:"acted"`
	ByVersion map[string]int64 `json:"by_version"`
	// First and Last are when it acted (RFC 3339, UTC), empty until it has.
	First string `json:"first,omitempty"`
	Last  string `json:"last,omitempty"`
	// Pending counts requests sent on with a correlation id of the toxic's whose answer has not come back
	// (duplicates included): the answers' toxic must stay until it is 0, or a client gets an id it never sent.
	Pending int64 `json:"pending"`
	// DuplicatesAnswered counts the broker's answers to duplicated requests (dropped by the toxic): evidence
	// that the broker handled the copy, not only that the toxic sent it.
	DuplicatesAnswered int64 `json:"duplicates_answered"`
	// Unanswered counts requests selected for an action on their answer whose connection closed before the
	// answer came (the broker killed, the link reset): not acted on, and count's budget is free again.
	Unanswered int64 `json:"unanswered"`
	// Errors counts answers the toxic could not decode to act on (passed through unchanged).
	Errors    int64  `json:"errors"`
	LastError string `json:"last_error,omitempty"`
}

// fault is the state one fault shares across its toxics: the upstream and downstream toxic of every link.
type fault struct {
	mu    sync.Mutex
	rng   *rand.Rand
	stats Stats
	// awaiting counts RPCs selected for an action on their answer that has not been carried out yet: with
	// Acted, what count's budget is spent on (a duplicate is acted on when it is sent)
	awaiting int64
}

// pending is a request sent on with a correlation id of the toxic's.
type pending struct {
	fault    *fault
	action   string // what to do with the answer; "" = restore the id only, "swallow" = drop (a duplicate's)
	key      int16
	version  int16
	client   int32  // the correlation id the client gave it
	conn     *state // the requests' stream of the connection it was sent on
	errCode  int16
	delay    time.Duration
	selected time.Time
}

const swallow = "swallow"

var (
	faultsMu sync.Mutex
	faults   = map[string]*fault{}

	pendingMu sync.Mutex
	inFlight  = map[int32]*pending{}
	// nextID counts down from -1: clients number their requests from 0 up, so a negative id is the toxic's
	nextID atomic.Int32
)

func faultNamed(name string, seed int64) *fault {
	faultsMu.Lock()
	defer faultsMu.Unlock()
	f, ok := faults[name]
	if !ok {
		f = &fault{rng: rand.New(rand.NewSource(seed)), stats: Stats{ByVersion: map[string]int64{}}} // #nosec G404 -- a seeded schedule, not a secret
		faults[name] = f
	}
	return f
}

// statsOf is a copy of a fault's stats (zero when it never existed).
func statsOf(name string) Stats {
	faultsMu.Lock()
	f, ok := faults[name]
	faultsMu.Unlock()
	if !ok {
		return Stats{ByVersion: map[string]int64{}}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.ByVersion = make(map[string]int64, len(f.stats.ByVersion))
	for k, v := range f.stats.ByVersion {
		s.ByVersion[k] = v
	}
	return s
}

// selects counts one matching request and says whether the fault acts on it: the first count ones (0: every
// one), each with probability p (seeded per fault).
func (f *fault) selects(count int64, p float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Seen++
	if count > 0 && f.stats.Acted+f.awaiting >= count {
		return false
	}
	if p < 1 && f.rng.Float64() >= p {
		return false
	}
	return true
}

func (f *fault) acted(key, version int16, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Acted++
	f.stats.ByVersion[fmt.Sprintf("%s v%d", kmsg.NameForKey(key), version)]++
	ts := at.UTC().Format(time.RFC3339Nano)
	if f.stats.First == "" {
		f.stats.First = ts
	}
	f.stats.Last = ts
}

// pendingDelta counts a request sent on with an id of the toxic's (d = 1) or its answer back (d = -1).
func (f *fault) pendingDelta(d int64, action string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Pending += d
	if action == swallow {
		if d < 0 {
			f.stats.DuplicatesAnswered++
		}
	} else {
		f.awaiting += d
	}
}

func (f *fault) failed(err error) {
	f.mu.Lock()
	f.stats.Errors++
	f.stats.LastError = err.Error()
	f.mu.Unlock()
}

// sendOn registers a request whose answer the downstream toxic handles and returns the id it leaves with.
func sendOn(p *pending) int32 {
	id := nextID.Add(-1)
	if id >= 0 { // wrapped past the negative range: start again (2^31 requests later, long answered)
		nextID.Store(-1)
		id = nextID.Add(-1)
	}
	pendingMu.Lock()
	inFlight[id] = p
	pendingMu.Unlock()
	p.fault.pendingDelta(1, p.action)
	return id
}

// abandon releases the pending requests sent on conn, whose stream ended: no answer to them can come any more.
// Without it the heal would wait out its drain bound for answers of a broker that is gone.
func abandon(conn *state) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	for id, p := range inFlight {
		if p.conn != conn {
			continue
		}
		delete(inFlight, id)
		p.fault.pendingDelta(-1, p.action)
		if p.action != swallow {
			p.fault.mu.Lock()
			p.fault.stats.Unanswered++
			p.fault.mu.Unlock()
		}
	}
}

// answered takes the pending request an answer's correlation id names, if it is one of the toxic's.
func answered(id int32) (*pending, bool) {
	if id >= 0 {
		return nil, false
	}
	pendingMu.Lock()
	defer pendingMu.Unlock()
	p, ok := inFlight[id]
	if ok {
		delete(inFlight, id)
		p.fault.pendingDelta(-1, p.action)
	}
	return p, ok
}
