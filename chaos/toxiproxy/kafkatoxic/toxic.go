package kafkatoxic

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// KafkaToxic is the "kafka" toxic. One fault is two of them on each of its links, one per stream, with the
// same Fault name: the upstream one (Side "requests") reads requests and decides, the downstream one (Side
// "responses") carries out what the decision left for the answer. Toxiproxy does not tell a toxic which
// stream it is on, hence Side. Add the downstream one first and remove it last, so no request leaves with
// an id of the toxic's that nobody restores.
type KafkaToxic struct {
	Fault       string  `json:"fault"`
	Side        string  `json:"side"`
	APIKey      int16   `json:"api_key"`
	Action      string  `json:"action"`
	ErrorCode   int16   `json:"error_code"`
	DelayMs     int64   `json:"delay_ms"`
	Count       int64   `json:"count"`       // act on the first Count matching requests; 0: on every one
	Probability float64 `json:"probability"` // each matching request is acted on with this probability
	Seed        int64   `json:"seed"`
}

// MarshalJSON is the toxic's attributes as Toxiproxy's API lists them, with the fault's live Stats: reading
// the toxic back is reading its evidence.
func (t *KafkaToxic) MarshalJSON() ([]byte, error) {
	type attributes KafkaToxic
	return json.Marshal(struct {
		*attributes
		Stats Stats `json:"stats"`
	}{(*attributes)(t), statsOf(t.Fault)})
}

// state is one stream of one connection, kept in the stub so that an interrupt (another toxic added or
// removed on the link) loses nothing: the bytes of an unfinished frame the toxic must see whole, how much of a
// frame it passes on unread is still to come, pieces not handled yet, pieces handled and not yet passed on,
// and an answer held back by a delay (nothing behind it overtakes it).
type state struct {
	buf     []byte
	passing int
	queue   []piece
	out     [][]byte
	held    *heldFrame
}

// piece is either bytes passed on as they are, or a whole frame the toxic acts on or reads.
type piece struct {
	data  []byte
	whole bool
}

type heldFrame struct {
	frame []byte
	until time.Time
}

// headerLen is how much of a frame the toxic reads to decide whether it needs the frame whole: a request's
// size, API key, version and correlation id; an answer's size and correlation id.
func (t *KafkaToxic) headerLen() int {
	if t.Side == "requests" {
		return 12
	}
	return 8
}

// wanted says, from a frame's first headerLen bytes, whether the toxic needs it whole: a request of its API,
// or an answer carrying a correlation id of the toxic's (negative: clients number theirs from 0 up).
func (t *KafkaToxic) wanted(head []byte) bool {
	if t.Side == "requests" {
		h, err := parseRequestHeader(head)
		return err == nil && h.APIKey == t.APIKey
	}
	id, err := responseCorrelation(head)
	return err == nil && id < 0
}

// feed cuts what a read delivered into pieces: frames the toxic does not want are passed on as the bytes arrive
// (not held until whole, and not copied), the ones it wants are gathered whole.
func (t *KafkaToxic) feed(st *state, d []byte) {
	for len(d) > 0 {
		if st.passing > 0 {
			n := min(st.passing, len(d))
			st.queue = append(st.queue, piece{data: d[:n]})
			st.passing -= n
			d = d[n:]
			continue
		}
		if len(st.buf) < t.headerLen() {
			n := min(t.headerLen()-len(st.buf), len(d))
			st.buf = append(st.buf, d[:n]...)
			d = d[n:]
			if len(st.buf) < t.headerLen() {
				continue
			}
			size := int(int32(binary.BigEndian.Uint32(st.buf)))
			if size < t.headerLen()-4 || !t.wanted(st.buf) { // not ours (or not Kafka): pass it on unread
				st.queue = append(st.queue, piece{data: st.buf})
				st.passing = max(0, 4+size-len(st.buf))
				st.buf = nil
				continue
			}
		}
		size := int(int32(binary.BigEndian.Uint32(st.buf)))
		n := min(4+size-len(st.buf), len(d))
		st.buf = append(st.buf, d[:n]...)
		d = d[n:]
		if len(st.buf) == 4+size {
			st.queue = append(st.queue, piece{data: st.buf, whole: true})
			st.buf = nil
		}
	}
}

func (t *KafkaToxic) NewState() interface{} { return new(state) }

// probability is Probability, 1 when unset.
func (t *KafkaToxic) probability() float64 {
	if t.Probability <= 0 {
		return 1
	}
	return t.Probability
}

