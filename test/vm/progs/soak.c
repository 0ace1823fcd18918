/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* Soak: many-to-many traffic of mixed sizes for R rounds; every rank sends K
 * messages to every other rank per round, the first of mixed sizes from 0 B to
 * 256 KiB, the others small, each byte checked.  Resident memory is sampled after the first fifth of the rounds
 * (warm-up: free lists and windows grown) and at the end; a rank whose growth
 * over the messages it sent to ranks on other hosts in between (those usnic
 * carries; as many as it received from them) is more than -b bytes per message
 * fails the run (a leak per message shows as that many bytes each).
 *   soak [-r ROUNDS] [-k K] [-b MAX_BYTES_PER_MESSAGE]
 * Prints per rank "soak: rank R rss A -> B KiB: G bytes per message over M
 * messages", then "soak: OK N messages, B bytes verified". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const size_t sizes[] = {0, 1, 8, 100, 700, 740, 4000, 4100, 12000, 40000,
                               150000, 262144};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* The pattern of a message: 8 bytes per hash of (seed, word index), so that
 * every byte depends on its message and position at little CPU per byte. */
static uint64_t pat_word(uint64_t seed, size_t w)
{
    uint64_t x = seed + (uint64_t) w * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return x;
}

static void pat_fill(uint8_t *b, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x = pat_word(seed, i / 8);
        memcpy(b + i, &x, len - i < 8 ? len - i : 8);
    }
}

/* the offset of the first byte that differs from the pattern, or len */
static size_t pat_check(const uint8_t *b, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x = pat_word(seed, i / 8);
        size_t n = len - i < 8 ? len - i : 8;
        if (0 != memcmp(b + i, &x, n)) {
            for (size_t j = 0; j < n; ++j) {
                if (b[i + j] != ((const uint8_t *) &x)[j]) {
                    return i + j;
                }
            }
        }
    }
    return len;
}

/* Mostly small messages, some medium, few large, as applications mix them; the
 * messages after the first of a pair's round (-k) are small (up to 740 B): many
 * messages for the memory bound at little time. */
static size_t size_of(int src, int dst, long m, int k)
{
    uint64_t h = (uint64_t) m * 2654435761u + (uint64_t) src * 40503u + (uint64_t) dst;
    unsigned r = (unsigned)(h % 100);
    if (0 != m % k) {
        return sizes[h % 6];
    }
    return r < 60 ? sizes[h % 6] : r < 95 ? sizes[6 + h % 4] : sizes[10 + h % 2];
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (NULL != f) {
        if (2 != fscanf(f, "%ld %ld", &pages, &resident)) {
            resident = 0;
        }
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv)
{
    long rounds = 200, max_per_msg = 16, errors = 0, msgs = 0, bytes = 0, rss_warm = 0, rss_end;
    long remote = 0, warm_remote = 0, mine;
    char *hosts;
    double per_msg;
    int rank, n, opt, k = 1;
    uint8_t **sbuf, **rbuf;
    MPI_Request *req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    /* which ranks are on other hosts: the messages usnic carries */
    {
        char me[MPI_MAX_PROCESSOR_NAME] = "";
        int len;
        MPI_Get_processor_name(me, &len);
        hosts = calloc((size_t) n, MPI_MAX_PROCESSOR_NAME);
        MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME,
                      MPI_CHAR, MPI_COMM_WORLD);
    }
    while ((opt = getopt(argc, argv, "r:k:b:")) != -1) {
        if ('r' == opt) {
            rounds = atol(optarg);
        } else if ('k' == opt) {
            k = atoi(optarg) > 0 ? atoi(optarg) : 1;
        } else if ('b' == opt) {
            max_per_msg = atol(optarg);
        }
    }
    /* slot p * k + j: the j-th message of a round to or from rank p */
    sbuf = calloc((size_t) n * k, sizeof(*sbuf));
    rbuf = calloc((size_t) n * k, sizeof(*rbuf));
    req = calloc(2 * (size_t) n * k, sizeof(*req));
    for (int q = 0; q < n * k; ++q) {
        sbuf[q] = malloc(sizes[NSIZES - 1]);
        rbuf[q] = malloc(sizes[NSIZES - 1]);
    }
    for (long r = 0; r < rounds; ++r) {
        int nreq = 0;
        if (r == rounds / 5) {
            rss_warm = rss_kib();
            warm_remote = remote;
        }
        for (int p = 0; p < n; ++p) {
            for (int j = 0; j < k && p != rank; ++j) {
                long m = r * k + j;
                MPI_Irecv(rbuf[p * k + j], (int) size_of(p, rank, m, k), MPI_BYTE, p,
                          (int)(m & 0x7fff), MPI_COMM_WORLD, &req[nreq++]);
            }
        }
        for (int p = 0; p < n; ++p) {
            for (int j = 0; j < k && p != rank; ++j) {
                long m = r * k + j;
                size_t len = size_of(rank, p, m, k);
                uint8_t *b = sbuf[p * k + j];
                pat_fill(b, len, ((uint64_t) rank << 40) ^ ((uint64_t) p << 20) ^ (uint64_t) m);
                if (0 != strcmp(hosts + (size_t) p * MPI_MAX_PROCESSOR_NAME,
                                hosts + (size_t) rank * MPI_MAX_PROCESSOR_NAME)) {
                    ++remote;
                }
                MPI_Isend(b, (int) len, MPI_BYTE, p, (int)(m & 0x7fff), MPI_COMM_WORLD,
                          &req[nreq++]);
            }
        }
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        for (int p = 0; p < n; ++p) {
            for (int j = 0; j < k && p != rank; ++j) {
                long m = r * k + j;
                size_t len = size_of(p, rank, m, k);
                uint64_t seed = ((uint64_t) p << 40) ^ ((uint64_t) rank << 20) ^ (uint64_t) m;
                const uint8_t *b = rbuf[p * k + j];
                size_t off = pat_check(b, len, seed);
                if (off != len && errors++ < 5) {
                    printf("soak: MISMATCH rank %d from %d message %ld size %zu offset %zu\n",
                           rank, p, m, len, off);
                }
                ++msgs;
                bytes += (long) len;
            }
        }
    }
    rss_end = rss_kib();
    /* sent to other hosts after the warm-up (as many as received from them) */
    mine = remote - warm_remote;
    per_msg = mine > 0 ? (double) (rss_end - rss_warm) * 1024 / (double) mine : 0.0;
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &msgs, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("soak: rank %d rss %ld -> %ld KiB: %.1f bytes per message over %ld messages to other "
           "hosts\n", rank, rss_warm, rss_end, per_msg, mine);
    if (per_msg > (double) max_per_msg) {
        printf("soak: MEMORY rank %d grew by %ld KiB after warm-up, %.1f bytes per message "
               "(limit %ld)\n", rank, rss_end - rss_warm, per_msg, max_per_msg);
        errors++;
    }
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (0 == rank) {
        if (0 == errors) {
            printf("soak: OK %ld messages, %ld bytes verified\n", msgs, bytes);
        } else {
            printf("soak: FAILED %ld errors\n", errors);
        }
    }
    for (int q = 0; q < n * k; ++q) {
        free(sbuf[q]);
        free(rbuf[q]);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(hosts);
    MPI_Finalize();
    return errors != 0;
}
