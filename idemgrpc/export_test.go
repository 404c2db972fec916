package idemgrpc

import (
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// DecodeStored reads an answer as the Store keeps it, for the tests of
// package idemgrpc_test: its response message (nil for a kept status), its
// kept status (nil for a response), and its metadata.
func DecodeStored(v []byte) (resp proto.Message, st *status.Status, header, trailer metadata.MD, err error) {
	a, err := decodeAnswer(v)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if a.status != nil {
		return nil, status.FromProto(a.status), a.header, a.trailer, nil
	}
	resp, err = a.response.UnmarshalNew()
	return resp, nil, a.header, a.trailer, err
}
