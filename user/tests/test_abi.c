// SPDX-License-Identifier: MIT
/*
 * The ABI as a binary built against an earlier header sees it: layouts,
 * the exported symbols and their versions, the function table, and the
 * struct sizes crossing the boundary in both directions.  Run against the
 * shared object the packages install, loaded with dlopen.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include <linux/peerdirect.h>

#include "kselftest_harness.h"
#include "loopback.h"
#include "device.h"

/* struct pd_api's function slots, in order, by the symbol each holds. */
static const char *const api_slots[] = {
	"pd_last_error", "pd_strerror", "pd_device_open", "pd_device_close",
	"pd_device_query", "pd_device_alloc", "pd_device_free", "pd_device_export",
	"pd_device_revoke", "pd_device_read_events", "pd_fabric_attr_init",
	"pd_fabric_open", "pd_fabric_close", "pd_fabric_set_path", "pd_fabric_addr",
	"pd_fabric_insert", "pd_fabric_attach_device", "pd_fabric_poll_events",
	"pd_mr_reg_host", "pd_mr_reg_dmabuf", "pd_mr_dereg", "pd_mr_path",
	"pd_mr_reason", "pd_mr_rkey", "pd_fabric_cache_stats",
	"pd_fabric_set_cache_limits", "pd_tsend", "pd_trecv", "pd_write", "pd_test",
	"pd_wait", "pd_req_free", "pd_progress", "pd_mr_invalidate_host",
	/* 1.1 */
	"pd_device_fd", "pd_fabric_provider", "pd_fabric_chunk_size", "pd_path_name",
	"pd_path_parse", "pd_fabric_detach_device", "pd_mr_cpu_ptr", "pd_rdv_open",
	"pd_rdv_allgather", "pd_rdv_barrier", "pd_rdv_close", "pd_fabric_attr_init_sz",
	"pd_device_query_sz", "pd_device_export_sz", "pd_device_read_events_sz",
	"pd_fabric_cache_stats_sz", "pd_mr_rkey_sz", "pd_dmabuf_import",
	"pd_dmabuf_release", "pd_mr_reg_imported",
	/* 1.3 */
	"pd_fabric_progress_count", "pd_fabric_wait",
	/* 1.4 */
	"pd_fabric_domain", "pd_fabric_domains",
};

