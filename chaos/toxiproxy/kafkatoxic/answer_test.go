package kafkatoxic

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// populate gives every slice of v one element (to depth 3), so nested error codes exist on the wire.
func populate(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			populate(v.Elem(), depth)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).CanSet() {
				populate(v.Field(i), depth)
			}
		}
	case reflect.Slice:
		if depth == 0 || v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		el := reflect.New(v.Type().Elem()).Elem()
		if d, ok := el.Addr().Interface().(interface{ Default() }); ok {
			d.Default()
		}
		populate(el, depth-1)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), el))
	}
}

// codes collects every ErrorCode of v in walk order.
func codes(v reflect.Value, out *[]int16) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			codes(v.Elem(), out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 {
				*out = append(*out, int16(v.Field(i).Int()))
			} else if v.Field(i).CanInterface() {
				codes(v.Field(i), out)
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			codes(v.Index(i), out)
		}
	}
}

func header(id int32, flexible bool) []byte {
	h := binary.BigEndian.AppendUint32(nil, uint32(id))
	if flexible {
		h = append(h, 0) // no tagged fields
	}
	return h
}

func decode(t *testing.T, key, version int16, body []byte) kmsg.Response {
	t.Helper()
	r, err := newResponse(key, version)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
	}
	return r
}

// TestErrorsReplacedInEveryVersionOfEveryAPI: for every API and version kmsg knows, a populated answer with
// every error code 1 goes through withErrors(…, 16): the frame keeps its header and a size that is its
// length, decodes, and every error code the version carries on the wire (those that came back 1 from a plain
// round trip) is 16.
func TestErrorsReplacedInEveryVersionOfEveryAPI(t *testing.T) {
	versions, withCodes := 0, 0
	for _, api := range APIs() {
		for v := int16(0); v <= api.MaxVersion; v++ {
			resp, err := newResponse(api.Key, v)
			if err != nil {
				t.Fatal(err)
			}
			populate(reflect.ValueOf(resp), 3)
			setErrors(resp, 1)
			body := resp.AppendTo(nil)
			plain := decode(t, api.Key, v, body)
			var want []int16
			codes(reflect.ValueOf(plain), &want)

			frame := frameOf(header(7, flexibleResponseHeader(resp)), body)
			out, _, err := withErrors(frame, api.Key, v, 16)
			if err != nil {
				t.Fatalf("%s v%d: %v", api.Name, v, err)
			}
			if got := int(binary.BigEndian.Uint32(out)); got != len(out)-4 {
				t.Fatalf("%s v%d: size %d for %d bytes", api.Name, v, got, len(out)-4)
			}
			if id, _ := responseCorrelation(out); id != 7 {
				t.Fatalf("%s v%d: correlation id %d", api.Name, v, id)
			}
			_, gotBody, err := responseBody(out, flexibleResponseHeader(resp))
			if err != nil {
				t.Fatal(err)
			}
			var got []int16
			codes(reflect.ValueOf(decode(t, api.Key, v, gotBody)), &got)
			if len(got) != len(want) {
				t.Fatalf("%s v%d: %d codes, want %d", api.Name, v, len(got), len(want))
			}
			for i := range want {
				if want[i] == 1 && got[i] != 16 {
					t.Fatalf("%s v%d: error code %d of %d is %d, not 16", api.Name, v, i, len(want), got[i])
				}
				if want[i] == 1 {
					withCodes++
				}
			}
			versions++
		}
	}
	if versions < 300 || withCodes < 400 { // 367 versions and 464 codes with kmsg v1.15.1
		t.Fatalf("only %d versions and %d codes checked", versions, withCodes)
	}
	t.Logf("%d APIs, %d versions, %d error codes replaced", len(APIs()), versions, withCodes)
}

// TestFlexibleHeaderTagsAreKept: a flexible answer whose header carries a tagged field keeps it.
func TestFlexibleHeaderTagsAreKept(t *testing.T) {
	resp, _ := newResponse(14, 5) // SyncGroup v5, flexible
	body := resp.AppendTo(nil)
	h := binary.BigEndian.AppendUint32(nil, 9)
	h = append(h, 1, 3, 2, 0xAB, 0xCD) // one tagged field: tag 3, 2 bytes
	out, n, err := withErrors(frameOf(h, body), 14, 5, 27)
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if got := out[4 : 4+len(h)]; !reflect.DeepEqual(got, h) {
		t.Fatalf("header %x, want %x", got, h)
	}
	r := decode(t, 14, 5, out[4+len(h):]).(*kmsg.SyncGroupResponse)
	if r.ErrorCode != 27 {
		t.Fatal(r.ErrorCode)
	}
}

func TestUnknownVersionIsAnErrorNotAGuess(t *testing.T) {
	if _, _, err := withErrors(frameOf(header(1, false), nil), 14, 999, 16); err == nil {
		t.Fatal("no error for SyncGroup v999")
	}
}
