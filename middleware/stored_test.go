package middleware

import (
	"net/http"
	"reflect"
	"testing"
)

func TestDecodeStoredResponse(t *testing.T) {
	got, err := DecodeStoredResponse(encode(201, 0, []string{"Content-Type", "application/json", "Link", "</a>", "Link", "</b>"}, []byte(`{"id":1}`)))
	want := StoredResponse{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Link": {"</a>", "</b>"}}, Body: []byte(`{"id":1}`)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeStoredResponse = %+v, %v; want %+v", got, err, want)
	}
	got, err = DecodeStoredResponse(encode(200, flagStreamed|flagOversize, nil, nil))
	if err != nil || !got.NotReplayable || got.Reason != "streamed,oversize" || got.Status != 200 {
		t.Fatalf("tombstone = %+v, %v", got, err)
	}
	if _, err := DecodeStoredResponse([]byte("idemwatermill/1\n[]")); err == nil {
		t.Fatal("another writer's result decoded as a response")
	}
}
