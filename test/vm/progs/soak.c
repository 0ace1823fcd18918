/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* Soak: many-to-many traffic of mixed sizes for R rounds; every rank sends one
 * message to every other rank per round, sizes from 0 B to 256 KiB, each byte
 * checked.  Resident memory is sampled after the first tenth of the rounds
 * (warm-up) and at the end; growth beyond -g MB fails the run.
 *   soak [-r ROUNDS] [-g MAX_GROWTH_MB]
 * Prints "soak: OK N messages, B bytes verified, rss A -> B KiB". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const size_t sizes[] = {0, 1, 8, 100, 700, 740, 4000, 4100, 12000, 40000,
                               150000, 262144};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint8_t pat(uint64_t seed, size_t i)
{
    uint64_t x = seed + i * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint8_t)(x >> 32);
}

/* Mostly small messages, some medium, few large, as applications mix them. */
static size_t size_of(int src, int dst, long round)
{
    uint64_t h = (uint64_t) round * 2654435761u + (uint64_t) src * 40503u + (uint64_t) dst;
    unsigned r = (unsigned)(h % 100);
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
    long rounds = 200, growth_mb = 16, errors = 0, msgs = 0, bytes = 0, rss_warm = 0, rss_end;
    int rank, n, opt;
    uint8_t **sbuf, **rbuf;
    MPI_Request *req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    while ((opt = getopt(argc, argv, "r:g:")) != -1) {
        if ('r' == opt) {
            rounds = atol(optarg);
        } else if ('g' == opt) {
            growth_mb = atol(optarg);
        }
    }
    sbuf = calloc(n, sizeof(*sbuf));
    rbuf = calloc(n, sizeof(*rbuf));
    req = calloc(2 * n, sizeof(*req));
    for (int p = 0; p < n; ++p) {
        sbuf[p] = malloc(sizes[NSIZES - 1]);
        rbuf[p] = malloc(sizes[NSIZES - 1]);
    }
    for (long r = 0; r < rounds; ++r) {
        int nreq = 0;
        if (r == rounds / 10) {
            rss_warm = rss_kib();
        }
        for (int p = 0; p < n; ++p) {
            size_t len;
            if (p == rank) {
                continue;
            }
            len = size_of(p, rank, r);
            MPI_Irecv(rbuf[p], (int) len, MPI_BYTE, p, (int)(r & 0x7fff), MPI_COMM_WORLD,
                      &req[nreq++]);
        }
        for (int p = 0; p < n; ++p) {
            size_t len;
            if (p == rank) {
                continue;
            }
            len = size_of(rank, p, r);
            for (size_t i = 0; i < len; ++i) {
                sbuf[p][i] = pat(((uint64_t) rank << 40) ^ ((uint64_t) p << 20) ^ (uint64_t) r, i);
            }
            MPI_Isend(sbuf[p], (int) len, MPI_BYTE, p, (int)(r & 0x7fff), MPI_COMM_WORLD,
                      &req[nreq++]);
        }
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        for (int p = 0; p < n; ++p) {
            size_t len;
            uint64_t seed;
            if (p == rank) {
                continue;
            }
            len = size_of(p, rank, r);
            seed = ((uint64_t) p << 40) ^ ((uint64_t) rank << 20) ^ (uint64_t) r;
            for (size_t i = 0; i < len; ++i) {
                if (rbuf[p][i] != pat(seed, i)) {
                    if (errors++ < 5) {
                        printf("soak: MISMATCH rank %d from %d round %ld size %zu offset %zu\n",
                               rank, p, r, len, i);
                    }
                    break;
                }
            }
            ++msgs;
            bytes += (long) len;
        }
    }
    rss_end = rss_kib();
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &msgs, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("soak: rank %d rss %ld -> %ld KiB\n", rank, rss_warm, rss_end);
    if (rss_end - rss_warm > growth_mb * 1024) {
        printf("soak: MEMORY rank %d grew by %ld KiB after warm-up (limit %ld MiB)\n", rank,
               rss_end - rss_warm, growth_mb);
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
    for (int p = 0; p < n; ++p) {
        free(sbuf[p]);
        free(rbuf[p]);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    MPI_Finalize();
    return errors != 0;
}
