# SPDX-License-Identifier: GPL-2.0
# peerdirect: `make check` runs every test, `make demo` tells the story.
# Both install the Debian packages they need first (scripts/install-deps.sh).

KDIR ?= $(shell scripts/kdir.sh)
BUILD := build
SELFTESTS := uapi alloc export revoke events lifetime importers multidev faults unplug
SELFTEST_BINS := $(addprefix $(BUILD)/selftests/,$(SELFTESTS))
KSFT := $(BUILD)/kselftest/kselftest_harness.h
KSRC = $(filter-out %.mod.c,$(wildcard kmod/*.[ch] selftests/importer/*.[ch] uapi/linux/*.h))

.PHONY: all deps modules selftests user check demo bench checkpatch sparse install clean \
	support-matrix

all: modules selftests user

deps:
	scripts/install-deps.sh

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

$(KSFT):
	scripts/kselftest-headers.sh $(BUILD)/kselftest

selftests: $(SELFTEST_BINS)

# Static, so the VM image needs no libraries for them.
$(BUILD)/selftests/%: selftests/%.c selftests/pd_test.h uapi/linux/peerdirect.h \
		selftests/importer/pd_test_importer.h $(KSFT)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -static -pthread -I$(BUILD)/kselftest -o $@ $<

user:
	$(MAKE) -C user all

check: deps
	scripts/check.sh

demo: deps
	scripts/demo.sh

bench: deps
	scripts/bench.sh

# From the last `make check`, never by hand.
support-matrix:
	scripts/support-matrix.sh build/check > Documentation/support-matrix.md

checkpatch: $(KSFT)
	perl $(BUILD)/kselftest/scripts/checkpatch.pl --strict --no-tree --quiet \
		--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG -f $(KSRC)

sparse:
	$(MAKE) -C $(KDIR) M=$(CURDIR) C=2 modules 2>&1 | \
		awk '/warning:|error:/ { bad = 1 } { print } END { exit bad }'

install: modules
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules_install
	install -D -m 0644 kmod/60-peerdirect.rules /etc/udev/rules.d/60-peerdirect.rules
	depmod -a $(notdir $(patsubst %/build,%,$(KDIR)))

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean || true
	$(MAKE) -C user clean || true
	rm -rf $(BUILD)
