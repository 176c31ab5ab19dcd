# Runs inside the verbs VM (tests/rxe/vm.sh OUT tests/rxe/verbs_guest.sh BUILD ITERS SIZE QPS).
# Soft-RoCE on a dummy netdev, then perftest pairs and our own verbs workloads under the tracer.
# perftest gets -F: its CPU-frequency self-check ("Can't produce a report") is unreliable under
# TCG and failed ib_send_bw runs here, more often with the tracer's writer thread running.
# Every trace, perftest report and truth file lands in OUT; "STEP name rc" lines in steps.txt.
out=$1 build=$2 iters=${3:-200} size=${4:-4096} qps=${5:-2}
lib=$build/lib/libicxtrace.so
addr=192.0.2.1 # TEST-NET-1 on a dummy device in a guest without a network card
step() { echo "STEP $1 $2" >>"$out/steps.txt"; }
: >"$out/steps.txt"
modprobe crc32_generic; modprobe rdma_ucm; modprobe rdma_rxe && modprobe dummy numdummies=1 &&
    ip link set dummy0 up && ip addr add $addr/24 dev dummy0 &&
    rdma link add rxe0 type rxe netdev dummy0
step setup $?
ibv_devinfo -d rxe0 >"$out/devinfo.txt" 2>&1
gid=1 # the IPv4-mapped GID of $addr

traced() { # traced NAME CMD...: run CMD with the tracer writing $out/NAME.icx.zst
    name=$1; shift
    timeout 120 env ICX_OUTPUT=$out/$name.icx.zst LD_PRELOAD=$lib "$@"
}

# NAME TOOL EXTRA-FLAGS: plain write/send/read, send into a shared receive queue, and write over
# QPs that librdmacm connected (rdma_cm ends up in the same verbs calls).
# A pair that fails is run once more, from scratch (its traces and reports replaced): rdma_cm
# connections on rxe were seen to be rejected once in a while (the server: "Failed to create RDMA
# CM connection ... No space left on device"), with or without anything else running.  Both
# attempts' outcomes are in steps.txt.
pair() { # pair NAME TOOL ARGS...: server and client of one perftest; "<client rc>/<server rc>"
    t=$1 tool=$2
    shift 2
    rm -f "$out/${t}-"*
    traced ${t}-server $tool -F -d rxe0 -x $gid -s $size -n $iters -q $qps "$@" \
        >"$out/${t}-server.txt" 2>&1 &
    srv=$!
    rc=1
    for try in 1 2 3 4 5 6 7 8 9 10; do # the server needs a moment to listen
        sleep 1
        traced ${t}-client $tool -F -d rxe0 -x $gid -s $size -n $iters -q $qps "$@" $addr \
            >"$out/${t}-client.txt" 2>&1 && { rc=0; break; }
        grep -qiE "Couldn't connect|Unable to perform rdma_client" "$out/${t}-client.txt" || break
        rm -f "$out/${t}-client.icx.zst"* # that attempt's trace: the next one is the run
    done
    wait $srv
    echo "$rc/$?"
}
for spec in "write write" "send send" "read read" "send-srq send --use-srq" "write-cm write -R"; do
    set -- $spec
    t=$1 tool=ib_$2_bw
    shift 2
    r=$(pair $t $tool "$@")
    if [ "$r" != 0/0 ]; then
        step perftest-$t-first-attempt "$r"
        sleep 2
        r=$(pair $t $tool "$@")
    fi
    step perftest-$t "$r"
done

traced loop-post "$build/tests/verbs/verbs_loop" rxe0 $gid post $iters $size \
    "$out/loop-post.truth" >"$out/loop-post.txt" 2>&1
step loop-post $?
traced loop-wr "$build/tests/verbs/verbs_loop" rxe0 $gid wr $iters $size \
    "$out/loop-wr.truth" >"$out/loop-wr.txt" 2>&1
step loop-wr $?
traced loop-dl "$build/tests/verbs/verbs_loop_dl" rxe0 $gid post $iters $size \
    "$out/loop-dl.truth" >"$out/loop-dl.txt" 2>&1
step loop-dl $?
ICX_VERBS_EVENTS=1 traced loop-events "$build/tests/verbs/verbs_loop" rxe0 $gid post \
    $iters $size "$out/loop-events.truth" >"$out/loop-events.txt" 2>&1
step loop-events $?
exit 0
