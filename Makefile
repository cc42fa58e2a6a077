# mrc-twin: two commands on a fresh machine.
#   make lab-up   install what is missing, bring up the default lab, verify every path,
#                 move 64 MiB through the MRC endpoints
#   make test     install what is missing, lint, run every test tier this machine allows
# Both are idempotent.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LAB    ?= mrc-4p
RUNTIME ?= auto
# make lab-up TELEMETRY=0: no exporter, no Prometheus
TELEMETRY ?= 1
# Debian packages the kernel-facing layers call: ip/tc (iproute2), nsenter (util-linux),
# nft (link-loss faults); gcc and zlib's headers build the endpoint's compiled data path,
# which computes the ICRC with ISA-L (libisal2) where it loads, else with zlib

.PHONY: help deps test-deps sanitize-deps venv engine images lab-up lab-down chaos test lint \
	sanitize bench clean

help:
	@echo "make lab-up     bring up $(LAB) as containers and verify every route and path"
	@echo "                (RUNTIME=netns for bare namespaces; LAB=mrc-8p for the big one)"
	@echo "                with live metrics in Prometheus on 127.0.0.1:9478 (TELEMETRY=0: none)"
	@echo "make images     build the router and host images offline (cached)"
	@echo "make engine     install docker.io if needed and start dockerd (no bridge, no iptables)"
	@echo "make lab-down   remove $(LAB)"
	@echo "make chaos      every shipped drill (lab/drills), each against single-path; reports (KEEP=1: labs stay up)"
	@echo "                in lab/build/<lab>/reports/<timestamp>/, exit 1 if a verdict fails"
	@echo "make test       lint and run every tier this machine allows: unit; as root, bpf (the eBPF"
	@echo "                programs in the kernel) and netns; docker once make images has run"
	@echo "make sanitize   the compiled transport built with ASan and UBSan (build/asan): the"
	@echo "                differential fuzzer for SANITIZE_SECONDS (default 120) and the trace"
	@echo "                tests under it; exit 1 on any report or divergence (.ci/sanitize)"
	@echo "make bench      lab-up/verify, runtimes, the endpoint (against TCP and blasters),"
	@echo "                its transport per packet and buffer registration: docs/benchmarks.md"

deps:
	@missing=""; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v tc >/dev/null || missing="$$missing iproute2"; \
	command -v nsenter >/dev/null || missing="$$missing util-linux"; \
	command -v nft >/dev/null || missing="$$missing nftables"; \
	command -v gcc >/dev/null || missing="$$missing gcc"; \
	[ -f /usr/include/zlib.h ] || missing="$$missing zlib1g-dev"; \
	ldconfig -p 2>/dev/null | grep -q 'libisal\.so\.2 ' || missing="$$missing libisal2"; \
	$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing:$$missing (run as root, or apt-get install$$missing)"; exit 1; fi; \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# setup.py builds the endpoint's compiled data path and transport core (every twin/mrc/*.c
