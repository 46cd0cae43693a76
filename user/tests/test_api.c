// SPDX-License-Identifier: MIT
/* The versioned table, dlopen, errors and bad input on every entry point. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>

#include "kselftest_harness.h"
#include "peer_pair.h"
#include "errors.h"
#include "fabric.h"

TEST(get_api_accepts_same_and_older_minor_refuses_newer)
{
	const struct pd_api *api = NULL;

	ASSERT_EQ(0, pd_get_api(PD_ABI_MAJOR, PD_ABI_MINOR, &api));
	EXPECT_EQ(sizeof(struct pd_api), api->size);
	EXPECT_EQ(PD_ABI_MAJOR, api->abi_major);
	EXPECT_EQ(PD_ABI_MINOR, api->abi_minor);
	EXPECT_TRUE(api->tsend == pd_tsend);
	EXPECT_TRUE(api->mr_reg_dmabuf == pd_mr_reg_dmabuf);
	EXPECT_TRUE(api->mr_invalidate_host == pd_mr_invalidate_host);
	EXPECT_EQ(-ENOTSUP, pd_get_api(PD_ABI_MAJOR, PD_ABI_MINOR + 1, &api));
	EXPECT_NE(NULL, strstr(pd_last_error(), "is older than"));
	EXPECT_EQ(-ENOTSUP, pd_get_api(PD_ABI_MAJOR + 1, 0, &api));
	EXPECT_NE(NULL, strstr(pd_last_error(), "major version 2"));
	EXPECT_EQ(-EINVAL, pd_get_api(PD_ABI_MAJOR, 0, NULL));
}

/* What a runtime does: dlopen the shared object, dlsym one symbol. */
TEST(dlopen_and_one_symbol_is_enough)
{
	char path[PATH_MAX], *slash;
	const struct pd_api *api;
	pd_get_api_fn get;
	struct pd_fabric *fab;
	void *h;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 64);

	ASSERT_LT(0, n);
	path[n] = '\0';
	slash = strrchr(path, '/');
	*slash = '\0';
	slash = strrchr(path, '/');	/* build/tests/x -> build/ */
	strcpy(slash + 1, "libpeerdirect.so.1");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ASSERT_NE(NULL, h) TH_LOG("%s", dlerror());
	get = (pd_get_api_fn)dlsym(h, "pd_get_api");
	ASSERT_NE(NULL, get);
	/* Internals stay hidden. */
	EXPECT_EQ(NULL, dlsym(h, "pd_mr_cache_get"));
	ASSERT_EQ(0, get(PD_ABI_MAJOR, PD_ABI_MINOR, &api));
	EXPECT_EQ(-EINVAL, api->fabric_open(NULL, NULL));
	EXPECT_NE(NULL, strstr(api->last_error(), "out is NULL"));
	ASSERT_EQ(0, api->fabric_open(NULL, &fab)) TH_LOG("%s", api->last_error());
	api->fabric_close(fab);
	dlclose(h);
}

TEST(errors_are_negative_errno_with_text)
{
	EXPECT_STREQ("Connection timed out", pd_strerror(-ETIMEDOUT));
	EXPECT_STREQ(pd_strerror(-ENODEV), pd_strerror(ENODEV));
	EXPECT_NE(NULL, strstr(pd_strerror(-265), "runcat"));	/* FI_ETRUNC */
	pd_error(-EIO, "first");
	EXPECT_STREQ("first", pd_last_error());
	pd_clear_error();
	EXPECT_STREQ("", pd_last_error());
}

static void *other_thread(void *arg)
{
	pd_error(-EIO, "from the other thread");
	*(int *)arg = strcmp(pd_last_error(), "from the other thread");
	return NULL;
}

TEST(last_error_is_per_thread)
{
	pthread_t t;
	int differs = 1;

	pd_error(-EIO, "main thread");
	ASSERT_EQ(0, pthread_create(&t, NULL, other_thread, &differs));
	pthread_join(t, NULL);
	EXPECT_EQ(0, differs);
	EXPECT_STREQ("main thread", pd_last_error());
}

