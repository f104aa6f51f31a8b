package kafkatoxic

import (
	"fmt"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pipe runs a toxic on a stub of its own, as Toxiproxy's link does.
type pipe struct {
	in   chan *stream.StreamChunk
	out  chan *stream.StreamChunk
	stub *toxics.ToxicStub
	done chan struct{}
}

func run(tox *KafkaToxic) *pipe {
	p := &pipe{in: make(chan *stream.StreamChunk), out: make(chan *stream.StreamChunk, 64), done: make(chan struct{})}
	p.stub = toxics.NewToxicStub(p.in, p.out)
	p.stub.State = tox.NewState()
	// through the stub's Run, as Toxiproxy's link starts a toxic (InterruptToxic waits on what Run sets up)
	go func() { p.stub.Run(&toxics.ToxicWrapper{Toxic: tox, Toxicity: 1}); close(p.done) }()
	return p
}

func (p *pipe) send(frames ...[]byte) {
	var all []byte
	for _, f := range frames {
		all = append(all, f...)
	}
	// two reads, cut in the middle of a frame: the toxic re-frames
	p.in <- &stream.StreamChunk{Data: all[:len(all)/2]}
	p.in <- &stream.StreamChunk{Data: all[len(all)/2:]}
}

// frames reads what came out until want frames arrived or wait passed.
func (p *pipe) frames(t *testing.T, want int, wait time.Duration) [][]byte {
	t.Helper()
	var buf []byte
	var got [][]byte
	deadline := time.After(wait)
	for len(got) < want {
		select {
		case c := <-p.out:
			buf = append(buf, c.Data...)
			fr, rest := splitFrames(buf)
			got = append(got, fr...)
			buf = append([]byte(nil), rest...)
		case <-deadline:
			return got
		}
	}
	return got
}

var seq int

func toxic(side, action string, key int16) *KafkaToxic {
	seq++
	return &KafkaToxic{Fault: fmt.Sprintf("test-%d-%s", seq, action), Side: side, APIKey: key, Action: action,
		ErrorCode: 27, DelayMs: 300, Count: 1, Seed: 1}
}

func pair(action string, key int16) (req, resp *KafkaToxic) {
	req = toxic("requests", action, key)
	r := *req
	r.Side = "responses"
	return req, &r
}

func syncAnswer(id int32, code int16) []byte {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = 5
	r.ErrorCode = code
	return frameOf(header(id, true), r.AppendTo(nil))
}

func ids(t *testing.T, frames [][]byte, requests bool) []int32 {
	var out []int32
	for _, f := range frames {
		if requests {
			h, _ := parseRequestHeader(f)
			out = append(out, h.CorrelationID)
		} else {
			id, _ := responseCorrelation(f)
			out = append(out, id)
		}
	}
	return out
}

func TestDropRequestActsOnTheFirstMatchingRequestOnly(t *testing.T) {
	req, _ := pair(DropRequest, 14)
	p := run(req)
	p.send(request(12, 4, 1, ""), request(14, 5, 2, "a"), request(14, 5, 3, "b"))
	got := ids(t, p.frames(t, 2, 2*time.Second), true)
	if fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("passed on %v, want [1 3]", got)
	}
	s := statsOf(req.Fault)
	if s.Seen != 2 || s.Acted != 1 || s.ByVersion["SyncGroup v5"] != 1 || s.First == "" {
		t.Fatalf("%+v", s)
	}
}

func TestErrorReplacesTheAnswersCodeAndRestoresTheClientsID(t *testing.T) {
	req, resp := pair(Error, 14)
	up, down := run(req), run(resp)
	up.send(request(14, 5, 5, "a"))
	sent := up.frames(t, 1, 2*time.Second)
	id := ids(t, sent, true)[0]
	if id >= 0 {
		t.Fatalf("the request left with id %d, not one of the toxic's", id)
	}
	if s := statsOf(req.Fault); s.Pending != 1 || s.Acted != 0 {
		t.Fatalf("%+v", s)
	}
	down.send(syncAnswer(id, 0), syncAnswer(6, 0))
	got := down.frames(t, 2, 2*time.Second)
	if fmt.Sprint(ids(t, got, false)) != "[5 6]" {
		t.Fatalf("answers %v", ids(t, got, false))
	}
	_, body, _ := responseBody(got[0], true)
	if r := decode(t, 14, 5, body).(*kmsg.SyncGroupResponse); r.ErrorCode != 27 {
		t.Fatalf("error code %d", r.ErrorCode)
	}
	_, body, _ = responseBody(got[1], true)
	if r := decode(t, 14, 5, body).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatal("an answer the fault did not select was changed")
	}
	if s := statsOf(req.Fault); s.Pending != 0 || s.Acted != 1 {
		t.Fatalf("%+v", s)
	}
}