/* Every exported symbol with the version node that added it. */
static const char *const exported[] = {
	"pd_device_alloc@@LIBPEERDIRECT_1", "pd_device_close@@LIBPEERDIRECT_1",
	"pd_device_export@@LIBPEERDIRECT_1", "pd_device_fd@@LIBPEERDIRECT_1",
	"pd_device_free@@LIBPEERDIRECT_1", "pd_device_open@@LIBPEERDIRECT_1",
	"pd_device_query@@LIBPEERDIRECT_1", "pd_device_read_events@@LIBPEERDIRECT_1",
	"pd_device_revoke@@LIBPEERDIRECT_1", "pd_fabric_addr@@LIBPEERDIRECT_1",
	"pd_fabric_attach_device@@LIBPEERDIRECT_1", "pd_fabric_attr_init@@LIBPEERDIRECT_1",
	"pd_fabric_cache_stats@@LIBPEERDIRECT_1", "pd_fabric_chunk_size@@LIBPEERDIRECT_1",
	"pd_fabric_close@@LIBPEERDIRECT_1", "pd_fabric_detach_device@@LIBPEERDIRECT_1",
	"pd_fabric_insert@@LIBPEERDIRECT_1", "pd_fabric_open@@LIBPEERDIRECT_1",
	"pd_fabric_poll_events@@LIBPEERDIRECT_1", "pd_fabric_provider@@LIBPEERDIRECT_1",
	"pd_fabric_set_cache_limits@@LIBPEERDIRECT_1", "pd_fabric_set_path@@LIBPEERDIRECT_1",
	"pd_get_api@@LIBPEERDIRECT_1", "pd_last_error@@LIBPEERDIRECT_1",
	"pd_mr_cpu_ptr@@LIBPEERDIRECT_1", "pd_mr_dereg@@LIBPEERDIRECT_1",
	"pd_mr_invalidate_host@@LIBPEERDIRECT_1", "pd_mr_path@@LIBPEERDIRECT_1",
	"pd_mr_reason@@LIBPEERDIRECT_1", "pd_mr_reg_dmabuf@@LIBPEERDIRECT_1",
	"pd_mr_reg_host@@LIBPEERDIRECT_1", "pd_mr_rkey@@LIBPEERDIRECT_1",
	"pd_path_name@@LIBPEERDIRECT_1", "pd_path_parse@@LIBPEERDIRECT_1",
	"pd_progress@@LIBPEERDIRECT_1", "pd_rdv_allgather@@LIBPEERDIRECT_1",
	"pd_rdv_barrier@@LIBPEERDIRECT_1", "pd_rdv_close@@LIBPEERDIRECT_1",
	"pd_rdv_open@@LIBPEERDIRECT_1", "pd_req_free@@LIBPEERDIRECT_1",
	"pd_strerror@@LIBPEERDIRECT_1", "pd_test@@LIBPEERDIRECT_1",
	"pd_trecv@@LIBPEERDIRECT_1", "pd_tsend@@LIBPEERDIRECT_1",
	"pd_wait@@LIBPEERDIRECT_1", "pd_write@@LIBPEERDIRECT_1",
	"pd_device_export_sz@@LIBPEERDIRECT_1.1", "pd_device_query_sz@@LIBPEERDIRECT_1.1",
	"pd_device_read_events_sz@@LIBPEERDIRECT_1.1",
	"pd_fabric_attr_init_sz@@LIBPEERDIRECT_1.1",
	"pd_fabric_cache_stats_sz@@LIBPEERDIRECT_1.1", "pd_mr_rkey_sz@@LIBPEERDIRECT_1.1",
	"pd_dmabuf_import@@LIBPEERDIRECT_1.1", "pd_dmabuf_release@@LIBPEERDIRECT_1.1",
	"pd_mr_reg_imported@@LIBPEERDIRECT_1.1",
	"pd_fabric_progress_count@@LIBPEERDIRECT_1.3", "pd_fabric_wait@@LIBPEERDIRECT_1.3",
	"pd_fabric_domain@@LIBPEERDIRECT_1.4", "pd_fabric_domains@@LIBPEERDIRECT_1.4",
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define GUARD 0xa5

/* build/tests/test_abi -> build/libpeerdirect.so.1 */
static void so_path(char *path, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", path, len - 64);
	char *slash;

	path[n > 0 ? n : 0] = '\0';
	slash = strrchr(path, '/');
	*slash = '\0';
	slash = strrchr(path, '/');
	strcpy(slash + 1, "libpeerdirect.so.1");
}

static void *open_so(void)
{
	char path[PATH_MAX];

	so_path(path, sizeof(path));
	return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static bool all_bytes(const void *p, size_t len, unsigned char v)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < len; i++) {
		if (c[i] != v)
			return false;
	}
	return true;
}

