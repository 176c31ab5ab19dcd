# Sourced by bench/run.sh and bench/peers.sh (BUILD, LIB and tmp set): start-up and exit of
# processes that use no traced API, what the preload adds (loading it and its libraries alone:
# ICX_DISABLE=1, and as shipped), and that they leave no trace file.
S="$BUILD/bench/bench_startup"
if command -v taskset >/dev/null 2>&1; then
    S="taskset -c ${BENCH_CPU:-1} $S"
fi
SROUNDS=${SROUNDS:-400}
mkdir -p "$tmp/startup"
echo
echo "start-up + exit of a process that uses no traced API: fork+exec+wait, us, $SROUNDS runs each, interleaved"
printf "%-24s %9s %9s %9s\n" "variant" "median" "p90" "added"
for prog in /bin/true "/bin/bash -c true" "/usr/bin/python3 -c pass"; do
    echo "$prog"
    # shellcheck disable=SC2086 # the program's words are meant to split
    ICX_QUIET=0 ICX_OUTPUT="$tmp/startup/%p.icx.zst" $S "$LIB" "$SROUNDS" -- $prog
done
if [ -n "$(ls -A "$tmp/startup")" ]; then
    echo "bench: a process that used no traced API left a trace: $(ls "$tmp/startup" | head -3)" >&2
    exit 1
fi
