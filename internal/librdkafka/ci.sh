#!/usr/bin/env bash
# ci.sh checks internal/librdkafka, a module of its own that the root
# module's go vet and go test do not reach: vet, staticcheck and its test
# (librdkafka consumers on group.protocol=consumer against offsetd serve),
# under the race detector. confluent-kafka-go v2.11.1 comes from the Go
# module proxy; where it cannot be had, the module is skipped, saying why.
# Without cgo (or a C compiler) the test skips itself and says so.
set -euo pipefail
cd "$(dirname "$0")"

if ! go mod download github.com/confluentinc/confluent-kafka-go/v2 >/dev/null 2>&1; then
  echo "skipped: confluent-kafka-go v2.11.1 could not be downloaded from the Go module proxy"
  exit 0
fi
if [ "$(go env CGO_ENABLED)" != 1 ]; then
  echo "cgo is off (CGO_ENABLED=0 or no C compiler): the librdkafka test will skip"
fi

echo "== internal/librdkafka: go vet"
go vet ./...

echo "== internal/librdkafka: staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "== internal/librdkafka: go test -race"
race=-race
[ "$(go env CGO_ENABLED)" = 1 ] || race=
go test $race -count=1 -v ./...
