# molt — build, test, run and deploy. `make help` lists the targets.
#
# Every tool is pinned here and installed into ./.tools/bin by `make tools`; a fresh
# machine needs only Go (and make). Nothing is taken from the PATH except go and git,
# and node/npm (20 or later) for the A2A JS SDK interop test, whose client is pinned
# by internal/a2a/testdata/jsclient/package-lock.json and installed by `make jsclient`.

# ---- pinned tools ------------------------------------------------------------------
KUMO_VERSION        := v0.33.1
KUMO_PKG            := github.com/sivchari/kumo/cmd/kumo
RIE_VERSION         := v0.0.0-20261030222936-bef5c4ba774d
RIE_PKG             := github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
STATICCHECK_VERSION := v0.8.2
STATICCHECK_PKG     := honnef.co/go/tools/cmd/staticcheck

# ---- settings (override on the command line: make build ARCH=amd64) -----------------
SHELL       := bash
.SHELLFLAGS := -eu -o pipefail -c
MAKEFLAGS   += --no-builtin-rules
.DEFAULT_GOAL := help
.SUFFIXES:

GO        ?= go
MODULE    := github.com/molt-dev/molt
# ARCH is the Lambda architecture of `make build`; `:=` so an ARCH left in the
# environment by something else is ignored (only the command line overrides it).
ARCH      := arm64
# SAM_ARCH is what the template declares (Architectures: [arm64]) for `sam build`.
SAM_ARCH  := arm64
BUILD_DIR := build
TOOLS_DIR := $(CURDIR)/.tools
TOOLS_BIN := $(TOOLS_DIR)/bin
STAMPS    := $(TOOLS_DIR)/stamps

ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
ifeq ($(origin SHA),undefined)
SHA := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
endif

LDFLAGS := -s -w -X $(MODULE)/internal/buildinfo.Version=$(VERSION) -X $(MODULE)/internal/buildinfo.SHA=$(SHA)
# GO_BUILD is shared by every build below; stamping is ours, so VCS stamping is off and
# the same commit gives the same binary.
GO_BUILD  := CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)'
# LAMBDA_BUILD builds a provided.al2023 bootstrap; append GOARCH=… before it.
LAMBDA_BUILD = GOOS=linux $(GO_BUILD) -tags lambda.norpc

# One Lambda function per functions/<name>/main.go.
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
BOOTSTRAPS := $(foreach f,$(FUNCTIONS),$(BUILD_DIR)/$(f)/bootstrap)
ZIPS       := $(foreach f,$(FUNCTIONS),$(BUILD_DIR)/$(f).zip)

# 2 cores: two test binaries at a time; emulator-bound tests may overlap a little more.
TEST_FLAGS  ?= -count=1 -timeout=15m -p=2 -parallel=4
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem -count=1 -timeout=15m -p=1

.PHONY: help tools browser jsclient vet test build bootstraps zips molt run bench bench-peer clean clean-tools version FORCE

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_%-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  variables: ARCH=$(ARCH) (or amd64)  VERSION=$(VERSION)  SHA=$(SHA)  BUILD_DIR=$(BUILD_DIR)"

version: ## print the version and SHA a build would stamp
	@echo "$(VERSION) $(SHA)"

# ---- tools ---------------------------------------------------------------------------
# A stamp file per tool and version: a tool already installed at its pinned version is
# skipped; changing a version above reinstalls it.
TOOL_STAMPS := $(STAMPS)/kumo-$(KUMO_VERSION) $(STAMPS)/aws-lambda-rie-$(RIE_VERSION) \
	$(STAMPS)/staticcheck-$(STATICCHECK_VERSION)

tools: $(TOOL_STAMPS) ## install kumo, the Lambda RIE and staticcheck into .tools/bin

# go-install PKG,VERSION,BINARY: GONOSUMDB because a few aws-sdk-go-v2 modules kumo
# needs are not in the checksum database.
define go-install
	@mkdir -p $(TOOLS_BIN) $(STAMPS)
	@echo "installing $(1)@$(2)"
	GOBIN=$(TOOLS_BIN) GONOSUMDB=github.com/aws $(GO) install $(1)@$(2)
	@test -x $(TOOLS_BIN)/$(3)
	@rm -f $(STAMPS)/$(3)-* && touch $@
endef

$(STAMPS)/kumo-$(KUMO_VERSION):
	$(call go-install,$(KUMO_PKG),$(KUMO_VERSION),kumo)
$(STAMPS)/aws-lambda-rie-$(RIE_VERSION):
	$(call go-install,$(RIE_PKG),$(RIE_VERSION),aws-lambda-rie)
$(STAMPS)/staticcheck-$(STATICCHECK_VERSION):
	$(call go-install,$(STATICCHECK_PKG),$(STATICCHECK_VERSION),staticcheck)

# browser installs Debian's chromium (/usr/bin/chromium) for the console's browser
# tests (internal/console) when it is missing; it needs root (or sudo). `make test` does
# not depend on it: .ci/run calls it first, and a test machine without chromium skips
# the browser tests (fails under CI=true).
CHROMIUM ?= /usr/bin/chromium
browser: ## install Debian's chromium for the browser tests when it is missing
	@if [[ -x $(CHROMIUM) ]]; then echo "$(CHROMIUM) is installed"; exit 0; fi; \
	if [[ $$(id -u) -eq 0 ]]; then sudo=; else sudo=sudo; fi; \
	echo "installing chromium (apt-get)"; \
	$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; \
	test -x $(CHROMIUM)

