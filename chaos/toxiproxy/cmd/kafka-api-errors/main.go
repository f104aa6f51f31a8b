// Command kafka-api-errors prints, as JSON, Kafka's error codes by name (franz-go's kerr, current with
// Errors.java) and the error names documented for each Kafka API's answer:
// {"Heartbeat": ["COORDINATOR_NOT_AVAILABLE", ...], ...}, from two sources, united:
//
//   - franz-go's kmsg: its generated code documents ErrorCode fields of responses (top level and nested: per
//     topic, partition, member) with the errors Kafka returns there; read with Go's own parser;
//   - Kafka's own message specs (common/message/<Name>Response.json in the kafka-clients jar given with -specs):
//     their comments and "about" texts name errors added in later versions (STALE_MEMBER_EPOCH, ...).
//
// Neither is complete (kmsg's Heartbeat omits KIP-345's FENCED_INSTANCE_ID); chaos/model/kafka_api.py adds
// what a KIP documents elsewhere. kafka-chaos keeps the output as chaos/model/kafka_api_errors.json (an rpc
// fault's `error` is checked against it at load time); a unit test runs this command and compares.
//
// Usage: go run ./cmd/kafka-api-errors -specs kafka-clients-X.jar [-kmsg dir] (default -kmsg: the kmsg this
// module requires, from `go list -m`).
package main

import (
	"archive/zip"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorName is how kmsg's comments write an error: Kafka's upper-case name (NOT_COORDINATOR).
var errorName = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b`)

func main() {
	specs := flag.String("specs", "", "a kafka-clients jar (Kafka's message specs)")
	kmsgDir := flag.String("kmsg", "", "kmsg's source directory (default: from go list -m)")
	flag.Parse()
	if *specs == "" {
		fail("-specs kafka-clients-X.jar is required")
	}
	dir := *kmsgDir
	if dir == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go/pkg/kmsg").Output()
		if err != nil {
			fail("go list -m github.com/twmb/franz-go/pkg/kmsg: %v", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "generated.go"), nil, parser.ParseComments)
	if err != nil {
		fail("%v", err)
	}
	// each API's answer: its response type and every type nested in it are named <Name>Response...
	names := map[string]string{}
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if n := kmsg.NameForKey(key); n != "" {
			names[n+"Response"] = n
		}
	}
	found := map[string]map[string]bool{}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			api := apiOf(ts.Name.Name, names)
			if !ok || api == "" {
				continue
			}
			for _, field := range st.Fields.List {
				if len(field.Names) != 1 || !strings.HasSuffix(field.Names[0].Name, "ErrorCode") || field.Doc == nil {
					continue
				}
				add(found, api, field.Doc.Text())
			}
		}
	}
	if err := readSpecs(*specs, names, found); err != nil {
		fail("%s: %v", *specs, err)
	}
	errs := map[string][]string{}
	for api, set := range found {
		for e := range set {
			errs[api] = append(errs[api], e)
		}
		sort.Strings(errs[api])
	}
	// every error code kerr knows (Kafka's Errors.java, as franz-go keeps it current), by name
	codes := map[string]int16{}
	for code := int16(-1); code < 1000; code++ {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
			codes[e.Message] = code
		}
	}
	out := struct {
		Sources map[string]string   `json:"sources"`
		Codes   map[string]int16    `json:"codes"`
		Errors  map[string][]string `json:"errors"`
	}{map[string]string{"kmsg": moduleVersion("github.com/twmb/franz-go/pkg/kmsg"),
		"kerr": moduleVersion("github.com/twmb/franz-go"), "specs": filepath.Base(*specs)}, codes, errs}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fail("%v", err)
	}
}

// add records the error names text mentions as errors of api.
func add(found map[string]map[string]bool, api, text string) {
	for _, e := range errorName.FindAllString(text, -1) {
		if found[api] == nil {
			found[api] = map[string]bool{}
		}
		found[api][e] = true
	}
}

// readSpecs adds the error names each <Name>Response.json of the jar mentions (comments and "about" texts:
// the only upper-case underscored words in them are error names).
func readSpecs(jar string, names map[string]string, found map[string]map[string]bool) error {
	z, err := zip.OpenReader(jar)
	if err != nil {
		return err
	}
	defer z.Close()
	// the specs spell some names in another case than kmsg (InitProducerId, InitProducerID)
	folded := map[string]string{}
	for typeName, api := range names {
		folded[strings.ToLower(typeName)] = api
	}
	n := 0
	for _, f := range z.File {
		base := strings.TrimPrefix(f.Name, "common/message/")
		api, ok := folded[strings.ToLower(strings.TrimSuffix(base, ".json"))]
		if base == f.Name || !strings.HasSuffix(base, "Response.json") || !ok {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return err
		}
		text, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return err
		}
		add(found, api, string(text))
		n++
	}
	if n == 0 {
		return fmt.Errorf("no common/message/*Response.json in it")
	}
	return nil
}

// apiOf is the API whose answer the type belongs to: the longest <Name>Response prefix of its name.
func apiOf(typeName string, names map[string]string) string {
	best := ""
	for prefix, api := range names {
		if strings.HasPrefix(typeName, prefix) && len(api) > len(best) {
			best = api
		}
	}
	return best
}

// moduleVersion is the version of a module this command is built with (kmsg: the one it reads by default).
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kafka-api-errors: "+format+"\n", args...)
	os.Exit(1)
}
