/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * libFuzzer harness of the usnic BTL's receive path; input format in
 * fuzz_recv.h.
 *
 * Inputs run in an engine world (test/unit/engine_world.h): two modules
 * over the fake device, A and B, one endpoint each toward the other, all
 * of the component's code real.  An input's datagrams arrive at B's queue
 * pairs as if from the wire, and B's progress runs the real completion
 * handling, packet validation, sender lookup, window checks, ACK
 * processing, chunk reassembly and PUT target checks.  What B sends back
 * (ACKs, and its own traffic when the options ask for some) is taken off
 * the fake wire and dropped, or with FUZZ_OPT_NET carried to A, whose
 * answers come back to B.
 *
 * World lifetime.  Building a world maps and touches some 12 MB of
 * buffers (about 3 ms under AddressSanitizer), so a world is kept for
 * FUZZ_REBUILD_EVERY inputs (environment; default 256), and rebuilt
 * sooner when it looks wedged: a module died, an endpoint is gone, or B
 * cannot get its own traffic acknowledged.  After each input, A
 * acknowledges all of B's traffic (a valid ACK through the real receive
 * path); before each input, the harness forgets what the test PML
 * received, empties the wire, zeroes the statistics and gives both
 * endpoints the receive state of a new endpoint (tidy_world).  Sequence
 * numbers in inputs are rebased (fuzz_recv.h), so an input means the
 * same in a kept world as in a fresh one.  Without the receive reset,
 * fragments left half reassembled by one input make the same fragment
 * ids busy for every later one, and the corpus stops reproducing its own
 * coverage.
 *
 * Reproducing.  A kept world still differs from a fresh one (free list
 * order, where the windows stand), so a crash may need the inputs before
 * it: on any sanitizer report the harness writes every input of the
 * current world, in order, to <artifact_prefix>history-<pid>/ and prints
 * how to replay them.  FUZZ_REBUILD_EVERY=1 gives every input a world of
 * its own (fully reproducible, about 300 inputs/s).
 *
 * Leaks.  libFuzzer's per-input leak check (-detect_leaks) cannot tell
 * state a kept world holds on purpose from a leak: it re-runs and scans
 * after most inputs and finds nothing; run with -detect_leaks=0.
 * Instead, whenever a world is released, the harness runs LeakSanitizer
 * itself: whatever the component lost during the world's lifetime is
 * unreachable then and is reported (as a crash, with the history).  The
 * only objects exempted are the test fixture's (ignore_mca_strings).
 *
 * The PUT region has poisoned parts (AddressSanitizer manual poisoning):
 * a guard in front, the unregistered gap, the part registered without
 * remote-write permission, and the writable part too while an input has
 * it deregistered (FUZZ_OPT_DEREG).  A PUT the component lets through
 * into any of them is reported as a use-after-poison write.
 */

#include "opal_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>

/* The coverage build (make cover) has no sanitizers. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN
#endif
#endif
#ifdef HAVE_LSAN
#define lsan_ignore(p) __lsan_ignore_object(p)
#define lsan_check() __lsan_do_recoverable_leak_check()
#else
#define lsan_ignore(p) ((void) (p))
#define lsan_check() 0
#endif

#include "opal/mca/btl/btl.h"
#include "opal/runtime/opal.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_wire.h"

#include "engine_world.h"
#include "fake_device.h"
#include "fuzz_recv.h"

#define GUARD 4096
#define DEFAULT_REBUILD_EVERY 256

static uint8_t region_mem[GUARD + FUZZ_REGION_SIZE] __attribute__((aligned(4096)));
static uint8_t *const region = region_mem + GUARD;

static world_t *world;
static mca_btl_base_registration_handle_t *rw_handle;  /* B's writable part of the region */
static bool dereg_allowed = true;
static unsigned long rebuild_every = DEFAULT_REBUILD_EVERY;
static bool wedged;
static unsigned long warnings_left = FUZZ_WARN_LIMIT;

/* The inputs of the current world, for the history written on a crash. */
typedef struct {
    uint8_t *data;
    size_t size;
} hist_t;
static hist_t *history;
static size_t nhistory;
static char artifact_prefix[512] = "./";

void (*fuzz_after_input)(world_t *w);

world_t *fuzz_world(void)
{
    return world;
}

uint8_t *fuzz_put_region(void)
{
    return region;
}

