# make            build demo and test_gpt2 (nvcc when on PATH: CUDA + CPU backends; else cc: CPU only)
# make test       build and run every test (CPU backend; GPT2_TEST_BACKEND=cuda for the GPU)
# make demo       build the demo
# make server     build the OpenAI-compatible server (needs libmicrohttpd and cJSON: pkg-config)
# make bench      build the benchmarks (bench_gpt2, bench_mixed: nvcc and a GPU; bench_cpu: the CPU backend, plain C)
# make fuzz       the fuzz smoke: every libFuzzer harness over its corpus + 30 s (needs clang)
# demo_mpi and the MPI tests are built when mpicc is found.

NVCC ?= $(shell command -v nvcc 2>/dev/null)
CC ?= cc
MPICC := $(shell command -v mpicc 2>/dev/null)
CXX_FOUND := $(shell command -v $(CXX) 2>/dev/null)
MPI_CFLAGS := $(if $(MPICC),$(shell mpicc --showme:compile))
VALGRIND := $(shell command -v valgrind 2>/dev/null)
CUDA_ARCH ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=compute_90
WARN := -Wall -Wextra
OPENMP := -fopenmp

ifneq ($(NVCC),)
  BUILD = $(NVCC) -x cu -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler "$(WARN) $(OPENMP)" -I.
  LIBS = -lcublasLt -lcublas -lgomp
else
  BUILD = $(CC) -x c -O3 -std=gnu99 $(WARN) $(OPENMP) -DGPT2_NO_CUDA -I.
  LIBS = -lm
endif
# the CPU part also builds as plain C: checked on every test run
CBUILD = $(CC) -x c -O3 -std=gnu99 $(WARN) -Werror $(OPENMP) -DGPT2_NO_CUDA -I.

