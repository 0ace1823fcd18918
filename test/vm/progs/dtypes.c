/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* dtypes: non-contiguous derived datatypes across the hosts, checked element by element.
 *
 * Types (each instance's blocks are known to the program, so every byte can be placed):
 *   vector   MPI_Type_vector(B, 3, 5, MPI_DOUBLE): 24-byte blocks 40 bytes apart
 *   indexed  MPI_Type_indexed over MPI_INT: block lengths 1,3,2,7,4,1,5,16 ints with gaps of
 *            1,0,2,5,1,3,0,9 ints (gap 0: blocks that touch), every 4th/5th block listed in
 *            swapped order (the typemap, not memory, gives the packed order)
 *   struct   MPI_Type_create_struct of {int32; double; char[3]; short} (17 data bytes,
 *            4 padding bytes in a 24-byte extent), resized to its C extent
 * at about 600 B (fast path), 3000 B (one datagram), 24 KB (> 16 KiB: usnic packs chunk by
 * chunk, "lazy"), 200 KB (> the 150 KiB eager limit: rendezvous) and 480 KB (several
 * max_send_size fragments) of packed data, as COUNT instances of a type whose instance holds
 * up to 16 KiB (struct: 17 bytes).
 * For each type and size the two ranks of each cross-host pair exchange, both ways at once:
 *   d->d  send the derived type, receive the derived type: data bytes at the right place, every
 *         gap and padding byte of the receive buffer still poisoned
 *   d->c  send the derived type, receive its packed form contiguously (MPI_DOUBLE, MPI_INT, or
 *         a packed 17-byte struct type with the same signature)
 *   c->d  send the packed form, receive the derived type
 * The data byte at packed position p of a message is pattern(type, size, direction, p); a
 * mismatch is reported with its instance, block and byte. Counts (MPI_Get_count in the
 * receive type) are checked too.
 *
 * Usage: dtypes [-s SIZE,SIZE,...] [-t vector|indexed|struct]
 */
#include "common.h"

#include <stddef.h>

enum { T_VECTOR, T_INDEXED, T_STRUCT, NTYPES };
static const char *type_name[NTYPES] = {"vector", "indexed", "struct"};

/* One derived type with its layout: nblk blocks (typemap order) within one extent. */
typedef struct {
    MPI_Datatype dtype;      /* the non-contiguous type */
    MPI_Datatype ctype;      /* its packed, contiguous form (same signature) */
    int cper;                /* ctype elements per instance */
    int nblk;
    size_t *disp, *len;      /* bytes */
    size_t extent, data;     /* per instance */
} layout_t;

typedef struct {
    int32_t a;
    double b;
    char c[3];
    short d;
} rec_t;

static void add_block(layout_t *l, size_t disp, size_t len)
{
    l->disp[l->nblk] = disp;
    l->len[l->nblk] = len;
    l->nblk++;
    l->data += len;
}

/* a type of kind t whose instance holds at most inst_bytes of data (at least one block) */
static void make_type(layout_t *l, int t, size_t inst_bytes)
{
    MPI_Aint lb, ext;

    memset(l, 0, sizeof(*l));
    if (T_VECTOR == t) {
        int b = inst_bytes / 24 > 0 ? (int)(inst_bytes / 24) : 1;
        l->disp = dp_malloc(b * sizeof(size_t));
        l->len = dp_malloc(b * sizeof(size_t));
        for (int i = 0; i < b; ++i) {
            add_block(l, (size_t) i * 40, 24);
        }
        MPI_Type_vector(b, 3, 5, MPI_DOUBLE, &l->dtype);
        l->ctype = MPI_DOUBLE;
        l->cper = 3 * b;
    } else if (T_INDEXED == t) {
        static const int lens[8] = {1, 3, 2, 7, 4, 1, 5, 16}, gaps[8] = {1, 0, 2, 5, 1, 3, 0, 9};
        int cap = (int)(inst_bytes / 4) + 1, n = 0, pos = 0, ints = 0;
        int *bl = dp_malloc(cap * sizeof(int)), *dl = dp_malloc(cap * sizeof(int));
        /* memory order first */
        while (0 == n || (size_t)(ints + lens[n % 8]) * 4 <= inst_bytes) {
            bl[n] = lens[n % 8];
            dl[n] = pos;
            ints += bl[n];
            pos += bl[n] + gaps[n % 8];
            ++n;
        }
        /* typemap order: swap blocks 4k and 4k+1 for every odd k */
        for (int i = 4; i + 1 < n; i += 8) {
            int x = bl[i];
            bl[i] = bl[i + 1];
            bl[i + 1] = x;
            x = dl[i];
            dl[i] = dl[i + 1];
            dl[i + 1] = x;
        }
        l->disp = dp_malloc(n * sizeof(size_t));
        l->len = dp_malloc(n * sizeof(size_t));
        for (int i = 0; i < n; ++i) {
            add_block(l, (size_t) dl[i] * 4, (size_t) bl[i] * 4);
        }
        MPI_Type_indexed(n, bl, dl, MPI_INT, &l->dtype);
        l->ctype = MPI_INT;
        l->cper = ints;
        free(bl);
        free(dl);
    } else {
        int bl[4] = {1, 1, 3, 1};
        MPI_Aint d[4] = {offsetof(rec_t, a), offsetof(rec_t, b), offsetof(rec_t, c),
                         offsetof(rec_t, d)};
        MPI_Aint pd[4] = {0, 4, 12, 15};
        MPI_Datatype ty[4] = {MPI_INT32_T, MPI_DOUBLE, MPI_CHAR, MPI_SHORT}, tmp;

        l->disp = dp_malloc(4 * sizeof(size_t));
        l->len = dp_malloc(4 * sizeof(size_t));
        add_block(l, d[0], 4);
        add_block(l, d[1], 8);
        add_block(l, d[2], 3);
        add_block(l, d[3], 2);
        MPI_Type_create_struct(4, bl, d, ty, &tmp);
        MPI_Type_create_resized(tmp, 0, sizeof(rec_t), &l->dtype);
        MPI_Type_free(&tmp);
        /* the packed record: same signature, no gaps, 17-byte extent */
        MPI_Type_create_struct(4, bl, pd, ty, &tmp);
        MPI_Type_create_resized(tmp, 0, 17, &l->ctype);
        MPI_Type_free(&tmp);
        MPI_Type_commit(&l->ctype);
        l->cper = 1;
    }
    MPI_Type_commit(&l->dtype);
    MPI_Type_get_extent(l->dtype, &lb, &ext);
    l->extent = (size_t) ext;
    if (T_STRUCT == t && (0 != lb || sizeof(rec_t) != l->extent || 24 != l->extent)) {
        dp_fail("struct type: lb %ld extent %zu, expected 0 and 24", (long) lb, l->extent);
    }
}

static void free_type(layout_t *l)
{
    MPI_Type_free(&l->dtype);
    if (MPI_DOUBLE != l->ctype && MPI_INT != l->ctype) {
        MPI_Type_free(&l->ctype);
    }
    free(l->disp);
    free(l->len);
}

/* derived-layout buffer of `count` instances: data = stream `seed`, gaps = `gap` */
static void fill_derived(const layout_t *l, int count, uint8_t *buf, uint64_t seed, uint8_t gap)
{
    size_t p = 0;

    memset(buf, gap, l->extent * count);
    for (int r = 0; r < count; ++r) {
        for (int b = 0; b < l->nblk; ++b) {
            dp_gen(buf + r * l->extent + l->disp[b], l->len[b], seed, p);
            p += l->len[b];
        }
    }
}

/* the derived-layout receive buffer: every block holds its part of the stream, every byte that
 * is not in a block (gaps, padding, guard) still holds the poison */
static void check_derived(const layout_t *l, int count, const uint8_t *buf, uint64_t seed,
                          uint8_t poison, const char *ctx)
{
    size_t total = l->extent * count, p = 0;
    uint8_t *covered = calloc(total + DP_GUARD, 1), exp[4096];
    char where[300];
    bool reported = false;

    for (int r = 0; r < count && !reported; ++r) {
        for (int b = 0; b < l->nblk && !reported; ++b) {
            const uint8_t *blk = buf + r * l->extent + l->disp[b];
            size_t len = l->len[b];
            memset(covered + r * l->extent + l->disp[b], 1, len);
            for (size_t o = 0; o < len && !reported; o += sizeof(exp)) {
                size_t n = len - o < sizeof(exp) ? len - o : sizeof(exp);
                dp_gen(exp, n, seed, p + o);
                if (0 != memcmp(exp, blk + o, n)) {
                    size_t i = 0, nbad = 0;
                    while (exp[i] == blk[o + i]) {
                        ++i;
                    }
                    for (size_t j = i; j < n; ++j) {
                        nbad += exp[j] != blk[o + j];
                    }
                    snprintf(where, sizeof(where),
                             "%s: element at instance %d block %d byte %zu (packed position "
                             "%zu; %zu bad bytes in this piece)", ctx, r, b, o + i, p + o + i,
                             nbad);
                    dp_mismatch(where, (size_t)(blk + o + i - buf), exp[i], blk[o + i], nbad);
                    reported = true;
                }
            }
            p += len;
        }
    }
    if (!reported) {
        size_t first = (size_t) -1, nbad = 0;
        for (size_t i = 0; i < total + DP_GUARD; ++i) {
            if (!covered[i] && buf[i] != poison) {
                if ((size_t) -1 == first) {
                    first = i;
                }
                ++nbad;
            }
        }
        if (nbad) {
            snprintf(where, sizeof(where), "%s: byte outside the type's blocks (gap, padding "
                     "or guard) was written (instance %zu, byte %zu of its extent)", ctx,
                     first / l->extent, first % l->extent);
            dp_mismatch(where, first, poison, buf[first], nbad);
        }
    }
    free(covered);
}

static void check_count(const MPI_Status *st, MPI_Datatype t, int expected, int src,
                        const char *ctx)
{
    int count = -1;

    MPI_Get_count(st, t, &count);
    if (count != expected || st->MPI_SOURCE != src) {
        dp_fail("%s: MPI_Get_count %d from source %d, expected %d from %d", ctx, count,
                st->MPI_SOURCE, expected, src);
    }
}

/* one exchange with the partner, both directions at once.
 * how: 0 = d->d, 1 = d->c, 2 = c->d */
static void exchange(const layout_t *l, int count, int t, size_t target, int how, int partner)
{
    static const char *how_name[3] = {"d->d", "d->c", "c->d"};
    bool send_derived = 2 != how, recv_derived = 1 != how;
    size_t dbytes = l->extent * count, cbytes = l->data * count;
    size_t sbytes = send_derived ? dbytes : cbytes, rbytes = recv_derived ? dbytes : cbytes;
    uint8_t *sbuf = dp_malloc(sbytes), *rbuf = dp_malloc(rbytes + DP_GUARD);
    uint64_t sseed = dp_seed(t, target, how, dp_rank), rseed = dp_seed(t, target, how, partner);
    uint8_t poison = (uint8_t)(0x3c ^ how ^ t), gap = (uint8_t) ~poison;
    MPI_Request req[2];
    MPI_Status st[2];
    char ctx[200];

    if (send_derived) {
        fill_derived(l, count, sbuf, sseed, gap);
    } else {
        dp_gen(sbuf, cbytes, sseed, 0);
    }
    memset(rbuf, poison, rbytes + DP_GUARD);
    if (recv_derived) {
        MPI_Irecv(rbuf, count, l->dtype, partner, 40 + how, MPI_COMM_WORLD, &req[0]);
    } else {
        MPI_Irecv(rbuf, count * l->cper, l->ctype, partner, 40 + how, MPI_COMM_WORLD, &req[0]);
    }
    if (send_derived) {
        MPI_Isend(sbuf, count, l->dtype, partner, 40 + how, MPI_COMM_WORLD, &req[1]);
    } else {
        MPI_Isend(sbuf, count * l->cper, l->ctype, partner, 40 + how, MPI_COMM_WORLD, &req[1]);
    }
    MPI_Waitall(2, req, st);

    snprintf(ctx, sizeof(ctx), "%s %s from rank %d: %d x %zu data bytes (%zu total)",
             type_name[t], how_name[how], partner, count, l->data, cbytes);
    if (recv_derived) {
        check_count(&st[0], l->dtype, count, partner, ctx);
        check_derived(l, count, rbuf, rseed, poison, ctx);
    } else {
        check_count(&st[0], l->ctype, count * l->cper, partner, ctx);
        dp_check(rbuf, cbytes, rseed, 0, ctx);
        strncat(ctx, " (guard after the data)", sizeof(ctx) - strlen(ctx) - 1);
        dp_check_fill(rbuf + cbytes, DP_GUARD, poison, ctx);
    }
    dp_count_in(cbytes);
    dp_verified(cbytes);
    free(sbuf);
    free(rbuf);
}

int main(int argc, char **argv)
{
    static size_t default_sizes[] = {600, 3000, 24000, 200000, 480000};
    size_t *sizes = default_sizes;
    int nsizes = sizeof(default_sizes) / sizeof(default_sizes[0]), only = -1, partner;

    dp_init("dtypes", &argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-s")) {
            const char *p = argv[i + 1];
            sizes = dp_malloc(strlen(p) * sizeof(size_t));
            nsizes = 0;
            while (*p) {
                char *end;
                sizes[nsizes++] = strtoull(p, &end, 0);
                p = ',' == *end ? end + 1 : end;
                if (end == p && *p) {
                    break;
                }
            }
        } else if (0 == strcmp(argv[i], "-t")) {
            for (int t = 0; t < NTYPES; ++t) {
                if (0 == strcmp(argv[i + 1], type_name[t])) {
                    only = t;
                }
            }
        }
    }
    if (0 != dp_size % 2) {
        if (0 == dp_rank) {
            printf("dtypes: ERROR needs an even number of ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    partner = dp_rank < dp_size / 2 ? dp_rank + dp_size / 2 : dp_rank - dp_size / 2;
    if (dp_host_of[partner] == dp_my_host) {
        dp_fail("partner rank %d runs on my host: the pairs do not cross the hosts", partner);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int t = 0; t < NTYPES; ++t) {
        double tt = dp_now();
        if (only >= 0 && t != only) {
            continue;
        }
        for (int i = 0; i < nsizes; ++i) {
            layout_t l;
            int count;
            /* instances of at most 16 KiB of data that add up to about the size */
            size_t ninst = (sizes[i] + 16383) / 16384;
            make_type(&l, t, sizes[i] / (ninst > 0 ? ninst : 1));
            count = (int)((sizes[i] + l.data / 2) / l.data);
            count = count > 0 ? count : 1;
            if (0 == dp_rank) {
                printf("dtypes: %s ~%zu B: %d x (%d blocks, %zu data bytes, extent %zu) = %zu "
                       "bytes\n", type_name[t], sizes[i], count, l.nblk, l.data, l.extent,
                       l.data * count);
                fflush(stdout);
            }
            for (int how = 0; how < 3; ++how) {
                exchange(&l, count, t, sizes[i], how, partner);
            }
            free_type(&l);
        }
        dp_phase_done(type_name[t], tt);
    }
    return dp_finish();
}
