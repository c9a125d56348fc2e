# pvediskcheck: build, test, demo, package. `make help` lists the targets.
PREFIX  ?= /usr
DESTDIR ?=
VERSION ?= $(shell dpkg-parsechangelog -S Version 2>/dev/null || git describe --tags --always 2>/dev/null || echo dev)
GO      ?= go
GOFLAGS ?= -trimpath
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin/pvediskcheck
# The man page's date: the changelog's, so the page is reproducible.
SOURCE_DATE_EPOCH ?= $(shell dpkg-parsechangelog -S Timestamp 2>/dev/null)
export SOURCE_DATE_EPOCH

.PHONY: e2e bench bench-compare bench-overhead all build test test-unit test-host test-qemu11 lint demo install clean help deps qemu11 fuzz mutants
.PHONY: man completion vendor deb deb-test monitoring test-monitoring

all: build

help:
	@echo "build    build $(BIN) (static, -trimpath, version stamped)"
	@echo "test     install test dependencies when missing, then run every test"
	@echo "test-unit  the unit tests outside cmd/ and internal/, as user nobody without QEMU (none may skip)"
	@echo "fuzz     run every fuzz target for FUZZTIME each (default 30s); make test runs their seeds"
	@echo "mutants  mutation testing (gremlins) of the capability packages, qemuserver, fio and fioreport"
	@echo "demo     start a scratch VM shaped like Lab 37's VM 370 and run the tool against it"
	@echo "lint     go vet, gofmt and staticcheck (pinned: scripts/staticcheck.sh) on both tag sets and tools/monitoring"
	@echo "e2e      only the end-to-end tier (a real Linux guest with fio and the guest agent)"
	@echo "bench-compare  the speed benchmarks of BASE (default: HEAD~1) and the working tree, in turn in one run (ROUNDS=3)"
	@echo "bench-overhead  time bench against the same fio runs by hand through the agent, and its CPU (real guest; ROUNDS=3)"
	@echo "qemu11   build (once) the cached Debian trixie chroot with QEMU 11.1.3 for the tests"
	@echo "install  install into DESTDIR/PREFIX"
	@echo "man      generate bin/man/pvediskcheck.8 from the --help text"
	@echo "completion  generate the bash completion bin/completion/pvediskcheck"
	@echo "vendor   go mod vendor (the one step that may download; run before dpkg-buildpackage)"
	@echo "deb      build bin/deb/pvediskcheck_VERSION_amd64.deb (installs debhelper, lintian... when missing) and run lintian"
	@echo "deb-test build the .deb, install it into a scratch root and run it against a VM of the harness"
	@echo "monitoring  regenerate share/prometheus/ (alert rules, Grafana dashboard) from tools/monitoring"
	@echo "test-monitoring  the generator's tests: committed files current, PromQL, metric names, promtool test rules"

build:
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/pvediskcheck

# deps installs what the tests need on a fresh Debian machine.
deps:
	@scripts/test-deps.sh

# test runs every test on the host's QEMU (Debian 12: 7.2), then the
# real-QEMU integration suite again on QEMU 11.1.3 (the labs' version).
test: deps lint build qemu11 test-unit test-host test-qemu11 test-monitoring deb-test

# test-unit proves that the unit tier needs neither root nor QEMU.
test-unit:
	@echo "== unit tests outside cmd/ and internal/, as nobody, no QEMU on PATH"
	@scripts/test-unprivileged.sh

# Every test, the integration tier (real QEMU, root, qemu-img, fio) included.
# Packages run one at a time (-p 1): the measuring tests (limits within 3 %,
# flush timings) share 2 cores with TCG guests otherwise.
test-host:
	@echo "== all tests, host QEMU: $$(qemu-system-x86_64 --version | head -n1)"
	$(GO) test -tags integration -p 1 -count=1 -timeout 40m ./...

# Packages whose tests start QEMU; the guest tier picks its 11.1 scenario itself.
QEMU_PKGS := ./cmd/... ./internal/... ./qmp/... ./sampler/...
test-qemu11:
	@echo "== real-QEMU integration suite, QEMU 11.1: $$(scripts/qemu-11.1 --version | head -n1)"
	PVEDISKCHECK_QEMU=$(CURDIR)/scripts/qemu-11.1 $(GO) test -tags integration -p 1 -count=1 -timeout 40m $(QEMU_PKGS)

# The alert rules and the dashboard (share/prometheus/) come from a generator
# in a module of its own (tools/monitoring: Grafana's SDK and Prometheus'
# packages stay out of the tool's go.mod and vendor/). Its tests need
# promtool (make deps) and the Go module proxy, like the tool's own.
MONITORING := share/prometheus/pvediskcheck.rules.yml share/prometheus/pvediskcheck.grafana.json
monitoring:
	cd tools/monitoring && $(GO) run .

