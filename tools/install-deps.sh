#!/bin/sh
# Make sure the Debian packages icxtrace builds and tests with are present.  As root, installs the
# missing ones (apt-get); otherwise names them and fails.  The CUDA toolkit is not a Debian package
# here: it is expected at $CUDA_HOME (default /usr/local/cuda).
#
#   install-deps.sh      what the build needs (missing and not root: fails)
#   install-deps.sh test what the tests need beyond the build: the verbs VM (tests/rxe/vm.sh:
#                        Debian's kernel with rdma_rxe, qemu, busybox, perftest, the rxe
#                        provider), clang-format for the style check and chromium to render the
#                        HTML report; missing and not root:
#                        named, and those tests skip saying so ("vm" is the old name)
set -u
vm=${1:-}
[ "$vm" = test ] && vm=vm
if [ "$vm" = vm ]; then
    PKGS="qemu-system-x86 linux-image-amd64 busybox-static perftest ibverbs-providers ibverbs-utils
          iproute2 kmod cpio gzip clang-format chromium"
else
    PKGS="libzstd-dev libibverbs-dev libunwind-dev zstd python3 make gcc"
fi
missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
    case "$st" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
missing=${missing# }
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "icxtrace: installing missing Debian packages: $missing"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; } >/tmp/icx-apt.log 2>&1 || {
            echo "icxtrace: apt-get failed (log: /tmp/icx-apt.log):" >&2
            tail -n 20 /tmp/icx-apt.log >&2
            exit 1
        }
    else
        echo "icxtrace: missing Debian packages: $missing" >&2
        echo "icxtrace: install them with: sudo apt-get install $missing" >&2
        [ "$vm" = vm ] && { echo "icxtrace: the verbs VM test, the style check and the HTML rendering will be skipped" >&2; exit 0; }
        exit 1
    fi
fi
[ "$vm" = vm ] && exit 0
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
    echo "icxtrace: CUDA toolkit headers not found at $CUDA_HOME/include (set CUDA_HOME)" >&2
    exit 1
fi
exit 0
