//go:build ofi

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "shim.h"

#define KN_FI_VERSION FI_VERSION(1, 9)

static struct fi_info *kn_hints(const char *prov, uint64_t extra)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_MSG | FI_RMA | extra;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	/* The modes package ofi handles; FI_MR_LOCAL is not one of them. */
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	if (prov) {
		h->fabric_attr->prov_name = strdup(prov);
		if (!h->fabric_attr->prov_name) {
			fi_freeinfo(h);
			return NULL;
		}
	}
	return h;
}

/* Whether name is one of the ", "-separated entries of list. */
static int kn_listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	for (p = list; (p = strstr(p, name)); p += n) {
		if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == 0))
			return 1;
	}
	return 0;
}

/* Lists the providers fi_getinfo offers for the same request without a
 * provider name, for the error of a module that cannot start. */
int kn_providers(const char *node, char *buf, size_t len)
{
	struct fi_info *h = kn_hints(NULL, 0), *info = NULL, *i;
	size_t used = 0;
	int ret;

	buf[0] = 0;
	if (!h)
		return -FI_ENOMEM;
	ret = fi_getinfo(KN_FI_VERSION, node, NULL, FI_SOURCE, h, &info);
	fi_freeinfo(h);
	if (ret)
		return ret;
	for (i = info; i; i = i->next) {
		const char *name = i->fabric_attr->prov_name;

		if (kn_listed(buf, name))
			continue;
		ret = snprintf(buf + used, len - used, "%s%s",
			       used ? ", " : "", name);
		if (ret < 0 || (size_t)ret >= len - used)
			break;
		used += ret;
	}
	fi_freeinfo(info);
	return 0;
}

static int kn_setup(struct kn_ep *e, const char **stage)
{
	struct fi_cq_attr cq_attr = {
		.size = (size_t)e->nslots * 2,
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = FI_WAIT_NONE,
	};
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	*stage = "fi_fabric";
	ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL);
	if (ret)
		return ret;
	*stage = "fi_domain";
	ret = fi_domain(e->fabric, e->info, &e->domain, NULL);
	if (ret)
		return ret;
	*stage = "fi_av_open";
	ret = fi_av_open(e->domain, &av_attr, &e->av, NULL);
	if (ret)
		return ret;
	*stage = "fi_cq_open";
	ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
	if (ret)
		return ret;
	*stage = "fi_endpoint";
	ret = fi_endpoint(e->domain, e->info, &e->ep, NULL);
	if (ret)
		return ret;
	*stage = "fi_ep_bind(av)";
	ret = fi_ep_bind(e->ep, &e->av->fid, 0);
	if (ret)
		return ret;
	*stage = "fi_ep_bind(cq)";
	ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		return ret;
	*stage = "fi_enable";
	ret = fi_enable(e->ep);
	if (ret)
		return ret;
	*stage = "fi_getname";
	e->namelen = sizeof(e->name);
	return fi_getname(&e->ep->fid, e->name, &e->namelen);
}

int kn_open(const char *prov, const char *node, int nslots, int ncomp,
	    int sources, struct kn_ep **out, const char **stage)
{
	struct fi_info *h;
	struct kn_ep *e;
	int ret, i;

	*stage = "allocation";
	e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	e->nslots = nslots;
	e->ncomp = ncomp;
	e->slots = calloc(nslots, sizeof(*e->slots));
	e->comp = calloc(ncomp, sizeof(*e->comp));
	e->src = calloc(ncomp, sizeof(*e->src));
	/* FI_SOURCE, when asked and the provider has it: a message's source
	 * address, which a module checks against the rank its header names. */
	h = kn_hints(prov, sources ? FI_SOURCE : 0);
	if (!e->slots || !e->comp || !e->src || !h) {
		ret = -FI_ENOMEM;
		goto err;
	}
	for (i = 0; i < nslots; i++)
		e->slots[i].index = i;
	*stage = "fi_getinfo";
	ret = fi_getinfo(KN_FI_VERSION, node, NULL, FI_SOURCE, h, &e->info);
	if (ret == -FI_ENODATA && sources) {
		fi_freeinfo(h);
		h = kn_hints(prov, 0);
		if (!h) {
			ret = -FI_ENOMEM;
			goto err;
		}
		ret = fi_getinfo(KN_FI_VERSION, node, NULL, FI_SOURCE, h, &e->info);
	}
	if (ret)
		goto err;
	e->source = (e->info->caps & FI_SOURCE) != 0;
	e->mr_mode = e->info->domain_attr->mr_mode;
	e->tx_iov_limit = e->info->tx_attr->iov_limit;
	e->rx_iov_limit = e->info->rx_attr->iov_limit;
	e->max_msg_size = e->info->ep_attr->max_msg_size;
	ret = kn_setup(e, stage);
	if (ret)
		goto err;
	fi_freeinfo(h);
	*out = e;
	return 0;
err:
	fi_freeinfo(h);
	kn_close(e);
	return ret;
}

