#!/bin/sh
# Run a script inside a small QEMU guest that has the real Linux verbs stack (rdma_rxe, soft-RoCE).
#
#   tests/rxe/vm.sh OUTDIR SCRIPT [ARGS...]
#
# The guest boots Debian's stock kernel (linux-image-amd64) with software emulation (-accel tcg:
# this machine's /dev/kvm is a nested-virtualization module under which that kernel hangs) and a
# tiny busybox initramfs built here.  It sees this machine's root filesystem read-only over 9p
# with a tmpfs overlay on top, so it runs the very binaries built here (tracer, perftest, tests),
# and OUTDIR read-write at /icx-out.  The guest has no network device: nothing it sends leaves it.
# SCRIPT runs as root in the guest with OUTDIR as its argument $1 (then ARGS); its exit status
# lands in OUTDIR/rc and its output in OUTDIR/console.log.  Exit status: the script's; 125 when the
# VM cannot run here (missing kernel/qemu/busybox, printed), 124 when the guest timed out.
set -eu
out=$(realpath "$1"); script=$(realpath "$2"); shift 2
timeout_s=${ICX_VM_TIMEOUT:-300}
cache=${ICX_VM_CACHE:-/tmp/icx-rxe-vm}

kver=${ICX_VM_KERNEL_VERSION:-$(ls /lib/modules 2>/dev/null | grep -- '-amd64$' | sort -V | tail -1)}
kernel=/boot/vmlinuz-$kver
missing=""
[ -n "$kver" ] && [ -r "$kernel" ] || missing="$missing linux-image-amd64"
command -v qemu-system-x86_64 >/dev/null || missing="$missing qemu-system-x86"
command -v busybox >/dev/null || missing="$missing busybox-static"
if [ -n "$missing" ]; then
    echo "vm.sh: cannot run the verbs VM: missing Debian packages:$missing" >&2
    exit 125
fi
if [ -z "$(modinfo -k "$kver" -n rdma_rxe 2>/dev/null)" ]; then
    echo "vm.sh: kernel $kver has no rdma_rxe module" >&2
    exit 125
fi

# ---- initramfs: static busybox + the modules to mount 9p and overlay; rebuilt when inputs change
initrd=$cache/initrd-$kver.cpio.gz
if [ ! -s "$initrd" ] || [ "$0" -nt "$initrd" ]; then
    rm -rf "$cache/root" && mkdir -p "$cache/root/bin" "$cache/root/lib/mod"
    cp "$(command -v busybox)" "$cache/root/bin/busybox"
    mkdir -p "$cache/root/proc" "$cache/root/sys" "$cache/root/dev"
    : >"$cache/root/lib/mod/order"
    # Dependency order from modprobe itself; modules built into the kernel print as "builtin".
    for m in virtio_pci 9pnet_virtio 9p overlay; do
        modprobe -S "$kver" --show-depends "$m"
    done | awk '$1 == "insmod" { print $2 }' | while read -r f; do
            [ -e "$cache/root/lib/mod/$(basename "$f")" ] && continue
            cp "$f" "$cache/root/lib/mod/"
            basename "$f" >>"$cache/root/lib/mod/order"
        done
    cat >"$cache/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc && mount -t sysfs sys /sys && mount -t devtmpfs dev /dev
for m in $(cat /lib/mod/order); do insmod /lib/mod/$m; done
mkdir -p /host /rw /new
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro hostroot /host
mount -t tmpfs -o size=512m tmpfs /rw && mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /new
mkdir -p /new/icx-out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 icxout /new/icx-out
for d in proc sys dev; do mount --move /$d /new/$d 2>/dev/null || mount --bind /$d /new/$d; done
mount -t tmpfs tmpfs /new/run # not /tmp: a build under /tmp (a CI clone) must stay visible
ip link set lo up
chroot /new /bin/sh -c "hostname rxe-guest; sh /icx-out/.script /icx-out \$(cat /icx-out/.args) \
    >/icx-out/console.log 2>&1; echo \$? >/icx-out/rc; sync"
poweroff -f
INIT
    chmod 755 "$cache/root/init"
    (cd "$cache/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
fi

mkdir -p "$out"
rm -f "$out/rc" "$out/console.log"
printf '%s ' "$@" >"$out/.args"
cp "$script" "$out/.script"
set +e
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -m 1536 -smp 2 -nographic -no-reboot \
    -nic none -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 quiet panic=-1 rdinit=/init" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$out",mount_tag=icxout,security_model=none \
    >"$out/vm.log" 2>&1 </dev/null
qrc=$?
set -e
if [ $qrc -eq 124 ]; then
    echo "vm.sh: guest timed out after ${timeout_s}s (last lines of $out/vm.log follow)" >&2
    tail -20 "$out/vm.log" >&2
    exit 124
fi
if [ ! -s "$out/rc" ]; then
    echo "vm.sh: guest did not finish its script (qemu exit $qrc); $out/vm.log:" >&2
    tail -30 "$out/vm.log" >&2
    exit 1
fi
exit "$(cat "$out/rc")"