TEST(path_names_parse_and_reject)
{
	enum pd_path p;

	EXPECT_EQ(0, pd_path_parse("auto", &p));
	EXPECT_EQ(PD_PATH_AUTO, p);
	EXPECT_EQ(0, pd_path_parse("dmabuf", &p));
	EXPECT_EQ(PD_PATH_DMABUF, p);
	EXPECT_EQ(0, pd_path_parse("mapped", &p));
	EXPECT_EQ(PD_PATH_MAPPED, p);
	EXPECT_EQ(0, pd_path_parse("bounce", &p));
	EXPECT_EQ(PD_PATH_BOUNCE, p);
	EXPECT_EQ(-EINVAL, pd_path_parse("Bounce", &p));
	EXPECT_NE(NULL, strstr(pd_last_error(), "auto|dmabuf|mapped|bounce"));
	EXPECT_EQ(-EINVAL, pd_path_parse("", &p));
	EXPECT_EQ(-EINVAL, pd_path_parse(NULL, &p));
	EXPECT_EQ(-EINVAL, pd_path_parse("auto", NULL));
	EXPECT_NE(NULL, strstr(pd_last_error(), "NULL")) TH_LOG("%s", pd_last_error());
	EXPECT_STREQ("invalid", pd_path_name((enum pd_path)99));
}

TEST(size_parser)
{
	size_t v;

	EXPECT_EQ(0, pd_parse_size("4096", &v));
	EXPECT_EQ(4096, v);
	EXPECT_EQ(0, pd_parse_size("4K", &v));
	EXPECT_EQ(4096, v);
	EXPECT_EQ(0, pd_parse_size("8MiB", &v));
	EXPECT_EQ(8 << 20, v);
	EXPECT_EQ(0, pd_parse_size("2g", &v));
	EXPECT_EQ(2ULL << 30, v);
	EXPECT_EQ(-EINVAL, pd_parse_size("", &v));
	EXPECT_EQ(-EINVAL, pd_parse_size("-1", &v));
	EXPECT_EQ(-EINVAL, pd_parse_size("12Q", &v));
	EXPECT_EQ(-EINVAL, pd_parse_size("1KK", &v));
	/* decimal, leading zeros and all */
	EXPECT_EQ(0, pd_parse_size("0100", &v));
	EXPECT_EQ(100, v);
	EXPECT_EQ(-EINVAL, pd_parse_size("0x1000", &v));
	EXPECT_EQ(-EINVAL, pd_parse_size(" 4K", &v));
	EXPECT_EQ(-EINVAL, pd_parse_size("+4K", &v));
	/* out of range, not wrapped */
	EXPECT_EQ(-ERANGE, pd_parse_size("17179869188G", &v));
	EXPECT_EQ(-ERANGE, pd_parse_size("18014398509481984K", &v));
	EXPECT_EQ(-ERANGE, pd_parse_size("99999999999999999999", &v));
}

TEST(device_missing_on_host_is_explained)
{
	struct pd_device *dev;
	struct pd_event ev;
	uint64_t h;

	if (access("/dev/peerdirect0", F_OK) == 0)
		SKIP(return, "/dev/peerdirect0 exists: this test is for hosts without the module");
	EXPECT_EQ(-ENOENT, pd_device_open(0, &dev));
	EXPECT_NE(NULL, strstr(pd_last_error(), "module loaded"));
	EXPECT_EQ(-EINVAL, pd_device_open(0, NULL));
	EXPECT_EQ(-EINVAL, pd_device_alloc(NULL, 4096, &h, NULL));
	EXPECT_EQ(-EINVAL, pd_device_free(NULL, 1));
	EXPECT_EQ(-EINVAL, pd_device_read_events(NULL, &ev, 1, 0));
	EXPECT_EQ(-EINVAL, pd_device_revoke(NULL, PD_REVOKE_ALLOC | PD_REVOKE_EXPORT, 1, NULL, NULL));
	EXPECT_EQ(-EINVAL, pd_device_fd(NULL));
}

