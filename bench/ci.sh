#!/usr/bin/env bash
# ci.sh checks bench/, which the root module's go test and go vet do not
# reach (it is a module of its own): formatting, vet, staticcheck, the unit
# tests (workload, every system's conformance, the report writer's golden
# files), then every benchmark once on a tiny key space and a report of it.
# About 20 s on 2 cores with a warm build cache; about 2.5 minutes cold.
set -euo pipefail
cd "$(dirname "$0")"

# Without cgo, Pebble compresses with pure Go instead of building the C
# zstd library, which takes a third of a cold build; a smoke run needs none
# of it. run.sh's measured runs keep the default (cgo on where available).
export CGO_ENABLED=${CGO_ENABLED:-0}

echo "== bench: gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt wants to change: $unformatted"
  exit 1
fi

echo "== bench: go vet"
go vet ./...

echo "== bench: staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "== bench: go test"
go test -count=1 ./...

echo "== bench: every benchmark once"
./run.sh --ci