/* ------------------------------------------------------------------ */
/* crash history                                                       */

static void forget_history(void)
{
    for (size_t i = 0; i < nhistory; ++i) {
        free(history[i].data);
    }
    nhistory = 0;
}

static void remember_input(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size);

    if (NULL == copy) {
        abort();
    }
    memcpy(copy, data, size);
    /* rebuild_every bounds the count, except for FUZZ_REBUILD_EVERY=1,
     * where the one slot is reused */
    if (NULL == history) {
        history = calloc(rebuild_every + 1, sizeof(*history));
        if (NULL == history) {
            abort();
        }
    }
    if (nhistory > rebuild_every) {
        forget_history();
    }
    history[nhistory].data = copy;
    history[nhistory].size = size;
    ++nhistory;
}

static void write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            return;
        }
        p += n;
        len -= (size_t) n;
    }
}

/* Called by every sanitizer report (AddressSanitizer, UndefinedBehavior-
 * Sanitizer, LeakSanitizer) with its one-line summary, before the process
 * dies: print it as the default hook does, then save the history.  No
 * malloc here: the allocator may be what failed. */
void __sanitizer_report_error_summary(const char *summary);
void __sanitizer_report_error_summary(const char *summary)
{
    static bool done;
    char dir[600], path[640], line[1400];
    int n;

    n = snprintf(line, sizeof(line), "%s\n", summary);
    write_all(2, line, (size_t) n);
    if (done || 0 == nhistory) {
        return;
    }
    done = true;
    snprintf(dir, sizeof(dir), "%shistory-%d", artifact_prefix, (int) getpid());
    if (0 != mkdir(dir, 0755) && EEXIST != errno) {
        return;
    }
    for (size_t i = 0; i < nhistory; ++i) {
        int fd;
        snprintf(path, sizeof(path), "%s/%06zu", dir, i + 1);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            return;
        }
        write_all(fd, history[i].data, history[i].size);
        close(fd);
    }
    n = snprintf(line, sizeof(line),
                 "fuzz_recv: the %zu inputs this world has run, in order, are in %s/\n"
                 "fuzz_recv: replay them in one world with\n"
                 "    FUZZ_REBUILD_EVERY=%zu <fuzz_recv> -detect_leaks=0 %s/*\n",
                 nhistory, dir, nhistory + 1, dir);
    write_all(2, line, (size_t) n);
}

/* ------------------------------------------------------------------ */
/* the world                                                           */

/* Everything but memory registered for remote writes is poisoned. */
static void poison_region(bool writable)
{
    ASAN_UNPOISON_MEMORY_REGION(region_mem, sizeof(region_mem));
    ASAN_POISON_MEMORY_REGION(region_mem, GUARD);
    ASAN_POISON_MEMORY_REGION(region + FUZZ_PUT_RW_LEN, FUZZ_REGION_SIZE - FUZZ_PUT_RW_LEN);
    if (!writable) {
        ASAN_POISON_MEMORY_REGION(region, FUZZ_PUT_RW_LEN);
    }
}

/* Key 0 stands for the key of the live registration in the slot ref names. */
static void live_key(world_t *w, usnic_reg_ref_t *ref)
{
    usnic_reg_ref_t r;
    const opal_btl_usnic_regs_t *regs = &w->regtab[SIDE_B];

    memcpy(&r, ref, sizeof(r));
    if (0 == r.key && r.index < regs->used && NULL != regs->slot[r.index].t) {
        r.key = regs->slot[r.index].key;
        memcpy(ref, &r, sizeof(r));
    }
}

static bool register_rw(world_t *w)
{
    /* remote writes (PUT), reads (GET) and atomics */
    rw_handle = world_register(w, SIDE_B, region, FUZZ_PUT_RW_LEN,
                               MCA_BTL_REG_FLAG_REMOTE_WRITE | MCA_BTL_REG_FLAG_REMOTE_READ |
                                   MCA_BTL_REG_FLAG_REMOTE_ATOMIC);
    poison_region(NULL != rw_handle);
    return NULL != rw_handle;
}

static void deregister_rw(world_t *w)
{
    if (NULL != rw_handle) {
        world_deregister(w, SIDE_B, rw_handle);
        rw_handle = NULL;
        poison_region(false);
    }
}