test-monitoring: deps
	@echo "== alert rules and dashboard (tools/monitoring)"
	cd tools/monitoring && CI=$${CI:-true} $(GO) test -count=1 ./...

# e2e runs only the end-to-end tier: a real Linux guest built from Debian
# packages (scripts/build-guest.sh, cached) with Proxmox's disk layouts.
e2e: deps build
	$(GO) test -tags integration -p 1 -count=1 -timeout 20m -run 'E2E|GuestSmoke' -v ./cmd/... ./internal/e2e/...

# bench prints the speed targets measured side by side in one run (docs/speed.md).
bench: deps build
	$(GO) test -tags integration -run XXX -bench . -benchtime 20x ./cmd/... ./fio/...

# bench-compare: the speed benchmarks before and after a change in one run
# (issue 33's "make bench before and after"): BASE's test binary and the
# working tree's, in turn, ROUNDS rounds; medians and ratios (docs/speed.md).
BASE ?= HEAD~1
bench-compare: deps
	@scripts/bench-compare.sh $(BASE) $(ROUNDS) $(BENCH)

# bench-overhead: bench's wall time against the same fio command lines run by
# hand through the guest agent, and its CPU, on the real guest
# (docs/speed.md; ROUNDS rounds of about 2.5 minutes, Lab 19's 20 s + 3 s ramp).
ROUNDS ?= 3
bench-overhead: deps build
	@scripts/bench-overhead.sh $(ROUNDS)

fuzz:
	@scripts/fuzz.sh

mutants:
	@scripts/mutants.sh

# qemu11: QEMU 11.1.3, the version on the labs' Proxmox VE 9.2, from Debian
# trixie-backports in a chroot cached at $(PVEDISKCHECK_CACHE)/trixie-qemu11 (default
# /var/cache/pvediskcheck): ~40 s and ~270 MB the first time, instant afterwards.
# scripts/qemu-11.1 and scripts/qemu-img-11.1 run it like qemu-system-x86_64/qemu-img.
# What it installs and why: the header of scripts/qemu-chroot.sh.
qemu11:
	@scripts/qemu-chroot.sh

# lint: go vet, gofmt and staticcheck at its pinned version (scripts/staticcheck.sh
# installs it into bin/tools when missing), each on the default build, the
# integration tag's and the monitoring generator's module; any finding fails.
# A finding that is the point of the code is silenced where it stands, with
# //lint:ignore CHECK and the reason, never by a check turned off for all.
lint:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	cd tools/monitoring && $(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	GO=$(GO) scripts/staticcheck.sh ./...
	GO=$(GO) scripts/staticcheck.sh -tags integration ./...
	cd tools/monitoring && GO=$(GO) ../../scripts/staticcheck.sh ./...

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/sbin/pvediskcheck
	install -d $(DESTDIR)$(PREFIX)/share/pvediskcheck/prometheus
	install -m 0644 $(MONITORING) $(DESTDIR)$(PREFIX)/share/pvediskcheck/prometheus/
	install -D -m 0644 share/examples/policy.yaml $(DESTDIR)$(PREFIX)/share/doc/pvediskcheck/examples/policy.yaml

# man and completion come from the built binary's own help text (hidden
# commands gen-man, gen-bash-completion), so they never disagree with --help.
man: build
	@mkdir -p bin/man
	$(BIN) gen-man > bin/man/pvediskcheck.8

completion: build
	@mkdir -p bin/completion
	$(BIN) gen-bash-completion > bin/completion/pvediskcheck

# vendor fills the git-ignored vendor/ from the module cache or the Go module
# proxy; dpkg-buildpackage then builds offline with -mod=vendor. Note: while
# ./vendor exists, every go build/test in this tree uses it (Go's default), so
# `make deb` vendors into its own build copy instead (VENDOR_DIR).
VENDOR_DIR ?= vendor
vendor:
	$(GO) mod vendor -o $(VENDOR_DIR)

# deb: debian/ packaging, built in bin/deb/ (see scripts/deb.sh), then lintian.
deb:
	@scripts/deb.sh

# deb-test: the .deb installed into a scratch root (never onto this machine),
# its --version and `cache 370 --json` run against Lab 37's VM 370 started by
# the harness (needs root and QEMU, like the tests).
deb-test: deb deps
	@scripts/deb-test.sh

# demo: a scratch VM shaped like Lab 37's VM 370 and the tool's commands run
# against it, one line of explanation per step; cleans up even on Ctrl-C.
demo: deps build
	@scripts/demo.sh

clean:
	rm -rf bin
