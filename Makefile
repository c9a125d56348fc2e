# pvediskcheck: build, test, demo, package. `make help` lists the targets.
PREFIX  ?= /usr
DESTDIR ?=
VERSION ?= $(shell dpkg-parsechangelog -S Version 2>/dev/null || git describe --tags --always 2>/dev/null || echo dev)
GO      ?= go
GOFLAGS ?= -trimpath
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin/pvediskcheck

.PHONY: all build test unit lint demo install clean help deps

all: build

help:
	@echo "build    build $(BIN) (static, -trimpath, version stamped)"
	@echo "test     install test dependencies when missing, then run every test"
	@echo "demo     start a scratch VM shaped like Lab 37's VM 370 and run the tool against it"
	@echo "lint     go vet + gofmt check"
	@echo "install  install into DESTDIR/PREFIX"

build:
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/pvediskcheck

# deps installs what the tests need on a fresh Debian machine.
deps:
	@scripts/test-deps.sh

test: deps build
	$(GO) test -count=1 -timeout 40m ./...

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/sbin/pvediskcheck

clean:
	rm -rf bin
