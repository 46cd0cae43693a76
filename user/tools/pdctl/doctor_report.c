// SPDX-License-Identifier: MIT
/*
 * The doctor's report: the checks and pairs a run found (struct doctor),
 * their names, and the table or JSON document they print as, with the
 * exit code's meaning.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "json.h"

static const char *const status_names[] = {
	[STATUS_OK] = "ok", [STATUS_WARN] = "warn", [STATUS_FAIL] = "fail", [STATUS_SKIP] = "skip",
};

static const char *const verdict_names[] = {
	[VERDICT_UNKNOWN] = "unknown", [VERDICT_DMABUF] = "dmabuf", [VERDICT_MAPPED] = "mapped",
	[VERDICT_BOUNCE] = "bounce", [VERDICT_NONE] = "none", [VERDICT_DENIED] = "denied",
	[VERDICT_UNAVAILABLE] = "unavailable",
};

const char *status_name(enum status s)
{
	return status_names[s];
}

const char *verdict_name(enum verdict v)
{
	return verdict_names[v];
}

void add_check(struct doctor *dr, const char *check, const char *subject, enum status status,
	       const char *fix, const char *fmt, ...)
{
	struct check *c;
	va_list ap;

	if (dr->nr_checks >= MAX_CHECKS)
		return;
	if (dr->nr_checks == MAX_CHECKS - 1) {
		/* the last slot says that more were left out */
		check = "checks";
		subject = "more";
		status = STATUS_WARN;
		fix = "pdctl -d N doctor --nic NAME, for fewer at a time";
		fmt = "further checks left out: at most %d";
	}
	c = &dr->checks[dr->nr_checks++];
	c->check = check;
	snprintf(c->subject, sizeof(c->subject), "%s", subject);
	c->status = status;
	snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	if (dr->nr_checks == MAX_CHECKS)
		snprintf(c->reason, sizeof(c->reason), fmt, MAX_CHECKS - 1);
	else
		vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
}

void set_text(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, TEXT, fmt, ap);
	va_end(ap);
}

/* Appends word to a space-separated list of size bytes, *used long; a
 * full list keeps what fits. */
void list_add(char *list, size_t size, size_t *used, const char *word)
{
	if (*used < size)
		*used += snprintf(list + *used, size - *used, "%s%s", *used ? " " : "", word);
}

/* What an exit code of the doctor means, in the human output and JSON. */
static const char *exit_text(int ret)
{
	return ret == EX_OK ? "no pair falls back to bounce" :
	       ret == EX_BOUNCE ? "a pair would fall back to bounce" :
	       ret == EX_PERM ? "permission denied" :
	       ret == EX_NODEV ? "no module, device or node" :
	       ret == EX_SIMONLY ? "only simulated devices (--allow-sim accepts them)" :
	       "a check failed, a pair has no path (verdict none), or a pair could not be "
	       "probed (verdict unknown)";
}

void doctor_print_human(struct doctor *dr, int ret)
{
	int i;

	printf("%-14s %-26s %-6s %s\n", "CHECK", "SUBJECT", "STATUS", "REASON");
	for (i = 0; i < dr->nr_checks; i++) {
		struct check *c = &dr->checks[i];

		term_safe(c->subject);
		term_safe(c->reason);
		term_safe(c->fix);
		printf("%-14s %-26s %-6s %s\n", c->check, c->subject, status_name(c->status), c->reason);
		if (c->fix[0])
			printf("%-48s fix: %s\n", "", c->fix);
	}
	if (dr->nr_pairs) {
		printf("\n%-12s %-16s %-8s %-8s %s\n", "DEVICE", "NIC", "KIND", "VERDICT",
		       "REASON");
		for (i = 0; i < dr->nr_pairs; i++) {
			struct pair *p = &dr->pairs[i];

			term_safe(p->nic);
			term_safe(p->reason);
			term_safe(p->fix);
			term_safe(p->topology);
			printf("%-12s %-16s %-8s %-8s %s\n", p->device, p->nic, p->nic_kind,
			       verdict_name(p->verdict), p->reason);
			if (p->fix[0])
				printf("%-47s fix: %s\n", "", p->fix);
			printf("%-47s pci: %s\n", "", p->topology);
		}
	}
	printf("\nexit %d: %s\n", ret, exit_text(ret));
}

/* --json's "error" member: the same words as the human "exit N:" line. */
void doctor_print_json(const struct doctor *dr, const char *release, int ret)
{
	int i;

	jopen(NULL, '{');
	jstr("pdctl", PD_VERSION);
	jstr("kernel", release);
	jopen("checks", '[');
	for (i = 0; i < dr->nr_checks; i++) {
		jopen(NULL, '{');
		jstr("check", dr->checks[i].check);
		jstr("subject", dr->checks[i].subject);
		jstr("status", status_name(dr->checks[i].status));
		jstr("reason", dr->checks[i].reason);
		jstr("fix", dr->checks[i].fix[0] ? dr->checks[i].fix : NULL);
		jclose('}');
	}
	jclose(']');
	jopen("pairs", '[');
	for (i = 0; i < dr->nr_pairs; i++) {
		jopen(NULL, '{');
		jstr("device", dr->pairs[i].device);
		jstr("nic", dr->pairs[i].nic);
		jstr("nic_kind", dr->pairs[i].nic_kind);
		jstr("verdict", verdict_name(dr->pairs[i].verdict));
		jstr("reason", dr->pairs[i].reason);
		jstr("fix", dr->pairs[i].fix[0] ? dr->pairs[i].fix : NULL);
		jstr("topology", dr->pairs[i].topology);
		jkey("ibv_errno");
		if (dr->pairs[i].ibv_errno >= 0)
			printf("%d", dr->pairs[i].ibv_errno);
		else
			fputs("null", stdout);
		jclose('}');
	}
	jclose(']');
	if (ret)
		jstr("error", exit_text(ret));
	ji64("exit", ret);
	jclose('}');
	putchar('\n');
}

/* The worse of two exit codes: no device, permission, bounce, other. */
int worse(int a, int b)
{
	/* pdctl.8: 3 and 4 take precedence over 7, and a bounce found is
	 * worth more than a pair that could not be probed (1). */
	static const int rank[] = { [EX_OK] = 0, [EX_FAIL] = 1, [EX_BOUNCE] = 2,
				    [EX_SIMONLY] = 3, [EX_PERM] = 4, [EX_NODEV] = 5 };

	const int n = (int)(sizeof(rank) / sizeof(rank[0]));

	if (a < 0 || a >= n || b < 0 || b >= n)
		return a ? a : b;
	return rank[b] > rank[a] ? b : a;
}