HEADERS = gpt2.cuh
TEST_INC = $(wildcard tests/*.inc) tests/mpi/workload.h

# the server (server.c) needs libmicrohttpd and cJSON, found by pkg-config: built by make when they are there
SERVER_DEPS := $(shell pkg-config --exists libmicrohttpd libcjson 2>/dev/null && echo yes)

all: demo test_gpt2 $(if $(MPICC),demo_mpi) $(if $(SERVER_DEPS),server)

server: server.c $(HEADERS)
	$(BUILD) $(shell pkg-config --cflags libmicrohttpd libcjson) server.c -o $@ $(LIBS) $(shell pkg-config --libs libmicrohttpd libcjson) -lpthread

demo: demo.cu $(HEADERS)
	$(BUILD) demo.cu -o $@ $(LIBS)

test_gpt2: test_gpt2.cu $(HEADERS) $(TEST_INC)
	$(BUILD) test_gpt2.cu -o $@ $(LIBS)

test_gpt2_c: test_gpt2.cu $(HEADERS) $(TEST_INC)
	$(CBUILD) test_gpt2.cu -o $@ -lm

# the CPU suite built for this machine's CPU: with fused multiply-adds where it has them (x86-64 with FMA, aarch64),
# which once made a row's logits depend on its batch (GPT2__NO_CONTRACT in gpt2.cuh says why)
test_gpt2_native: test_gpt2.cu $(HEADERS) $(TEST_INC)
	$(CBUILD) -march=native test_gpt2.cu -o $@ -lm

# the CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer (leaks included)
test_gpt2_asan: test_gpt2.cu $(HEADERS) $(TEST_INC)
	$(CC) -x c -std=gnu99 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
	  $(WARN) $(OPENMP) -DGPT2_NO_CUDA -I. test_gpt2.cu -o $@ -lm

demo_mpi: demo.cu gpt2_mpi.h $(HEADERS)
	$(BUILD) -DGPT2_DEMO_MPI $(shell mpicc --showme:compile) demo.cu -o $@ $(LIBS) $(shell mpicc --showme:link)

# the MPI side of tests/mpi_tests.inc: CPU backend, plain C
tests/mpi/test_mpi: tests/mpi/test_mpi.c tests/mpi/workload.h gpt2_mpi.h $(HEADERS)
	$(MPICC) -x c -O2 -std=gnu99 $(WARN) -Werror $(OPENMP) -DGPT2_NO_CUDA -I. tests/mpi/test_mpi.c -o $@ -lm

# the demo as plain C, for valgrind (a CUDA runtime under valgrind is noise, not signal)
demo_c: demo.cu $(HEADERS)
	$(CBUILD) -g demo.cu -o $@ -lm

# the README's example, as plain C
examples/hello: examples/hello.c $(HEADERS)
	$(CBUILD) examples/hello.c -o $@ -lm

# ThreadSanitizer builds (no OpenMP: GCC's libgomp is not instrumented): the threading test by GCC and by Clang
# (when installed), and the README's example as a host program with -fsanitize=thread would build it
CLANG := $(shell command -v clang 2>/dev/null)
TSAN = -x c -std=gnu99 -O1 -g -fsanitize=thread $(WARN) -Werror -I.
TSAN_RUN = TSAN_OPTIONS="halt_on_error=1 exitcode=66"
tests/threads_tsan_gcc: tests/threads.c $(HEADERS)
	$(CC) $(TSAN) tests/threads.c -o $@ -lm -lpthread
tests/threads_tsan_clang: tests/threads.c $(HEADERS)
	clang $(TSAN) tests/threads.c -o $@ -lm -lpthread
examples/hello_tsan: examples/hello.c $(HEADERS)
	$(CC) $(TSAN) examples/hello.c -o $@ -lm

test: demo test_gpt2 test_gpt2_c test_gpt2_native test_gpt2_asan examples/hello tests/threads_tsan_gcc examples/hello_tsan \
      $(if $(CLANG),tests/threads_tsan_clang) $(if $(VALGRIND),demo_c) $(if $(MPICC),demo_mpi tests/mpi/test_mpi) \
      $(if $(NVCC),tests/sanitize_kernels) $(if $(SERVER_DEPS),server)
	@echo "== the headers under strict warnings (C99 and C++11, -Wpedantic -Werror, with and without OpenMP)"
	@for c in "$(CC) -x c -std=c99" $(if $(CXX_FOUND),"$(CXX) -x c++ -std=c++11") \
	  $(if $(MPICC),"$(CC) -x c -std=c99 -DSTRICT_MPI $(MPI_CFLAGS)" $(if $(CXX_FOUND),"$(CXX) -x c++ -std=c++11 -DSTRICT_MPI $(MPI_CFLAGS)")); do \
	  for o in "" "$(OPENMP)"; do echo "$$c $$o"; \
	    $$c $$o -Wall -Wextra -Wpedantic -Werror -DGPT2_NO_CUDA -I. -fsyntax-only tests/strict.c || exit 1; done; done
	@echo "== the README's example"
	./examples/hello weights "ROMEO:" > /dev/null
	@echo "== threads under ThreadSanitizer: a model per thread, a shared tokenizer, per-thread last errors"
	$(TSAN_RUN) ./tests/threads_tsan_gcc 4
ifneq ($(CLANG),)
	$(TSAN_RUN) ./tests/threads_tsan_clang 4
else
	@echo "Clang ThreadSanitizer build skipped: clang is not installed"
endif
	$(TSAN_RUN) ./examples/hello_tsan weights "ROMEO:" > /dev/null
ifneq ($(VALGRIND),)
	@echo "== the demo under valgrind (embedded model, CPU)"
	OMP_NUM_THREADS=1 $(VALGRIND) -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	  ./demo_c -n 8 --seed 1 "ROMEO:" > /dev/null
else
	@echo "valgrind run skipped: valgrind is not installed"
endif
	@echo "== the CPU suite with the weights and the KV cache in F16, then in BF16"
	for d in f16 bf16; do GPT2_TEST_DTYPE=$$d ./test_gpt2_c > test_gpt2_c_$$d.log 2>&1 || { cat test_gpt2_c_$$d.log; exit 1; }; \
	  tail -n 1 test_gpt2_c_$$d.log; done
	@echo "== the CPU suite built with -march=native"
	./test_gpt2_native > test_gpt2_native.log 2>&1 || { cat test_gpt2_native.log; exit 1; }
	@tail -n 1 test_gpt2_native.log
	@echo "== the CPU suite under ASan + UBSan"
	./test_gpt2_asan > test_gpt2_asan.log 2>&1 || { cat test_gpt2_asan.log; exit 1; }
	@tail -n 1 test_gpt2_asan.log
ifeq ($(MPICC),)
	@echo "MPI tests skipped: Open MPI (mpicc) is not installed"
endif
ifneq ($(SERVER_DEPS),)
	@echo "== the server under the openai client (loopback, CPU)"
	bash tests/server/run.sh
else
	@echo "server tests skipped: libmicrohttpd or cJSON is not installed (pkg-config finds no libmicrohttpd or no libcjson)"
endif
	@echo "== the suite"
	./test_gpt2

# the few-row products on random data with no cuBLASLt call, for compute-sanitizer on a GPU (tests/sanitize.sh);
# built by make test so that CI compiles it
tests/sanitize_kernels: tests/sanitize_kernels.cu $(HEADERS)
	$(BUILD) tests/sanitize_kernels.cu -o $@ $(LIBS)

# libFuzzer harnesses (clang): regression inputs, the seed corpus, then FUZZ_SECONDS of fresh fuzzing each
FUZZ_SECONDS ?= 30
fuzz:
	bash tests/fuzz/run.sh $(FUZZ_SECONDS)

bench: bench/bench_gpt2 bench/bench_mixed bench/bench_cpu

# the CPU backend's speed (plain C; no GPU needed)
bench/bench_cpu: bench/bench_cpu.c $(HEADERS)
	$(CBUILD) bench/bench_cpu.c -o $@ -lm

bench/bench_gpt2: bench/bench_gpt2.cu $(HEADERS)
	$(BUILD) bench/bench_gpt2.cu -o $@ $(LIBS)

# bench_gpt2 with --trace (CUPTI's kernel records; not part of `make bench`)
bench/trace: bench/bench_gpt2.cu $(HEADERS)
	$(BUILD) -DBENCH_CUPTI bench/bench_gpt2.cu -o $@ $(LIBS) -lcupti

bench/bench_mixed: bench/bench_mixed.cu $(HEADERS)
	$(BUILD) bench/bench_mixed.cu -o $@ $(LIBS)

bench/load_time: bench/load_time.cu $(HEADERS)
	$(BUILD) bench/load_time.cu -o $@ $(LIBS)

clean:
	rm -f server demo_c examples/hello examples/hello_tsan tests/threads_tsan_gcc tests/threads_tsan_clang tests/mpi/test_mpi tests/sanitize_kernels demo demo_mpi test_gpt2 test_gpt2_c test_gpt2_native test_gpt2_native.log test_gpt2_asan test_gpt2_asan.log bench/bench_gpt2 bench/bench_mixed bench/bench_cpu bench/trace bench/load_time

.PHONY: all test fuzz bench clean
