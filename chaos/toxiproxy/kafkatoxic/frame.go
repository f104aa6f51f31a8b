// Package kafkatoxic is a Toxiproxy toxic that acts on one Kafka API's requests or responses on a link:
// it drops a request or its response, delays a response, replaces a response's error codes, or sends a
// request twice.
//
// Toxiproxy hands a toxic the bytes of one direction as TCP reads delivered them, so the toxic re-frames
// them on Kafka's 4-byte size prefix (Kafka's protocol guide, "Protocol Framing"): it reads each frame's
// header and passes every frame it does not act on through unchanged, in order and as its bytes arrive.
//
// Upstream (client to broker) and downstream (broker to client) are two toxics that share nothing per
// connection in Toxiproxy, so a response is matched to its request through the wire: a request whose
// response the fault acts on leaves with its correlation id replaced by a negative id of the toxic's own
// (clients number theirs from 0 up: librdkafka per connection, the Java client per client), which the
// broker echoes (the response header is the correlation id, Kafka's protocol guide, "Headers"). The
// downstream toxic, on any connection of the proxy, finds that id, acts, and restores the client's id.
// Requests and responses the fault does not act on are not decoded beyond their header.
package kafkatoxic

import (
	"encoding/binary"
	"errors"
)

// requestHeader is the part of a request header (v1 and v2) the toxic reads: the API key, its version and
// the correlation id, the first 8 bytes after the size in every version (Kafka's RequestHeader.json).
type requestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
}

var errShort = errors.New("frame shorter than its header")

func parseRequestHeader(frame []byte) (requestHeader, error) {
	if len(frame) < 12 {
		return requestHeader{}, errShort
	}
	return requestHeader{
		APIKey:        int16(binary.BigEndian.Uint16(frame[4:])),
		APIVersion:    int16(binary.BigEndian.Uint16(frame[6:])),
		CorrelationID: int32(binary.BigEndian.Uint32(frame[8:])),
	}, nil
}

// withRequestCorrelation is a copy of a request frame with another correlation id.
func withRequestCorrelation(frame []byte, id int32) []byte {
	out := append([]byte(nil), frame...)
	binary.BigEndian.PutUint32(out[8:], uint32(id))
	return out
}

// responseCorrelation is a response frame's correlation id, the first field of every response header.
func responseCorrelation(frame []byte) (int32, error) {
	if len(frame) < 8 {
		return 0, errShort
	}
	return int32(binary.BigEndian.Uint32(frame[4:])), nil
}

// withResponseCorrelation is a copy of a response frame with another correlation id.
func withResponseCorrelation(frame []byte, id int32) []byte {
	out := append([]byte(nil), frame...)
	binary.BigEndian.PutUint32(out[4:], uint32(id))
	return out
}

// responseBody splits a response frame after its header: the correlation id, then, in the flexible versions
// of every API but ApiVersions (whose response header stays v0 so any client can read it, KIP-511), the
// header's tagged fields (KIP-482).
func responseBody(frame []byte, flexibleHeader bool) (header, body []byte, err error) {
	if len(frame) < 8 {
		return nil, nil, errShort
	}
	at := 8
	if flexibleHeader {
		n, k := binary.Uvarint(frame[at:])
		if k <= 0 {
			return nil, nil, errShort
		}
		at += k
		for i := uint64(0); i < n; i++ {
			_, k = binary.Uvarint(frame[at:]) // tag
			if k <= 0 {
				return nil, nil, errShort
			}
			at += k
			size, k := binary.Uvarint(frame[at:])
			if k <= 0 || at+k+int(size) > len(frame) {
				return nil, nil, errShort
			}
			at += k + int(size)
		}
	}
	return frame[4:at], frame[at:], nil
}

// frameOf prefixes header and body with their size.
func frameOf(header, body []byte) []byte {
	out := make([]byte, 4, 4+len(header)+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(header)+len(body)))
	out = append(out, header...)
	return append(out, body...)
}
