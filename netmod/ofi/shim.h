//go:build ofi

/*
 * The C side of package ofi: the libfabric calls whose arguments are
 * structures, gathered so that Go makes one cgo call per operation and one
 * per batch of completions.  Every structure libfabric may keep a pointer
 * to (operation contexts, iovec arrays, headers) lives in C memory that
 * these functions allocate.
 */
#ifndef KNEMESIS_OFI_SHIM_H
#define KNEMESIS_OFI_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <sys/uio.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>

#define KN_IOV_MAX 4   /* header + 3 payload entries: tcp;ofi_rxm's iov_limit */
#define KN_HDR_MAX 64
#define KN_NAME_MAX 256

/* One operation in flight.  ctx must come first: libfabric hands it back
 * as op_context, and index names the Go side's slot. */
struct kn_slot {
	struct fi_context2 ctx;
	int32_t index;
	uint32_t niov;
	struct iovec iov[KN_IOV_MAX];
	uint8_t hdr[KN_HDR_MAX];
};

struct kn_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct kn_slot *slots;
	int nslots;
	struct fi_cq_tagged_entry *comp;
	fi_addr_t *src;	/* source of each of comp, when source is set */
	int ncomp;
	int source;	/* the provider gives message sources (FI_SOURCE) */
	struct fi_cq_err_entry err;
	uint64_t mr_mode;
	size_t tx_iov_limit;
	size_t rx_iov_limit;
	size_t max_msg_size;
	size_t namelen;
	uint8_t name[KN_NAME_MAX];
};

int kn_open(const char *prov, const char *node, int nslots, int ncomp,
	    int sources, struct kn_ep **out, const char **stage);
void kn_close(struct kn_ep *e);
int kn_providers(const char *node, char *buf, size_t len);
int64_t kn_av_insert(struct kn_ep *e, const void *name, uint64_t *addr);
void kn_av_straddr(struct kn_ep *e, const void *name, char *buf, size_t len);
ssize_t kn_tsend(struct kn_ep *e, struct kn_slot *s, fi_addr_t dest, uint64_t tag);
ssize_t kn_trecv(struct kn_ep *e, struct kn_slot *s, fi_addr_t src,
		 uint64_t tag, uint64_t ignore);
ssize_t kn_read(struct kn_ep *e, struct kn_slot *s, fi_addr_t src,
		uint64_t addr, uint64_t key);
ssize_t kn_poll(struct kn_ep *e);
int kn_cancel(struct kn_ep *e, struct kn_slot *s);
void kn_cq_strerror(struct kn_ep *e, char *buf, size_t len);
int kn_mr_reg(struct kn_ep *e, void *buf, size_t len, uint64_t access,
	      uint64_t key, struct fid_mr **mr, uint64_t *outkey,
	      uint64_t *outaddr);
int kn_mr_close(struct fid_mr *mr);
const char *kn_strerror(int err);

#endif