void kn_close(struct kn_ep *e)
{
	if (e->ep)
		fi_close(&e->ep->fid);
	if (e->cq)
		fi_close(&e->cq->fid);
	if (e->av)
		fi_close(&e->av->fid);
	if (e->domain)
		fi_close(&e->domain->fid);
	if (e->fabric)
		fi_close(&e->fabric->fid);
	if (e->info)
		fi_freeinfo(e->info);
	free(e->comp);
	free(e->src);
	free(e->slots);
	free(e);
}

int64_t kn_av_insert(struct kn_ep *e, const void *name, uint64_t *addr)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(e->av, name, 1, &a, 0, NULL);

	if (ret < 0)
		return ret;
	if (ret != 1)
		return -FI_EADDRNOTAVAIL;
	*addr = a;
	return 0;
}

void kn_av_straddr(struct kn_ep *e, const void *name, char *buf, size_t len)
{
	size_t l = len;

	buf[0] = 0;
	fi_av_straddr(e->av, name, buf, &l);
	buf[len - 1] = 0;
}

ssize_t kn_tsend(struct kn_ep *e, struct kn_slot *s, fi_addr_t dest, uint64_t tag)
{
	struct fi_msg_tagged m = {
		.msg_iov = s->iov,
		.iov_count = s->niov,
		.addr = dest,
		.tag = tag,
		.context = &s->ctx,
	};

	return fi_tsendmsg(e->ep, &m, FI_COMPLETION);
}

ssize_t kn_trecv(struct kn_ep *e, struct kn_slot *s, fi_addr_t src,
		 uint64_t tag, uint64_t ignore)
{
	struct fi_msg_tagged m = {
		.msg_iov = s->iov,
		.iov_count = s->niov,
		.addr = src,
		.tag = tag,
		.ignore = ignore,
		.context = &s->ctx,
	};

	return fi_trecvmsg(e->ep, &m, FI_COMPLETION);
}

ssize_t kn_read(struct kn_ep *e, struct kn_slot *s, fi_addr_t src,
		uint64_t addr, uint64_t key)
{
	return fi_read(e->ep, s->iov[0].iov_base, s->iov[0].iov_len, NULL,
		       src, addr, key, &s->ctx);
}

/* Reads up to ncomp completions into e->comp.  Returns their number, 0
 * when there are none, or -FI_EAVAIL with the failed one in e->err. */
ssize_t kn_poll(struct kn_ep *e)
{
	ssize_t n = e->source ? fi_cq_readfrom(e->cq, e->comp, e->ncomp, e->src) :
				fi_cq_read(e->cq, e->comp, e->ncomp);

	if (n == -FI_EAGAIN)
		return 0;
	if (n != -FI_EAVAIL)
		return n;
	memset(&e->err, 0, sizeof(e->err));
	n = fi_cq_readerr(e->cq, &e->err, 0);
	if (n == -FI_EAGAIN)
		return 0;
	if (n < 0)
		return n;
	return -FI_EAVAIL;
}

int kn_cancel(struct kn_ep *e, struct kn_slot *s)
{
	return (int)fi_cancel(&e->ep->fid, &s->ctx);
}

void kn_cq_strerror(struct kn_ep *e, char *buf, size_t len)
{
	const char *s;

	s = fi_cq_strerror(e->cq, e->err.prov_errno, e->err.err_data, buf, len);
	if (s != buf)
		snprintf(buf, len, "%s", s ? s : "");
}

int kn_mr_reg(struct kn_ep *e, void *buf, size_t len, uint64_t access,
	      uint64_t key, struct fid_mr **mr, uint64_t *outkey,
	      uint64_t *outaddr)
{
	int ret = fi_mr_reg(e->domain, buf, len, access, 0, key, 0, mr, NULL);

	if (ret)
		return ret;
	if (e->mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(*mr, &e->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(*mr);
		if (ret) {
			fi_close(&(*mr)->fid);
			return ret;
		}
	}
	*outkey = fi_mr_key(*mr);
	*outaddr = (e->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	return 0;
}

int kn_mr_close(struct fid_mr *mr)
{
	return fi_close(&mr->fid);
}

const char *kn_strerror(int err)
{
	return fi_strerror(err < 0 ? -err : err);
}