/* The 1.0 layouts (LP64): only appending is allowed. */
TEST(layouts_are_frozen)
{
	if (sizeof(void *) != 8)
		SKIP(return, "offsets pinned for LP64");
	EXPECT_EQ(0, offsetof(struct pd_device_info, abi_major));
	EXPECT_EQ(4, offsetof(struct pd_device_info, abi_minor));
	EXPECT_EQ(8, offsetof(struct pd_device_info, features));
	EXPECT_EQ(16, offsetof(struct pd_device_info, backend));
	EXPECT_EQ(20, offsetof(struct pd_device_info, index));
	EXPECT_EQ(24, offsetof(struct pd_device_info, mem_size));
	EXPECT_EQ(32, offsetof(struct pd_device_info, mem_free));
	EXPECT_EQ(40, offsetof(struct pd_device_info, page_size));
	EXPECT_EQ(48, offsetof(struct pd_device_info, quota));
	EXPECT_EQ(56, offsetof(struct pd_device_info, quota_used));
	EXPECT_EQ(64, offsetof(struct pd_device_info, max_exports));
	EXPECT_EQ(68, offsetof(struct pd_device_info, max_events));
	EXPECT_EQ(72, sizeof(struct pd_device_info));
	EXPECT_EQ(0, offsetof(struct pd_export_info, fd));
	EXPECT_EQ(4, offsetof(struct pd_export_info, reserved));
	EXPECT_EQ(8, offsetof(struct pd_export_info, export_id));
	EXPECT_EQ(16, offsetof(struct pd_export_info, inode));
	EXPECT_EQ(24, sizeof(struct pd_export_info));
	EXPECT_EQ(0, offsetof(struct pd_event, reason));
	EXPECT_EQ(4, offsetof(struct pd_event, reserved));
	EXPECT_EQ(8, offsetof(struct pd_event, seq));
	EXPECT_EQ(16, offsetof(struct pd_event, export_id));
	EXPECT_EQ(24, offsetof(struct pd_event, handle));
	EXPECT_EQ(32, offsetof(struct pd_event, inode));
	EXPECT_EQ(40, offsetof(struct pd_event, offset));
	EXPECT_EQ(48, offsetof(struct pd_event, length));
	EXPECT_EQ(56, sizeof(struct pd_event));
	EXPECT_EQ(0, offsetof(struct pd_fabric_attr, size));
	EXPECT_EQ(4, offsetof(struct pd_fabric_attr, flags));
	EXPECT_EQ(8, offsetof(struct pd_fabric_attr, provider));
	EXPECT_EQ(16, offsetof(struct pd_fabric_attr, path));
	EXPECT_EQ(24, offsetof(struct pd_fabric_attr, chunk_size));
	EXPECT_EQ(32, offsetof(struct pd_fabric_attr, bounce_slots));
	EXPECT_EQ(40, offsetof(struct pd_fabric_attr, cache_max_entries));
	EXPECT_EQ(48, offsetof(struct pd_fabric_attr, cache_max_bytes));
	EXPECT_EQ(56, offsetof(struct pd_fabric_attr, queue_size));
	EXPECT_EQ(64, offsetof(struct pd_fabric_attr, universe_size));
	EXPECT_EQ(72, offsetof(struct pd_fabric_attr, max_pending));
	EXPECT_EQ(80, offsetof(struct pd_fabric_attr, peer_timeout_ms));
	EXPECT_EQ(88, offsetof(struct pd_fabric_attr, max_staging_bytes));
	EXPECT_EQ(96, offsetof(struct pd_fabric_attr, wait_spin_us));
	EXPECT_EQ(100, offsetof(struct pd_fabric_attr, reserved));
	EXPECT_EQ(104, offsetof(struct pd_fabric_attr, domain));
	EXPECT_EQ(112, sizeof(struct pd_fabric_attr));
	EXPECT_EQ(0, offsetof(struct pd_rkey, addr));
	EXPECT_EQ(8, offsetof(struct pd_rkey, key));
	EXPECT_EQ(16, offsetof(struct pd_rkey, len));
	EXPECT_EQ(24, sizeof(struct pd_rkey));
	EXPECT_EQ(0, offsetof(struct pd_cache_stats, lookups));
	EXPECT_EQ(8, offsetof(struct pd_cache_stats, hits));
	EXPECT_EQ(16, offsetof(struct pd_cache_stats, misses));
	EXPECT_EQ(24, offsetof(struct pd_cache_stats, evictions));
	EXPECT_EQ(32, offsetof(struct pd_cache_stats, invalidations));
	EXPECT_EQ(40, offsetof(struct pd_cache_stats, uncached));
	EXPECT_EQ(48, offsetof(struct pd_cache_stats, entries));
	EXPECT_EQ(56, offsetof(struct pd_cache_stats, bytes));
	EXPECT_EQ(64, offsetof(struct pd_cache_stats, reg_count));
	EXPECT_EQ(72, offsetof(struct pd_cache_stats, reg_failures));
	EXPECT_EQ(80, offsetof(struct pd_cache_stats, reg_ns));
	EXPECT_EQ(88, offsetof(struct pd_cache_stats, dereg_count));
	EXPECT_EQ(96, sizeof(struct pd_cache_stats));
	EXPECT_EQ(4, offsetof(struct pd_api, abi_major));
	EXPECT_EQ(6, offsetof(struct pd_api, abi_minor));
	EXPECT_EQ(8, offsetof(struct pd_api, last_error));
	EXPECT_EQ(272, offsetof(struct pd_api, mr_invalidate_host));
	EXPECT_EQ(280, offsetof(struct pd_api, device_fd));
	EXPECT_EQ(408, offsetof(struct pd_api, mr_rkey_sz));
	EXPECT_EQ(440, offsetof(struct pd_api, fabric_progress_count));
	EXPECT_EQ(456, offsetof(struct pd_api, fabric_domain));
	EXPECT_EQ(464, offsetof(struct pd_api, fabric_domains));
	EXPECT_EQ(472, sizeof(struct pd_api));
}