func TestDelayHoldsTheAnswerAndWhatFollowsIt(t *testing.T) {
	req, resp := pair(Delay, 14)
	up, down := run(req), run(resp)
	up.send(request(14, 5, 5, "a"))
	id := ids(t, up.frames(t, 1, 2*time.Second), true)[0]
	start := time.Now()
	// the toxic stops reading while it holds an answer, so the second read blocks: send from a goroutine
	go down.send(syncAnswer(id, 0), syncAnswer(6, 0))
	got := down.frames(t, 2, 2*time.Second)
	took := time.Since(start)
	if fmt.Sprint(ids(t, got, false)) != "[5 6]" || took < 300*time.Millisecond {
		t.Fatalf("answers %v after %v", ids(t, got, false), took)
	}
}

func TestDropResponseLosesTheAnswerOnly(t *testing.T) {
	req, resp := pair(DropResponse, 14)
	up, down := run(req), run(resp)
	up.send(request(14, 5, 5, "a"), request(14, 5, 6, "b"))
	sent := ids(t, up.frames(t, 2, 2*time.Second), true)
	if sent[0] >= 0 || sent[1] != 6 {
		t.Fatalf("sent %v", sent)
	}
	down.send(syncAnswer(sent[0], 0), syncAnswer(6, 0))
	if got := ids(t, down.frames(t, 2, 500*time.Millisecond), false); fmt.Sprint(got) != "[6]" {
		t.Fatalf("answers %v", got)
	}
}

func TestDuplicateRequestReachesTheBrokerTwiceAndIsAnsweredOnce(t *testing.T) {
	req, resp := pair(DuplicateRequest, 11)
	up, down := run(req), run(resp)
	up.send(request(11, 9, 5, "join"))
	sent := up.frames(t, 2, 2*time.Second)
	got := ids(t, sent, true)
	if len(got) != 2 || got[0] != 5 || got[1] >= 0 || string(sent[1][14:]) != "join" {
		t.Fatalf("sent %v", got)
	}
	if s := statsOf(req.Fault); s.Acted != 1 || s.Pending != 1 || s.DuplicatesAnswered != 0 {
		t.Fatalf("before the answers: %+v", s)
	}
	// count 1 is spent on the one duplicated: a second JoinGroup goes by untouched
	up.send(request(11, 9, 6, "again"))
	if got := ids(t, up.frames(t, 1, 2*time.Second), true); fmt.Sprint(got) != "[6]" {
		t.Fatalf("sent %v", got)
	}
	down.send(syncAnswer(5, 0), syncAnswer(got[1], 0))
	if answers := ids(t, down.frames(t, 2, 500*time.Millisecond), false); fmt.Sprint(answers) != "[5]" {
		t.Fatalf("answers %v", answers)
	}
	if s := statsOf(req.Fault); s.Acted != 1 || s.Pending != 0 || s.DuplicatesAnswered != 1 || s.Seen != 2 {
		t.Fatalf("after the answers: %+v", s)
	}
}

func TestCleanupPassesOnAHeldAnswerWithItsClientsID(t *testing.T) {
	req, resp := pair(Delay, 14)
	resp.DelayMs, req.DelayMs = 60000, 60000
	up, down := run(req), run(resp)
	up.send(request(14, 5, 8, "a"))
	id := ids(t, up.frames(t, 1, 2*time.Second), true)[0]
	down.send(syncAnswer(id, 0))
	time.Sleep(100 * time.Millisecond)
	if !down.stub.InterruptToxic() {
		t.Fatal("not running")
	}
	resp.Cleanup(down.stub)
	if got := ids(t, down.frames(t, 1, time.Second), false); fmt.Sprint(got) != "[8]" {
		t.Fatalf("answers %v", got)
	}
}

func TestARequestWhoseConnectionClosedUnansweredFreesItsPlace(t *testing.T) {
	// found exploring 3.9.1: an OffsetCommit error fault selected a commit, then the coordinator was killed;
	// the answer never came, the heal waited out its drain bound, and count's budget stayed spent
	req, _ := pair(Error, 14)
	up := run(req)
	up.send(request(14, 5, 5, "a"))
	if got := ids(t, up.frames(t, 1, 2*time.Second), true); len(got) != 1 || got[0] >= 0 {
		t.Fatalf("sent %v", got)
	}
	if s := statsOf(req.Fault); s.Pending != 1 {
		t.Fatalf("before the close: %+v", s)
	}
	close(up.in) // the link's reader is done: the connection is over
	select {
	case <-up.done:
	case <-time.After(2 * time.Second):
		t.Fatal("the toxic did not end with its stream")
	}
	if s := statsOf(req.Fault); s.Pending != 0 || s.Unanswered != 1 || s.Acted != 0 {
		t.Fatalf("after the close: %+v", s)
	}
	// the budget is free: on a new connection, the next matching request is selected
	again := run(req)
	again.send(request(14, 5, 9, "b"))
	if got := ids(t, again.frames(t, 1, 2*time.Second), true); len(got) != 1 || got[0] >= 0 {
		t.Fatalf("sent %v", got)
	}
}
