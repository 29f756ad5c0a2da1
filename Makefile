# speclab: the front door. make | make test | make bench | make demo | make clean | make deps
# Knobs: CC=..., DEBUG=1 (no optimisation, -g), SANITIZE=1 (address + undefined behaviour).

CC ?= cc
BUILD ?= build

DEB_PKGS = build-essential pkg-config libgsl-dev libopenblas-dev libhdf5-dev libcriterion-dev \
           libjson-c-dev libpcre2-dev gnuplot-nox python3 python3-numpy python3-scipy python3-h5py \
           python3-nbformat python3-nbclient python3-ipykernel jupyter-nbconvert python3-matplotlib

PKGS = gsl openblas hdf5 json-c libpcre2-8
# analysis/sl_log: raw HDF5 chunks inflated by libdeflate, sha256 of model files by nettle.
DEB_PKGS += libdeflate-dev nettle-dev
# make test: valgrind memcheck on the CLI smoke test (tests/san/valgrind.sh).
DEB_PKGS += valgrind
PKGS += libdeflate nettle
# pkg-config is asked lazily so that `make deps` works before the packages exist.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null | sed 's/-lgslcblas//')

SRC_DIRS = sim analysis models models/train plots notebooks_export data
INC = $(addprefix -I,$(SRC_DIRS)) -Isim/cli

OPT = -O2 -march=x86-64-v3
ifeq ($(DEBUG),1)
OPT = -O0 -g -march=x86-64-v3
endif
ifeq ($(SANITIZE),1)
# At -O1, every access still instrumented: the whole sanitizer build at -O2 took ~590 s of CPU on
# the Zen 5 VM (gcc 12), at -O1 ~430 s. (At -O2 the matmul kernels, sl_kern_mm.h inlined into every
# pass shape, had needed -O1 on their own: instrumented, they took gcc minutes.)
# -g1: line tables only (a report's stack has files and lines), a third less compile time than -g.
ifneq ($(DEBUG),1)
OPT = -O1 -g1 -march=x86-64-v3
endif
# Every UB report is fatal (exit code 1 and a stack), as an ASan report is. gcc leaves
# float-cast-overflow out of -fsanitize=undefined (clang has it): named, so that a double that does
# not fit its integer type is caught (the fuzz replay, tests/fuzz/replay.sh, links this build too).
OPT += -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
       -fno-sanitize-recover=undefined,float-cast-overflow
LDSAN = -fsanitize=address,undefined,float-cast-overflow
endif

CFLAGS ?=
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp $(OPT) $(INC) $(PKG_CFLAGS)
LDLIBS = $(PKG_LIBS) -lgomp -lpthread -lm -ldl
LDFLAGS += -fopenmp $(LDSAN)

