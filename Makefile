# Two entry points (see README): `make run` and `make test`. Both set up the
# virtual environment first; a second `make` reuses it unless
# requirements.txt or setup.py changed since it was built.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= ../shared/data/ml-100k
RUN_DIR ?= runs/default
GPU ?= 0  # 1: also TensorFlow 2.14's CUDA 11.8 libraries (requirements-gpu.txt)
# One test process per core, plus one (pytest-xdist); idle ones take queued tests.
# With one per core, 2 cores were busy 148-189% of the run: tests wait on worker
# processes, sockets and subprocesses, and the extra process fills those waits
# (2 cores: 6:28 against 7:17 one after the other, the same CPU time). Each
# process's share starts with its part of the tests marked slow (conftest);
# worksteal moves queued tests to idle processes (--dist=load does not: 9:31).
# pytest's cache plugin is off: with it, `make test` kept 1.61-1.64 of the 2 cores
# busy (3 runs, 8:00-8:49), without it 1.94-1.96 (5 runs, 6:48-8:29), 2026-12-07;
# why is not known.
PYTEST_ARGS ?= -p no:cacheprovider -n $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN) + 1 ))) --dist=worksteal

.PHONY: setup ops run test clean bazel-setup bazel-test gpu-check

GPU_STAMP := $(if $(filter 1,$(GPU)),$(VENV)/.installed-gpu)

setup: $(VENV)/.installed $(GPU_STAMP) ops

$(VENV)/.installed-gpu: requirements-gpu.txt $(VENV)/.installed
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-gpu.txt
	touch $@

# The hashed embedding op library (incremental: rebuilt when its sources change);
# its CUDA build too where TensorFlow's CUDA (11.8) is found. GPU=1 installs that
# toolkit first where apt can (.ci/cuda_toolkit; elsewhere it says what to install).
ops: $(VENV)/.installed $(GPU_STAMP)
	$(if $(filter 1,$(GPU)),-.ci/cuda_toolkit)
	TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python -m tff_rec.ops.build

$(VENV)/.installed: requirements.txt setup.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; tff_rec needs Python 3.11 (TensorFlow Federated 0.87 supports < 3.12). Set PYTHON=/path/to/python3.11." >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==24.0"
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# A short federated MovieLens next-item run on ML-100K (a couple of minutes on 2 cores).
run: setup
	$(BIN)/python -m launch.train --task=next_item --data_dir=$(DATA_DIR) \
	  --output_dir=$(RUN_DIR) --rounds=20 --clients_per_round=20 --eval_every=5

# Python's compiled-module cache (__pycache__/, git-ignored) even where the
# environment turns it off (PYTHONDONTWRITEBYTECODE=1): else each of the suite's
# ~45 processes compiles the project's modules again, and each test process
# rewrites every test module's asserts again (collection: 8.3 CPU-s a process
# without the cache, 6.5 with it).
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest $(PYTEST_ARGS)

# Bazel, offline (README: Bazel): Debian's bazel-bootstrap 4.2.3 from apt, then
# every target against the environment `make setup` built.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
bazel-setup:
	@command -v bazel >/dev/null || { command -v apt-get >/dev/null || { echo "error: bazel is not installed and this machine has no apt-get; install Bazel 4.2.x (Debian/Ubuntu: apt-get install bazel-bootstrap) or skip the bazel targets (make test runs every test)" >&2; exit 1; }; $(SUDO) apt-get install -y bazel-bootstrap; }

bazel-test: setup bazel-setup
	bazel test //... --local_test_jobs=$$(nproc) --test_output=errors

clean:
	rm -rf $(VENV) runs .pytest_cache tff_rec/ops/*.so

# The op's CUDA kernels on a GPU, with nothing but nvcc (no TensorFlow, no
# Python): the harness checks them against the CPU reference, then cuda_floor
# times them against the floor of their access pattern (exit 1 past 1.1x).
NVCC ?= nvcc
NVCC_ARCH ?= -arch=native
GPU_CHECK_DIR ?= /tmp/tff_rec_gpu_check
gpu-check:
	mkdir -p $(GPU_CHECK_DIR)
	cd tff_rec/ops/cc && for program in cuda_harness cuda_floor; do \
	  $(NVCC) -O3 $(NVCC_ARCH) -o $(GPU_CHECK_DIR)/$$program $$program.cu \
	    -x cu hashed_embedding_kernels.cu.cc || exit 1; done
	$(GPU_CHECK_DIR)/cuda_harness
	$(GPU_CHECK_DIR)/cuda_floor