TEST(fabric_open_rejects_bad_settings)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;

	memset(&attr, 0, sizeof(attr));
	EXPECT_EQ(-EINVAL, pd_fabric_open(&attr, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "pd_fabric_attr_init"));
	pd_fabric_attr_init(&attr);
	attr.flags = 1;
	EXPECT_EQ(-EINVAL, pd_fabric_open(&attr, &fab));
	pd_fabric_attr_init(&attr);
	attr.provider = "no-such-provider";
	EXPECT_GT(0, pd_fabric_open(&attr, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "no-such-provider"));
	pd_fabric_attr_init(&attr);
	attr.path = PD_PATH_HOST;
	EXPECT_EQ(-EINVAL, pd_fabric_open(&attr, &fab));
	pd_fabric_attr_init(&attr);
	attr.bounce_slots = 1;
	EXPECT_EQ(-EINVAL, pd_fabric_open(&attr, &fab));
	pd_fabric_attr_init(&attr);
	attr.chunk_size = 100;
	EXPECT_EQ(-EINVAL, pd_fabric_open(&attr, &fab));
	setenv("PEERDIRECT_CHUNK_SIZE", "lots", 1);
	EXPECT_EQ(-EINVAL, pd_fabric_open(NULL, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PEERDIRECT_CHUNK_SIZE='lots'"));
	/* A chunk so large that a message's chunk count would wrap to 0 and
	 * the message "complete" with nothing sent. */
	setenv("PEERDIRECT_CHUNK_SIZE", "17179869183G", 1);
	EXPECT_EQ(-EINVAL, pd_fabric_open(NULL, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "chunk_size")) TH_LOG("%s", pd_last_error());
	pd_fabric_attr_init(&attr);
	attr.chunk_size = ((size_t)1 << 30) + 4096;
	EXPECT_EQ(-EINVAL, pd_fabric_open(&attr, &fab));
	unsetenv("PEERDIRECT_CHUNK_SIZE");
	setenv("PEERDIRECT_MAX_STAGING_BYTES", "lots", 1);
	EXPECT_EQ(-EINVAL, pd_fabric_open(NULL, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PEERDIRECT_MAX_STAGING_BYTES='lots'")) TH_LOG("%s", pd_last_error());
	unsetenv("PEERDIRECT_MAX_STAGING_BYTES");
	/* Counts and milliseconds are whole numbers: "10K" ms is not 10240. */
	{
		static const char *const counts[] = {
			"PEERDIRECT_PEER_TIMEOUT_MS", "PEERDIRECT_BOUNCE_SLOTS",
			"PEERDIRECT_MR_CACHE_MAX_ENTRIES", "PEERDIRECT_QUEUE_SIZE",
			"PEERDIRECT_UNIVERSE_SIZE", "PEERDIRECT_MAX_PENDING",
		};
		unsigned int i;

		for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
			setenv(counts[i], "4K", 1);
			EXPECT_EQ(-EINVAL, pd_fabric_open(NULL, &fab)) TH_LOG("%s", counts[i]);
			EXPECT_NE(NULL, strstr(pd_last_error(), "whole number")) TH_LOG("%s", pd_last_error());
			EXPECT_NE(NULL, strstr(pd_last_error(), counts[i])) TH_LOG("%s", pd_last_error());
			unsetenv(counts[i]);
		}
		setenv("PEERDIRECT_PEER_TIMEOUT_MS", "2500", 1);
		ASSERT_EQ(0, pd_fabric_open(NULL, &fab)) TH_LOG("%s", pd_last_error());
		EXPECT_EQ(2500, fab->peer_timeout_ms);
		pd_fabric_close(fab);
		unsetenv("PEERDIRECT_PEER_TIMEOUT_MS");
	}
	/* Nothing was lost: a good open still works. */
	ASSERT_EQ(0, pd_fabric_open(NULL, &fab));
	pd_fabric_close(fab);
}

/*
 * With no provider named, the library takes one that reaches other nodes.
 * On libfabric 2.1 only shm offered FI_HMEM, the first thing asked for, so
 * "auto" was shm, and a multi-node job's remote peers never answered.  A
 * provider named outright, shm included, is still taken.
 */
TEST(auto_provider_reaches_other_nodes)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;

	unsetenv("PEERDIRECT_PROVIDER");
	ASSERT_EQ(0, pd_fabric_open(NULL, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_TRUE(fab->info->caps & FI_REMOTE_COMM) TH_LOG("auto chose %s", pd_fabric_provider(fab));
	EXPECT_EQ(NULL, strstr(pd_fabric_provider(fab), "shm")) TH_LOG("auto chose %s", pd_fabric_provider(fab));
	pd_fabric_close(fab);
	setenv("PEERDIRECT_PROVIDER", "auto", 1);
	ASSERT_EQ(0, pd_fabric_open(NULL, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_TRUE(fab->info->caps & FI_REMOTE_COMM) TH_LOG("auto chose %s", pd_fabric_provider(fab));
	pd_fabric_close(fab);
	unsetenv("PEERDIRECT_PROVIDER");
	pd_fabric_attr_init(&attr);
	attr.provider = "shm";
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_STREQ("shm", pd_fabric_provider(fab));
	pd_fabric_close(fab);
}

/* The domain names the NIC as sysfs does (tcp's netdev), shm's is "shm",
 * and a NULL fabric's is empty, not a crash. */
TEST(domain_names_the_nic)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	char path[PATH_MAX];

	EXPECT_STREQ("", pd_fabric_domain(NULL));
	pd_fabric_attr_init(&attr);
	attr.provider = "tcp";
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_STREQ(fab->info->domain_attr->name, pd_fabric_domain(fab));
	snprintf(path, sizeof(path), "/sys/class/net/%s", pd_fabric_domain(fab));
	EXPECT_EQ(0, access(path, F_OK)) TH_LOG("tcp's domain %s is no netdev", pd_fabric_domain(fab));
	pd_fabric_close(fab);
	attr.provider = "shm";
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_STREQ("shm", pd_fabric_domain(fab));
	pd_fabric_close(fab);
}

/*
 * A node's NICs, each opened by name (a network plugin's devices): every
 * domain listed opens and is the one asked for; a name no provider has is
 * refused, by the attr and by PEERDIRECT_DOMAIN, saying which; a buffer
 * too short is -ENOSPC, never a truncated list.
 */
TEST(domains_are_listed_and_opened_by_name)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	char buf[1024], tiny[3];
	const char *name;
	int n, seen = 0;

	pd_fabric_attr_init(&attr);
	attr.provider = "tcp";
	n = pd_fabric_domains(&attr, buf, sizeof(buf));
	ASSERT_LE(1, n) TH_LOG("%s", pd_last_error());
	for (name = buf; *name; name += strlen(name) + 1, seen++) {
		attr.domain = name;
		ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s: %s", name, pd_last_error());
		EXPECT_STREQ(name, pd_fabric_domain(fab));
		pd_fabric_close(fab);
	}
	EXPECT_EQ(n, seen);
	/* the first is what an open without a name takes */
	attr.domain = NULL;
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab));
	EXPECT_STREQ(buf, pd_fabric_domain(fab));
	pd_fabric_close(fab);
	attr.domain = "pd-no-such-nic";
	EXPECT_EQ(-ENODATA, pd_fabric_open(&attr, &fab));
	EXPECT_NE(NULL, strstr(pd_last_error(), "domain pd-no-such-nic")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, pd_fabric_domains(&attr, buf, sizeof(buf)));
	EXPECT_EQ(0, buf[0]);
	attr.domain = NULL;
	setenv("PEERDIRECT_DOMAIN", "pd-no-such-nic", 1);
	EXPECT_EQ(-ENODATA, pd_fabric_open(&attr, &fab));
	unsetenv("PEERDIRECT_DOMAIN");
	EXPECT_EQ(-ENOSPC, pd_fabric_domains(&attr, tiny, sizeof(tiny)));
	EXPECT_EQ(-ENOSPC, pd_fabric_domains(&attr, tiny, 0));
	EXPECT_EQ(-EINVAL, pd_fabric_domains(&attr, NULL, 16));
	attr.provider = "shm";
	EXPECT_EQ(1, pd_fabric_domains(&attr, buf, sizeof(buf)));
	EXPECT_STREQ("shm", buf);
}

/*
 * The library never writes the environment: setenv races with other
 * threads' getenv, and FI_UNIVERSE_SIZE would leak into every other
 * libfabric user of the process.  The universe size reaches libfabric as
 * the AV's count instead.
 */
TEST(library_never_touches_the_environment)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;

	unsetenv("FI_UNIVERSE_SIZE");
	pd_fabric_attr_init(&attr);
	attr.universe_size = 7;
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab));
	EXPECT_EQ(NULL, getenv("FI_UNIVERSE_SIZE"));
	EXPECT_EQ(7, fab->universe);
	pd_fabric_close(fab);
}

