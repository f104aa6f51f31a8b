package kafkatoxic

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// splitFrames takes whole frames (size prefix included) off the front of buf; rest is an incomplete tail.
func splitFrames(buf []byte) (frames [][]byte, rest []byte) {
	for len(buf) >= 4 {
		size := int(int32(binary.BigEndian.Uint32(buf)))
		if size < 0 || len(buf) < 4+size {
			break
		}
		frames = append(frames, buf[:4+size:4+size])
		buf = buf[4+size:]
	}
	return frames, buf
}

func request(key, version int16, id int32, payload string) []byte {
	h := []byte{byte(key >> 8), byte(key), byte(version >> 8), byte(version), byte(id >> 24), byte(id >> 16),
		byte(id >> 8), byte(id), 0, 0} // client id: empty string
	return frameOf(h, []byte(payload))
}

// TestFramesSurviveEveryCut: a stream cut at every byte boundary (and at every pair of them) comes out as the
// same bytes, the frame of the toxic's API whole and once, the others passed on as they came.
func TestFramesSurviveEveryCut(t *testing.T) {
	want := request(14, 5, 2, "abc")
	stream := append(append(request(12, 4, 1, "hb"), want...), request(8, 9, 3, "payload")...)
	tox := &KafkaToxic{Side: "requests", APIKey: 14}
	for a := 0; a <= len(stream); a++ {
		for b := a; b <= len(stream); b++ {
			st := new(state)
			for _, part := range [][]byte{stream[:a], stream[a:b], stream[b:]} {
				tox.feed(st, part)
			}
			var all []byte
			var whole [][]byte
			for _, pc := range st.queue {
				all = append(all, pc.data...)
				if pc.whole {
					whole = append(whole, pc.data)
				}
			}
			if !bytes.Equal(all, stream) || len(whole) != 1 || !bytes.Equal(whole[0], want) || len(st.buf) != 0 ||
				st.passing != 0 {
				t.Fatalf("cuts %d,%d: %d whole frames, %d bytes out of %d", a, b, len(whole), len(all), len(stream))
			}
		}
	}
}

// TestAnswersOfOthersPassUnread: on the answers' side only a negative correlation id is gathered whole.
func TestAnswersOfOthersPassUnread(t *testing.T) {
	tox := &KafkaToxic{Side: "responses"}
	st := new(state)
	tox.feed(st, append(frameOf(header(5, false), []byte("a")), frameOf(header(-9, false), []byte("b"))...))
	if len(st.queue) != 3 || st.queue[0].whole || st.queue[1].whole || !st.queue[2].whole {
		t.Fatalf("%+v", st.queue)
	}
}

func TestRequestHeaderAndCorrelationRewrite(t *testing.T) {
	fr := request(14, 5, 41, "x")
	h, err := parseRequestHeader(fr)
	if err != nil || h != (requestHeader{14, 5, 41}) {
		t.Fatal(h, err)
	}
	out := withRequestCorrelation(fr, -3)
	if h2, _ := parseRequestHeader(out); h2.CorrelationID != -3 || !bytes.Equal(out[12:], fr[12:]) {
		t.Fatal(h2)
	}
	if h3, _ := parseRequestHeader(fr); h3.CorrelationID != 41 {
		t.Fatal("the original frame changed")
	}
}