/* The shared object exports exactly the frozen list, each symbol in the
 * version node that added it (a symbol never moves or goes). */
TEST(symbols_and_versions_are_frozen)
{
	char path[PATH_MAX], cmd[PATH_MAX + 64], line[512], name[256];
	unsigned int seen = 0, i;
	bool found;
	FILE *p;

	so_path(path, sizeof(path));
	snprintf(cmd, sizeof(cmd), "readelf --dyn-syms -W '%s'", path);
	p = popen(cmd, "r");
	ASSERT_NE(NULL, p);
	while (fgets(line, sizeof(line), p)) {
		if (!strstr(line, " FUNC ") || !strstr(line, " GLOBAL ") || strstr(line, " UND "))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %255s", name) != 1 ||
		    strncmp(name, "pd_", 3))
			continue;
		found = false;
		for (i = 0; i < N(exported); i++)
			found |= !strcmp(name, exported[i]);
		EXPECT_TRUE(found) TH_LOG("%s is exported but not in the frozen list (or moved version)", name);
		seen++;
	}
	pclose(p);
	EXPECT_EQ(N(exported), seen) TH_LOG("a frozen symbol is missing from the library");
}

/* "X", "X.Y" or "X.Y.Z" as one comparable number, ignoring a build's
 * "+N.gitDATE.HASH" (scripts/version.sh); -1 when it is none. */
static long version_number(const char *v)
{
	unsigned long part[3] = { 0, 0, 0 };
	unsigned int i;
	char *end;

	for (i = 0; i < 3; i++) {
		if (*v < '0' || *v > '9')
			return -1;
		part[i] = strtoul(v, &end, 10);
		if (!*end || *end == '+')
			return part[0] * 1000000L + part[1] * 1000L + part[2];
		if (*end != '.')
			return -1;
		v = end + 1;
	}
	return -1;
}

/* Each version node of the linker map has its "(symver)NODE VERSION" line in
 * the Debian symbols file, VERSION a release at least as new as the node and
 * no newer than this one, without a Debian revision: otherwise
 * dpkg-gensymbols invents "VERSION-1" lines and lintian fails the package
 * (symbols-file-contains-current-version-with-debian-revision). */
TEST(every_version_node_is_in_the_debian_symbols_file)
{
	char line[512], node[128], want[160], ver[64];
	unsigned int nodes = 0;
	FILE *map, *sym;
	bool found;

	map = fopen(PD_TOP "/user/lib/libpeerdirect.map", "r");
	ASSERT_NE(NULL, map);
	sym = fopen(PD_TOP "/scripts/packaging/debian/libpeerdirect1.symbols", "r");
	ASSERT_NE(NULL, sym);
	while (fgets(line, sizeof(line), map)) {
		if (sscanf(line, "LIBPEERDIRECT_%63[0-9.] {", ver) != 1)
			continue;
		snprintf(node, sizeof(node), "LIBPEERDIRECT_%s", ver);
		nodes++;
		snprintf(want, sizeof(want), " (symver)%s ", node);
		found = false;
		rewind(sym);
		while (fgets(line, sizeof(line), sym)) {
			if (strncmp(line, want, strlen(want)) ||
			    sscanf(line + strlen(want), "%63s", ver) != 1)
				continue;
			found = true;
			EXPECT_EQ(NULL, strchr(ver, '-')) TH_LOG("%s: %s has a Debian revision", node, ver);
			EXPECT_LE(version_number(node + strlen("LIBPEERDIRECT_")),
				  version_number(ver)) TH_LOG("%s: %s is older than the node", node, ver);
			EXPECT_LE(version_number(ver), version_number(PD_VERSION))
				TH_LOG("%s: %s is newer than this release %s", node, ver, PD_VERSION);
		}
		EXPECT_TRUE(found) TH_LOG("%s has no (symver) line in the symbols file", node);
	}
	EXPECT_LE(2, nodes);
	fclose(sym);
	fclose(map);
}