FIXTURE(fab) {
	struct pd_fabric *fab, *other;
	struct pd_mr *mr;
	char buf[8192];
};

FIXTURE_SETUP(fab)
{
	ASSERT_EQ(0, pd_fabric_open(NULL, &self->fab));
	ASSERT_EQ(0, pd_fabric_open(NULL, &self->other));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, self->buf, sizeof(self->buf), PD_ACCESS_ALL, &self->mr));
}

FIXTURE_TEARDOWN(fab)
{
	pd_mr_dereg(self->mr);
	pd_fabric_close(self->other);
	pd_fabric_close(self->fab);
}

TEST_F(fab, registration_rejects_bad_input)
{
	struct pd_mr *mr;

	EXPECT_EQ(-EINVAL, pd_mr_reg_host(NULL, self->buf, 1, 0, &mr));
	EXPECT_EQ(-EINVAL, pd_mr_reg_host(self->fab, NULL, 1, 0, &mr));
	EXPECT_EQ(-EINVAL, pd_mr_reg_host(self->fab, self->buf, 0, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "length is 0"));
	EXPECT_EQ(-EINVAL, pd_mr_reg_host(self->fab, self->buf, 1, 0x100, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "unknown access bits"));
	EXPECT_EQ(-EINVAL, pd_mr_reg_host(self->fab, (void *)(UINTPTR_MAX - 10), 4096, 0, &mr));
	EXPECT_EQ(-EINVAL, pd_mr_invalidate_host(self->fab, NULL, 1));
	EXPECT_EQ(PD_PATH_HOST, pd_mr_path(self->mr));
	EXPECT_STREQ("host memory", pd_mr_reason(self->mr));
}

