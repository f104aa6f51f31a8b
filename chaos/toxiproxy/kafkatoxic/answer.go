package kafkatoxic

import (
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API is one Kafka API as the toxic knows it (from franz-go's kmsg, generated from Kafka's message specs).
type API struct {
	Key        int16  `json:"key"`
	Name       string `json:"name"`
	MaxVersion int16  `json:"max_version"`
}

// APIs lists every API kmsg has a request and response for.
func APIs() []API {
	var out []API
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req, resp := kmsg.RequestForKey(k), kmsg.ResponseForKey(k)
		if req == nil || resp == nil {
			continue
		}
		out = append(out, API{Key: k, Name: kmsg.NameForKey(k), MaxVersion: resp.MaxVersion()})
	}
	return out
}

// newResponse is an empty response of key at version, or an error when kmsg does not know it.
func newResponse(key, version int16) (kmsg.Response, error) {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return nil, fmt.Errorf("unknown API key %d", key)
	}
	if version < 0 || version > resp.MaxVersion() {
		return nil, fmt.Errorf("%s v%d is beyond the newest version known (%d)", kmsg.NameForKey(key), version,
			resp.MaxVersion())
	}
	resp.SetVersion(version)
	return resp, nil
}

// flexibleResponseHeader says whether the response header of key at version carries tagged fields.
func flexibleResponseHeader(resp kmsg.Response) bool {
	return resp.IsFlexible() && resp.Key() != 18 // ApiVersions: header v0 in every version (KIP-511)
}

// injectedMessage is what an answer's error message says where its version has one.
const injectedMessage = "kafka-chaos: error injected by the kafka toxic"

// setErrors replaces every error code of a decoded response (the top-level ErrorCode and those of its
// topics, partitions, members...) with code, and sets its error messages; it returns how many codes it set.
// Every ErrorCode field is an int16 named ErrorCode in kmsg's generated structs.
func setErrors(resp kmsg.Response, code int16) int {
	return setIn(reflect.ValueOf(resp).Elem(), code)
}

func setIn(v reflect.Value, code int16) int {
	n := 0
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), t.Field(i).Name
			switch {
			case !f.CanSet():
			case name == "ErrorCode" && f.Kind() == reflect.Int16:
				f.SetInt(int64(code))
				n++
			case name == "ErrorMessage" && f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String:
				msg := injectedMessage
				f.Set(reflect.ValueOf(&msg))
			default:
				n += setIn(f, code)
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			n += setIn(v.Index(i), code)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			n += setIn(v.Elem(), code)
		}
	}
	return n
}

// withErrors is a response frame of key at version with every error code replaced by code: decoded and
// encoded again by kmsg (flexible versions and tagged fields included), the header kept as it came.
func withErrors(frame []byte, key, version, code int16) ([]byte, int, error) {
	resp, err := newResponse(key, version)
	if err != nil {
		return nil, 0, err
	}
	header, body, err := responseBody(frame, flexibleResponseHeader(resp))
	if err != nil {
		return nil, 0, err
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, 0, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	n := setErrors(resp, code)
	return frameOf(header, resp.AppendTo(nil)), n, nil
}
