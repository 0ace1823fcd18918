/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* oldqkey PID VPID T_FROM T_TO QKEY: whether QKEY is the Q_Key the usnic BTL used to derive
 * (opal_rand seeded with pid ^ time ^ vpid, low 31 bits) for that process at any second
 * T_FROM..T_TO: what anyone who sees the process list could compute. Prints the verdict;
 * exits 1 if predictable, 0 if not, 2 on bad arguments. Build with mpicc, -lopen-pal. */
#include "opal_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "opal/util/alfg.h"

int main(int argc, char **argv)
{
    unsigned long pid, vpid, from, to, qkey;

    if (6 != argc) {
        fprintf(stderr, "usage: oldqkey PID VPID T_FROM T_TO QKEY\n");
        return 2;
    }
    pid = strtoul(argv[1], NULL, 0);
    vpid = strtoul(argv[2], NULL, 0);
    from = strtoul(argv[3], NULL, 0);
    to = strtoul(argv[4], NULL, 0);
    qkey = strtoul(argv[5], NULL, 0);
    for (unsigned long t = from; t <= to; ++t) {
        opal_rng_buff_t rng;
        uint32_t k;

        opal_srand(&rng, (uint32_t)(pid ^ t ^ vpid));
        /* (a zero seed gives only zeros: the old code hung there) */
        for (int tries = 0; tries < 8 && 0 == (k = opal_rand(&rng) & 0x7fffffffu); ++tries) {
        }
        if (k == qkey) {
            printf("oldqkey: Q_Key 0x%08lx of pid %lu is predictable (time %lu)\n", qkey, pid, t);
            return 1;
        }
    }
    printf("oldqkey: Q_Key 0x%08lx of pid %lu matches no time in %lu..%lu\n", qkey, pid, from, to);
    return 0;
}