# The @a2a-js/sdk client internal/a2a's TestJSSDKInterop runs: `npm ci` from the
# committed lockfile, again whenever package.json or the lockfile changes (the stamp
# lives in node_modules, so removing node_modules reinstalls). Without npm the test
# skips, except under CI=true, where both this target and the test fail.
JSCLIENT_DIR   := internal/a2a/testdata/jsclient
JSCLIENT_STAMP := $(JSCLIENT_DIR)/node_modules/.molt-installed

jsclient: $(JSCLIENT_STAMP) ## install the pinned @a2a-js/sdk for the A2A interop test (npm ci)

$(JSCLIENT_STAMP): $(JSCLIENT_DIR)/package.json $(JSCLIENT_DIR)/package-lock.json
	@if ! command -v npm >/dev/null; then \
		if [[ "$${CI:-}" == true ]]; then echo "npm is required (node 20+) for the A2A JS SDK interop test" >&2; exit 1; fi; \
		echo "npm not found: the A2A JS SDK interop test will be skipped"; exit 0; \
	fi; \
	echo "npm ci in $(JSCLIENT_DIR)"; \
	cd $(JSCLIENT_DIR) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && touch $(CURDIR)/$@

# ---- checks --------------------------------------------------------------------------
vet: $(STAMPS)/staticcheck-$(STATICCHECK_VERSION) ## gofmt check, go vet and staticcheck
	@out=$$(gofmt -l $(wildcard cmd functions internal scripts)); \
	if [[ -n $$out ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS_BIN)/staticcheck ./...

test: tools jsclient vet ## every test, against a private kumo (or AWS_ENDPOINT_URL if set)
	scripts/with-emulator.sh $(GO) test $(TEST_FLAGS) ./...

# ---- build ---------------------------------------------------------------------------
build: bootstraps zips molt ## bootstrap + zip per function (ARCH=arm64|amd64) and build/molt

bootstraps: $(BOOTSTRAPS) ## only the bootstraps (BUILD_DIR=… to build elsewhere)
	@if [[ -z "$(FUNCTIONS)" ]]; then echo "no functions/*/main.go yet"; fi

zips: $(ZIPS)

# Always re-run go build: the Go build cache makes it cheap, and make cannot see
# which of the package's dependencies changed.
$(BUILD_DIR)/%/bootstrap: FORCE
	GOARCH=$(ARCH) $(LAMBDA_BUILD) -o $@ ./functions/$*

$(BUILD_DIR)/%.zip: $(BUILD_DIR)/%/bootstrap
	$(GO) run ./scripts/zip -o $@ $<

molt: ## build/molt for this machine
	@if [[ -d cmd/molt ]]; then $(GO_BUILD) -o $(BUILD_DIR)/molt ./cmd/molt; else echo "no cmd/molt yet"; fi

# sam build (BuildMethod: makefile) runs `make build-<LogicalId>` with ARTIFACTS_DIR set.
# A function's logical id is its folder name in CamelCase plus "Function":
# ApiFunction → functions/api, RunWorkerFunction → functions/run-worker. Same flags as
# `make build`, for the template's architecture.
build-%Function: ## sam build: make build-ApiFunction ARTIFACTS_DIR=… (arm64 bootstrap)
	@if [[ -z "$(ARTIFACTS_DIR)" ]]; then echo "$@: ARTIFACTS_DIR is not set (sam build sets it)" >&2; exit 2; fi
	@fn=$$(sed -E 's/([a-z0-9])([A-Z])/\1-\2/g' <<<'$*' | tr '[:upper:]' '[:lower:]'); \
	if [[ ! -f functions/$$fn/main.go ]]; then echo "$@: no functions/$$fn/main.go" >&2; exit 2; fi; \
	echo "GOARCH=$(SAM_ARCH) $(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$$fn"; \
	GOARCH=$(SAM_ARCH) $(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$$fn

FORCE:

# ---- run -----------------------------------------------------------------------------
run: molt ## build and start `molt serve` (API on 127.0.0.1:8080, data in ./.molt)
	$(BUILD_DIR)/molt serve

# ---- bench ---------------------------------------------------------------------------
bench: tools build ## benchmarks, bootstrap sizes and RIE cold starts
	@echo "bootstrap sizes ($(ARCH)):"; ls -l $(BUILD_DIR)/*/bootstrap
	@pkgs=$$(grep -rlE --include='*_test.go' '^func Benchmark' cmd functions internal 2>/dev/null | xargs -r -n1 dirname | sort -u | sed 's|^|./|'); \
	if [[ -z $$pkgs ]]; then echo "no benchmarks"; exit 0; fi; \
	echo "benchmarks in:" $$pkgs; \
	scripts/with-emulator.sh $(GO) test $(BENCH_FLAGS) $$pkgs

bench-peer: ## molt against River on PostgreSQL, alternating rounds (installs PostgreSQL if missing; not part of test)
	scripts/bench-peer.sh

# ---- clean ---------------------------------------------------------------------------
clean: ## remove build outputs (build/, .aws-sam/)
	rm -rf $(BUILD_DIR) .aws-sam

clean-tools: ## remove the installed tools (.tools/)
	rm -rf $(TOOLS_DIR)
