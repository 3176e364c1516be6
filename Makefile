# tailfabric — make targets. `make test` and `make demo` set themselves up (apt packages, .venv).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Debian packages the project's tools and tests use (installed when missing and we are root).
APT_PACKAGES := python3-venv python3-dev gcc iproute2 ethtool tcpdump tcpreplay iputils-ping mininet
RESULTS := results

.PHONY: help setup system-deps test test-unit lint bench-p4 fuzz-p4 bench-switch bench-ratelimit bench-transport bench-transport-cpu p4-info clean

help:
	@echo "make test        set up .venv and run the whole test suite"
	@echo "make bench-p4    packets/s of the software P4 target -> results/bench_p4.csv"
	@echo "make bench-p4-native  the same on the native executor -> results/bench_p4_native.csv"
	@echo "make fuzz-p4 [FUZZ_PROGRAMS=10000]  random header/union/stack programs x packets: no crash"
	@echo "make bench-transport  MRC / single path / TCP goodput and completion times -> results/bench_transport.csv"
	@echo "make bench-transport-cpu [CPU_LINK_MBPS=40]  MRC's CPU per packet, sender and receiver -> results/bench_transport_cpu.csv"
	@echo "make bench-switch  tf-switch on veths with tcpreplay -> results/bench_switch.csv (root)"
	@echo "make bench-ratelimit  one switch through a 50-200 Mbit/s port -> results/bench_ratelimit.csv (root)"
	@echo "make p4-info P4=prog.p4   write the P4Info of a program to build/"
	@echo "make fabric [PLANES=2 LEAVES=2 SPINES=2 HOSTS=2 TARGET=tf]  fabric in Mininet + CLI (root)"
	@echo "make fabric-up / fabric-down   start / stop a background fabric (root)"
	@echo "make bench-fabric  bring-up time of the default fabric -> results/bench_fabric.csv (root)"
	@echo "make bench-fabric-throughput [FT_PLANES=2,4 TARGET=tf]  UDP packets/s, loss, latency, switch CPU through the fabric and Linux routers -> results/bench_fabric_throughput.csv, .png (root)"
	@echo "make bench-controller  route computation (131,072 GPUs), failure commands -> results/bench_controller.csv"
	@echo "make exp-gossip  DP, DiLoCo, GlobalM1, GlobalM1LocalM2 at two link rates -> results/gossip.csv, gossip.png"
	@echo "make exp-decoupled  elastic DP vs Decoupled DiLoCo M=2,4,8 under chaos -> results/decoupled.csv, decoupled.png"
	@echo "make lint        ruff format --check, ruff check, mypy --strict, import layer contracts"
	@echo "make clean       remove build outputs and results; stop fabrics and remove their leftovers"

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing Debian packages:$$missing (run as root or install them)"; fi; \
	fi

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory system-deps
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@# the native executor of the project's programs (switch/native), built into its cache
	-@$(PY) -m switch.native p4/*.p4
	@touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider --durations=20 tests

test-unit: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

# Formatter check, linter, type checker (pyproject [tool.mypy]) and the layer contracts
# (pyproject [tool.importlinter], README "Layout").
lint: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench-p4: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m switch.bench_p4 --out $(RESULTS)/bench_p4.csv

# The same cases on the native executor (generated C, 256 packets per call; switch/native).
.PHONY: bench-p4-native
bench-p4-native: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m switch.bench_p4 --native --out $(RESULTS)/bench_p4_native.csv

# Random well-typed programs over headers, unions and stacks, 8 packets each (the unit suite
# runs 60 of them; tests/unit/test_fuzz_programs.py).
FUZZ_PROGRAMS ?= 10000
fuzz-p4: $(STAMP)
	$(PY) -m tests.unit.p4_program_gen --programs $(FUZZ_PROGRAMS) --packets 8

# tf-switch running p4/ipv6_router.p4 between two namespaces; tcpreplay loops one 64-byte-payload
# IPv6/UDP frame into it at top speed and at lower rates; latency at 1,000 packets/s.
BENCH_RATES ?= top,120000,100000,80000,63000,40000,20000
bench-switch: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m switch.bench_net --out $(RESULTS)/bench_switch.csv --rates $(BENCH_RATES) \
	  --switch-cpu 1 --gen-cpu 0 --log $(RESULTS)/bench_switch.log \
	  --switch-cmd "{python} -m switch.daemon -i 1@{if1} -i 2@{if2} --thrift-port 9390 p4/ipv6_router.p4 -- --grpc-server-addr 127.0.0.1:9389" \
	  --setup-cmd "{python} -m switch.device.control --wait 30 --thrift-port 9390 table_add ipv6_lpm ipv6_forward {dst}/64 => {sink_mac} 2"

# One switch forwarding 1,400-byte datagrams through a port limited to 50/100/200 Mbit/s at 0.9x
# and 1.5x its rate (the egress queues in C): delivered share of the rate, CPU per packet.
bench-ratelimit: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m switch.bench_ratelimit --switch-cpu 1 --gen-cpu 0 --out $(RESULTS)/bench_ratelimit.csv

bench-transport: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m experiments.bench_transport --out $(RESULTS)/bench_transport.csv --fabric auto --results $(RESULTS) \
	  $(EXP_LINK_ARG)

# CPU per packet of MRC's sender and receiver (1 MiB messages over ::1; CPU_LINK_MBPS=40, root:
# on a loopback rate-limited like a fabric link, where each packet wakes the receiver alone).
CPU_LINK_MBPS ?=
bench-transport-cpu: $(STAMP)
	@mkdir -p $(RESULTS)
	$(PY) -m experiments.bench_transport --cpu --cpu-out $(RESULTS)/bench_transport_cpu.csv \
	  $(if $(CPU_LINK_MBPS),--cpu-link-mbps $(CPU_LINK_MBPS))

p4-info: $(STAMP)
	@mkdir -p build
	$(VENV)/bin/tf-p4 info $(P4) -o build/$(notdir $(basename $(P4))).p4info.txtpb

# Also after a crash: `tf-topo clean --all` stops the fabric's processes (state file first, then
# any tf-switch / fork server / tf-ctl serve), its host namespaces and their processes, its switch
# ports and stale test namespaces: only what the project made (see topologies/emulation/cleanup.py;
# never Mininet's own clean-up command, which deletes every /tmp/*.log and /tmp/*.out on the machine).
# Without root or without .venv it only removes build outputs and results, and says so.
clean:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "not root: leaving fabric processes and interfaces alone (sudo make clean removes them)"; \
	elif [ -x $(PY) ]; then \
	  $(PY) -m topologies.emulation.cli clean --all --results $(RESULTS) || true; \
	else \
	  echo "no $(VENV): cannot look for fabric leftovers (make setup, then make clean)"; \
	fi
	rm -rf build $(RESULTS) .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# p4/fabric.p4 with the real p4c (BMv2 JSON + P4Info); the software target needs no build step.
.PHONY: p4-build
p4-build:
	@mkdir -p build
	@if command -v p4c-bm2-ss >/dev/null 2>&1; then \
	  p4c-bm2-ss --p4runtime-files build/fabric.p4info.txtpb -o build/fabric.json p4/fabric.p4 \
	  && echo "wrote build/fabric.json and build/fabric.p4info.txtpb"; \
	else \
	  echo "p4c-bm2-ss is not on PATH: install p4c (p4lang/p4c) to build p4/fabric.p4 for BMv2."; \
	  echo "The project's software target needs no build: tf-p4 compile p4/fabric.p4 -o build/fabric.tfp4.json"; \
	fi

# The multi-plane Clos fabric in Mininet (root; README "Fabrics in Mininet").
PLANES ?= 2
LEAVES ?= 2
SPINES ?= 2
HOSTS ?= 2
TARGET ?= tf
LINK_MBPS ?= 100
PCAP ?=
FABRIC_ARGS = --planes $(PLANES) --leaves $(LEAVES) --spines $(SPINES) --hosts $(HOSTS) \
  --target $(TARGET) --link-mbps $(LINK_MBPS) --results $(RESULTS) $(if $(PCAP),--pcap)
BENCH_RUNS ?= 5
.PHONY: fabric fabric-up fabric-down bench-fabric

fabric: $(STAMP)
	$(VENV)/bin/tf-topo up $(FABRIC_ARGS)

# fabric-up also starts the controller service (tf-ctl commands, telemetry); NO_CONTROLLER=1: none
fabric-up: $(STAMP)
	$(VENV)/bin/tf-topo up --detach $(FABRIC_ARGS) $(if $(NO_CONTROLLER),--no-controller)

fabric-down: $(STAMP)
	$(VENV)/bin/tf-topo down --results $(RESULTS)

bench-fabric: $(STAMP)
	$(PY) -m topologies.emulation.bench_bringup --runs $(BENCH_RUNS) --cold --planes $(PLANES) \
	  --leaves $(LEAVES) --spines $(SPINES) --hosts $(HOSTS) --target $(TARGET) \
	  --results $(RESULTS) --out $(RESULTS)/bench_fabric.csv

# UDP through the fabric with links that do not limit (10 Gbit/s): the P4 switches (TARGET),
# then the same topology from Linux routers as the reference, appended to the same CSV (root).
# FT_PLANES=2,4 adds the 4-plane fabric; FT_RATES, FT_SIZES, FT_MODES override the sweep.
FT_PLANES ?= 2
# The overload run: one flow from the kernel-made sender (--sender xdp) on a CPU of its own, up
# to 10x the fabric's peak and beyond.
FT_OVERLOAD_RATES ?= 20000,80000,160000,320000,640000,1280000,2560000,5120000
FT_ARGS = --planes $(FT_PLANES) --results $(RESULTS) --out $(RESULTS)/bench_fabric_throughput.csv \
  $(if $(FT_RATES),--rates $(FT_RATES)) $(if $(FT_SIZES),--sizes $(FT_SIZES)) \
  $(if $(FT_MODES),--modes $(FT_MODES))
.PHONY: bench-fabric-throughput
bench-fabric-throughput: $(STAMP)
	flock /tmp/tailfabric-fabric.lock $(PY) -m experiments.bench_fabric_throughput --target $(TARGET) $(FT_ARGS)
	flock /tmp/tailfabric-fabric.lock $(PY) -m experiments.bench_fabric_throughput --kernel --append --idle 0 --step-s 2 $(FT_ARGS)
	@if [ "$$(nproc)" -ge 2 ]; then \
	  flock /tmp/tailfabric-fabric.lock $(PY) -m experiments.bench_fabric_throughput --target $(TARGET) \
	    $(FT_ARGS) --append --idle 0 --modes one --sender xdp --sender-cpus 1 --rates $(FT_OVERLOAD_RATES); \
	else echo "bench-fabric-throughput: the overload run needs 2 CPUs (the generator on one of its own)"; fi

# Controller speed: 131,072-GPU route computation, failure commands on 32 switches (no root)
.PHONY: bench-controller
bench-controller: $(STAMP)
	$(PY) -m topologies.emulation.bench_controller --runs $(BENCH_RUNS) --out $(RESULTS)/bench_controller.csv

# MRC vs the single-path baseline through the fabric (root; README "MRC through the fabric").
# Each brings up its own default fabric (refused while another runs) and stops it. Link rate:
# LINK_MBPS when given on the command line, else the experiment's own (failover 50 Mbit/s,
# collisions 20 Mbit/s with a 16 ms burst allowance at the switch ports: 10x the rates at which
# the switches forwarded in Python).
# SEEDS=N runs every variant under seeds 0..N-1 (default: failover 5, collisions 3).
EXP_LINK_ARG = $(if $(filter command line,$(origin LINK_MBPS)),--link-mbps $(LINK_MBPS))
EXP_SEEDS_ARG = $(if $(SEEDS),--seeds $(SEEDS))
.PHONY: exp-failover exp-collisions

exp-failover: $(STAMP)
	$(PY) -m experiments.failover --results $(RESULTS) --out $(RESULTS)/plane_failure.csv \
	  $(EXP_LINK_ARG) $(EXP_SEEDS_ARG)

exp-collisions: $(STAMP)
	$(PY) -m experiments.collisions --results $(RESULTS) --out $(RESULTS)/flow_collisions.csv \
	  $(EXP_LINK_ARG) $(EXP_SEEDS_ARG)

# DBLP (README "DBLP: bounded-loss gradient exchange"): both bring the default fabric up at
# DBLP_LINK_MBPS when none is running and this machine can (root, Mininet) and take it down
# again; otherwise they run on the in-process emulated fabric. SEEDS=N (microburst default 5,
# demo 1); EXP_ARGS / DEMO_ARGS pass options (e.g. EXP_ARGS="--network emu", DEMO_ARGS=--quick).
# 200 Mbit/s: 10x the rate of before the switches' C data path (issue 18; README has the sweep).
DBLP_LINK_MBPS ?= 200
EXP_ARGS ?=
DEMO_ARGS ?=
.PHONY: exp-microburst demo

exp-microburst: $(STAMP)
	$(PY) -m experiments.microburst --results $(RESULTS) --link-mbps $(DBLP_LINK_MBPS) \
	  $(EXP_SEEDS_ARG) $(EXP_ARGS)

demo: $(STAMP)
	$(PY) -m experiments.demo --results $(RESULTS) --link-mbps $(DBLP_LINK_MBPS) \
	  $(EXP_SEEDS_ARG) $(DEMO_ARGS)

# Factored gossip DiLoCo (README "Factored gossip DiLoCo"): calibrates the two link rates of
# the paper's comm/compute ratios, then brings the default fabric up at each in turn and takes
# it down again (root, Mininet; otherwise every worker runs on the in-process emulator).
# SEEDS=N (default 3); GOSSIP_ARGS passes options (e.g. GOSSIP_ARGS=--quick, --network emu).
GOSSIP_ARGS ?=
.PHONY: exp-gossip

exp-gossip: $(STAMP)
	$(PY) -m experiments.gossip --results $(RESULTS) --out $(RESULTS)/gossip.csv \
	  $(EXP_SEEDS_ARG) $(GOSSIP_ARGS)

# PyTorch collectives (README "Using it from PyTorch"): all-reduce latency and bus bandwidth,
# tailfabric vs gloo, 4 ranks across the default fabric (brought up at each rate of
# COLL_LINK_MBPS and taken down again; root, Mininet), 3 interleaved rounds per backend, and a
# plane failed mid-stream. 5 Mbit/s: there the links, not the 2 CPUs, limit both backends
# (gloo's TCP at 86 % of a plane, its ranks at 1-3 % of a core, tailfabric's at 12-18 %); from
# 10 Mbit/s the software switches take over. COLL_LINK_MBPS=5,10,20 sweeps (README has all
# three). COLL_ARGS passes options (e.g. --quick, --rounds 5, --max-s 40 for 4-16 MiB).
COLL_LINK_MBPS ?= 5
COLL_ARGS ?=
.PHONY: bench-collectives

bench-collectives: $(STAMP)
	$(PY) -m experiments.bench_collectives --results $(RESULTS) \
	  --out $(RESULTS)/bench_collectives.csv --link-mbps $(COLL_LINK_MBPS) $(COLL_ARGS)

# Decoupled DiLoCo (README "Decoupled DiLoCo"): elastic data parallel vs Decoupled DiLoCo with
# M = 2, 4 learners at two failure rates and none, a seeded chaos schedule killing, pausing and
# slowing the processes and failing spines and planes through the controller; on the default
# fabric, brought up and taken down again (root, Mininet; otherwise on the in-process emulator).
# SEEDS=N (default 3); DECOUPLED_ARGS passes options (e.g. --quick, --network emu,
# --learners 2,4,8).
DECOUPLED_ARGS ?=
.PHONY: exp-decoupled

exp-decoupled: $(STAMP)
	$(PY) -m experiments.decoupled --results $(RESULTS) --out $(RESULTS)/decoupled.csv \
	  --wait-s 1800 $(EXP_SEEDS_ARG) $(DECOUPLED_ARGS)
