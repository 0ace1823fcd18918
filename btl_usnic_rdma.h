/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Emulated GET and atomics (btl_usnic_rdma.c): the initiator sends a
 * request with tag USNIC_TAG_RDMA, the target's progress carries it out on
 * its registered memory and sends the data or the old value back.
 */

#ifndef BTL_USNIC_RDMA_H
#define BTL_USNIC_RDMA_H

#include "btl_usnic.h"
#include "btl_usnic_wire.h"

BEGIN_C_DECLS

struct opal_btl_usnic_module_t;
struct mca_btl_base_endpoint_t;

/* Largest GET: request plus data fit one chunked fragment. */
#define USNIC_RDMA_MAX_GET (USNIC_MAX_FRAG_SIZE - (uint32_t) sizeof(usnic_rdma_msg_t))

/* Atomic operations the module offers (btl_atomic_flags). */
#define USNIC_RDMA_ATOMIC_FLAGS                                                             \
    (MCA_BTL_ATOMIC_SUPPORTS_ADD | MCA_BTL_ATOMIC_SUPPORTS_AND | MCA_BTL_ATOMIC_SUPPORTS_OR |  \
     MCA_BTL_ATOMIC_SUPPORTS_XOR | MCA_BTL_ATOMIC_SUPPORTS_LAND |                              \
     MCA_BTL_ATOMIC_SUPPORTS_LOR | MCA_BTL_ATOMIC_SUPPORTS_LXOR |                              \
     MCA_BTL_ATOMIC_SUPPORTS_SWAP | MCA_BTL_ATOMIC_SUPPORTS_CSWAP |                            \
     MCA_BTL_ATOMIC_SUPPORTS_32BIT | MCA_BTL_ATOMIC_SUPPORTS_GLOB)

/* Per-module state: outstanding requests, deferred replies. */
void opal_btl_usnic_rdma_init(struct opal_btl_usnic_module_t *module);
void opal_btl_usnic_rdma_fini(struct opal_btl_usnic_module_t *module);

/* A complete message with tag USNIC_TAG_RDMA from ep. */
void opal_btl_usnic_rdma_recv(struct opal_btl_usnic_module_t *module,
                              struct mca_btl_base_endpoint_t *ep, const void *data, size_t len);

/* Progress calls it while module->rdma_work is set: replies that found no
 * send buffer at first, and completions of operations on this process's
 * own memory (NULL endpoint). */
void opal_btl_usnic_rdma_progress(struct opal_btl_usnic_module_t *module);

/* btl_put with a NULL endpoint: into this process's own registered memory,
 * as the registration ref names allows. */
int opal_btl_usnic_rdma_local_put(struct opal_btl_usnic_module_t *module, void *local,
                                  uint64_t remote_address, size_t size,
                                  mca_btl_base_registration_handle_t *local_handle,
                                  const usnic_reg_ref_t *ref,
                                  mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                  void *cbdata);

/* A PUT, GET or atomic (what) of ep (NULL: this process) named no
 * registration of this process: counted, and told once per module. */
void opal_btl_usnic_rdma_bad_handle(struct opal_btl_usnic_module_t *module,
                                    struct mca_btl_base_endpoint_t *ep, const char *what);

/* A GET data fragment of size bytes from ep names GET id (usnic_is_get_data):
 * where it goes (the GET's local buffer, now taken by this fragment), or
 * NULL (counted) if id is no outstanding GET of ep of that size, or one
 * whose data fragment came already; whether the GET still waits for it;
 * the fragment is whole: the GET completes. */
void *opal_btl_usnic_rdma_get_dest(struct opal_btl_usnic_module_t *module,
                                   struct mca_btl_base_endpoint_t *ep, uint64_t id, size_t size);
bool opal_btl_usnic_rdma_get_live(struct opal_btl_usnic_module_t *module,
                                  struct mca_btl_base_endpoint_t *ep, uint64_t id, size_t size);
void opal_btl_usnic_rdma_get_done(struct opal_btl_usnic_module_t *module,
                                  struct mca_btl_base_endpoint_t *ep, uint64_t id, size_t size);

/* Memory [base, base + len) is deregistered: GET data still to be chunked
 * from it, or to be resent, is copied aside first. */
void opal_btl_usnic_rdma_memory_gone(uint64_t base, uint64_t len);

/* A frag that sent GET data without a copy releases the device
 * registration of that data at its return
 * (opal_btl_usnic_frag_return_if_done). */
void opal_btl_usnic_rdma_zcopy_release(struct opal_btl_usnic_module_t *module,
                                       struct opal_btl_usnic_send_frag_t *frag);

/* The endpoint goes away: its outstanding requests fail (OPAL_ERR_UNREACH). */
void opal_btl_usnic_rdma_flush_endpoint(struct mca_btl_base_endpoint_t *ep);

/* BTL entry points.  An atomic on this process's own memory (NULL endpoint)
 * returns 1, done without a callback, unless it fetches 32 bits. */
int opal_btl_usnic_get(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *endpoint,
                       void *local_address, uint64_t remote_address,
                       mca_btl_base_registration_handle_t *local_handle,
                       mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags,
                       int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                       void *cbdata);
int opal_btl_usnic_atomic_op(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *endpoint,
                             uint64_t remote_address,
                             mca_btl_base_registration_handle_t *remote_handle,
                             mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                             mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                             void *cbdata);
int opal_btl_usnic_atomic_fop(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *endpoint,
                              void *local_address, uint64_t remote_address,
                              mca_btl_base_registration_handle_t *local_handle,
                              mca_btl_base_registration_handle_t *remote_handle,
                              mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                              mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                              void *cbdata);
int opal_btl_usnic_atomic_cswap(mca_btl_base_module_t *btl,
                                struct mca_btl_base_endpoint_t *endpoint, void *local_address,
                                uint64_t remote_address,
                                mca_btl_base_registration_handle_t *local_handle,
                                mca_btl_base_registration_handle_t *remote_handle,
                                uint64_t compare, uint64_t value, int flags, int order,
                                mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                void *cbdata);

END_C_DECLS
#endif /* BTL_USNIC_RDMA_H */
