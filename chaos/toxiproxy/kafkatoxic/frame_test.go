package kafkatoxic

import (
	"bytes"
	"testing"
)

func request(key, version int16, id int32, payload string) []byte {
	h := []byte{byte(key >> 8), byte(key), byte(version >> 8), byte(version), byte(id >> 24), byte(id >> 16),
		byte(id >> 8), byte(id), 0, 0} // client id: empty string
	return frameOf(h, []byte(payload))
}

// TestFramesSurviveEveryCut: a stream of frames cut at every byte boundary comes out as the same frames.
func TestFramesSurviveEveryCut(t *testing.T) {
	stream := append(append(request(14, 5, 1, "abc"), request(12, 4, 2, "")...), request(8, 9, 3, "payload")...)
	for cut := 0; cut <= len(stream); cut++ {
		var got [][]byte
		buf := []byte{}
		for _, part := range [][]byte{stream[:cut], stream[cut:]} {
			buf = append(buf, part...)
			frames, rest := splitFrames(buf)
			got = append(got, frames...)
			buf = append([]byte(nil), rest...)
		}
		if len(got) != 3 || len(buf) != 0 || !bytes.Equal(bytes.Join(got, nil), stream) {
			t.Fatalf("cut %d: %d frames, %d left", cut, len(got), len(buf))
		}
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
