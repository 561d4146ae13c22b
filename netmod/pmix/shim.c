//go:build pmix

#include <string.h>
#include "shim.h"

int kn_pmix_init(struct kn_pmix_self *self)
{
	pmix_proc_t me;
	pmix_status_t rc = PMIx_Init(&me, NULL, 0);

	if (rc != PMIX_SUCCESS)
		return rc;
	memcpy(self->nspace, me.nspace, sizeof(self->nspace));
	self->nspace[PMIX_MAX_NSLEN] = 0;
	self->rank = me.rank;
	return PMIX_SUCCESS;
}

int kn_pmix_finalize(void)
{
	return PMIx_Finalize(NULL, 0);
}

static int kn_get(const char *nspace, uint32_t rank, const char *key,
		  pmix_value_t **val)
{
	pmix_proc_t p;

	PMIX_PROC_CONSTRUCT(&p);
	PMIX_LOAD_PROCID(&p, nspace, rank);
	return PMIx_Get(&p, key, NULL, 0, val);
}

int kn_pmix_get_u32(const char *nspace, uint32_t rank, const char *key, uint32_t *out)
{
	pmix_value_t *v = NULL;
	int rc = kn_get(nspace, rank, key, &v);

	if (rc != PMIX_SUCCESS)
		return rc;
	switch (v->type) {
	case PMIX_UINT32:
		*out = v->data.uint32;
		break;
	case PMIX_PROC_RANK:
		*out = v->data.rank;
		break;
	default:
		rc = PMIX_ERR_TYPE_MISMATCH;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

int kn_pmix_get_string(const char *nspace, uint32_t rank, const char *key, char *buf, size_t len)
{
	pmix_value_t *v = NULL;
	int rc = kn_get(nspace, rank, key, &v);

	if (rc != PMIX_SUCCESS)
		return rc;
	if (v->type == PMIX_STRING && v->data.string) {
		strncpy(buf, v->data.string, len - 1);
		buf[len - 1] = 0;
	} else {
		rc = PMIX_ERR_TYPE_MISMATCH;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

int kn_pmix_put_bytes(const char *key, const void *buf, size_t len)
{
	pmix_value_t v;
	pmix_byte_object_t bo = { .bytes = (char *)buf, .size = len };
	int rc;

	PMIX_VALUE_CONSTRUCT(&v);
	rc = PMIx_Value_load(&v, &bo, PMIX_BYTE_OBJECT);
	if (rc != PMIX_SUCCESS)
		return rc;
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	PMIX_VALUE_DESTRUCT(&v);
	return rc;
}

int kn_pmix_commit(void)
{
	return PMIx_Commit();
}

int kn_pmix_fence(void)
{
	pmix_info_t info;
	bool collect = true;
	int rc;

	PMIX_INFO_CONSTRUCT(&info);
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	rc = PMIx_Fence(NULL, 0, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	return rc;
}

int kn_pmix_get_bytes(const char *nspace, uint32_t rank, const char *key,
		      void *buf, size_t cap, size_t *len)
{
	pmix_value_t *v = NULL;
	int rc = kn_get(nspace, rank, key, &v);

	if (rc != PMIX_SUCCESS)
		return rc;
	if (v->type != PMIX_BYTE_OBJECT) {
		rc = PMIX_ERR_TYPE_MISMATCH;
	} else {
		*len = v->data.bo.size;
		if (v->data.bo.size > cap)
			rc = PMIX_ERR_NOMEM;
		else
			memcpy(buf, v->data.bo.bytes, v->data.bo.size);
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

const char *kn_pmix_strerror(int status)
{
	return PMIx_Error_string(status);
}