/* world_new re-registers the component's MCA parameters
 * (fake_component_reset): the MCA base puts a copy of every string value
 * into the variable's storage in the component object, and the reset
 * overwrites that storage with the pristine object's, losing the copy.
 * A few bytes per world, of the test fixture and not of the component:
 * LeakSanitizer is told to ignore exactly these objects.  (A suppression
 * by stack does not work: libopen-pal has no frame pointers, so the fast
 * unwinder never sees the fixture's frames.) */
static void ignore_mca_strings(void)
{
    char *strings[] = {usnic_component.if_include, usnic_component.if_exclude,
                       usnic_component.rcache_name, usnic_component.mpool_hints,
                       usnic_component.connectivity_map_prefix};

    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); ++i) {
        if (NULL != strings[i]) {
            lsan_ignore(strings[i]);
        }
    }
}

/* Release the world; then nothing the component allocated for it may be
 * left unreachable. */
static void release_world(void)
{
    if (NULL == world || !world->live) {
        return;
    }
    world_fini(world);
    if (0 != lsan_check()) {
        fprintf(stderr, "fuzz_recv: memory leaked during the last world's %zu inputs\n",
                nhistory);
        abort();
    }
}

static void build_world(void)
{
    release_world();
    forget_history();
    world = world_new(FUZZ_ISN_A, FUZZ_ISN_B);
    ignore_mca_strings();
    if (NULL == world || !register_rw(world) ||
        NULL == world_register(world, SIDE_B, region + FUZZ_PUT_RO_OFF,
                               FUZZ_REGION_SIZE - FUZZ_PUT_RO_OFF, MCA_BTL_REG_FLAG_LOCAL_WRITE)) {
        fprintf(stderr, "fuzz_recv: cannot build the engine world\n");
        abort();
    }
    wedged = false;
}

/* Whether the kept world can take another input. */
static bool world_usable(const world_t *w)
{
    return NULL != w && w->live && !wedged && nhistory < rebuild_every &&
           !w->mods[SIDE_A].dead && !w->mods[SIDE_B].dead && 0 == fake_dev.fatal_calls &&
           NULL != w->ep[SIDE_A] && NULL != w->ep[SIDE_B];
}

static void drain_wire(void)
{
    fake_dgram_t d;

    while (fake_wire_take(0, &d)) {
        fake_dgram_free(&d);
    }
}

/* The receive state of a newly set up endpoint whose peer starts at
 * first_seq: no fragment under reassembly (freed as endpoint_destruct
 * frees them), no out-of-order receipt recorded. */
static void fresh_rx(opal_btl_usnic_endpoint_t *ep, uint16_t first_seq)
{
    if (NULL != ep->rx_frags) {
        for (int i = 0; i < USNIC_RX_FRAG_SLOTS; ++i) {
            if (0 != ep->rx_frags[i].frag_id && 0 == ep->rx_frags[i].put_addr) {
                free(ep->rx_frags[i].buf);
            }
        }
        free(ep->rx_frags);
        ep->rx_frags = NULL;
    }
    usnic_rx_window_init(&ep->rx, first_seq, ep->rx.size, ep->rx_bits);
}

/* Between inputs: nothing received is kept, nothing is on the wire,
 * counters start at zero (the bad-packet warning fires at a count), and
 * both endpoints receive as if just set up, B from where its window
 * stands, A from where B's sends stand (settle_b left nothing of B in
 * flight; A may not have seen all of it).  Inputs then depend on what
 * ran before them only through the sequence numbers (rebased) and the
 * modules' free lists. */
static void tidy_world(world_t *w)
{
    for (size_t i = 0; i < w->nrx; ++i) {
        free(w->rx[i].data);
    }
    w->nrx = 0;
    drain_wire();
    for (int s = 0; s < 2; ++s) {
        memset(&w->mods[s].stats, 0, sizeof(w->mods[s].stats));
    }
    fresh_rx(w->ep[SIDE_B], w->ep[SIDE_B]->rx.next_contig);
    fresh_rx(w->ep[SIDE_A], w->ep[SIDE_B]->tx.next_seq_to_send);
}

/* One progress pass of B, counted as the component's progress function
 * counts them (the tick count times standalone ACKs); without the
 * network, what B sent is dropped. */