/* A runtime that dlsyms pd_get_api alone reaches every function. */
TEST(api_table_reaches_every_exported_function)
{
	const struct pd_api *api;
	pd_get_api_fn get;
	unsigned int i, j;
	void *h = open_so();

	ASSERT_NE(NULL, h) TH_LOG("%s", dlerror());
	get = (pd_get_api_fn)dlsym(h, "pd_get_api");
	ASSERT_NE(NULL, get);
	ASSERT_EQ(0, get(PD_ABI_MAJOR, PD_ABI_MINOR, &api));
	ASSERT_EQ(offsetof(struct pd_api, last_error) + N(api_slots) * sizeof(void (*)(void)),
		  api->size);
	for (i = 0; i < N(api_slots); i++) {
		void *sym = dlsym(h, api_slots[i]), *slot;

		memcpy(&slot, (const char *)api + offsetof(struct pd_api, last_error) +
		       i * sizeof(void (*)(void)), sizeof(slot));
		EXPECT_TRUE(sym && slot == sym) TH_LOG("slot %u is not %s", i, api_slots[i]);
	}
	for (i = 0; i < N(exported); i++) {
		bool found = !strncmp(exported[i], "pd_get_api@", 11);

		for (j = 0; j < N(api_slots) && !found; j++)
			found = !strncmp(exported[i], api_slots[j], strlen(api_slots[j])) &&
				exported[i][strlen(api_slots[j])] == '@';
		EXPECT_TRUE(found) TH_LOG("%s is not in struct pd_api", exported[i]);
	}
	dlclose(h);
}

/*
 * A binary built against 1.0 calls pd_fabric_attr_init on its own, shorter
 * struct: the library must not write its own size there (the caller's
 * stack), and the library must accept the result.
 */
TEST(old_binary_attr_init_writes_only_its_struct)
{
	struct {
		unsigned char attr[offsetof(struct pd_fabric_attr, universe_size) + sizeof(size_t)];
		unsigned char guard[64];
	} old;
	void (*init)(void *);
	int (*open_fab)(const void *, struct pd_fabric **);
	void (*close_fab)(struct pd_fabric *);
	struct pd_fabric *fab;
	uint32_t size;
	void *h = open_so();

	ASSERT_NE(NULL, h) TH_LOG("%s", dlerror());
	*(void **)&init = dlsym(h, "pd_fabric_attr_init");
	*(void **)&open_fab = dlsym(h, "pd_fabric_open");
	*(void **)&close_fab = dlsym(h, "pd_fabric_close");
	ASSERT_TRUE(init && open_fab && close_fab);
	memset(&old, GUARD, sizeof(old));
	init(old.attr);
	EXPECT_TRUE(all_bytes(old.guard, sizeof(old.guard), GUARD))
		TH_LOG("pd_fabric_attr_init wrote past a 1.0 caller's struct");
	memcpy(&size, old.attr, sizeof(size));
	EXPECT_EQ(sizeof(old.attr), size);
	EXPECT_TRUE(all_bytes(old.attr + 4, sizeof(old.attr) - 4, 0));
	ASSERT_EQ(0, open_fab(old.attr, &fab));
	close_fab(fab);
	dlclose(h);
}

/*
 * A dlopen caller built against 1.1 initialises its attr through the
 * table's sized slot: the library sees the whole struct and the fields
 * 1.1 added (max_pending here) take effect.  The 1.0 slot would have
 * written the 1.0 size and they would be ignored; the header warns a
 * caller off it (the Makefile's header check compiles one).
 */