TEST_F(fab, transfers_reject_bad_input)
{
	struct pd_rkey rk = { 0 };
	struct pd_req *req, *r2;
	size_t got = 0;
	uint64_t me;
	char addr[256];
	size_t alen = sizeof(addr);

	ASSERT_EQ(0, pd_fabric_addr(self->fab, addr, &alen));
	ASSERT_EQ(0, pd_fabric_insert(self->fab, addr, alen, &me));
	EXPECT_EQ(-EINVAL, pd_fabric_insert(self->fab, addr, 0, &me));
	EXPECT_EQ(-EINVAL, pd_tsend(self->fab, self->mr, 0, 0, me, 1, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "length is 0"));
	EXPECT_EQ(-EINVAL, pd_tsend(self->fab, self->mr, 8000, 500, me, 1, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "outside the registration"));
	EXPECT_EQ(-EINVAL, pd_tsend(self->fab, self->mr, SIZE_MAX, 2, me, 1, &req));
	EXPECT_EQ(-EINVAL, pd_tsend(self->fab, self->mr, 0, 8, me, 1ULL << 48, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "48 bits"));
	EXPECT_EQ(-EINVAL, pd_tsend(self->fab, self->mr, 0, 8, PD_ANY_PEER, 1, &req));
	EXPECT_EQ(-EINVAL, pd_tsend(self->other, self->mr, 0, 8, me, 1, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "another fabric"));
	EXPECT_EQ(-EINVAL, pd_write(self->fab, self->mr, 0, 8, me, NULL, 0, &req));
	EXPECT_EQ(-EINVAL, pd_write(self->fab, self->mr, 0, 8, me, &rk, 0, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "remote range"));
	EXPECT_EQ(-EINVAL, pd_trecv(self->fab, NULL, 0, 8, me, 1, &req));
	EXPECT_EQ(-EINVAL, pd_test(NULL, NULL));
	EXPECT_EQ(-EINVAL, pd_mr_rkey(NULL, &rk));
	EXPECT_EQ(-EINVAL, pd_progress(NULL));
	/* After all that, a real loopback transfer still works. */
	memset(self->buf, 7, 100);
	ASSERT_EQ(0, pd_tsend(self->fab, self->mr, 0, 100, me, 9, &req));
	ASSERT_EQ(0, pd_trecv(self->fab, self->mr, 4096, 100, me, 9, &r2));
	EXPECT_EQ(0, pd_wait(r2, WAIT_MS, &got));
	EXPECT_EQ(100, got);
	EXPECT_EQ(0, pd_wait(req, WAIT_MS, NULL));
	EXPECT_EQ(7, self->buf[4096 + 99]);
	pd_req_free(r2);
	pd_req_free(req);
}

TEST_F(fab, rkey_describes_registration)
{
	struct pd_rkey rk;
	struct pd_mr *sub;

	ASSERT_EQ(0, pd_mr_rkey(self->mr, &rk));
	EXPECT_EQ(sizeof(self->buf), rk.len);
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, self->buf + 100, 50, 0, &sub));
	EXPECT_EQ(pd_mr_cpu_ptr(sub), (void *)(self->buf + 100));
	pd_mr_dereg(sub);
}

TEST_HARNESS_MAIN