static void progress_b(world_t *w, bool net)
{
    if (net) {
        /* A and B progress, the network carries both ways */
        world_step(w);
        world_step(w);
    } else {
        ++usnic_component.progress_ticks;
        world_progress(w, SIDE_B);
        drain_wire();
    }
}

static void send_traffic(world_t *w, int what, bool net)
{
    switch (what) {
    case FUZZ_TRAFFIC_ONE:
        world_send(w, SIDE_B, FUZZ_SMALL_MSG, SEND_ALLOC);
        break;
    case FUZZ_TRAFFIC_FOUR:
        for (int i = 0; i < 4; ++i) {
            world_send(w, SIDE_B, FUZZ_SMALL_MSG, SEND_ALLOC);
        }
        break;
    case FUZZ_TRAFFIC_LARGE:
        world_send(w, SIDE_B, FUZZ_LARGE_MSG, SEND_PREPARE);
        world_send(w, SIDE_B, FUZZ_SMALL_MSG, SEND_ALLOC);
        break;
    default:
        return;
    }
    /* The data segments go out (and are lost unless the network runs):
     * B now has segments waiting for ACKs. */
    progress_b(w, net);
}

/* A acknowledges everything B ever sent, so that the next input finds B
 * with nothing in flight.  If B then still has something in flight, the
 * world is rebuilt before the next input. */
static void settle_b(world_t *w)
{
    opal_btl_usnic_endpoint_t *ep = w->ep[SIDE_B];

    for (int round = 0; round < 4 && NULL != ep && 0 != usnic_tx_window_inflight(&ep->tx);
         ++round) {
        usnic_btl_header_t h;

        world_header(w, SIDE_A, &h, USNIC_PAYLOAD_TYPE_ACK);
        h.ack_present = 1;
        h.ack_seq = (uint16_t)(ep->tx.next_seq_to_send - 1);
        world_inject(w, SIDE_B, USNIC_PRIORITY_CHANNEL, &h, sizeof(h));
        progress_b(w, false);
    }
    drain_wire();
    if (NULL == ep || 0 != usnic_tx_window_inflight(&ep->tx) ||
        !opal_list_is_empty(&ep->send_queue)) {
        wedged = true;
    }
}

