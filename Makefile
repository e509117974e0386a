# gradnet — every target installs what it needs itself (apt packages, .venv).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TARGET ?= auto
P4C ?= p4c-bm2-ss
P4_PROGRAMS := $(wildcard p4src/*.p4)
P4_TEST_PROGRAMS := $(wildcard tests/p4/*.p4)
# gcc + libc6-dev: the embedded target's native backend compiles each P4 program to C
APT_PACKAGES := mininet iproute2 ethtool iputils-ping procps tcpdump libpcap0.8 openssl gcc libc6-dev
export TARGET

.PHONY: all deps apt venv native p4rt-shell docs run compare compare-full compare-sync run-scale simulate regimes test test-long bench p4 p4-gen lint clean help run-%
all: help

help:
	@echo "make run      run the main experiment on the emulated network (TARGET=$(TARGET))"
	@echo "make run CLI=1  same, but leave a Mininet CLI open"
	@echo "make compare  time to accuracy: every scheme trains the same model, seeds and CIs (ARGS=...)"
	@echo "make compare-full  the same with the larger model (up to an hour)"
	@echo "make compare-sync  every gradient-sync scheme on one gradient, once: one table, one plot"
	@echo "make run-MODE one technique's experiment: run-ndn, run-differentiated, run-bcube, run-token (ARGS=...)"
	@echo "             shared options (--workers --bw --loss --seed --max-time --target --out-dir): \"common options\" of --help"
	@echo "make run-scale INA and its PS baseline on a k=8 fat-tree: 80 switches, 127 workers (ARGS=...)"
	@echo "make simulate the sync-time scale table in ns-3: PS, ring, INA on fat-trees (ARGS=...)"
	@echo "make regimes  the regime map: which scheme reaches the target first vs workers, link rate, oversubscription, model (ns-3; ARGS=...)"
	@echo "make test     run the test suite (kept under 20 min)"
	@echo "make test-long  the long tier: second sizes, soaks and harness runs the suite leaves out"
	@echo "make bench    run the benchmarks (tables and ratios)"
	@echo "make p4       make p4-gen, then recompile p4src/*.p4 and tests/p4/*.p4 with p4c into build/"
	@echo "              (and ina.p4 once per other INA packet size: p4src/build/ina_v128.json, ina_v256.json)"
	@echo "make native  build the native backend's C for every compiled program into its cache (make deps does)"
	@echo "make p4-gen   regenerate the P4 value lanes (p4src/gen_lanes.py; no p4c needed)"
	@echo "make lint     ruff, then the size report (scripts/size_report.py)"
	@echo "make docs     the documentation site: mkdocs build --strict into site/"
	@echo "make p4rt-shell  p4runtime-shell's own venv (.venv-p4rt-shell; gradctl net shell builds it too)"
	@echo "TARGET=auto|embedded|bmv2 picks the switch (auto: bmv2 when simple_switch_grpc exists)"

deps: apt venv native

# The native backend's shared objects for every compiled program, built ahead into the
# cache (targets/embedded/native/__main__.py) so that no switch compiles C while a
# P4Runtime client waits; a program that is not there compiles in the background. The INA
# agents' datagram paths (hosts/ina/dgram*.c, hosts/ina/native.py) are built with them.
NATIVE_INPUTS := $(wildcard p4src/build/*.json tests/p4/build/*.json targets/embedded/native/*.c targets/embedded/native/*.py hosts/ina/dgram.c hosts/ina/dgram_ps.c)
native: $(VENV)/.native-stamp
$(VENV)/.native-stamp: $(VENV)/.stamp $(NATIVE_INPUTS)
	@if command -v cc >/dev/null; then $(PY) -m targets.embedded.native --quiet p4src/build/*.json tests/p4/build/*.json; \
	$(PY) -c "from hosts.ina import native; native.library()"; \
	else echo "no C compiler: the embedded switches run the Python backend, the INA agents their Python packet path"; fi
	@touch $@

# apt packages, installed only when a command they provide is missing.
apt: $(VENV)/.apt-stamp
$(VENV)/.apt-stamp:
	@missing=0; for c in mnexec ip ethtool ping tc tcpdump openssl cc; do command -v $$c >/dev/null || missing=1; done; \
	if [ $$missing = 1 ]; then \
	  echo "installing apt packages: $(APT_PACKAGES)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES) >/dev/null; \
	fi
	@mkdir -p $(VENV) && touch $@

venv: $(VENV)/.stamp
$(VENV)/.stamp: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,train,sim,docs]'
	@touch $@

run: deps
	$(PY) -m experiments $(if $(CLI),--cli,)

# make compare: the time-to-accuracy harness at small defaults (digits CNN, 3 seeds; a few
# minutes). make compare-full: the same default schemes, the larger model (up to an hour).
# make compare-sync: PS, ring, INA, NDN-PS, BML and the token LAN on one gradient, once.
compare: deps
	$(PY) -m experiments --mode train $(ARGS)

compare-full: deps
	@echo "make compare-full: the default schemes, 3 seeds, the mlp model; about 35 minutes here (up to an hour)"
	$(PY) -m experiments --mode train --model mlp --seeds 3 --epochs 4 $(ARGS)

compare-sync: deps
	$(PY) -m experiments --mode compare $(ARGS)

# make run-ndn, run-differentiated, run-bcube, run-token: one technique's experiment
# (ARGS="..." passes its options, e.g. make run-bcube ARGS="--n 2 --k 3").
# make run-scale: INA and its PS baseline on a k=8 fat-tree (80 switches, 128 hosts,
# 127 workers; links dilated to 0.2 Mbit/s; about 4 minutes). 0.2 stays the default: at
# 0.5-2 Mbit/s INA meets the 2 cores' floor (about 0.5 s whatever the rate, docs/ina.md).
run-scale: deps
	$(PY) -m experiments --preset k8 $(ARGS)

run-%: deps
	$(PY) -m experiments --mode $* $(ARGS)

# make simulate: sync time vs workers at data-centre scale in ns-3 (sim/, docs/simulation.md).
simulate: deps
	$(PY) -m bench.sim_bench $(ARGS)

# make regimes: which scheme reaches the target first per (model, workers, network, link
# rate), from ns-3 and the ideal bound (sim/regimes.py, docs/harness.md "Regime map").
regimes: deps
	@echo "make regimes: 72 cells, 120 ns-3 runs; about 10 minutes on a 2-core machine (ARGS=\"--resume DIR\" reuses a run)"
	$(PY) -m bench regimes $(ARGS)

test: deps
	$(PY) -m pytest -q -ra --durations=25

test-long: deps
	$(PY) -m pytest -q -ra -m long

bench: deps
	$(PY) -m bench

# The per-value register/field lanes of the P4 sources: p4src/gen_lanes.py writes them
# into p4src/include/generated/
# (standard library only, so any python3 runs it).
p4-gen:
	$(PYTHON) p4src/gen_lanes.py

# ina.p4 is compiled once more for every other INA packet size (gen_lanes.py
# INA_VALUE_SIZES; docs/ina.md, "Values per packet"): build/ina_v<N>.json with -DINA_VALUES=N.
p4: p4-gen
	@command -v $(P4C) >/dev/null || { echo "p4c ($(P4C)) not found"; exit 1; }
	@set -e; for f in $(P4_PROGRAMS) $(P4_TEST_PROGRAMS); do \
	  out=$$(dirname $$f)/build/$$(basename $$f .p4); mkdir -p $$(dirname $$out); \
	  echo "p4c $$f -> $$out.json, $$out.p4info.txt"; \
	  $(P4C) --arch v1model --std p4-16 -I p4src/include \
	    --p4runtime-files $$out.p4info.txt -o $$out.json $$f; \
	done
	@set -e; for n in $$($(PYTHON) p4src/gen_lanes.py --variant-sizes); do \
	  out=p4src/build/ina_v$$n; \
	  echo "p4c -DINA_VALUES=$$n p4src/ina.p4 -> $$out.json, $$out.p4info.txt"; \
	  $(P4C) --arch v1model --std p4-16 -I p4src/include -DINA_VALUES=$$n \
	    --p4runtime-files $$out.p4info.txt -o $$out.json p4src/ina.p4; \
	done
	@if [ -x $(PY) ] && command -v cc >/dev/null; then $(PY) -m targets.embedded.native --quiet p4src/build/*.json tests/p4/build/*.json; fi

# ruff, then the size report: any module over 600 lines or function over 80 fails.
lint: venv
	$(VENV)/bin/ruff check .
	$(PY) scripts/size_report.py

# The documentation site (mkdocs.yml, docs/): the docs extra is part of the venv.
docs: venv
	$(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache results logs site

# p4runtime-shell in its own venv (it pins protobuf<3.21); `gradctl net shell` builds it too.
p4rt-shell: .venv-p4rt-shell/.stamp
.venv-p4rt-shell/.stamp: requirements-p4rt-shell.txt
	$(PYTHON) -m venv --clear .venv-p4rt-shell
	.venv-p4rt-shell/bin/python -m pip install -q --disable-pip-version-check -r requirements-p4rt-shell.txt
	@touch $@