// Pipe re-frames the stream and hands each whole frame to the request or response logic, in order.
func (t *KafkaToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*state)
	f := faultNamed(t.Fault, t.Seed)
	for {
		if len(st.out) > 0 {
			select {
			case <-stub.Interrupt:
				return
			case stub.Output <- chunk(st.out[0]):
				st.out = st.out[1:]
			}
			continue
		}
		if st.held != nil {
			select {
			case <-stub.Interrupt:
				return
			case <-time.After(time.Until(st.held.until)):
				st.out = append(st.out, st.held.frame)
				st.held = nil
			}
			continue
		}
		if len(st.queue) > 0 {
			pc := st.queue[0]
			st.queue = st.queue[1:]
			switch {
			case !pc.whole:
				st.out = append(st.out, pc.data)
			case t.Side == "requests":
				st.out = append(st.out, t.request(f, pc.data, st)...)
			default:
				st.out = append(st.out, t.response(pc.data, st, false)...)
			}
			continue
		}
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				t.flush(stub, st)
				if t.Side == "requests" { // the connection is over: what it sent on will not be answered
					abandon(st)
				}
				stub.Close()
				return
			}
			t.feed(st, c.Data)
		}
	}
}

func chunk(data []byte) *stream.StreamChunk {
	return &stream.StreamChunk{Data: data, Timestamp: time.Now()}
}

// Cleanup passes on everything the toxic still holds when it is removed, in order: what it handled, the
// held answer (early: the fault is over), frames not handled yet (an answer of the toxic's only gets its
// client's correlation id back) and the tail of an unfinished frame.
func (t *KafkaToxic) Cleanup(stub *toxics.ToxicStub) {
	t.flush(stub, stub.State.(*state))
}

func (t *KafkaToxic) flush(stub *toxics.ToxicStub, st *state) {
	pending := st.out
	if st.held != nil {
		pending = append(pending, st.held.frame)
	}
	for _, pc := range st.queue {
		if !pc.whole || t.Side == "requests" {
			pending = append(pending, pc.data)
		} else {
			pending = append(pending, t.response(pc.data, st, true)...)
		}
	}
	if len(st.buf) > 0 {
		pending = append(pending, st.buf)
	}
	*st = state{}
	for _, data := range pending {
		if err := stub.WriteOutput(chunk(data), 5*time.Second); err != nil {
			return // the connection's reader is gone
		}
	}
}

// request decides about one request frame (upstream) and returns what goes on to the broker.
func (t *KafkaToxic) request(f *fault, frame []byte, conn *state) [][]byte {
	h, err := parseRequestHeader(frame)
	if err != nil || h.APIKey != t.APIKey || !f.selects(t.Count, t.probability()) {
		return [][]byte{frame}
	}
	now := time.Now()
	switch t.Action {
	case DropRequest:
		f.acted(h.APIKey, h.APIVersion, now)
		return nil
	case DuplicateRequest:
		f.acted(h.APIKey, h.APIVersion, now)
		dup := sendOn(&pending{fault: f, action: swallow, key: h.APIKey, version: h.APIVersion,
			client: h.CorrelationID, conn: conn, selected: now})
		return [][]byte{frame, withRequestCorrelation(frame, dup)}
	default: // an action on the answer: the downstream toxic finds it by the id it leaves with
		id := sendOn(&pending{fault: f, action: t.Action, key: h.APIKey, version: h.APIVersion,
			client: h.CorrelationID, conn: conn, errCode: t.ErrorCode,
			delay: time.Duration(t.DelayMs) * time.Millisecond, selected: now})
		return [][]byte{withRequestCorrelation(frame, id)}
	}
}

// response carries out what was decided for one answer frame (downstream) and returns what goes on to the
// client; a delayed answer is put in st.held instead. Healing (the toxic being removed), an answer of the
// toxic's only gets its client's correlation id back.
func (t *KafkaToxic) response(frame []byte, st *state, healing bool) [][]byte {
	id, err := responseCorrelation(frame)
	if err != nil {
		return [][]byte{frame}
	}
	p, ok := answered(id)
	if !ok {
		return [][]byte{frame}
	}
	now := time.Now()
	action := p.action
	if healing && action != swallow {
		action = ""
	}
	switch action {
	case swallow:
		return nil
	case DropResponse:
		p.fault.acted(p.key, p.version, now)
		return nil
	case Delay:
		p.fault.acted(p.key, p.version, now)
		st.held = &heldFrame{withResponseCorrelation(frame, p.client), now.Add(p.delay)}
		return nil
	case Error:
		out, _, err := withErrors(frame, p.key, p.version, p.errCode)
		if err != nil {
			p.fault.failed(err)
			return [][]byte{withResponseCorrelation(frame, p.client)}
		}
		p.fault.acted(p.key, p.version, now)
		return [][]byte{withResponseCorrelation(out, p.client)}
	default:
		return [][]byte{withResponseCorrelation(frame, p.client)}
	}
}

func init() {
	toxics.Register("kafka", new(KafkaToxic))
}
