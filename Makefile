# icxtrace build.  `make` builds everything into build/; `make test` runs every test; `make demo` runs
# the main job on the simulated node.  Debian packages are checked (and installed when root) first.
CUDA_HOME ?= /usr/local/cuda
CC ?= cc
BUILD ?= build
O := $(BUILD)/obj

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
        -Wformat=2 -Wno-format-nonliteral -Wundef
CSTD := -std=c11 -D_GNU_SOURCE
OPT ?= -O2 -g
SAN ?=
BASE_CFLAGS := $(CSTD) $(WARN) $(OPT) $(SAN) -Iinclude -isystem $(CUDA_HOME)/include
LIB_CFLAGS := $(BASE_CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec -Ipreload

PRELOAD_SRC := $(wildcard preload/*.c)
ANALYZER_LIB_SRC := $(filter-out analyzer/main.c,$(wildcard analyzer/*.c))
SIM_CUDART_SRC := tests/sim/cudart.c tests/sim/topo_file.c tests/sim/counters.c
SIM_NVML_SRC := tests/sim/nvml.c tests/sim/topo_file.c tests/sim/counters.c
SIM_VERBS_SRC := tests/sim/verbs.c tests/sim/topo_file.c
SIM_NCCL_SRC := tests/sim/nccl.c tests/sim/nccl_ib.c tests/sim/nccl_prof.c tests/sim/topo_file.c tests/sim/counters.c

LIBICX := $(BUILD)/lib/libicxtrace.so
ANALYZE := $(BUILD)/bin/icx-analyze
ICXRUN := $(BUILD)/bin/icx-run
ICXSIM := $(BUILD)/bin/icx-sim
SIM_CUDART := $(BUILD)/sim/lib/libcudart.so.13
SIM_NVML := $(BUILD)/sim/lib/libnvidia-ml.so.1
SIM_VERBS := $(BUILD)/sim/lib/libibverbs.so.1
SIM_NCCL := $(BUILD)/sim/lib/libnccl.so.2
TEST_PROGS := $(patsubst tests/e2e/%.c,$(BUILD)/tests/%,$(wildcard tests/e2e/*.c))
UNIT_PROGS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit_%,$(wildcard tests/unit/*.c))
BENCH_PROGS := $(BUILD)/bench/bench_copy $(BUILD)/bench/null/libcudart.so.13 $(BUILD)/bench/libfloor.so \
               $(BUILD)/bench/bench_post_send $(BUILD)/bench/null/libibverbs.so.1 \
               $(BUILD)/bench/bench_nccl $(BUILD)/bench/null/libnccl.so.2 $(BUILD)/bench/bench_startup \
               $(BUILD)/bench/exit_copies
PEER_PROGS := $(BUILD)/bench/bench_peers $(BUILD)/bench/peers/pg/libibverbs.so.1 $(BUILD)/bench/bench_rate

.PHONY: all deps test demo sanitize tsan bench bench-peers clean format fuzz
NCCL_PROGS := $(BUILD)/tests/nccl/ddp_loop $(BUILD)/tests/nccl/capture_nccl \
              $(BUILD)/tests/nccl/libcount_plugin.so
VERBS_PROGS := $(BUILD)/tests/verbs/verbs_loop $(BUILD)/tests/verbs/verbs_loop_dl \
               $(BUILD)/tests/verbs/rail_verbs \
               $(BUILD)/tests/verbs/dl_next
FORK_TEST := $(BUILD)/tests/fork/fork_locks
EXAMPLE_LIB := $(BUILD)/tests/example/libicxtrace.so
EXAMPLE_REPORT := $(BUILD)/tests/example/icx-analyze-example
STATIC_TEST := $(if $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a),$(BUILD)/tests/static/static_cudart)
all: deps-ok $(LIBICX) $(ANALYZE) $(ICXRUN) $(ICXSIM) $(SIM_CUDART) $(SIM_NVML) $(SIM_VERBS) $(SIM_NCCL) $(TEST_PROGS) $(UNIT_PROGS) $(VERBS_PROGS) $(NCCL_PROGS) \
     $(BENCH_PROGS) $(PEER_PROGS) $(STATIC_TEST) $(FORK_TEST) $(EXAMPLE_LIB) $(EXAMPLE_REPORT)

# Checked once per build directory; tools/install-deps.sh installs (root) or names what is missing.
deps-ok: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok: tools/install-deps.sh
	@CUDA_HOME=$(CUDA_HOME) sh tools/install-deps.sh
	@mkdir -p $(BUILD) && touch $@
.PHONY: deps-ok

$(O)/preload/%.o: preload/%.c $(wildcard preload/*.h preload/*.def) $(wildcard include/icx/*)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

# TSan's start-up sets its signal handlers through our sigaction before its runtime can take an
# instrumented call: signals.c goes uninstrumented under TSan (make tsan).
$(O)/preload/signals.o: LIB_CFLAGS += $(if $(findstring thread,$(SAN)),-fno-sanitize=thread)

LINK_TRACER = $(CC) -shared $(SAN) -Wl,--version-script=$(BUILD)/exports.map -Wl,-z,nodelete -o $@ \
	    $(filter %.o,$^) -lzstd -lunwind -ldl -lpthread

# The version script comes from the lists of wrapped names (preload/wraps_*.def).
$(BUILD)/exports.map: tools/gen-exports $(wildcard preload/wraps_*.def)
	@mkdir -p $(dir $@)
	sh tools/gen-exports $(wildcard preload/wraps_*.def) >$@

$(LIBICX): $(patsubst %.c,$(O)/%.o,$(PRELOAD_SRC)) $(BUILD)/exports.map
	@mkdir -p $(dir $@)
	$(LINK_TRACER)

# A test copy of the tracer with the example module in its table (preload/examples/).
$(O)/example/core.o: preload/core.c $(wildcard preload/*.h) $(wildcard include/icx/*)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -DICX_EXTRA_MODULES='&icx_mod_example,' -c $< -o $@
$(O)/example/null_module.o: preload/examples/null_module.c $(wildcard preload/*.h) $(wildcard include/icx/*)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c $< -o $@
$(EXAMPLE_LIB): $(filter-out $(O)/preload/core.o,$(patsubst %.c,$(O)/%.o,$(PRELOAD_SRC))) \
		$(O)/example/core.o $(O)/example/null_module.o $(BUILD)/exports.map
	@mkdir -p $(dir $@)
	$(LINK_TRACER)

$(EXAMPLE_REPORT): analyzer/examples/report_example.c $(BUILD)/lib/libicxreader.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -Ianalyzer -o $@ $< $(BUILD)/lib/libicxreader.a -lzstd -lm

$(O)/analyzer/%.o: analyzer/%.c $(wildcard analyzer/*.h) $(wildcard include/icx/*)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -Ianalyzer -c $< -o $@

$(BUILD)/lib/libicxreader.a: $(patsubst %.c,$(O)/%.o,$(ANALYZER_LIB_SRC))
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(ANALYZE): $(O)/analyzer/main.o $(BUILD)/lib/libicxreader.a
	@mkdir -p $(dir $@)
	$(CC) $(SAN) -o $@ $^ -lzstd -lm

$(ICXRUN): tools/icx-run
	@mkdir -p $(dir $@)
	install -m 755 $< $@

$(ICXSIM): tools/icx-sim
	@mkdir -p $(dir $@)
	install -m 755 $< $@

# ---- simulated hardware (never linked into the tracer) ----
$(O)/sim/%.o: tests/sim/%.c $(wildcard tests/sim/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -fvisibility=hidden -Itests/sim -Ipreload -c $< -o $@

$(SIM_CUDART): $(patsubst tests/sim/%.c,$(O)/sim/%.o,$(SIM_CUDART_SRC)) tests/sim/cudart.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(SAN) -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/sim/cudart.map \
	    -o $@ $(filter %.o,$^) -lpthread -lm
	ln -sf libcudart.so.13 $(BUILD)/sim/lib/libcudart.so

$(SIM_NVML): $(patsubst tests/sim/%.c,$(O)/sim/%.o,$(SIM_NVML_SRC)) tests/sim/nvml.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(SAN) -Wl,-soname,libnvidia-ml.so.1 -Wl,--version-script=tests/sim/nvml.map \
	    -o $@ $(filter %.o,$^) -lpthread -lm

$(SIM_VERBS): $(patsubst tests/sim/%.c,$(O)/sim/%.o,$(SIM_VERBS_SRC)) tests/sim/verbs.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(SAN) -Wl,-soname,libibverbs.so.1 -Wl,--version-script=tests/sim/verbs.map \
	    -o $@ $(filter %.o,$^) -lpthread

$(SIM_NCCL): $(patsubst tests/sim/%.c,$(O)/sim/%.o,$(SIM_NCCL_SRC)) $(SIM_CUDART)
	@mkdir -p $(dir $@)
	$(CC) -shared $(SAN) -Wl,-soname,libnccl.so.2 -o $@ $(filter %.o,$^) \
	    -L$(BUILD)/sim/lib -lcudart -lpthread -lrt -ldl

# Test workloads compile against the real CUDA headers and link the (simulated) libcudart.
$(BUILD)/tests/%: tests/e2e/%.c $(SIM_CUDART)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim/lib -lcudart -lpthread

# Not linked to libcudart: it dlopen()s the plugin, which is.
$(BUILD)/tests/dlopen_local: tests/e2e/dlopen_local.c $(BUILD)/tests/copy_plugin.so
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< -ldl

$(BUILD)/tests/copy_plugin.so: tests/plugin/copy_plugin.c $(SIM_CUDART)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -fvisibility=hidden -o $@ $< -L$(BUILD)/sim/lib -lcudart

# Verbs workloads: linked to the real libibverbs, and one that dlopen()s it as NCCL does.
$(BUILD)/tests/verbs/verbs_loop: tests/verbs/verbs_loop.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< -libverbs

$(BUILD)/tests/verbs/verbs_loop_dl: tests/verbs/verbs_loop.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -DICX_DLOPEN -o $@ $< -ldl

# A user's own NCCL profiler plugin (the chaining test): loaded by NCCL, links nothing of NCCL's.
$(BUILD)/tests/nccl/libcount_plugin.so: tests/nccl/count_plugin.c $(wildcard include/icx/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $< -lpthread

# NCCL workload: compiled against the real nccl.h, linked to the simulated libnccl and libcudart.
$(BUILD)/tests/nccl/%: tests/nccl/%.c $(SIM_NCCL) $(SIM_CUDART)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim/lib -l:libnccl.so.2 -lcudart

# Multi-node workload for the simulated cluster: linked to the simulated libibverbs (no -lfoo.so
# symlink there, so by file name; its IBVERBS_1.1 references resolve against the real one too).
$(BUILD)/tests/verbs/rail_verbs: tests/verbs/rail_verbs.c $(SIM_VERBS) $(SIM_CUDART)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim/lib -l:libibverbs.so.1 -lcudart

# dlsym(RTLD_NEXT) from a library must stay relative to that library under the preload.
$(BUILD)/tests/verbs/libnext_%.so: tests/verbs/next_lib.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -DNEXT_NAME="'$*'" -o $@ $< -ldl

$(BUILD)/tests/verbs/dl_next: tests/verbs/dl_next.c $(BUILD)/tests/verbs/libnext_a.so \
                              $(BUILD)/tests/verbs/libnext_b.so
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/tests/verbs -Wl,-rpath,'$$ORIGIN' -Wl,--no-as-needed -lnext_a -lnext_b -ldl

# Fork while the tracer's locks are busy: against the stateless null libraries of bench/.
$(FORK_TEST): tests/fork/fork_locks.c $(BUILD)/bench/null/libcudart.so.13 \
              $(BUILD)/bench/null/libnccl.so.2 $(BUILD)/bench/null/libibverbs.so.1
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/bench/null -l:libcudart.so.13 -l:libnccl.so.2 \
	    -l:libibverbs.so.1 -lpthread -Wl,-rpath,'$$ORIGIN/../../bench/null'

# Statically linked CUDA runtime (nvcc's default): the tracer must detect it.
$(BUILD)/tests/static/static_cudart: tests/static/static_cudart.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(OPT) -I$(CUDA_HOME)/include -o $@ $< $(CUDA_HOME)/lib64/libcudart_static.a \
	    -ldl -lpthread -lrt

$(BUILD)/tests/unit_%: tests/unit/%.c $(wildcard tests/unit/*.h) $(BUILD)/lib/libicxreader.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -Ianalyzer -Ipreload -o $@ $< $(BUILD)/lib/libicxreader.a -lzstd -lm

$(BUILD)/bench/null/libcudart.so.13: bench/nullcudart.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -Wl,-soname,libcudart.so.13 \
	    -Wl,--version-script=tests/sim/cudart.map -o $@ $<

$(BUILD)/bench/null/libibverbs.so.1: bench/nullverbs.c bench/nullverbs.map
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -Wl,-soname,libibverbs.so.1 \
	    -Wl,--version-script=bench/nullverbs.map -o $@ $<

$(BUILD)/bench/bench_post_send: bench/bench_post_send.c bench/bench_timing.h $(BUILD)/bench/null/libibverbs.so.1
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $< -L$(BUILD)/bench/null -l:libibverbs.so.1 \
	    -Wl,-rpath,'$$ORIGIN/null'

$(BUILD)/bench/bench_startup: bench/bench_startup.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $<

$(BUILD)/bench/exit_copies: bench/exit_copies.c $(BUILD)/bench/null/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/bench/null -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN/null'

$(BUILD)/bench/null/libnccl.so.2: bench/nullnccl.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -Wl,-soname,libnccl.so.2 -o $@ $<

$(BUILD)/bench/bench_nccl: bench/bench_nccl.c bench/bench_timing.h $(BUILD)/bench/null/libnccl.so.2 $(BUILD)/bench/null/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $< -L$(BUILD)/bench/null -l:libnccl.so.2 -l:libcudart.so.13 \
	    -Wl,-rpath,'$$ORIGIN/null'

# make bench-peers (bench/peers.sh): the per-call program, the null provider built with -pg (what
# uftrace records inside a library), and the LTTng-UST preload (needs liblttng-ust-dev, which
# bench/peers.sh installs first, so it is built from there).
$(BUILD)/bench/bench_peers: bench/bench_peers.c bench/bench_tsc.h $(BUILD)/bench/null/libcudart.so.13 \
                            $(BUILD)/bench/null/libibverbs.so.1 $(BUILD)/bench/null/libnccl.so.2
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $< -L$(BUILD)/bench/null -l:libcudart.so.13 -l:libibverbs.so.1 \
	    -l:libnccl.so.2 -Wl,-rpath,'$$ORIGIN/null'
$(BUILD)/bench/bench_rate: bench/bench_rate.c bench/bench_tsc.h $(BUILD)/bench/null/libcudart.so.13 $(BUILD)/bench/null/libibverbs.so.1
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $< -L$(BUILD)/bench/null -l:libcudart.so.13 -l:libibverbs.so.1 \
	    -lpthread -Wl,-rpath,'$$ORIGIN/null'
$(BUILD)/bench/peers/pg/libibverbs.so.1: bench/nullverbs.c bench/nullverbs.map
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -pg -fPIC -shared -Wl,-soname,libibverbs.so.1 \
	    -Wl,--version-script=bench/nullverbs.map -o $@ $<
$(BUILD)/bench/peers/liblttng_peer.so: bench/peers/lttng_peer.c bench/peers/lttng_peer_tp.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -Ibench/peers -fPIC -shared -fvisibility=hidden -o $@ $< -llttng-ust -ldl

$(BUILD)/bench/libfloor.so: bench/floor_preload.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -fvisibility=hidden -o $@ $< -ldl

$(BUILD)/bench/bench_copy: bench/bench_copy.c bench/bench_timing.h $(BUILD)/bench/null/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $< -L$(BUILD)/bench/null -l:libcudart.so.13 \
	    -Wl,-rpath,'$$ORIGIN/null'

test: all
	@sh tools/install-deps.sh test
	@BUILD=$(BUILD) sh tests/run.sh
	@if [ -z "$(SAN)" ] && [ -z "$(NO_SANITIZE)" ]; then $(MAKE) --no-print-directory sanitize; fi

# The same tests with ASan+UBSan in the tracer, the analyzer and the simulated hardware.
sanitize:
	@$(MAKE) --no-print-directory BUILD=build/san SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" OPT="-O1 -g" all
	@BUILD=build/san ICX_TEST_SANITIZE=1 sh tests/run.sh

# The unit and e2e tests with TSan in the tracer, the analyzer and the simulated hardware
# (docs/RELIABILITY.md says what TSan cannot run here and what still fails).  Not in `make test`.
tsan:
	@$(MAKE) --no-print-directory BUILD=build/tsan SAN="-fsanitize=thread" OPT="-O1 -g" all
	@BUILD=build/tsan ICX_TEST_SANITIZE=thread sh tests/run.sh

# Coverage-guided fuzzing (libFuzzer; needs clang with compiler-rt), one target per input kind:
#   fuzz_reader   whole trace files (zstd framing, then every decoder and report); seeds: the golden traces
#   fuzz_records  a frame's records (the decoders and the data embedded in traces); seeds: the golden
#                 traces decompressed, tests/fuzz/seeds/records (verbs, a hang dump, Python stacks)
#   fuzz_nccl_xml NCCL's graph and topology XML; seeds: tests/fuzz/seeds/nccl_xml
# `make fuzz` runs each for FUZZ_SECONDS; tests/run.sh runs them briefly when clang can.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := fuzz_reader fuzz_records fuzz_nccl_xml
FUZZ_CC = clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined $(CSTD) -Iinclude -Ianalyzer -o $@
FUZZ_RUN = -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1
$(BUILD)/fuzz/fuzz_reader $(BUILD)/fuzz/fuzz_records: $(BUILD)/fuzz/%: tests/fuzz/%.c \
    tests/fuzz/fuzz_analyze.c tests/fuzz/fuzz_analyze.h $(ANALYZER_LIB_SRC) $(wildcard analyzer/*.h) \
    $(wildcard include/icx/*)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $< tests/fuzz/fuzz_analyze.c $(ANALYZER_LIB_SRC) -lzstd -lm
$(BUILD)/fuzz/fuzz_nccl_xml: tests/fuzz/fuzz_nccl_xml.c analyzer/nccl_graph.c analyzer/nccl_graph.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) tests/fuzz/fuzz_nccl_xml.c analyzer/nccl_graph.c
fuzz: $(addprefix $(BUILD)/fuzz/,$(FUZZ_TARGETS))
	@mkdir -p $(BUILD)/fuzz/reader $(BUILD)/fuzz/records $(BUILD)/fuzz/nccl_xml
	@for f in tests/golden/*/*.icx.zst; do \
	    n=$$(basename $$(dirname $$f))-$$(basename $$f .icx.zst); \
	    cp "$$f" $(BUILD)/fuzz/reader/$$n.icx.zst && zstd -dcq "$$f" > $(BUILD)/fuzz/records/$$n; done
	@cp tests/fuzz/seeds/nccl_xml/* $(BUILD)/fuzz/nccl_xml/ && cp tests/fuzz/seeds/records/* $(BUILD)/fuzz/records/
	@rc=0; for t in reader:65536 records:16384 nccl_xml:8192; do len=$${t#*:}; t=$${t%:*}; \
	    echo "== fuzz_$$t"; $(BUILD)/fuzz/fuzz_$$t $(FUZZ_RUN) -max_len=$$len -artifact_prefix=$(BUILD)/fuzz/$$t- \
	        $(BUILD)/fuzz/$$t >$(BUILD)/fuzz/$$t.log 2>&1 || rc=1; tail -n 12 $(BUILD)/fuzz/$$t.log; done; exit $$rc

demo: all
	@BUILD=$(BUILD) sh tools/demo.sh

bench: all
	@BUILD=$(BUILD) sh bench/run.sh
bench-peers: all $(BENCH_PROGS) $(PEER_PROGS)
	@BUILD=$(BUILD) sh bench/peers.sh

# Every C file of the tree, as tests/run.sh checks them (the style of .clang-format).
FORMAT_SRC = $(shell git ls-files '*.c' '*.h' 2>/dev/null | grep -v '^shared/')
format:
	clang-format -i $(FORMAT_SRC)

clean:
	rm -rf build
