/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* A rank reuses a registration handle after its owner deregistered the memory (t-stalehandle).
 * Rank 1 registers a buffer with the usnic BTL, as osc does for a window, and gives rank 0 the
 * handle; rank 0 PUTs with it through the BTL (as osc/rdma does), which must arrive. Then rank 1
 * deregisters the buffer (MPI_Win_free) and registers the same memory again (a new window on
 * it), fills it with a sentinel and tells rank 0, which PUTs again with the old handle. That
 * PUT must not write: rank 1 checks the sentinel while rank 0's BTL is still sending it.
 * Prints (rank 1) "stalehandle: live PUT arrived", then "stalehandle: stale PUT refused,
 * memory intact" or "stalehandle: MISMATCH stale PUT wrote the memory"; (rank 0)
 * "stalehandle: stale PUT completed" if it ever completes. Internal interfaces (Open MPI 4.1):
 * the BTL module from mca_btl_base_modules_initialized, the endpoint from the BML. */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/bml/bml.h"
#include "ompi/proc/proc.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/btl/btl.h"
#include "opal/runtime/opal_progress.h"

#define LEN 4096
#define PUT_LEN 64

static volatile int put_status = 1;     /* 1: not completed */

static void put_done(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                     void *local, mca_btl_base_registration_handle_t *lh, void *ctx, void *data,
                     int status)
{
    (void) btl; (void) ep; (void) local; (void) lh; (void) ctx; (void) data;
    put_status = status;
}

static mca_btl_base_module_t *usnic_btl(void)
{
    mca_btl_base_selected_module_t *sm;

    OPAL_LIST_FOREACH (sm, &mca_btl_base_modules_initialized, mca_btl_base_selected_module_t) {
        if (0 == strcmp(sm->btl_component->btl_version.mca_component_name, "usnic")) {
            return sm->btl_module;
        }
    }
    return NULL;
}

static struct mca_btl_base_endpoint_t *endpoint_of(int rank, mca_btl_base_module_t *btl)
{
    ompi_proc_t *p = ompi_comm_peer_lookup(MPI_COMM_WORLD, rank);
    mca_bml_base_endpoint_t *be = p->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_BML];
    mca_bml_base_btl_t *bb;

    if (NULL == be) {
        return NULL;
    }
    bb = mca_bml_base_btl_array_find(&be->btl_rdma, btl);
    if (NULL == bb) {
        bb = mca_bml_base_btl_array_find(&be->btl_eager, btl);
    }
    return NULL == bb ? NULL : bb->btl_endpoint;
}

/* progress for secs seconds, or until the PUT completed */
static void progress(double secs, bool until_done)
{
    double t0 = MPI_Wtime();

    while (MPI_Wtime() - t0 < secs && !(until_done && 1 != put_status)) {
        opal_progress();
    }
}

int main(int argc, char **argv)
{
    mca_btl_base_module_t *btl;
    uint8_t msg[8 + 256], src[PUT_LEN];
    uint64_t addr;
    int rank, size, dummy = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    btl = usnic_btl();
    if (2 != size || NULL == btl || btl->btl_registration_handle_size > 256) {
        printf("stalehandle: ERROR rank %d: 2 ranks and the usnic BTL needed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (1 == rank) {
        uint8_t *buf = aligned_alloc(4096, LEN);
        mca_btl_base_registration_handle_t *h;
        uint32_t flags = MCA_BTL_REG_FLAG_REMOTE_WRITE | MCA_BTL_REG_FLAG_LOCAL_WRITE;
        bool intact = true;

        memset(buf, 0, LEN);
        h = btl->btl_register_mem(btl, NULL, buf, LEN, flags);
        addr = (uint64_t) (uintptr_t) buf;
        memcpy(msg, &addr, 8);
        memcpy(msg + 8, h, btl->btl_registration_handle_size);
        MPI_Send(msg, (int) sizeof(msg), MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        MPI_Recv(&dummy, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < PUT_LEN; ++i) {
            if (0x5a != buf[i]) {
                printf("stalehandle: ERROR rank 1: the PUT with the live handle did not arrive\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        printf("stalehandle: live PUT arrived\n");
        fflush(stdout);
        /* the window is freed, and a new one made on the same memory */
        btl->btl_deregister_mem(btl, h);
        h = btl->btl_register_mem(btl, NULL, buf, LEN, flags);
        memset(buf, 0x33, LEN);
        MPI_Send(&dummy, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        MPI_Recv(&dummy, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* the stale PUT and its resends arrive meanwhile */
        progress(3.0, false);
        for (int i = 0; i < LEN; ++i) {
            intact &= 0x33 == buf[i];
        }
        printf(intact ? "stalehandle: stale PUT refused, memory intact\n"
                      : "stalehandle: MISMATCH stale PUT wrote the memory\n");
        fflush(stdout);
        MPI_Send(&dummy, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
        MPI_Recv(&dummy, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        btl->btl_deregister_mem(btl, h);
    } else {
        struct mca_btl_base_endpoint_t *ep = endpoint_of(1, btl);
        mca_btl_base_registration_handle_t *h = (mca_btl_base_registration_handle_t *) (msg + 8);

        if (NULL == ep) {
            printf("stalehandle: ERROR rank 0: no usnic endpoint to rank 1\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Recv(msg, (int) sizeof(msg), MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        memcpy(&addr, msg, 8);
        memset(src, 0x5a, sizeof(src));
        if (OPAL_SUCCESS != btl->btl_put(btl, ep, src, addr, NULL, h, PUT_LEN, 0,
                                         MCA_BTL_NO_ORDER, put_done, NULL, NULL)) {
            printf("stalehandle: ERROR rank 0: btl_put failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        progress(20.0, true);
        if (OPAL_SUCCESS != put_status) {
            printf("stalehandle: ERROR rank 0: the live PUT completed with %d\n", put_status);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Send(&dummy, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
        MPI_Recv(&dummy, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        put_status = 1;
        memset(src, 0xee, sizeof(src));
        if (OPAL_SUCCESS != btl->btl_put(btl, ep, src, addr, NULL, h, PUT_LEN, 0,
                                         MCA_BTL_NO_ORDER, put_done, NULL, NULL)) {
            printf("stalehandle: ERROR rank 0: btl_put of the stale handle failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Send(&dummy, 1, MPI_INT, 1, 4, MPI_COMM_WORLD);
        MPI_Recv(&dummy, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* refused: resent until the peer timeout ends the job */
        progress(60.0, true);
        if (1 != put_status) {
            printf("stalehandle: stale PUT completed (status %d)\n", put_status);
        }
        MPI_Send(&dummy, 1, MPI_INT, 1, 6, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