# and *.h; build_hash.py says which, and hashes them into the module) with gcc. The old
# module goes first: the build is optional, and one that fails must not leave it behind
# as if it were current (an endpoint would find it stale: twin.mrc.core.stale_build).
$(STAMP): pyproject.toml setup.py twin/mrc/build_hash.py $(wildcard twin/mrc/*.c twin/mrc/*.h)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	rm -f twin/mrc/_fastpath.*.so
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

venv: deps $(STAMP)

engine: venv
	$(BIN)/twin engine start

images: engine
	@command -v debootstrap >/dev/null || { echo "installing: debootstrap"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
	$(BIN)/twin images build

# Containers by default: the engine and images are made ready first (both cached).
lab-up: venv
	@if [ "$(RUNTIME)" != netns ]; then $(MAKE) --no-print-directory images; fi
	@$(BIN)/twin status --lab $(LAB) >/dev/null 2>&1 && echo "lab $(LAB) is already up" || $(BIN)/twin up $(LAB) --runtime $(RUNTIME)
	$(BIN)/twin verify --lab $(LAB)
	@if [ "$(TELEMETRY)" = 1 ]; then $(BIN)/twin telemetry status --lab $(LAB) >/dev/null 2>&1 && \
	  echo "telemetry of $(LAB) is already running" || $(BIN)/twin telemetry up --lab $(LAB); fi
	$(BIN)/twin traffic bulk --lab $(LAB) --src r0h0 --dst r1h0 --size 64M
	@$(BIN)/twin status --lab $(LAB)
	@echo "inspect: $(BIN)/twin exec --lab $(LAB) t0-p0-r0 -- ip -6 route    remove: make lab-down"

# Every shipped drill on its fabric's lab (brought up if needed, and taken down after
# unless KEEP=1), each also on single-path; exit 0 when every MRC verdict holds.
chaos: venv
	@if [ "$(RUNTIME)" != netns ]; then $(MAKE) --no-print-directory images; fi
	$(BIN)/twin drill all --compare single-path --runtime $(RUNTIME)$(if $(KEEP), --keep)$(if $(SUFFIX), --suffix $(SUFFIX))

lab-down: venv
	@if $(BIN)/twin status --lab $(LAB) >/dev/null 2>&1; then $(BIN)/twin down --lab $(LAB); else echo "lab $(LAB) is not up"; fi

lint: venv
	$(BIN)/ruff check twin tests bench

# tshark checks the wire format with a standard dissector (its test skips without it).
# Chromium is not installed here: it is ~360 MB (apt-get install chromium). Without it the
# drill report's screenshot test (tests/unit/test_drill_report.py) skips and says so.
# Prometheus (Debian's, without its service): the telemetry tier and promtool's checks of
# every dashboard query. twin installs it the same way on `twin telemetry up`.
# bpftool: the independent witness that `twin down` leaves no eBPF program loaded (its
# test asks the kernel itself without it).
test-deps: venv
	@command -v bpftool >/dev/null || { [ "$$(id -u)" != 0 ] && echo "bpftool missing: the kernel is asked instead" || \
	  { echo "installing: bpftool"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq bpftool >/dev/null; }; }
	@command -v tshark >/dev/null || { [ "$$(id -u)" != 0 ] && echo "tshark missing: its test will skip" || \
	  { echo "installing: tshark"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq tshark >/dev/null; }; }
	@command -v prometheus >/dev/null || { [ "$$(id -u)" != 0 ] && echo "prometheus missing: its tests will skip" || \
	  $(BIN)/python -c 'from twin.telemetry.prometheus import install; print("installed", install())'; }

test: lint test-deps
	@$(BIN)/pytest; rc=$$?; \
	if [ $$rc = 5 ]; then echo "pytest collected no tests: that is a failure"; exit 1; fi; \
	exit $$rc

# The sanitizer tier (.ci/sanitize): gcc's ASan and UBSan runtimes (Debian 12: gcc-12's
# libasan8 and libubsan1), the core built with them into build/asan, the differential
# fuzzer (seed SANITIZE_SEED, default today's date) and the trace tests run under them.
SANITIZE_SECONDS ?= 120
SANITIZE_SEED ?=
sanitize-deps:
	@missing=""; \
	[ -f "$$(readlink -f "$$(gcc -print-file-name=libasan.so)")" ] || missing="$$missing libasan8"; \
	[ -f "$$(readlink -f "$$(gcc -print-file-name=libubsan.so)")" ] || missing="$$missing libubsan1"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing:$$missing (run as root, or apt-get install$$missing)"; exit 1; fi; \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

sanitize: venv sanitize-deps
	FUZZ_SECONDS=$(SANITIZE_SECONDS) SEED=$(SANITIZE_SEED) .ci/sanitize

bench: venv
	$(BIN)/python bench/bench_lab.py
	$(BIN)/python bench/bench_runtimes.py
	$(BIN)/python bench/bench_endpoint.py
	$(BIN)/python bench/bench_transport.py
	$(BIN)/python bench/bench_buffers.py

clean:
	rm -rf $(VENV) lab/build .pytest_cache build/asan
