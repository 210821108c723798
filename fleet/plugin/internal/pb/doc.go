// Package pb holds the protocol buffer messages and gRPC service of the
// backend plugin protocol, generated from backend.proto.
//
// To regenerate after changing backend.proto, install protoc (Debian:
// apt-get install protobuf-compiler) and the two Go generators at the
// versions that match the module's google.golang.org/protobuf and
// google.golang.org/grpc:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.6
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.3.0
//
// then run go generate in this directory.
package pb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative backend.proto
