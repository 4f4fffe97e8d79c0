# deepmt — CPU inference server for deep (DeepNorm) translation Transformers.
#
#   make            build build/deepmt (installs missing Debian packages first)
#   make test       build and run every test; ends with "N passed, N failed"
#   make serve      serve the default model on http://127.0.0.1:5000
#   make asan       the test suite under AddressSanitizer + UBSan
#   make fuzz       each fuzz target (tests/fuzz/fuzz_*.c with libFuzzer, fuzz_*.py) for FUZZ_SECONDS (600)
#   make tsan       the C tests and the HTTP server tests under ThreadSanitizer
#   make golden     regenerate the committed golden fixtures (needs python3-torch)
#   make clean
#
# Sources are discovered: every .c/.cc under base/, model/, tokenizer/, text/, server/ goes into
# build/libdeepmt.a, cli/*.c into the deepmt binary, tests/c/test_*.c into one test
# binary each.

CC      ?= gcc
CXX     ?= g++
BUILD   ?= build
OPT     ?= -O3 -march=x86-64-v2 -mtune=generic
SAN     ?=
# the document libraries (text/documents.c): Debian's shared libzip and libxml2 by
# default; docker/Dockerfile links static builds of both instead (no ICU, no TLS)
DOC_CFLAGS ?= -I/usr/include/libxml2
DOC_LIBS   ?= -lzip -lxml2
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -fopenmp -g -Wall -Wextra -Wno-unused-parameter -pthread $(SAN) -I. -MMD -MP \
           $(DOC_CFLAGS)
CXXFLAGS+= -std=c++17 $(OPT) -g -Wall -Wextra -pthread $(SAN) -I. -MMD -MP
LDFLAGS += -pthread -fopenmp $(SAN)
LDLIBS  += -lopenblas -ljansson -lmicrohttpd -lsentencepiece -lcld2 -lgumbo $(DOC_LIBS) -lstdc++ -lm
PYTHON  ?= /usr/bin/python3
MODEL   ?= models/default
PORT    ?= 5000

