package idemgrpc_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/idemgrpc"
)

func builder(t testing.TB, opts ...fingerprint.Option) *fingerprint.Builder {
	t.Helper()
	b, err := fingerprint.New(append(opts, fingerprint.WithCaseSensitiveNames(true))...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fp(t testing.TB, b *fingerprint.Builder, method string, m proto.Message) string {
	t.Helper()
	s, err := idemgrpc.Fingerprint(b, method, m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, idemgrpc.FingerprintPrefix) || len(s) != len(idemgrpc.FingerprintPrefix)+64 {
		t.Fatalf("fingerprint %q", s)
	}
	return s
}

// decode unmarshals wire bytes into a new m.
func decode[M proto.Message](t testing.TB, wire []byte, m M) M {
	t.Helper()
	if err := proto.Unmarshal(wire, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Two encodings of one message fingerprint alike: fields in another order,
// a packed field sent unpacked, a proto3 default sent or left out.
func TestFingerprintEncodings(t *testing.T) {
	b := builder(t)
	// SourceCodeInfo.Location: path = 1 (packed int32), span = 2 (packed
	// int32), leading_comments = 3 (string).
	packed := func(field protowire.Number, vs ...uint64) []byte {
		var inner []byte
		for _, v := range vs {
			inner = protowire.AppendVarint(inner, v)
		}
		out := protowire.AppendTag(nil, field, protowire.BytesType)
		return protowire.AppendBytes(out, inner)
	}
	unpacked := func(field protowire.Number, vs ...uint64) []byte {
		var out []byte
		for _, v := range vs {
			out = protowire.AppendTag(out, field, protowire.VarintType)
			out = protowire.AppendVarint(out, v)
		}
		return out
	}
	comment := protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "hello")
	a := decode(t, concat(packed(1, 4, 0, 2), packed(2, 7, 8, 9), comment), &descriptorpb.SourceCodeInfo_Location{})
	c := decode(t, concat(comment, unpacked(2, 7, 8, 9), unpacked(1, 4), packed(1, 0, 2)), &descriptorpb.SourceCodeInfo_Location{})
	if fp(t, b, "/s/M", a) != fp(t, b, "/s/M", c) {
		t.Error("two encodings of one message fingerprint differently")
	}
	other := decode(t, concat(packed(1, 4, 2, 0), packed(2, 7, 8, 9), comment), &descriptorpb.SourceCodeInfo_Location{})
	if fp(t, b, "/s/M", a) == fp(t, b, "/s/M", other) {
		t.Error("a repeated field in another order fingerprints alike")
	}
	// A proto3 default sent explicitly is the message without it.
	zero := decode(t, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 0), &wrapperspb.Int64Value{})
	if fp(t, b, "/s/M", zero) != fp(t, b, "/s/M", &wrapperspb.Int64Value{}) {
		t.Error("a default sent or left out fingerprints differently")
	}
	if fp(t, b, "/s/M", wrapperspb.Int64(1)) == fp(t, b, "/s/M", wrapperspb.Int64(2)) {
		t.Error("two values fingerprint alike")
	}
	// Map entries in another order (Struct is a map).
	s1 := decode(t, concat(entry("a", 1), entry("b", 2)), &structpb.Struct{})
	s2 := decode(t, concat(entry("b", 2), entry("a", 1)), &structpb.Struct{})
	if fp(t, b, "/s/M", s1) != fp(t, b, "/s/M", s2) {
		t.Error("map entries in another order fingerprint differently")
	}
	// The method counts.
	if fp(t, b, "/s/M", s1) == fp(t, b, "/s/N", s1) {
		t.Error("two methods fingerprint alike")
	}
}

// entry is one Struct.fields map entry, name → number value.
func entry(name string, v float64) []byte {
	val := protowire.AppendFixed64(protowire.AppendTag(nil, 2, protowire.Fixed64Type), math.Float64bits(v)) // Value.number_value = 2
	e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), name)
	e = protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), val)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), e)
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Field lists name proto fields as the .proto file does, exactly; map
// keys that differ only in case are data, never refused.
func TestFingerprintFieldLists(t *testing.T) {
	field := func(name, jsonName, typeName string) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), JsonName: proto.String(jsonName), TypeName: proto.String(typeName)}
	}
	deny := builder(t, fingerprint.WithDeny("json_name"))
	if fp(t, deny, "/s/M", field("a", "x", "T")) != fp(t, deny, "/s/M", field("a", "y", "T")) {
		t.Error("a denied proto field name counts")
	}
	if fp(t, deny, "/s/M", field("a", "x", "T")) == fp(t, deny, "/s/M", field("a", "x", "U")) {
		t.Error("a field not denied does not count")
	}
	camel := builder(t, fingerprint.WithDeny("jsonName"))
	if fp(t, camel, "/s/M", field("a", "x", "T")) == fp(t, camel, "/s/M", field("a", "y", "T")) {
		t.Error("the JSON (camelCase) name reaches a field: names must be proto names")
	}
	allow := builder(t, fingerprint.WithAllow("type_name"))
	if fp(t, allow, "/s/M", field("a", "x", "T")) != fp(t, allow, "/s/M", field("b", "y", "T")) {
		t.Error("a field outside the allow-list counts")
	}
	// The default deny-list applies by proto name.
	def := builder(t)
	withTrace := func(id string) *structpb.Struct {
		s, _ := structpb.NewStruct(map[string]any{"amount": 1, "trace_id": id})
		return s
	}
	if fp(t, def, "/s/M", withTrace("a")) != fp(t, def, "/s/M", withTrace("b")) {
		t.Error("the default deny-list does not apply")
	}
	cased, _ := structpb.NewStruct(map[string]any{"amount": 1, "AMOUNT": 2})
	if _, err := idemgrpc.Fingerprint(def, "/s/M", cased); err != nil {
		t.Errorf("map keys that differ only in case: %v", err)
	}
	if _, err := idemgrpc.Fingerprint(def, "/s/M", nil); err == nil {
		t.Error("a nil message fingerprinted")
	}
}

// The interceptor's field lists reach its fingerprint.
func TestFingerprintOption(t *testing.T) {
	var runs = new(int64Counter)
	conn := guarded(t, memStore(t), &service{charge: runs.handler}, idemgrpc.WithFingerprint(fingerprint.WithDeny("sent_at")))
	a := call(t, conn, methodCharge, key("f"), msg(t, map[string]any{"amount": 1, "sent_at": "10:00"}))
	b := call(t, conn, methodCharge, key("f"), msg(t, map[string]any{"amount": 1, "sent_at": "10:01"}))
	if a.err != nil || b.err != nil || !b.replayed {
		t.Errorf("a denied field changed the request: %v, %v, replayed %v", a.err, b.err, b.replayed)
	}
	if n := runs.n.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

type int64Counter struct{ n atomic.Int64 }

func (c *int64Counter) handler(_ context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	c.n.Add(1)
	return req, nil
}
