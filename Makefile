# SPDX-License-Identifier: GPL-2.0
# peerdirect: `make check` runs every test, `make demo` tells the story.
# Both install the Debian packages they need first (scripts/install-deps.sh).

KDIR ?= $(shell scripts/kdir.sh)
BUILD := build
SELFTESTS := uapi alloc export revoke events lifetime importers multidev subscribe limits list trace admin compat32 faults stress fuzz kbench unplug zeroing
SELFTEST_BINS := $(addprefix $(BUILD)/selftests/,$(SELFTESTS))
# The same tests built as i386 binaries reach the compat ioctl entry with a
# 32-bit process's layout and pointers.  gcc-multilib (scripts/install-deps.sh)
# gives -m32 a static libc; without it these are not built, and the VM runner
# reports them skipped.
M32_SELFTESTS := uapi events subscribe list
HAVE_M32 := $(shell echo 'int main(void) { return 0; }' | \
	$(CC) -m32 -static -x c -o /dev/null - 2>/dev/null && echo y)
ifeq ($(HAVE_M32),y)
SELFTEST_BINS += $(patsubst %,$(BUILD)/selftests/%-m32,$(M32_SELFTESTS)) $(BUILD)/selftests/m32-probe
endif
KSFT := $(BUILD)/kselftest/kselftest_harness.h
KSRC = $(filter-out %.mod.c,$(wildcard kmod/*.[ch] selftests/importer/*.[ch] uapi/linux/*.h))

.PHONY: all deps modules selftests user check demo fuzz-long bench perf-report kbench checkpatch sparse install clean \
	support-matrix install-modules install-udev install-user install-man uninstall dkms-source man-lint \
	package package-test dkms-test

all: modules selftests user

deps:
	scripts/install-deps.sh

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) PD_VERSION=$(VERSION) modules

$(KSFT):
	scripts/kselftest-headers.sh $(BUILD)/kselftest

selftests: $(SELFTEST_BINS) $(BUILD)/selftests/pdctl

# pdctl for the VMs (selftests/admin.c runs it): static, like the selftests.
# Static glibc cannot dlopen reliably (the shared libraries must come from
# the very glibc it was linked with), so this build links
# user/tools/pdctl/static.c in place of dl.c and doctor_libs.c: it loads no
# library, and the doctor's libibverbs/libfabric/libpeerdirect checks
# report "skip".  The packaged, dynamic pdctl has them.
PDCTL_VM_SRC := $(addprefix user/tools/pdctl/,main.c json.c sysfs.c devices.c exports.c events.c \
	revoke.c bind.c ps.c topo.c doctor.c doctor_report.c doctor_host.c doctor_pci.c static.c)
$(BUILD)/selftests/pdctl: $(PDCTL_VM_SRC) $(wildcard user/tools/pdctl/*.h) $(wildcard user/tools/tool_*.h) \
		user/common/pci_path.h uapi/linux/peerdirect.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -static -Iuapi -Iuser/common \
		-DPD_VERSION='"$(VERSION)"' -o $@ $(PDCTL_VM_SRC)

# Static, so the VM image needs no libraries for them.
$(BUILD)/selftests/%: selftests/%.c selftests/pd_test.h uapi/linux/peerdirect.h \
		selftests/importer/pd_test_importer.h $(KSFT)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Werror -static -pthread -I$(BUILD)/kselftest -o $@ $<

# Exits 0 where the kernel runs i386 binaries and gives them the 32-bit
# time_t futex that i386 glibc's threads use (run-in-vm.sh asks first).
$(BUILD)/selftests/m32-probe: selftests/m32-probe.c
	@mkdir -p $(dir $@)
	$(CC) -m32 -static -O2 -Wall -Werror -o $@ $<

# 6.1's harness casts pointers to intmax_t in its comparisons: on i386 that
# warns about the harness, not about the tests.
$(BUILD)/selftests/%-m32: selftests/%.c selftests/pd_test.h uapi/linux/peerdirect.h \
		selftests/importer/pd_test_importer.h $(KSFT)
	@mkdir -p $(dir $@)
	$(CC) -m32 -O2 -g -Wall -Werror -Wno-pointer-to-int-cast -Wno-int-to-pointer-cast \
		-static -pthread -I$(BUILD)/kselftest -o $@ $<

user:
	$(MAKE) -C user all

check: deps
	scripts/check.sh

demo: deps
	scripts/demo.sh

# libpeerdirect's API fuzzer for FUZZ_SECONDS (default 600) under ASan.
fuzz-long: deps
	$(MAKE) -C user fuzz-long

bench: deps
	scripts/bench.sh

# Every performance figure the project claims, each with its command, into
# build/perf-report/ (Documentation/performance.md quotes the latest).
perf-report:
	scripts/perf-report.sh

# From the last `make check`, never by hand.
kbench: deps
	scripts/kbench.sh

support-matrix:
	scripts/support-matrix.sh build/check > Documentation/support-matrix.md

checkpatch: $(KSFT)
	perl $(BUILD)/kselftest/scripts/checkpatch.pl --strict --no-tree --quiet \
		--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG -f $(KSRC)

sparse:
	$(MAKE) -C $(KDIR) M=$(CURDIR) PD_VERSION=$(VERSION) C=2 modules 2>&1 | \
		awk '/warning:|error:/ { bad = 1 } { print } END { exit bad }'

# ---- installing ----------------------------------------------------------
# `make install` from a source tree: the module for the kernel in KDIR, the
# udev rule and group, the library, its header, pkg-config file and tools,
# and the man pages.  DESTDIR (and INSTALL_MOD_PATH, default DESTDIR) stage
# it elsewhere; then nothing on this machine is touched (no depmod, no
# group).  The test importer is never installed: PD_TEST_IMPORTER=n.
# The Debian packages and DKMS (scripts/packaging) are the better way.
# scripts/version.sh: the base release plus the commit, the one version the
# module (PD_VERSION), DKMS, the packages, the library and tools carry.
VERSION := $(shell scripts/version.sh)
PREFIX ?= /usr/local
MANDIR ?= $(PREFIX)/share/man
UDEVRULESDIR ?= /etc/udev/rules.d
INSTALL_MOD_PATH ?= $(DESTDIR)
MANPAGES := $(wildcard Documentation/man/*.[1-8])
# Debian's headers carry no signing key: sign only where the key is there
# (DKMS signs with its own MOK key).
PD_SIG_KEY = $(shell sed -n 's/^CONFIG_MODULE_SIG_KEY="*\([^"]*\)"*$$/\1/p' $(KDIR)/include/config/auto.conf 2>/dev/null)
PD_NOSIGN = $(if $(PD_SIG_KEY),$(if $(wildcard $(PD_SIG_KEY) $(KDIR)/$(PD_SIG_KEY)),,CONFIG_MODULE_SIG_ALL=))
# The release modules_install uses: the directory above build/, else the
# tree's own kernelrelease.
KVER = $(if $(filter /lib/modules/%/build,$(KDIR)),$(patsubst /lib/modules/%/build,%,$(KDIR)),$(shell $(MAKE) -s --no-print-directory -C $(KDIR) kernelrelease))

install: install-modules install-user install-man

install-modules: install-udev
	$(MAKE) -C $(KDIR) M=$(CURDIR) PD_VERSION=$(VERSION) PD_TEST_IMPORTER=n modules
	$(MAKE) -C $(KDIR) M=$(CURDIR) PD_VERSION=$(VERSION) PD_TEST_IMPORTER=n $(PD_NOSIGN) \
		INSTALL_MOD_PATH=$(INSTALL_MOD_PATH) modules_install
ifeq ($(INSTALL_MOD_PATH)$(DESTDIR),)
	depmod -a $(KVER)
endif

# The rule and the group alone: for a module DKMS builds.
install-udev:
	install -D -m 0644 kmod/60-peerdirect.rules $(DESTDIR)$(UDEVRULESDIR)/60-peerdirect.rules
	# Persistent binding: the rule names the helper at this fixed path; an
	# admin's devices.conf is never overwritten.
	install -D -m 0644 kmod/61-peerdirect-bind.rules $(DESTDIR)$(UDEVRULESDIR)/61-peerdirect-bind.rules
	install -D -m 0755 kmod/peerdirect-bind $(DESTDIR)/usr/lib/peerdirect/peerdirect-bind
	[ -e $(DESTDIR)/etc/peerdirect/devices.conf ] || \
		install -D -m 0644 kmod/devices.conf $(DESTDIR)/etc/peerdirect/devices.conf
ifeq ($(INSTALL_MOD_PATH)$(DESTDIR),)
	getent group peerdirect > /dev/null || groupadd --system peerdirect
	if udevadm control --reload 2> /dev/null; then \
		udevadm trigger --action=change --subsystem-match=misc --sysname-match='peerdirect*'; fi
endif

# What make install put there, for the kernel in KDIR; before the packages
# go on a node that had it: DKMS does not replace a module of the same
# version it finds installed.  The group stays (files may belong to it).
uninstall:
	rm -f $(wildcard $(INSTALL_MOD_PATH)/lib/modules/$(KVER)/extra/kmod/peerdirect.ko* \
		$(INSTALL_MOD_PATH)/lib/modules/$(KVER)/updates/kmod/peerdirect.ko*)
	rm -f $(DESTDIR)$(UDEVRULESDIR)/60-peerdirect.rules $(DESTDIR)$(UDEVRULESDIR)/61-peerdirect-bind.rules \
		$(DESTDIR)/usr/lib/peerdirect/peerdirect-bind
	# devices.conf goes only as installed: an admin's list stays, said so.
	if cmp -s kmod/devices.conf $(DESTDIR)/etc/peerdirect/devices.conf; then \
		rm -f $(DESTDIR)/etc/peerdirect/devices.conf; \
		rmdir $(DESTDIR)/etc/peerdirect 2>/dev/null || true; \
	elif [ -e $(DESTDIR)/etc/peerdirect/devices.conf ]; then \
		echo "uninstall: $(DESTDIR)/etc/peerdirect/devices.conf was edited: kept"; \
	fi
	$(MAKE) -C user uninstall PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)
	for p in $(MANPAGES); do rm -f $(DESTDIR)$(MANDIR)/man$${p##*.}/$${p##*/}; done
	scripts/packaging/man-links.sh $(MANPAGES) | while read -r page alias; do \
		rm -f $(DESTDIR)$(MANDIR)/man$${page##*.}/$$alias; done
ifeq ($(INSTALL_MOD_PATH)$(DESTDIR),)
	depmod -a $(KVER)
endif

install-user:
	$(MAKE) -C user install PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)

# Each page, and a link for every other name its NAME section documents.
install-man: $(MANPAGES)
	for p in $(MANPAGES); do \
		install -D -m 0644 $$p $(DESTDIR)$(MANDIR)/man$${p##*.}/$${p##*/} || exit 1; \
	done
	scripts/packaging/man-links.sh $(MANPAGES) | while read -r page alias; do \
		ln -sf $$page $(DESTDIR)$(MANDIR)/man$${page##*.}/$$alias || exit 1; \
	done

# The DKMS source tree, /usr/src/peerdirect-VERSION: Kbuild, kmod/, uapi/ and
# dkms.conf; no selftests/, so no test importer (the Debian package uses it).
# PACKAGE_VERSION is scripts/version.sh's, which DKMS passes on as PD_VERSION.
DKMS_SRC = $(DESTDIR)/usr/src/peerdirect-$(VERSION)
dkms-source:
	install -d $(DKMS_SRC)/kmod $(DKMS_SRC)/uapi/linux
	install -m 0644 Kbuild $(DKMS_SRC)/
	install -m 0644 $(filter-out %.mod.c,$(wildcard kmod/*.[ch])) kmod/Kbuild kmod/probes.mk $(DKMS_SRC)/kmod/
	install -m 0644 uapi/linux/*.h $(DKMS_SRC)/uapi/linux/
	sed 's/#MODULE_VERSION#/$(VERSION)/' scripts/packaging/dkms.conf.in > $(DKMS_SRC)/dkms.conf

# ---- packages and their tests ---------------------------------------------
# Man pages: mandoc -Tlint and man --warnings, any message fails.
man-lint:
	scripts/packaging/man-lint.sh $(MANPAGES)

# Debian packages into build/pkg/ (scripts/package.sh).
package:
	scripts/package.sh

# make install without the test importer, the packages (lintian, contents,
# install into a clean Debian 12 root), DKMS on every installed kernel and
# every kernel in the cache, loading its module in a VM.  TAP-like, "N passed, N failed".
package-test:
	scripts/package-test.sh

dkms-test:
	scripts/dkms-test.sh

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean || true
	$(MAKE) -C user clean || true
	rm -rf $(BUILD)
