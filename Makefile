# pvediskcheck: build, test, demo, package. `make help` lists the targets.
PREFIX  ?= /usr
DESTDIR ?=
VERSION ?= $(shell dpkg-parsechangelog -S Version 2>/dev/null || git describe --tags --always 2>/dev/null || echo dev)
GO      ?= go
GOFLAGS ?= -trimpath
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin/pvediskcheck

.PHONY: all build test test-host test-qemu11 lint demo install clean help deps qemu11

all: build

help:
	@echo "build    build $(BIN) (static, -trimpath, version stamped)"
	@echo "test     install test dependencies when missing, then run every test"
	@echo "demo     start a scratch VM shaped like Lab 37's VM 370 and run the tool against it"
	@echo "lint     go vet + gofmt check"
	@echo "qemu11   build (once) the cached Debian trixie chroot with QEMU 11.1.3 for the tests"
	@echo "install  install into DESTDIR/PREFIX"

build:
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/pvediskcheck

# deps installs what the tests need on a fresh Debian machine.
deps:
	@scripts/test-deps.sh

# test runs every test on the host's QEMU (Debian 12: 7.2), then the
# real-QEMU integration suite again on QEMU 11.1.3 (the labs' version).
test: deps build qemu11 test-host test-qemu11

test-host:
	@echo "== all tests, host QEMU: $$(qemu-system-x86_64 --version | head -n1)"
	$(GO) test -count=1 -timeout 40m ./...

# Packages whose tests start QEMU; the guest tier picks its 11.1 scenario itself.
QEMU_PKGS := ./cmd/... ./internal/...
test-qemu11:
	@echo "== real-QEMU integration suite, QEMU 11.1: $$(scripts/qemu-11.1 --version | head -n1)"
	PVEDISKCHECK_QEMU=$(CURDIR)/scripts/qemu-11.1 $(GO) test -count=1 -timeout 40m $(QEMU_PKGS)

# qemu11: QEMU 11.1.3, the version on the labs' Proxmox VE 9.2, from Debian
# trixie-backports in a chroot cached at $(PVEDISKCHECK_CACHE)/trixie-qemu11 (default
# /var/cache/pvediskcheck): ~40 s and ~270 MB the first time, instant afterwards.
# scripts/qemu-11.1 and scripts/qemu-img-11.1 run it like qemu-system-x86_64/qemu-img.
# What it installs and why: the header of scripts/qemu-chroot.sh.
qemu11:
	@scripts/qemu-chroot.sh

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/sbin/pvediskcheck

clean:
	rm -rf bin
