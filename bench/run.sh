#!/usr/bin/env bash
# run.sh runs offsetd's side-by-side benchmarks and writes RESULTS.md (see
# README.md).
#
#   ./run.sh            quick run: small key space (128k keys), short runs, 3 repeats
#   ./run.sh --full     the real run: large key space (1.28M keys), 5 repeats
#   ./run.sh --ci       every benchmark once on a tiny key space, to prove
#                       nothing rots; writes nothing in bench/
#
# Options:
#   --count N           repeats of every benchmark (default 3 quick, 5 full)
#   --sys a,b,...       only these systems (e.g. --sys offsetd,pebble; offsetd-http
#                       is the HTTP path, and the only one of the polled fetch)
#
# Environment:
#   BENCH_TMPDIR        where the stores are written (default bench/.data). It
#                       must be on the disk you mean to measure: not tmpfs.
#   BENCH_GROUPS        override the number of groups in the key space.
#
# The raw go test output goes to results/MODE.txt and benchstat's to
# results/MODE-benchstat.txt; RESULTS.md and commit-throughput.svg are
# written from them. Run it on a quiet machine: other work on the CPUs or the
# disk shows up in every figure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

mode=quick
count=
systems=
while [ $# -gt 0 ]; do
  case "$1" in
    --full) mode=full ;;
    --ci) mode=ci ;;
    --count) count=$2; shift ;;
    --sys) systems=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

# Per mode: key space, repeats, and how long each family runs.
case "$mode" in
  quick)
    count=${count:-3}; commit_time=500ms; read_time=300ms; restart_time=2x ;;
  full)
    export BENCH_FULL=1
    count=${count:-5}; commit_time=2s; read_time=1s; restart_time=3x ;;
  ci)
    export BENCH_GROUPS=${BENCH_GROUPS:-20}
    count=${count:-1}; commit_time=1x; read_time=1x; restart_time=1x ;;
esac

filter=
if [ -n "$systems" ]; then
  filter="/^sys=(${systems//,/|})\$"
fi

command="bench/run.sh"
[ "$mode" = quick ] || command+=" --$mode"
[ "$count" = "$([ "$mode" = full ] && echo 5 || echo 3)" ] || [ "$mode" = ci ] || command+=" --count $count"
[ -z "$systems" ] || command+=" --sys $systems"
[ -z "${BENCH_GROUPS:-}" ] || [ "$mode" = ci ] || command="BENCH_GROUPS=$BENCH_GROUPS $command"

work=$(mktemp -d)
data=${BENCH_TMPDIR:-$here/.data}
mkdir -p "$data"
data=$(mktemp -d "$data/run-XXXXXX")
cleanup() { rm -rf "$work" "$data"; }
trap cleanup EXIT
export TMPDIR=$data

if [ "$mode" = ci ]; then
  raw=$work/ci.txt
  stat=$work/ci-benchstat.txt
  out=$work/RESULTS.md
  chart=$work/commit-throughput.svg
else
  mkdir -p results
  raw=results/$mode.txt
  stat=results/$mode-benchstat.txt
  out=RESULTS.md
  chart=commit-throughput.svg
fi
: >"$raw"

start=$(date +%s)
echo "== building the benchmarks"
go test -c -o "$work/bench.test" .

# bench runs one family of benchmarks with its own -benchtime, appending
# the results to the raw output: count passes over the whole family, not
# count runs of each benchmark in a row, so that the repeats of every
# system spread over the same minutes of the disk's drifting speed.
bench() {
  local pattern=$1 benchtime=$2
  echo "== $pattern (benchtime $benchtime, count $count)"
  for _ in $(seq "$count"); do
    "$work/bench.test" -test.run '^$' -test.bench "$pattern$filter" \
      -test.benchtime "$benchtime" -test.count 1 -test.timeout 0 | tee -a "$raw"
  done
}

if [ "$mode" = ci ]; then
  bench '.' 1x
else
  bench '^BenchmarkCommit$' "$commit_time"
  bench '^BenchmarkClusterCommit$' "$commit_time"
  bench '^Benchmark(Fetch(Group)?|HTTPFloor)$' "$read_time"
  bench '^BenchmarkPolledFetch$' "$read_time"
  bench '^BenchmarkRestart$' "$restart_time"
fi

echo "== benchstat"
{
  go tool benchstat "$raw"
  echo
  echo "Side by side, each system against the first column:"
  echo
  go tool benchstat -col /sys "$raw"
} >"$stat"
cat "$stat"

echo
echo "== report"
go run ./cmd/report -in "$raw" -benchstat "$stat" -out "$out" -chart "$chart" -command "$command"
echo "== done in $(( $(date +%s) - start ))s ($mode run)"
