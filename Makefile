# omni — the two commands of the README, and their pieces.
#
#   make demo   set-up, build, run the main job (the CPU FlowGRPO demo)
#   make test   set-up, build, run every test (lit + GoogleTest via ctest)
#
# BUILD_DIR and JOBS may be overridden: make test BUILD_DIR=/tmp/b JOBS=4

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# assert() stays on in the Release build that tests and CI run (README,
# "Assertions"); ASSERTIONS=OFF for a build that measures speed. Read when
# BUILD_DIR is first configured.
ASSERTIONS ?= ON
# ccache: paths relative to the checkout, so clones share cache entries.
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: all deps configure build test demo check-lit clean

all: build

deps:
	@bash tools/setup/install-deps.sh

$(BUILD_DIR)/build.ninja: | deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DOMNI_ASSERTIONS=$(ASSERTIONS) >/dev/null \
	  || cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DOMNI_ASSERTIONS=$(ASSERTIONS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	@ninja -C $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

check-lit: build
	@ninja -C $(BUILD_DIR) check-omni

demo: build
	@bash examples/demo.sh $(BUILD_DIR)

clean:
	@rm -rf $(BUILD_DIR)
