//go:build pmix

/*
 * The C side of package pmix: the PMIx calls whose arguments are
 * structures or macros, one function per Go call.
 */
#ifndef KNEMESIS_PMIX_SHIM_H
#define KNEMESIS_PMIX_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <pmix.h>

struct kn_pmix_self {
	char nspace[PMIX_MAX_NSLEN + 1];
	uint32_t rank;
};

int kn_pmix_init(struct kn_pmix_self *self);
int kn_pmix_finalize(void);
int kn_pmix_get_u32(const char *nspace, uint32_t rank, const char *key, uint32_t *out);
int kn_pmix_get_string(const char *nspace, uint32_t rank, const char *key, char *buf, size_t len);
int kn_pmix_put_bytes(const char *key, const void *buf, size_t len);
int kn_pmix_commit(void);
int kn_pmix_fence(void);
int kn_pmix_get_bytes(const char *nspace, uint32_t rank, const char *key, void *buf, size_t cap, size_t *len);
const char *kn_pmix_strerror(int status);

#endif
