// SPDX-License-Identifier: MIT
/*
 * NCCL's load of our net plugin, without NCCL: built and run by
 * scripts/package-test.sh in a clean Debian root with the packages alone.
 *
 *   cc -o nccl-load nccl-load.c -ldl && ./nccl-load [LIBRARY]
 *
 * NCCL_NET_PLUGIN=peerdirect makes NCCL dlopen("libnccl-net-peerdirect.so")
 * by bare name (the loader's path: no LD_LIBRARY_PATH here) and take the
 * newest table it knows, ncclNetPlugin_v12 ... _v8.  Every table begins
 * with the net's name.  Prints where the loader found it and each name;
 * exits 1 if it is not found or a table is missing or misnamed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	static const char *const tables[] = { "ncclNetPlugin_v12", "ncclNetPlugin_v8" };
	const char *lib = argc > 1 ? argv[1] : "libnccl-net-peerdirect.so";
	struct link_map *lm = NULL;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	unsigned int i;

	if (!h) {
		fprintf(stderr, "dlopen(\"%s\"): %s\n", lib, dlerror());
		return 1;
	}
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
		printf("%s: loaded from %s\n", lib, lm->l_name);
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		/* The table's first member: const char *name. */
		const char *const *name = dlsym(h, tables[i]);

		if (!name || !*name || strcmp(*name, "peerdirect")) {
			fprintf(stderr, "%s: %s %s\n", lib, tables[i], name ? "is not named peerdirect" : "missing");
			return 1;
		}
		printf("%s: name \"%s\"\n", tables[i], *name);
	}
	dlclose(h);
	return 0;
}