LIB_SRC = $(sort $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
CLI_SRC = $(sort $(wildcard sim/cli/*.c))
TEST_SRC = $(sort $(wildcard tests/test_*.c))
BENCH_SRC = $(sort $(wildcard tests/bench/*.c))

LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ = $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ = $(TEST_SRC:%.c=$(BUILD)/%.o)
BENCH_BIN = $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

LIB = $(BUILD)/libspeclab.a
BIN = $(BUILD)/speclab
TEST_BIN = $(BUILD)/test_speclab

.PHONY: all deps san test bench demo figures clean cuda
all: $(BIN)

# $(call apt_install,TARGET,PACKAGES): installs those of PACKAGES not installed yet, in one apt-get.
apt_install = @missing=$$(for p in $(2); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make $(1): installing" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	fi
deps:
	$(call apt_install,deps,$(DEB_PKGS))

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The source revision recorded in every HDF5 log (analysis/LOG_SCHEMA.md): git describe at build
# time, "unknown" outside a git checkout. sl_log_write.o (which writes it) is rebuilt whenever it changes.
SL_REVISION := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
$(shell mkdir -p $(BUILD); [ "$$(cat $(BUILD)/revision 2>/dev/null)" = "$(SL_REVISION)" ] || echo "$(SL_REVISION)" > $(BUILD)/revision)
$(BUILD)/analysis/sl_log_write.o: CFLAGS += -DSL_SOURCE_REVISION='"$(SL_REVISION)"'
# The AVX-512 build of the matmul (sl_kern_mm.h): used only where the CPU has it (sl_kern_select).
$(BUILD)/models/sl_kern_wide.o: CFLAGS += -mavx512f
$(BUILD)/analysis/sl_log_write.o: $(BUILD)/revision

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# --whole-archive keeps every subcommand's weak-referenced entry point in the binary.
$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) -Wl,--whole-archive $(LIB) -Wl,--no-whole-archive $(LDLIBS)

# The option registry (sim/cli/sl_cli.c) is CLI code, linked into the tests on its own.
$(TEST_BIN): $(TEST_OBJ) $(BUILD)/sim/cli/sl_cli.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(BUILD)/sim/cli/sl_cli.o $(LIB) -lcriterion $(LDLIBS)

$(BUILD)/bench/%: tests/bench/%.c $(LIB) $(wildcard tests/*.h) $(wildcard tests/bench/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The sanitizer build used by `make test` (tests/san/): the same sources with AddressSanitizer and
# UndefinedBehaviorSanitizer, every UB report fatal, in its own folder so it never mixes with $(BUILD).
BUILD_SAN ?= build-san
BIN_SAN = $(BUILD_SAN)/speclab
TEST_BIN_SAN = $(BUILD_SAN)/test_speclab
# `make test` builds with 2 jobs unless make was given -j (the CI machine has 2 cores).
TEST_J = $(if $(filter -j%,$(MAKEFLAGS)),,-j2)
SAN_MAKE = $(MAKE) --no-print-directory $(TEST_J) BUILD=$(BUILD_SAN) SANITIZE=1
# The longest compile of each build (the AVX-512 matmul) is named first, so it starts first and the
# other files fill the second core beside it.
san: deps
	@$(SAN_MAKE) $(BUILD_SAN)/models/sl_kern_wide.o $(BIN_SAN) $(TEST_BIN_SAN)

# make test also installs Open MPI (deps-test), so that tests/cli/mpi.sh runs instead of skipping.
# The two builds share one -j2: the sanitizer build's files fill the normal build's idle core.
.PHONY: test-builds test-build test-build-san deps-test
test: deps-test
	@$(MAKE) --no-print-directory $(TEST_J) test-builds
	@SPECLAB=$(BIN) SPECLAB_MPI=$(BIN_MPI) TEST_BIN=$(TEST_BIN) SPECLAB_SAN=$(BIN_SAN) TEST_BIN_SAN=$(TEST_BIN_SAN) bash tests/run_all.sh
test-builds: test-build test-build-san
test-build:
	@$(MAKE) --no-print-directory $(BUILD)/models/sl_kern_wide.o $(BIN) $(TEST_BIN) $(if $(HAVE_MPI),$(BIN_MPI))
test-build-san:
	@$(MAKE) --no-print-directory BUILD=$(BUILD_SAN) SANITIZE=1 $(BUILD_SAN)/models/sl_kern_wide.o $(BIN_SAN) $(TEST_BIN_SAN)

bench: deps
	@$(MAKE) --no-print-directory $(BIN) $(BENCH_BIN)
	@SPECLAB=$(BIN) BUILD=$(BUILD) bash tests/bench/run_all.sh

demo: deps
	@$(MAKE) --no-print-directory $(BIN)
	@SPECLAB=$(BIN) bash sim/demo.sh

# The example figures in plots/examples/ (shown in the README).
figures: deps
	@$(MAKE) --no-print-directory $(BIN)
	@SPECLAB=$(BIN) bash plots/make_figures.sh

# The trainer's GPU backend (models/train/sl_train_gpu.h): the same source as the cuda-emu build in
# libspeclab, compiled by nvcc into a library that `speclab train --backend cuda` loads from beside
# the binary. Only where CUDA exists (nvcc and cuBLAS); nothing else depends on it.
NVCC ?= nvcc
NVCC_ARCH ?= native
cuda: $(BUILD)/libsl_train_cuda.so
$(BUILD)/libsl_train_cuda.so: models/train/sl_train_gpu.c models/train/sl_train_gpu.h models/train/sl_train_types.h
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -arch=$(NVCC_ARCH) -x cu -Imodels/train -Xcompiler -fPIC,-fvisibility=hidden -shared -o $@ $< -lcublas

# The inference backend's library (--device cuda), added to `make cuda` by its own rules.
include models/infer_gpu.mk

clean:
	rm -rf $(BUILD) $(BUILD_SAN)

# The MPI build (analysis/MPI.md): build/speclab-mpi, the same objects as build/speclab but for
# sim/sl_mpi.c, the one file that includes <mpi.h>, compiled by mpicc with -DSL_MPI, and linked
# by mpicc. Its packages are installed by `make deps-mpi` (`make mpi` and `make test` do), not by
# `make deps` (Open MPI brings ~40 packages that `make demo` does not need); `make test` builds
# build/speclab-mpi and runs tests/cli/mpi.sh against it.
DEB_PKGS_MPI = openmpi-bin libopenmpi-dev
MPICC ?= mpicc
BIN_MPI = $(BUILD)/speclab-mpi
LIB_MPI = $(BUILD)/mpi/libspeclab-mpi.a
MPI_OBJ = $(BUILD)/mpi/sim/sl_mpi.o
HAVE_MPI = $(shell command -v $(MPICC) >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && echo 1)
.PHONY: mpi deps-mpi
mpi: deps deps-mpi
	@$(MAKE) --no-print-directory $(BIN_MPI)
deps-mpi:
	$(call apt_install,deps-mpi,$(DEB_PKGS_MPI))
# make test's packages: make deps's and Open MPI's in one apt-get (one update, one install).
deps-test:
	$(call apt_install,test,$(DEB_PKGS) $(DEB_PKGS_MPI))
$(MPI_OBJ): sim/sl_mpi.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -DSL_MPI -MMD -MP -c $< -o $@
$(LIB_MPI): $(filter-out $(BUILD)/sim/sl_mpi.o,$(LIB_OBJ)) $(MPI_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BIN_MPI): $(CLI_OBJ) $(LIB_MPI)
	$(MPICC) $(LDFLAGS) -o $@ $(CLI_OBJ) -Wl,--whole-archive $(LIB_MPI) -Wl,--no-whole-archive $(LDLIBS)

# Fuzzing (tests/fuzz/README.md). fuzz: builds the libFuzzer harnesses with clang and runs each for
# FUZZ_SECONDS (default 60), one at a time; fuzz-replay: replays the kept corpora tests/fuzz/corpus/
# under AddressSanitizer + UBSan with $(CC), no clang needed (what `make test` runs).
FUZZ_SECONDS ?= 60
.PHONY: fuzz fuzz-replay
fuzz:
	@bash tests/fuzz/run.sh $(FUZZ_SECONDS)
fuzz-replay:
	@bash tests/fuzz/replay.sh

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(MPI_OBJ:.o=.d)