TEST(table_sized_attr_init_carries_the_1_1_fields)
{
	struct pd_mr *mr;
	struct pd_req *r1 = NULL, *r2 = NULL;
	static char page[8192] __attribute__((aligned(4096)));
	const struct pd_api *api;
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	uint64_t me;

	ASSERT_EQ(0, pd_get_api(PD_ABI_MAJOR, PD_ABI_MINOR, &api));
	memset(&attr, GUARD, sizeof(attr));
	api->fabric_attr_init_sz(&attr, sizeof(attr));
	EXPECT_EQ(sizeof(attr), attr.size);
	attr.max_pending = 1;
	attr.chunk_size = 4096;
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, api->mr_reg_host(fab, page, sizeof(page), 0, &mr));
	/* Two-chunk receives from any peer, nobody sending: chunk 1 waits for
	 * chunk 0 to name its sender, so one request stays pending and the
	 * second is one too many. */
	EXPECT_EQ(0, api->trecv(fab, mr, 0, sizeof(page), PD_ANY_PEER, 1, &r1)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EAGAIN, api->trecv(fab, mr, 0, sizeof(page), PD_ANY_PEER, 1, &r2));
	api->req_free(r1);
	api->req_free(r2);
	api->mr_dereg(mr);
	api->fabric_close(fab);
}

/* A caller newer than the library: zero fields it added are fine, set
 * ones are refused rather than silently ignored. */
TEST(newer_callers_attr_is_read_up_to_what_the_library_knows)
{
	struct {
		struct pd_fabric_attr attr;
		uint64_t added;
	} newer;
	struct pd_fabric *fab;

	pd_fabric_attr_init_sz(&newer.attr, sizeof(newer));
	EXPECT_EQ(sizeof(newer), newer.attr.size);
	EXPECT_EQ(0, newer.added);
	newer.attr.provider = "tcp";
	ASSERT_EQ(0, pd_fabric_open(&newer.attr, &fab)) TH_LOG("%s", pd_last_error());
	pd_fabric_close(fab);
	newer.added = 1;
	EXPECT_EQ(-E2BIG, pd_fabric_open(&newer.attr, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "newer")) TH_LOG("%s", pd_last_error());
}

/*
 * A size no struct pd_fabric_attr has: init leaves the struct alone and
 * says why; open refuses a garbage size (an attr never initialised)
 * instead of scanning gigabytes past the caller's struct for set bytes.
 */
TEST(a_bad_attr_size_is_refused_not_trusted)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab = NULL;

	memset(&attr, 0xab, sizeof(attr));
	pd_fabric_attr_init_sz(&attr, 3);
	EXPECT_NE(NULL, strstr(pd_last_error(), "not a size of struct pd_fabric_attr"))
		TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0xababababu, attr.size);
	pd_fabric_attr_init_sz(&attr, 1u << 30);
	EXPECT_NE(NULL, strstr(pd_last_error(), "size 1073741824")) TH_LOG("%s", pd_last_error());
	pd_fabric_attr_init(&attr);
	attr.size = 0x7fffffff;
	EXPECT_EQ(-EINVAL, pd_fabric_open(&attr, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "initialise it with pd_fabric_attr_init"))
		TH_LOG("%s", pd_last_error());
	EXPECT_EQ(NULL, fab);
}

/*
 * 1.2's cap on bounce staging beyond the pool applies to callers that know
 * the field: a 1.1 binary's 88-byte attr keeps 1.1's behaviour (no cap)
 * unless the environment sets one.  Before, it got the 1 GiB default it
 * never chose, and a pattern that worked could get -EAGAIN for ever.
 */
