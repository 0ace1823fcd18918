/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* A linked list that every rank appends to, in a dynamic window (passive target).
 *
 * Every element is memory of its own from MPI_Alloc_mem, attached to an MPI_Win_create_dynamic
 * window; an element is named by (rank, address from MPI_Get_address). Rank 0 owns the head.
 * A rank appends LLIST_PER_RANK elements (default 32) one after the other: under
 * MPI_Win_lock(MPI_LOCK_EXCLUSIVE) on the owner of the tail it believes in, it
 * MPI_Compare_and_swap's the tail's next rank from "none" to its own and, if that won,
 * MPI_Put's its element's address beside it (same epoch); if another rank won, it MPI_Get's the
 * next element (a further exclusive lock/unlock pair) and tries again there. Ranks lock and
 * target their own window too (rank 0 for the head, every rank whose element is the tail).
 * Then rank 0 walks the list (lock, get, unlock per element) and checks that every rank's
 * elements are there, each once and in the order the rank appended them; it sends the
 * verdict to all. Prints "llist: OK N messages, B bytes verified" and the datagram bound
 * (common.h) and, from rank 0, "llist: appended N elements in S s".
 */
#include "common.h"

#include <stddef.h>

typedef struct {
    MPI_Aint next_disp;         /* address of the next element at next_rank */
    int next_rank;              /* -1: this is the tail */
    int value;                  /* rank * 1000000 + sequence number */
} elem_t;

#define NONE (-1)

/* Argument "create": the elements are slots of one MPI_Alloc_mem pool per rank, exposed with
 * MPI_Win_create, and named by their offset in it (the same list without a dynamic window). */
static elem_t *pool;
static int pool_used;

/* One element, fresh and attached (dynamic) or the next slot of the pool; its target
 * displacement in *disp. */
static elem_t *new_elem(MPI_Win win, int value, MPI_Aint *disp)
{
    elem_t *e;

    if (NULL != pool) {
        e = &pool[pool_used];
        *disp = (MPI_Aint) (pool_used++ * sizeof(*e));
    } else if (MPI_SUCCESS != MPI_Alloc_mem(sizeof(*e), MPI_INFO_NULL, &e)) {
        dp_fail("MPI_Alloc_mem failed");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    e->next_disp = 0;
    e->next_rank = NONE;
    e->value = value;
    if (NULL == pool) {
        MPI_Win_attach(win, e, sizeof(*e));
        MPI_Get_address(e, disp);
    }
    return e;
}

int main(int argc, char **argv)
{
    int per_rank = NULL != getenv("LLIST_PER_RANK") ? atoi(getenv("LLIST_PER_RANK")) : 32;
    elem_t **mine, *head = NULL;
    MPI_Aint head_disp = 0, tail_disp;
    int tail_rank, ok = 1, total = 0;
    double t0;
    MPI_Win win;

    dp_init("llist", &argc, &argv);
    if (argc > 1 && 0 == strcmp(argv[1], "create")) {
        MPI_Alloc_mem((MPI_Aint) (per_rank + 1) * sizeof(elem_t), MPI_INFO_NULL, &pool);
        MPI_Win_create(pool, (MPI_Aint) (per_rank + 1) * sizeof(elem_t), 1, MPI_INFO_NULL,
                       MPI_COMM_WORLD, &win);
    } else {
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    }
    if (0 == dp_rank) {
        head = new_elem(win, -1, &head_disp);
    }
    MPI_Bcast(&head_disp, 1, MPI_AINT, 0, MPI_COMM_WORLD);
    mine = dp_malloc((size_t) per_rank * sizeof(*mine));
    MPI_Barrier(MPI_COMM_WORLD);

    t0 = dp_now();
    tail_rank = 0;
    tail_disp = head_disp;
    for (int i = 0; i < per_rank; ++i) {
        MPI_Aint my_disp;
        mine[i] = new_elem(win, dp_rank * 1000000 + i, &my_disp);
        for (;;) {
            int none = NONE, me = dp_rank, old = NONE;
            elem_t next;

            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, tail_rank, 0, win);
            MPI_Compare_and_swap(&me, &none, &old, MPI_INT, tail_rank,
                                 tail_disp + offsetof(elem_t, next_rank), win);
            MPI_Win_flush(tail_rank, win);
            if (NONE == old) {
                MPI_Put(&my_disp, 1, MPI_AINT, tail_rank, tail_disp + offsetof(elem_t, next_disp),
                        1, MPI_AINT, win);
            }
            MPI_Win_unlock(tail_rank, win);
            if (NONE == old) {
                break;
            }
            /* someone else appended here: move on to the element it appended */
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, tail_rank, 0, win);
            MPI_Get(&next, sizeof(next), MPI_BYTE, tail_rank, tail_disp, sizeof(next), MPI_BYTE,
                    win);
            MPI_Win_unlock(tail_rank, win);
            if (next.next_rank != old || next.next_rank < 0 || next.next_rank >= dp_size) {
                dp_fail("element %d:%#lx: compare-and-swap returned next rank %d, get %d",
                        tail_rank, (unsigned long) tail_disp, old, next.next_rank);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            tail_rank = next.next_rank;
            tail_disp = next.next_disp;
        }
        /* our element is the tail now (until someone appends) */
        tail_rank = dp_rank;
        tail_disp = my_disp;
    }
    MPI_Barrier(MPI_COMM_WORLD);

    if (0 == dp_rank) {
        printf("llist: appended %d elements in %.2f s\n", dp_size * per_rank, dp_now() - t0);
        fflush(stdout);
    }
    /* every rank walks the list from the head, each element a remote read under an
     * exclusive lock (the walks contend with each other) */
    {
        int *seen = calloc((size_t) dp_size, sizeof(int));
        int rank = 0;
        MPI_Aint disp = head_disp;
        elem_t e;

        for (;;) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
            MPI_Get(&e, sizeof(e), MPI_BYTE, rank, disp, sizeof(e), MPI_BYTE, win);
            MPI_Win_unlock(rank, win);
            if (0 != total) {
                int owner = e.value / 1000000, seq = e.value % 1000000;
                if (owner != rank || seq != seen[owner]) {
                    dp_fail("element %d of the list is %d:%d, expected %d:%d", total, owner,
                            seq, rank, seen[rank]);
                    ok = 0;
                    break;
                }
                ++seen[owner];
                dp_verified(sizeof(e));
            }
            if (dp_host_of[rank] != dp_my_host) {
                dp_count_bytes_in(sizeof(e));
            }
            if (NONE == e.next_rank) {
                break;
            }
            if (e.next_rank < 0 || e.next_rank >= dp_size || total++ >= dp_size * per_rank) {
                dp_fail("list broken after %d elements (next rank %d)", total, e.next_rank);
                ok = 0;
                break;
            }
            rank = e.next_rank;
            disp = e.next_disp;
        }
        for (int r = 0; ok && r < dp_size; ++r) {
            if (seen[r] != per_rank) {
                dp_fail("rank %d has %d elements in the list, expected %d", r, seen[r],
                        per_rank);
                ok = 0;
            }
        }
        free(seen);
    }

    MPI_Win_free(&win);
    for (int i = 0; NULL == pool && i < per_rank; ++i) {
        MPI_Free_mem(mine[i]);
    }
    if (NULL == pool && NULL != head) {
        MPI_Free_mem(head);
    }
    if (NULL != pool) {
        MPI_Free_mem(pool);
    }
    free(mine);
    return dp_finish();
}
