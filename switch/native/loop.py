"""The data path's wait-and-round loop in C: rounds and waits without returning to Python.

``tf_loop_run`` (built once per machine through cffi, like the generated programs, into the
same cache) runs a program's ``tf_ring_round`` (given by address: the loop is one shared
object for every program) again and again, and between rounds does what the daemon's Python
loop does (:meth:`switch.daemon.SwitchDaemon.run_loop`): another round at once after a full
one (first giving the core to any other process waiting for it, ``--yield-when-full``), a
``--coalesce-us`` sleep after a round that found several frames, ``--busy-poll``
spinning, else ``ppoll`` on the ports' rings and the wake-up pipe until a frame, a wake-up or
the next departure of a packet waiting in a queue in C (half the burst allowance early), to the
microsecond. It gives the GIL back for all that time (cffi releases it around the call), so
the gRPC and runtime CLI threads run meanwhile.

It returns to Python only when Python has work (:data:`REASONS`): the wake-up flag or pipe
(a control-plane thread wants the device lock, a PacketOut, a stop), a round that left
something for Python's path (a packet for the traffic manager or the CPU port, a full TX ring's
output, a frame for the rings' slow path), a digest, the deadline Python gave (at most the idle
wait), the drop log nearly full, or a port's socket reporting an error. What the rounds counted
accumulates for Python to read back once: the ports' counters stay in the ``tf_port`` structs
(the rounds add to them), the touched ports' bits are OR-ed, the drops logged one after the
other, the frames and dequeued packets summed.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from switch.native.build import compiled
from switch.native.runtime_c import RING_TYPES

# Why tf_loop_run returned (tf_loop.reason).
WAKE, PYTHON, DIGEST, DEADLINE, DROPS, PORT_ERROR, BAD = 1, 2, 3, 4, 5, 6, 7
REASONS = {
    WAKE: "the wake-up flag or pipe: a control-plane thread, a PacketOut, a stop",
    PYTHON: "a round left work for Python's path (jobs, a full TX ring's output, an odd frame)",
    DIGEST: "the program produced a digest",
    DEADLINE: "the deadline Python gave",
    DROPS: "the drop log is nearly full",
    PORT_ERROR: "a port's socket reported an error (tf_loop.err_port)",
    BAD: "bad arguments",
}
REASON_NAMES = {
    WAKE: "wake",
    PYTHON: "python",
    DIGEST: "digest",
    DEADLINE: "deadline",
    DROPS: "drops",
    PORT_ERROR: "port_error",
    BAD: "bad",
}
"""Short names of :data:`REASONS` (the runtime CLI's ``show_loop``)."""

LOOP_TYPE = """
typedef struct {
    int64_t start_ns; int wake_fd; const int *wake_flag; int limit;
    int coalesce_us, busy_us, yield_full; double early_us; int64_t deadline_us; const uint64_t *digests;
    int *drop_code; int *drop_port; int drop_cap;
    int start; int reason; int err_port; int ndrop; uint64_t touched;
    int64_t got, deq, rounds, sleeps, polls, yields; uint64_t now;
} tf_loop;
"""
"""The loop's state, shared by Python (cffi) and C: arguments in, what the call did out."""

CDEF = (
    RING_TYPES
    + LOOP_TYPE
    + """
int tf_loop_run(uintptr_t round_fn, uintptr_t X, uintptr_t P, int np, uintptr_t pmap,
                int pmap_n, uintptr_t R, tf_loop *L);
"""
)

SOURCE = (
    r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
"""
    + RING_TYPES
    + LOOP_TYPE
    + r"""

typedef int (*tf_round_fn)(void *X, tf_port *P, int np, int start, int limit, uint64_t now,
                           const int16_t *pmap, int pmap_n, tf_round *R);

enum { L_WAKE = 1, L_PYTHON, L_DIGEST, L_DEADLINE, L_DROPS, L_PORT_ERROR, L_BAD };
#define L_MAX_PORTS 64

static inline int64_t loop_now_us(const tf_loop *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - L->start_ns) / 1000;
}

static inline int loop_woken(const tf_loop *L) {
    return __atomic_load_n(L->wake_flag, __ATOMIC_ACQUIRE) != 0;
}

/* wait up to us microseconds on the wake-up pipe (and the rings when fds > 1): 1 the wake-up
   fired, -(k + 2) port k's socket has an error, 0 otherwise */
static int loop_wait(tf_loop *L, struct pollfd *fds, int nfds, const tf_port *P, int64_t us) {
    if (us < 0) us = 0;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    for (int i = 0; i < nfds; i++) fds[i].revents = 0;
    int rc = ppoll(fds, (nfds_t)nfds, &ts, NULL);
    if (rc <= 0) return 0;  /* the time, or EINTR: the caller looks again */
    if (fds[0].revents) return 1;
    for (int i = 1; i < nfds; i++)
        if (fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            /* an error with a frame still ready is read first (as the Python loop does) */
            const tf_port *p = &P[i - 1];
            const uint8_t *slot = p->rx + (size_t)p->rx_idx * p->rx_fs;
            if (!(__atomic_load_n((const uint32_t *)slot, __ATOMIC_ACQUIRE) & 1u))
                return -(i - 1) - 2;
        }
    return 0;
}

int tf_loop_run(uintptr_t round_fn, uintptr_t X, uintptr_t Pa, int np, uintptr_t pmap,
                int pmap_n, uintptr_t Ra, tf_loop *L) {
    tf_round_fn round = (tf_round_fn)round_fn;
    tf_port *P = (tf_port *)Pa;
    tf_round *R = (tf_round *)Ra;
    L->reason = 0; L->err_port = -1; L->ndrop = 0; L->touched = 0;
    L->got = L->deq = L->rounds = L->sleeps = L->polls = L->yields = 0;
    if (!round || !X || !P || !R || np <= 0 || np > L_MAX_PORTS || L->limit <= 0
        || L->drop_cap < L->limit || L->start < 0 || L->start >= np) {
        L->reason = L_BAD;
        return -1;
    }
    struct pollfd fds[L_MAX_PORTS + 1];
    fds[0].fd = L->wake_fd; fds[0].events = POLLIN;
    for (int k = 0; k < np; k++) { fds[k + 1].fd = P[k].fd; fds[k + 1].events = POLLIN; }
    int *code0 = R->drop_code, *port0 = R->drop_port, cap0 = R->drop_cap;
    int64_t last_work = -1;
    for (;;) {
        if (loop_woken(L)) { L->reason = L_WAKE; break; }
        int64_t now = loop_now_us(L);
        if (now >= L->deadline_us) { L->reason = L_DEADLINE; break; }
        if (L->drop_cap - L->ndrop < L->limit) { L->reason = L_DROPS; break; }
        R->drop_code = L->drop_code + L->ndrop;
        R->drop_port = L->drop_port + L->ndrop;
        R->drop_cap = L->drop_cap - L->ndrop;
        int got = round((void *)X, P, np, L->start, L->limit, (uint64_t)now,
                        (const int16_t *)pmap, pmap_n, R);
        L->now = (uint64_t)now;
        L->start = L->start + 1 < np ? L->start + 1 : 0;
        L->rounds++;
        L->got += got;
        L->deq += R->ndeq;
        L->ndrop += R->ndrop;
        L->touched |= R->touched;
        if (R->nspill || R->spill_kind || R->odd) { L->reason = L_PYTHON; break; }
        if (*L->digests) { L->reason = L_DIGEST; break; }
        if (got >= L->limit) {
            /* more are waiting, surely; but a process that keeps the core for a whole time
               slice overruns the rings of the switches it feeds, which then drop what it did */
            if (L->yield_full) { L->yields++; sched_yield(); }
            continue;
        }
        if (got || R->ndeq) last_work = now;
        /* the next departure of a packet waiting in a queue in C, half the burst early */
        double nxt = -1;
        for (int k = 0; k < np; k++)
            if (P[k].cq_n && (nxt < 0 || P[k].next_free < nxt)) nxt = P[k].next_free;
        int64_t wait = L->deadline_us - now;
        if (nxt >= 0 && (int64_t)(nxt - L->early_us) - now < wait)
            wait = (int64_t)(nxt - L->early_us) - now;
        if (wait <= 0) continue;
        if (L->busy_us && last_work >= 0 && now - last_work < L->busy_us) continue;
        int w;
        if (got > 1 && L->coalesce_us) {
            /* frames arrive faster than a round: let a batch gather (a wake-up ends it) */
            L->sleeps++;
            w = loop_wait(L, fds, 1, P, wait < L->coalesce_us ? wait : L->coalesce_us);
        } else {
            L->polls++;
            w = loop_wait(L, fds, np + 1, P, wait);
        }
        if (w == 1) { L->reason = L_WAKE; break; }
        if (w < 0) { L->reason = L_PORT_ERROR; L->err_port = -w - 2; break; }
    }
    R->drop_code = code0; R->drop_port = port0; R->drop_cap = cap0;
    return L->reason;
}
"""
)

_loaded: list[ModuleType] = []


def load() -> ModuleType:
    """The compiled loop (``ffi``, ``lib``), built now unless cached.

    Raises:
        BuildError: no compiler, or the loop did not compile (the message says why).
    """
    if not _loaded:
        _loaded.append(compiled("_tf_loop_", SOURCE, CDEF, what="the switch loop's C"))
    return _loaded[0]


def address(ffi: Any, obj: Any) -> int:
    """The address of a cdata of another cffi module (for tf_loop_run's ``uintptr_t``)."""
    return int(ffi.cast("uintptr_t", obj))