TEST(staging_cap_default_only_for_callers_that_know_it)
{
	const size_t size_1_1 = offsetof(struct pd_fabric_attr, max_staging_bytes);
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;

	unsetenv("PEERDIRECT_MAX_STAGING_BYTES");
	pd_fabric_attr_init_sz(&attr, size_1_1);
	attr.provider = "tcp";
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(SIZE_MAX, fab->max_staging);
	pd_fabric_close(fab);
	setenv("PEERDIRECT_MAX_STAGING_BYTES", "64K", 1);
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(65536, fab->max_staging);
	pd_fabric_close(fab);
	unsetenv("PEERDIRECT_MAX_STAGING_BYTES");
	pd_fabric_attr_init(&attr);
	attr.provider = "tcp";
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ((size_t)1 << 30, fab->max_staging);
	pd_fabric_close(fab);
	/* A NULL attr cannot say which ABI its caller knows: 1.1's. */
	setenv("PEERDIRECT_PROVIDER", "tcp", 1);
	ASSERT_EQ(0, pd_fabric_open(NULL, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(SIZE_MAX, fab->max_staging);
	pd_fabric_close(fab);
	unsetenv("PEERDIRECT_PROVIDER");
}

/* Output structs: a shorter (older) caller's struct is not overrun, a
 * longer (newer) one gets zeros for what the library does not know, and
 * *filled says how much was the library's. */
TEST(output_structs_fill_what_the_caller_has)
{
	struct {
		struct pd_cache_stats st;
		uint64_t added[2];
	} big;
	struct {
		unsigned char st[offsetof(struct pd_cache_stats, uncached)];
		unsigned char guard[64];
	} small;
	struct {
		struct pd_rkey rk;
		uint64_t added;
	} rk;
	static char page[4096] __attribute__((aligned(4096)));
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_mr *mr;
	uint64_t me;
	size_t filled = 0;

	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me));
	ASSERT_EQ(0, pd_mr_reg_host(fab, page, sizeof(page), PD_ACCESS_REMOTE_WRITE, &mr));

	memset(&big, GUARD, sizeof(big));
	ASSERT_EQ(0, pd_fabric_cache_stats_sz(fab, &big.st, sizeof(big), &filled));
	EXPECT_EQ(sizeof(struct pd_cache_stats), filled);
	EXPECT_EQ(1, big.st.misses);
	EXPECT_TRUE(all_bytes(big.added, sizeof(big.added), 0));

	memset(&small, GUARD, sizeof(small));
	EXPECT_EQ(-EINVAL, pd_fabric_cache_stats_sz(fab, (void *)small.st, sizeof(small.st), &filled));
	EXPECT_TRUE(all_bytes(&small, sizeof(small), GUARD));

	memset(&rk, GUARD, sizeof(rk));
	ASSERT_EQ(0, pd_mr_rkey_sz(mr, &rk.rk, sizeof(rk), &filled));
	EXPECT_EQ(sizeof(struct pd_rkey), filled);
	EXPECT_EQ(4096, rk.rk.len);
	EXPECT_EQ(0, rk.added);
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
}

/* Events go into the caller's array with the caller's stride. */
TEST(events_use_the_callers_record_size)
{
	struct {
		struct pd_event ev;
		uint64_t added[2];
	} got[3];
	struct peerdirect_event k[2] = {
		{ .hdr = { PEERDIRECT_EVENT_REVOKE, sizeof(k[0]) }, .reason = PEERDIRECT_REASON_FREE, .seq = 1, .export_id = 5 },
		{ .hdr = { PEERDIRECT_EVENT_REVOKE, sizeof(k[0]) }, .reason = PEERDIRECT_REASON_REVOKE, .seq = 2, .export_id = 6 },
	};
	struct pd_device *dev;
	int sv[2];

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, pd_device_wrap_fd(sv[0], 3, &dev));
	ASSERT_EQ(sizeof(k), send(sv[1], k, sizeof(k), 0));
	memset(got, GUARD, sizeof(got));
	ASSERT_EQ(2, pd_device_read_events_sz(dev, &got[0].ev, sizeof(got[0]), 3, 1000))
		TH_LOG("%s", pd_last_error());
	EXPECT_EQ(5, got[0].ev.export_id);
	EXPECT_EQ(6, got[1].ev.export_id);
	EXPECT_TRUE(all_bytes(got[0].added, sizeof(got[0].added), 0));
	EXPECT_TRUE(all_bytes(&got[2], sizeof(got[2]), GUARD));
	EXPECT_EQ(-EINVAL, pd_device_read_events_sz(dev, &got[0].ev, 8, 3, 0));
	pd_device_close(dev);
	close(sv[1]);
}

TEST_HARNESS_MAIN
