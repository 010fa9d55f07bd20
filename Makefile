# hirnode: one Makefile. Knobs: DEBUG=1 ASAN=1 UBSAN=1 TSAN=1 WERROR=1 CUDA=auto|0|1
#   make            build the library, the CLI and the tests
#   make run        build, then run an AllGather+matmul pipeline on 8 devices with --check
#   make test       install missing build dependencies, build, run every suite
#   make check-layers  the house rules of src/ (layers of includes and calls, cycles, sizes, tools)
#   make check-layers-test  the check's own tests (planted violations fail, the tree passes)
#   make install    PREFIX=/usr/local DESTDIR=: headers, libhirnode.so (soname) and .a,
#                   hirnode.pc, the CLI;  make uninstall  removes them
#   make fuzz       build the libFuzzer targets (clang); make fuzz-run FUZZ_TIME=S [FUZZ_TARGET=npy] runs one
#   make python     the Python package with the library beside it in build/python (PYTHONPATH=build/python)
#   make python-test   its suite (python/tests) on the CPU backend with NumPy
#   make format     clang-format the sources

CC      ?= gcc
DEBUG   ?= 0
ASAN    ?= 0
UBSAN   ?= 0
TSAN    ?= 0
WERROR  ?= 0

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wformat=2 -Wno-format-nonliteral
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -pthread -fPIC $(WARN) -Iinclude
LDLIBS  += -pthread -lm

BUILD   := build
ifeq ($(DEBUG),1)
  CFLAGS := $(filter-out -O2,$(CFLAGS)) -O0
endif
ifeq ($(WERROR),1)
  CFLAGS += -Werror
endif
SAN :=
ifeq ($(ASAN),1)
  SAN += -fsanitize=address -fno-omit-frame-pointer
  BUILD := $(BUILD)-asan
endif
ifeq ($(UBSAN),1)
  SAN += -fsanitize=undefined -fno-sanitize-recover=undefined
  BUILD := $(BUILD)-ubsan
endif
ifeq ($(TSAN),1)
  SAN += -fsanitize=thread
  BUILD := $(BUILD)-tsan
endif
CFLAGS  += $(SAN)
LDFLAGS += $(SAN)

# CUDA, NCCL and cuBLASLt: found under CUDA_HOME (NCCL there or in the
# system folders); CUDA=0 builds the CPU backends only
comma     := ,
CUDA      ?= auto
CUDA_HOME ?= /usr/local/cuda
NVCC      := $(CUDA_HOME)/bin/nvcc
ifeq ($(CUDA),auto)
  CUDA := $(if $(wildcard $(NVCC)),1,0)
endif
CUDA_SRC_C := src/device/device_cuda.c src/device/device_cuda_graph.c src/device/device_cuda_share.c src/device/cuda_error.c src/comm/nccl/comm_nccl.c src/comm/nccl/nccl_bench.c
CUDA_SRC_CU := src/device/compute_cuda.cu src/comm/ll/ll_cuda.cu src/comm/ll/ll_cuda_short.cu
ifeq ($(CUDA),1)
  NCCL_HOME ?= $(patsubst %/include/nccl.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h)))
  ifeq ($(NCCL_HOME),)
    $(error NCCL not found (nccl.h under $(CUDA_HOME)/include or /usr/include): set NCCL_HOME, or CUDA=0)
  endif
  CUDA_LIBDIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib $(NCCL_HOME)/lib $(NCCL_HOME)/lib64)
  CFLAGS   += -DHN_HAVE_CUDA -isystem $(CUDA_HOME)/include -isystem $(NCCL_HOME)/include
  CUDA_LDLIBS := $(addprefix -L,$(CUDA_LIBDIRS)) $(addprefix -Wl$(comma)-rpath$(comma),$(CUDA_LIBDIRS)) \
                 -lcublasLt -lnccl -lcudart -lstdc++
  LDLIBS   += $(CUDA_LDLIBS)
  NVCCFLAGS ?= -O2 -lineinfo
  NVCCFLAGS += -std=c++17 -DHN_HAVE_CUDA -Iinclude -I$(NCCL_HOME)/include -Xcompiler -fPIC \
               -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