/* ------------------------------------------------------------------ */
/* libFuzzer entry points                                              */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char *args[] = {"fuzz_recv", NULL};
    int ac = 1;
    char **av = args;
    const char *env = getenv("FUZZ_REBUILD_EVERY");

    for (int i = 1; i < *argc; ++i) {
        if (0 == strncmp((*argv)[i], "-artifact_prefix=", 17)) {
            snprintf(artifact_prefix, sizeof(artifact_prefix), "%s", (*argv)[i] + 17);
        }
    }
    /* No Open MPI stack-trace handlers (opal_signal) in place of the
     * sanitizers' and libFuzzer's own. */
    setenv("OMPI_MCA_opal_signal", "", 1);
    if (OPAL_SUCCESS != opal_init_util(&ac, &av)) {
        fprintf(stderr, "fuzz_recv: opal_init_util failed\n");
        abort();
    }
    if (NULL != env && atol(env) > 0) {
        rebuild_every = (unsigned long) atol(env);
    }
    env = getenv("FUZZ_NO_DEREG");
    dereg_allowed = NULL == env || 0 != strcmp(env, "1");
    build_world();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t dgram[FUZZ_REC_PAD_MASK + 1];
    opal_btl_usnic_endpoint_t *ep;
    uint16_t rx_off, tx_off;
    uint8_t opt;
    bool net, pending = false;
    size_t pos = 1;
    world_t *w;

    if (size < 1) {
        return 0;
    }
    if (!world_usable(world)) {
        build_world();
    }
    w = world;
    remember_input(data, size);
    tidy_world(w);
    ep = w->ep[SIDE_B];
    rx_off = (uint16_t)(ep->rx.next_contig - FUZZ_ISN_A);
    tx_off = (uint16_t)(ep->tx.next_seq_to_send - FUZZ_ISN_B);

    opt = data[0];
    net = 0 != (opt & FUZZ_OPT_NET);
    /* The warning reads a help file and prints a box: reach it, but not
     * for every input that asks (FUZZ_WARN_LIMIT). */
    usnic_component.max_short_packets = 0;
    if ((opt & FUZZ_OPT_WARN) && warnings_left > 0) {
        --warnings_left;
        usnic_component.max_short_packets = 1;
    }
    send_traffic(w, (opt & FUZZ_OPT_TRAFFIC_MASK) >> FUZZ_OPT_TRAFFIC_SHIFT, net);

    while (pos + 2 <= size) {
        uint16_t word = (uint16_t)(data[pos] | (data[pos + 1] << 8));
        size_t len = word & FUZZ_REC_LEN_MASK, full;
        int channel = (opt & FUZZ_OPT_DATA_CHANNEL) ? USNIC_DATA_CHANNEL : USNIC_PRIORITY_CHANNEL;

        pos += 2;
        full = 0;
        if (word & FUZZ_REC_PAD) {
            if (pos + 2 > size) {
                break;
            }
            full = (size_t)(data[pos] | (data[pos + 1] << 8)) & FUZZ_REC_PAD_MASK;
            pos += 2;
        }
        if (len > size - pos) {
            len = size - pos;
        }
        if (word & FUZZ_REC_OTHER_CHANNEL) {
            channel = USNIC_DATA_CHANNEL + USNIC_PRIORITY_CHANNEL - channel;
        }
        memcpy(dgram, data + pos, len);
        pos += len;
        if (full > len) {
            memset(dgram + len, 0, full - len);
            len = full;
        }
        if (len >= sizeof(usnic_btl_header_t)) {
            usnic_btl_header_t *h = (usnic_btl_header_t *) dgram;
            size_t ref_at = USNIC_PAYLOAD_TYPE_CHUNK == h->payload_type
                                ? sizeof(usnic_btl_chunk_header_t)
                                : sizeof(*h);
            if (0 != h->put_addr) {
                h->put_addr += (uint64_t)(uintptr_t) region - FUZZ_PUT_BASE;
            }
            /* the registration a PUT names */
            if (usnic_is_put(h->tag, h->put_addr) && USNIC_PAYLOAD_TYPE_ACK != h->payload_type &&
                len >= ref_at + sizeof(usnic_reg_ref_t)) {
                live_key(w, (usnic_reg_ref_t *) (dgram + ref_at));
            }
            /* the target address and registration of a GET/atomic request
             * in a small fragment */
            if (USNIC_PAYLOAD_TYPE_FRAG == h->payload_type && USNIC_TAG_RDMA == h->tag &&
                len >= sizeof(*h) + sizeof(usnic_rdma_msg_t)) {
                usnic_rdma_msg_t m;
                memcpy(&m, h + 1, sizeof(m));
                if (0 != m.addr && USNIC_RDMA_REPLY != m.kind) {
                    m.addr += (uint64_t)(uintptr_t) region - FUZZ_PUT_BASE;
                    live_key(w, &m.reg);
                    memcpy(h + 1, &m, sizeof(m));
                }
            }
            h->pkt_seq = (uint16_t)(h->pkt_seq + rx_off);
            h->ack_seq = (uint16_t)(h->ack_seq + tx_off);
        }
        /* A queue pair without a posted buffer drops the datagram, as a
         * real one would. */
        world_inject(w, SIDE_B, channel, dgram, (uint32_t) len);
        pending = true;
        if (!(word & FUZZ_REC_BATCH)) {
            progress_b(w, net);
            pending = false;
        }
        if ((opt & FUZZ_OPT_DEREG) && dereg_allowed && !pending) {
            deregister_rw(w);
        }
    }
    if (pending) {
        progress_b(w, net);
    }
    if (opt & FUZZ_OPT_SEND_AFTER) {
        world_send(w, SIDE_B, FUZZ_SMALL_MSG, SEND_ALLOC);
        progress_b(w, net);
    }

    /* Owed ACKs go out after ack_iteration_delay passes. */
    for (int i = 0; i <= usnic_component.ack_iteration_delay + 1; ++i) {
        progress_b(w, net);
    }
    if (opt & FUZZ_OPT_TIMEOUTS) {
        world_fire_timeouts(w, SIDE_B);
        progress_b(w, net);
    }
    drain_wire();
    if (NULL != fuzz_after_input) {
        fuzz_after_input(w);
    }
    settle_b(w);
    if (NULL == rw_handle && !register_rw(w)) {
        wedged = true;
    }

    if (rebuild_every <= 1) {
        /* Released (and checked for leaks) before libFuzzer looks at
         * this input's mallocs and frees. */
        release_world();
    }
    return 0;
}