LIB_SRC  := $(wildcard base/*.c model/*.c model/kernels/*.c tokenizer/*.c text/*.c server/*.c server/*/*.c)
LIB_CXX  := $(wildcard tokenizer/*.cc text/*.cc)
CLI_SRC  := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/c/test_*.c)
TEST_SUP := $(filter-out tests/c/test_%.c,$(wildcard tests/c/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(LIB_CXX:%.cc=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
SUP_OBJ  := $(TEST_SUP:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/c/%.c=$(BUILD)/tests/%)

.PHONY: all deps deps-test deps-train test asan tsan ubsan serve golden clean
all: deps $(BUILD)/deepmt $(TEST_BIN)

deps:
	@scripts/deps.sh build
deps-test:
	@scripts/deps.sh test
deps-train:
	@scripts/deps.sh train

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

# files the assembler builds into objects (.incbin), which -MMD does not see
$(BUILD)/server/api/lt_api.o: server/api/openapi.json
$(BUILD)/server/api/webpage.o: server/api/webpage.html

$(BUILD)/libdeepmt.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/deepmt: $(CLI_OBJ) $(BUILD)/libdeepmt.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libdeepmt.a $(LDLIBS)

# The AVX-VNNI, AVX-512 and AMX levels' kernels once more on SIMDe's portable AVX-512 (libsimde-dev,
# which `make test` installs) and, for amx, on the software tile model (model/kernels/amx.h),
# linked into the test programs only, so DEEPMT_ISA=avxvnni|avx512*|amx runs those levels'
# code on CPUs without them (model/kernels/kernels.h).
ifneq ($(wildcard /usr/include/simde/x86/avx512.h),)
EMU_OBJ := $(BUILD)/tests/c/kernels_avx512_emulated.o $(BUILD)/tests/c/kernels_avxvnni_emulated.o
SUP_OBJ += $(EMU_OBJ)
$(EMU_OBJ): $(BUILD)/tests/c/kernels_%_emulated.o: model/kernels/kernels_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -mavx2 -mfma -DDMT_KERNELS_EMULATED -c $< -o $@
endif

$(BUILD)/tests/%: $(BUILD)/tests/c/%.o $(SUP_OBJ) $(BUILD)/libdeepmt.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(SUP_OBJ) $(BUILD)/libdeepmt.a $(LDLIBS)

test: deps-test
	@$(MAKE) --no-print-directory all
	@DEEPMT_BUILD=$(BUILD) tests/run.sh

# Sanitizer builds live in their own folder so they never mix with normal objects.
asan:
	@$(MAKE) --no-print-directory test BUILD=build/asan OPT="-O1 -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"

# ThreadSanitizer: the threaded parts are the server's (HTTP threads, suspend and
# resume, the scheduler's workers, metrics, the read-deadline thread), so the C
# tests and the server's integration tests run; the other Python and shell tests
# do not start threads of ours. A report fails the test that saw it (the server's
# stderr is checked; TSan exits 66). tests/tsan.supp: libgomp is not built with
# TSan, so its barriers are invisible and every read after a parallel product is
# reported as a race (a false positive, suppressed there). TSAN_OPTIONS adds options.
# Left out: test_gemm (its only threads are OpenMP's; under TSan its software AMX
# model alone runs for over 15 minutes) and the reruns at other kernel levels (the
# same threads, other arithmetic).
tsan: deps-test
	@$(MAKE) --no-print-directory all BUILD=build/tsan OPT="-O1 -fno-omit-frame-pointer" SAN="-fsanitize=thread"
	@DEEPMT_BUILD=build/tsan TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 history_size=7 \
	  suppressions=$(CURDIR)/tests/tsan.supp $(TSAN_OPTIONS)" \
	  TESTS="build/tsan/tests/ tests/py/test_server.py tests/py/test_hardening.py tests/py/test_models.py" \
	  TESTS_EXCLUDE="test_gemm DEEPMT_ISA=" tests/run.sh

serve: deps
	@$(MAKE) --no-print-directory $(BUILD)/deepmt
	$(BUILD)/deepmt serve --model $(MODEL) --host 127.0.0.1 --port $(PORT)

golden: deps-train
	$(PYTHON) tools/make_golden.py --out tests/fixtures/golden
	$(PYTHON) tools/make_beam_golden.py --out tests/fixtures/beam --tiny-out tests/fixtures/tiny-model

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- evaluation: serve $(MODEL) on a free local port, score every test set (Multi30k
# test_2016/2017, FLORES-101, Tatoeba, newstest; BLEU/chrF2 as sacreBLEU) and the
# robustness report, stop the server. EVAL_SPLIT=test_2016_flickr: that split only;
# EVAL_BASELINE=old/report.json: compared with an earlier report at the end.
# Report and hypotheses in $(BUILD)/eval/. scripts/eval_default.sh; docs/evaluation.md.
SHARED  ?= ../shared
.PHONY: eval
eval: deps
	@$(MAKE) --no-print-directory $(BUILD)/deepmt
	@BUILD=$(BUILD) MODEL=$(MODEL) SHARED=$(SHARED) PYTHON=$(PYTHON) scripts/eval_default.sh

# ---- micro-benchmarks (bench/*.c -> build/bench/*); `make bench` runs the full report
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(BUILD)/libdeepmt.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libdeepmt.a $(LDLIBS)
bench-bin: $(BENCH_BIN)
.PHONY: bench-bin

# -- training (tools/train.py, docs/training.md) ---------------------------------
# make train    (progress: tail -f $(RUN)/train.log)
#               A joint SentencePiece vocabulary (16k, digits split) over Multi30k and
#               the general-domain pairs, then multilingual training (en, de, fr, cs;
#               12 Multi30k directions + en<->de/fr/cs general data with the robustness
#               augmentation) for TRAIN_BUDGET (hours, or an end time HH:MM UTC), then
#               export the best checkpoint to $(TRAIN_OUT) (not over models/default:
#               compare first with `make eval MODEL=$(TRAIN_OUT)`). Resume with
#               `make train TRAIN_ARGS=--resume`. Meant for a GPU (docs/training.md).
# make train-continue
#               The CPU path: continue models/default on the same data with its own
#               vocabulary (numbers split into digits), from its weights.
# make ui-data  User-interface strings (menus, buttons, dialogs) from the translations
#               of Debian 12 packages, into $(UI) (tools/ui_strings.py; downloads ~70 MB
#               of .deb files with apt-get). Both training targets make it when missing
#               and give it UI_SHARE of the general examples; UI= trains without it.
DATA         ?= ../shared/data/multi30k
GENERAL      ?= ../shared/data/general
UI           ?= runs/data/ui
UI_SHARE     ?= 0.08
UI_ARGS       = $(if $(UI),--ui $(UI) --ui-share $(UI_SHARE))
RUN          ?= runs/main
TRAIN_OUT    ?= $(RUN)/model
TRAIN_BUDGET ?= 2.5
TRAIN_ARGS   ?=
SPM          ?= runs/spm16k/spm
.PHONY: train train-continue train-bench ui-data
ui-data: deps-train
	test -z "$(UI)" || test -f $(UI)/train/en-de.en.gz || $(PYTHON) tools/ui_strings.py --out $(UI)
# make train-bench   training speed on this CPU (tools/train.py bench): fp32 vs bf16
#                    autocast, 1 and 2 threads, three batch sizes, on the run's batches
train-bench: deps-train
	test -f $(SPM).model || nice -n 5 $(PYTHON) tools/train.py spm --data $(DATA) --general $(GENERAL) \
	  --vocab-size 16000 --split-digits --max-sentences 2000000 --out $(SPM)
	$(PYTHON) tools/train.py bench --data $(DATA) --general $(GENERAL) --spm $(SPM).model $(TRAIN_BENCH_ARGS)
train: deps-train ui-data
	@mkdir -p $(RUN)
	test -f $(SPM).model || nice -n 5 $(PYTHON) tools/train.py spm --data $(DATA) --general $(GENERAL) \
	  --vocab-size 16000 --split-digits --max-sentences 2000000 --out $(SPM)
	set -e; nice -n 5 $(PYTHON) tools/train.py train --data $(DATA) --general $(GENERAL) --spm $(SPM).model \
	  --run $(RUN) --time-budget $(TRAIN_BUDGET) $(UI_ARGS) $(TRAIN_ARGS) > $(RUN)/train.log 2>&1 || { tail -20 $(RUN)/train.log; exit 1; }
	$(PYTHON) tools/train.py export --run $(RUN) --out $(TRAIN_OUT)
	@echo "train: model in $(TRAIN_OUT); score it with 'make eval MODEL=$(TRAIN_OUT)' and, if better, copy it over models/default"
train-continue: deps-train ui-data
	@mkdir -p $(RUN)
	$(PYTHON) tools/train.py spm --derive-from $(MODEL)/sentencepiece.model --out $(RUN)/spm
	set -e; nice -n 5 $(PYTHON) tools/train.py train --data $(DATA) --general $(GENERAL) --spm $(RUN)/spm.model \
	  --init-from $(MODEL) --run $(RUN) --time-budget $(TRAIN_BUDGET) --max-tokens 24000 --multi30k-share 0.25 --pivot-share 0.15 \
	  $(UI_ARGS) $(TRAIN_ARGS) > $(RUN)/train.log 2>&1 || { tail -20 $(RUN)/train.log; exit 1; }
	$(PYTHON) tools/train.py export --run $(RUN) --checkpoint $(RUN)/checkpoint.pt --out $(TRAIN_OUT)
	@echo "train: model in $(TRAIN_OUT); score it with 'make eval MODEL=$(TRAIN_OUT)'"

# ---- containers: build docker/Dockerfile with podman (installed when missing), run it,
# then 2 replicas behind nginx (docker/compose.yaml); TAP output. Takes minutes, needs
# root and podman, so it is not part of `make test`. scripts/docker_test.sh;
# docs/deployment.md.
.PHONY: docker-test
docker-test:
	@scripts/docker_test.sh

# ---- benchmark report (bench/bench.py; docs in its header). Not part of `make test`:
# deepmt vs the PyTorch baseline (tools/bench_torch.py) on Multi30k, `deepmt serve`
# under load, 12/100/1,000-layer models. Writes $(BUILD)/bench/report.md and
# report.json. BENCH_SIZE=1 adds the 3.2B-parameter model (minutes, ~13 GB of RAM,
# 6.4 GB of disk under $(BUILD)/bench, deleted afterwards). The product kernels alone:
# OPENBLAS_NUM_THREADS=1 build/bench/bench_gemm; the attention kernels alone:
# build/bench/bench_attention (after make bench-bin).
BENCH_THREADS ?= 1,2
BENCH_ROUNDS  ?= 3
BENCH_SIZE    ?=
BENCH_ARGS    ?=
.PHONY: bench
bench: deps-train
	@$(MAKE) --no-print-directory $(BUILD)/deepmt bench-bin
	$(PYTHON) bench/bench.py --build $(BUILD) --model $(MODEL) --shared $(SHARED) \
	  --threads $(BENCH_THREADS) --rounds $(BENCH_ROUNDS) $(if $(BENCH_SIZE),--size) $(BENCH_ARGS)

# ---- fuzzing (libFuzzer, clang, ASan + UBSan; README.md, "Development"). Every
# tests/fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput and becomes
# $(BUILD)/fuzz/fuzz_<name>, linked against the library built again with clang and
# the sanitizers under $(BUILD)/fuzz/obj. `make fuzz` runs each for FUZZ_SECONDS on
# tests/fuzz/corpus/<name>/ (committed seeds and regression inputs; new inputs go to
# $(BUILD)/fuzz/corpus/<name>/, crashes to $(BUILD)/fuzz/artifacts/), and each Python
# target tests/fuzz/fuzz_<name>.py as `fuzz_<name>.py --seconds FUZZ_SECONDS`.
# FUZZ=name runs only fuzz_<name>. `make test` runs each for a few seconds
# (tests/sh/test_fuzz.sh; tests/py/test_fuzz_unpickler.py).
FUZZ_CC      ?= clang
FUZZ_CXX     ?= clang++
FUZZ_SECONDS ?= 600
FUZZ         ?=
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -pthread -I. -MMD -MP \
                $(DOC_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_CXXFLAGS:= -std=c++17 -O1 -g -fno-omit-frame-pointer -pthread -I. -MMD -MP $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(LIB_CXX:%.cc=$(FUZZ_DIR)/obj/%.o)

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_DIR)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -c $< -o $@
$(FUZZ_DIR)/libdeepmt.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_DIR)/libdeepmt.a
	$(FUZZ_CXX) -fsanitize=fuzzer $(FUZZ_SAN) -pthread -o $@ $< $(FUZZ_DIR)/libdeepmt.a $(LDLIBS)

.PHONY: fuzz fuzz-bin
fuzz-bin: $(FUZZ_BIN)
fuzz: deps-test
	@$(MAKE) --no-print-directory fuzz-bin
	@FUZZ_DIR=$(FUZZ_DIR) tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ)