endif
# every C source under src/, at any depth (a folder per layer, comm/ a subfolder per communicator)
SRC_ALL_C := $(sort $(wildcard src/*/*.c src/*/*/*.c))
LIB_SRC  := $(filter-out $(if $(filter 1,$(CUDA)),,$(CUDA_SRC_C)),$(SRC_ALL_C))
LIB_CU   := $(if $(filter 1,$(CUDA)),$(CUDA_SRC_CU))
TOOL_SRC := $(wildcard tools/*.c)
TEST_SRC := $(wildcard tests/*.c tests/*/*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(LIB_CU:%.cu=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

VERSION  := $(shell sed -n 's/^\#define HN_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' include/hirnode/hirnode.h | paste -sd.)
# the soname's version: the major one, and below 1.0 the minor one too (0.x releases may change the ABI)
VERSION_WORDS := $(subst ., ,$(VERSION))
SOMAJOR  := $(if $(filter 0,$(word 1,$(VERSION_WORDS))),0.$(word 2,$(VERSION_WORDS)),$(word 1,$(VERSION_WORDS)))
LIB      := $(BUILD)/libhirnode.a
SOLIB    := $(BUILD)/libhirnode.so
CLI      := $(BUILD)/hirnode
TESTS    := $(BUILD)/hn_tests

.PHONY: all run test test-build check-deps check-layers check-layers-test format clean sanitize install uninstall fuzz fuzz-run fuzz-test fuzz-seeds \
        python python-test timeline
all: $(LIB) $(SOLIB) $(CLI) $(TESTS)

# objects are rebuilt when the flags change (CUDA=0/1, sanitizers, ...)
FLAGS_STAMP := $(BUILD)/flags.$(shell echo '$(CC) $(CFLAGS) $(NVCCFLAGS) $(LDLIBS)' | md5sum | cut -c1-12)
$(FLAGS_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/flags.*
	@touch $@

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# device code is built without the host sanitizers
$(BUILD)/obj/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

# made afresh: a member whose source was removed must not linger
$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

# the shared library exports hn_* only; its soname carries the major version
$(SOLIB): $(LIB_OBJ) src/hirnode.map
	$(CC) -shared -Wl,--version-script=src/hirnode.map -Wl,-soname,libhirnode.so.$(SOMAJOR) $(LDFLAGS) \
	  -o $@ $(LIB_OBJ) $(LDLIBS)

$(CLI): $(TOOL_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB) $(LDLIBS)

$(TESTS): $(TEST_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(LIB) $(LDLIBS) -lcunit

$(TEST_OBJ): CFLAGS += -Wno-missing-prototypes -Isrc -Itests

# CUnit, NumPy for the system's Python and clang with libFuzzer come from
# the distribution; install them when missing (CI runs as root). CUnit and
# NumPy are needed; without clang make test only skips the fuzz run.
FUZZ_PROBE = echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
             $(FUZZ_CC) $(FUZZ_SAN) -x c - -o /dev/null >/dev/null 2>&1
check-deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; updated=; \
	if ! echo '#include <CUnit/Basic.h>' | $(CC) -E - >/dev/null 2>&1; then \
	  echo "installing libcunit1-dev"; \
	  $$SUDO apt-get update -qq && updated=1 && $$SUDO apt-get install -y -qq libcunit1-dev >/dev/null || exit 1; \
	fi; \
	if ! command -v pkg-config >/dev/null; then \
	  echo "installing pkg-config (the install check builds an example with it)"; \
	  { [ -n "$$updated" ] || $$SUDO apt-get update -qq; } && updated=1 && \
	    $$SUDO apt-get install -y -qq pkg-config >/dev/null || exit 1; \
	fi; \
	if ! $(PYTHON) -c 'import numpy' >/dev/null 2>&1; then \
	  echo "installing python3 python3-numpy (the Python suite)"; \
	  { [ -n "$$updated" ] || $$SUDO apt-get update -qq; } && updated=1 && \
	    $$SUDO apt-get install -y -qq python3 python3-numpy >/dev/null || exit 1; \
	  $(PYTHON) -c 'import numpy' || { echo "$(PYTHON) cannot import numpy: PYTHON=/usr/bin/python3?"; exit 1; }; \
	fi; \
	if ! command -v ip >/dev/null || ! command -v unshare >/dev/null || ! command -v nsenter >/dev/null; then \
	  echo "installing iproute2 util-linux (tests/nodes.sh: nodes in network namespaces)"; \
	  { [ -n "$$updated" ] || $$SUDO apt-get update -qq; } && updated=1 && \
	    $$SUDO apt-get install -y -qq iproute2 util-linux >/dev/null || exit 1; \
	fi; \
	if ! $(FUZZ_PROBE); then \
	  echo "installing clang libclang-rt-dev (the fuzzer's compiler)"; \
	  { [ -n "$$updated" ] || $$SUDO apt-get update -qq; } && \
	    $$SUDO apt-get install -y -qq clang libclang-rt-dev >/dev/null || \
	    echo "clang not installed: make test skips the fuzz run"; \
	fi; \
	echo "check-deps: the Python suite and examples/python use $(PYTHON) (NumPy $$($(PYTHON) -c 'import numpy; print(numpy.__version__)'))"

# Installation: PREFIX (default /usr/local), DESTDIR for staging
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  := $(DESTDIR)$(PREFIX)/lib
install: $(LIB) $(SOLIB) $(CLI)
	install -d $(DESTDIR)$(PREFIX)/include/hirnode $(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/hirnode/*.h $(DESTDIR)$(PREFIX)/include/hirnode/
	install -m 755 $(SOLIB) $(LIBDIR)/libhirnode.so.$(VERSION)
	ln -sf libhirnode.so.$(VERSION) $(LIBDIR)/libhirnode.so.$(SOMAJOR)
	ln -sf libhirnode.so.$(SOMAJOR) $(LIBDIR)/libhirnode.so
	install -m 644 $(LIB) $(LIBDIR)/libhirnode.a
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@LIBS_PRIVATE@|$(strip $(LDLIBS))|' src/hirnode.pc.in > $(LIBDIR)/pkgconfig/hirnode.pc
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/hirnode

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/include/hirnode/,$(notdir $(wildcard include/hirnode/*.h)))
	-rmdir $(DESTDIR)$(PREFIX)/include/hirnode 2>/dev/null
	rm -f $(LIBDIR)/libhirnode.so.$(VERSION) $(LIBDIR)/libhirnode.so.$(SOMAJOR) $(LIBDIR)/libhirnode.so \
	      $(LIBDIR)/libhirnode.a $(LIBDIR)/pkgconfig/hirnode.pc $(DESTDIR)$(PREFIX)/bin/hirnode
	-rmdir $(LIBDIR)/pkgconfig $(LIBDIR) $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include 2>/dev/null

run: $(CLI)
	$(CLI) run --gpus 8 --check examples/ag_matmul_p2p.hir

# perf/cupti_timeline.c: a CUDA injection library that writes every kernel,
# copy and memset the GPUs ran (graph nodes one by one) to a CSV; read it
# with perf/timeline.py. Needs CUPTI (CUDA's lib64 or extras/CUPTI).
CUPTI_LIBDIR ?= $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_HOME)/lib64/libcupti.so $(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so))))
timeline: $(BUILD)/libhn_timeline.so
$(BUILD)/libhn_timeline.so: perf/cupti_timeline.c
	@mkdir -p $(BUILD)
	@test -n "$(CUPTI_LIBDIR)" || { echo "timeline: no libcupti.so under $(CUDA_HOME)"; exit 1; }
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -fPIC -shared -isystem $(CUDA_HOME)/include -isystem $(CUDA_HOME)/extras/CUPTI/include \
	    $< -o $@ -L$(CUPTI_LIBDIR) -Wl,-rpath,$(CUPTI_LIBDIR) -lcupti

# perf/p2p_pull_graph.cu: a replayed pull from a peer GPU, without hirnode
# (2 GPUs; its header says what it asks)
$(BUILD)/p2p_pull_graph: perf/p2p_pull_graph.cu
	@mkdir -p $(BUILD)
	$(NVCC) -O2 -std=c++17 $< -o $@ -lpthread

# Python (python/hirnode: ctypes over libhirnode.so). `make python` puts the
# package with a copy of the library beside it in build/python: a folder to
# put on PYTHONPATH or copy anywhere. PYTHON: the system's (Debian's
# python3, whose NumPy is python3-numpy) unless given.
PYTHON ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)
PYDIR  := $(BUILD)/python
python: $(SOLIB)
	@rm -rf $(PYDIR)/hirnode
	@mkdir -p $(PYDIR)/hirnode
	cp python/hirnode/*.py $(PYDIR)/hirnode/
	cp $(SOLIB) $(PYDIR)/hirnode/libhirnode.so
	@echo "python: PYTHONPATH=$(abspath $(PYDIR)) $(PYTHON) -c 'import hirnode'"

# the suite on the CPU backend; the leak test prints its figures
python-test: python
	@$(PYTHON) -c 'import numpy' 2>/dev/null || { echo "python-test: $(PYTHON) has no numpy (make check-deps)"; exit 1; }
	cd python/tests && $(PYTHON) -m unittest discover -p 'test_*.py'

# the suites on the plain build, under ASan+UBSan and under TSan, the
# Python suite (CPU backend, NumPy), then the
# command-line checks of every example (also in 2 and 4 processes),
# process mode's launcher and faults (tests/procs.sh, about 40 s) and
# worlds across nodes (tests/nodes.sh, about 25 s; network namespaces,
# which HN_NETNS_TESTS=0 leaves out); HN_PROCS_TESTS=0 leaves both out
NPROC := $(shell nproc 2>/dev/null || echo 2)
HN_PROCS_TESTS ?= 1
test: check-deps
	$(MAKE) -j$(NPROC) all
	$(TESTS)
	$(MAKE) -j$(NPROC) ASAN=1 UBSAN=1 build-asan-ubsan/hn_tests
	ASAN_OPTIONS=detect_leaks=1 build-asan-ubsan/hn_tests
	$(MAKE) -j$(NPROC) TSAN=1 build-tsan/hn_tests
	TSAN_OPTIONS=halt_on_error=1 build-tsan/hn_tests
	$(MAKE) python-test
	tests/examples.sh $(CLI)
	$(PYTHON) tests/perf_timeline_test.py
	@if [ "$(HN_PROCS_TESTS)" = 1 ]; then echo "tests/procs.sh $(CLI)"; tests/procs.sh $(CLI); \
	else echo "tests/procs.sh: skipped (HN_PROCS_TESTS=1 runs it)"; fi
	@if [ "$(HN_PROCS_TESTS)" = 1 ]; then echo "tests/nodes.sh $(CLI)"; tests/nodes.sh $(CLI); \
	else echo "tests/nodes.sh: skipped (HN_PROCS_TESTS=1 runs it)"; fi
	tests/install.sh
	$(MAKE) fuzz-test
	$(MAKE) check-layers-test
	$(MAKE) check-layers

# The house rules of src/ (tests/check_layers.py; its head comment has a
# paragraph per rule), read from the sources and the library's objects
# against the layers listed after `<!-- layers -->` in docs/ARCHITECTURE.md,
# bottom first: every #include "..." and every call or data reference
# between objects (nm) goes to the same folder or a lower layer, never to
# a sibling or a layer above; no call cycle among a folder's objects; no
# file under src/ over 900 lines (parse.c and device_host.c excepted), no
# folder over 6000; every source in one layer; the tools include public
# headers, their own and src/runtime/tools.h only.
check-layers: $(LIB)
	@$(PYTHON) tests/check_layers.py --doc docs/ARCHITECTURE.md $(LIB_OBJ)

# the check's own tests: the tree passes, and copies of it (in a temporary
# folder) with a violation planted in each — an upward include, a sibling
# include, an upward call, a cycle, a long file, a source in no layer, a
# layer naming nothing, a tool including base/util.h — fail
check-layers-test: $(LIB)
	@CC="$(CC)" $(PYTHON) tests/check_layers.py --self-test $(LIB_OBJ)

# The fuzzers, one per reader of what people hand in: program text
# (tests/fuzz/fuzz_program.c), .npy files (fuzz_npy.c) and traces
# (fuzz_trace.c); each built by clang with libFuzzer, ASan and UBSan, CPU
# backends only, in its own folder. A target writes what it learns to
# build-fuzz/corpus[-npy|-trace] and reads the committed seeds
# (tests/fuzz/corpus[-npy|-trace]); a crash is saved as build-fuzz/crash-*.
FUZZ_CC      ?= clang
FUZZ_BUILD   := build-fuzz
FUZZ_SAN     := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := -O1 -g -std=c11 -D_GNU_SOURCE -DHN_FUZZ_ENTRY -pthread $(WARN) $(if $(filter 1,$(WERROR)),-Werror) \
                -Iinclude -Isrc -Itests $(FUZZ_SAN)
FUZZ_TARGETS := program npy trace
FUZZ_LIB_SRC := $(filter-out $(CUDA_SRC_C),$(SRC_ALL_C))
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_OBJ     := $(FUZZ_LIB_OBJ) $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o)
FUZZERS      := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
FUZZ_DICT    := tests/fuzz/hir.dict
FUZZ_TIME    ?= 60
FUZZ_TARGET  ?= program
FUZZ_FLAGS   ?=
# per target: its dictionary, its committed seeds, its working corpus
fuzz_dict     = $(if $(filter program,$(1)),$(FUZZ_DICT),tests/fuzz/$(1).dict)
fuzz_seeds    = tests/fuzz/corpus$(if $(filter program,$(1)),,-$(1))
fuzz_corpus   = $(FUZZ_BUILD)/corpus$(if $(filter program,$(1)),,-$(1))
fuzz_opts     = -timeout=10 -rss_limit_mb=2048 -dict=$(call fuzz_dict,$(1)) -artifact_prefix=$(FUZZ_BUILD)/ \
                -print_final_stats=1 $(FUZZ_FLAGS)

fuzz: $(FUZZERS) $(FUZZ_DICT)

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_LIB_OBJ) $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ -pthread -lm

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_DICT): tests/fuzz/gen_dict.sh src/ir/ops.def src/ir/lex.c src/ir/parse.c src/ir/ir.c
	tests/fuzz/gen_dict.sh

fuzz-seeds:
	tests/fuzz/seeds.sh

# FUZZ_TIME seconds of fuzzing one target (FUZZ_TARGET=program|npy|trace), one process
fuzz-run: fuzz
	@mkdir -p $(call fuzz_corpus,$(FUZZ_TARGET))
	$(FUZZ_BUILD)/fuzz_$(FUZZ_TARGET) $(call fuzz_opts,$(FUZZ_TARGET)) -max_total_time=$(FUZZ_TIME) \
	  $(call fuzz_corpus,$(FUZZ_TARGET)) $(call fuzz_seeds,$(FUZZ_TARGET))

# make test: the fuzz runs when clang with libFuzzer is there, FUZZ_TIME
# seconds in all: half to programs, a quarter to each file reader; their
# output in build-fuzz/fuzz-TARGET.log, the last lines shown
fuzz_secs = $(if $(filter program,$(1)),$$(($(FUZZ_TIME) / 2)),$$(($(FUZZ_TIME) / 4)))
define fuzz_one
  echo "fuzz: $(call fuzz_secs,$(1)) s of $(FUZZ_BUILD)/fuzz_$(1), log in $(FUZZ_BUILD)/fuzz-$(1).log"; \
  mkdir -p $(call fuzz_corpus,$(1)); \
  if $(FUZZ_BUILD)/fuzz_$(1) $(call fuzz_opts,$(1)) -max_total_time=$(call fuzz_secs,$(1)) \
       $(call fuzz_corpus,$(1)) $(call fuzz_seeds,$(1)) >$(FUZZ_BUILD)/fuzz-$(1).log 2>&1; then \
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec)' $(FUZZ_BUILD)/fuzz-$(1).log; \
    grep -E 'cov: [0-9]+' $(FUZZ_BUILD)/fuzz-$(1).log | tail -1; \
  else \
    tail -60 $(FUZZ_BUILD)/fuzz-$(1).log; echo "fuzz: $(1) FAILED (the input is saved under $(FUZZ_BUILD)/)"; exit 1; \
  fi;
endef
fuzz-test:
	@if ! $(FUZZ_PROBE); then \
	  echo "fuzz: skipped ($(FUZZ_CC) with libFuzzer not found: apt-get install clang libclang-rt-dev)"; \
	else \
	  $(MAKE) -j$(NPROC) fuzz || exit 1; \
	  $(foreach t,$(FUZZ_TARGETS),$(call fuzz_one,$(t))) \
	fi

format:
	clang-format -i $(LIB_SRC) $(TOOL_SRC) $(TEST_SRC) $(wildcard src/*/*.h src/*/*/*.h include/hirnode/*.h tests/*.h)

clean:
	rm -rf build build-asan build-ubsan build-tsan build-asan-ubsan build-fuzz
	find python examples -name __pycache__ -type d -prune -exec rm -rf {} +

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(FUZZ_OBJ:.o=.d)
