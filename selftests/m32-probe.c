// SPDX-License-Identifier: GPL-2.0
/*
 * Built -m32: exits 0 where the kernel runs i386 binaries with what the
 * -m32 selftests need from it, 1 where a 32-bit-time_t futex (the i386
 * futex syscall glibc's threads use) is missing (CONFIG_COMPAT_32BIT_TIME
 * off).  run-in-vm.sh then counts the -m32 tests skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	int word = 0;

	/* No waiter: 0 woken, or ENOSYS without the 32-bit time syscalls. */
	return syscall(SYS_futex, &word, FUTEX_WAKE, 1, NULL, NULL, 0) < 0 && errno == ENOSYS;
}
