// for_loops.p4 -- for statements (P4-16 1.2.4), with break and continue.
//
// Covers: the three-clause form with two declarations in the initialiser and
// two comma-separated updates (bit<8> wrap-around of a loop variable); a
// loop whose condition is `true` (left by exit or return); `continue`, which
// still runs the update; `break` out of the inner of two nested loops only;
// `break` inside a switch inside a loop (leaves the loop: P4's switch has no
// break of its own); the range form `for (T i in a .. b)` with both bounds
// included, evaluated once (the body changing a bound does not matter), an
// empty range and a range up to the type's maximum; the header-stack form
// `for (T e in stack)`, where e is a copy of each element in turn (changing e
// leaves the stack alone); `for (j = a; ...)` assigning a variable declared
// before the loop (it keeps its value); loops in actions chosen by a table, in a control's
// apply block and in a function that returns from inside its loop.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  mode;
    bit<8>  count;
    bit<8>  a;
    bit<16> sum;
    bit<8>  aux;
}

header e_t {
    bit<8> v;
}

struct headers_t {
    h_t    h;
    e_t[4] s;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.mode) {
            4: parse_s;
            default: accept;
        }
    }
    // elements up to and including the first zero
    state parse_s {
        pkt.extract(hdr.s.next);
        transition select(hdr.s.last.v) {
            0: accept;
            default: parse_s;
        }
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

// the position of the lowest set bit of x, 0xff for none
bit<8> lowest_set(in bit<16> x) {
    bit<16> y = x;
    for (bit<8> i = 0; i < 16; i = i + 1) {
        if (y[0:0] == 1) {
            return i;
        }
        y = y >> 1;
    }
    return 0xff;
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    // mode 1: sum = 1 + 2 + ... + count; aux = the last w (doubling, bit<8>)
    action sum_to() {
        hdr.h.sum = 0;
        for (bit<8> i = 1, bit<8> w = 1; i <= hdr.h.count; i = i + 1, w = w << 1) {
            hdr.h.sum = hdr.h.sum + (bit<16>) i;
            hdr.h.aux = w;
        }
    }

    // mode 2: the odd i below count, stopping at i == a; aux = the last one added
    action odd_until() {
        hdr.h.sum = 0;
        for (bit<8> i = 0; i < hdr.h.count; i = i + 1) {
            if (i == hdr.h.a) {
                break;
            }
            if ((i & 1) == 0) {
                continue;
            }
            hdr.h.sum = hdr.h.sum + (bit<16>) i;
            hdr.h.aux = i;
        }
    }

    // mode 3: sum of a .. count; aux counts the iterations; count is cleared inside
    action range_sum() {
        hdr.h.sum = 0;
        for (bit<8> i in hdr.h.a .. hdr.h.count) {
            hdr.h.sum = hdr.h.sum + (bit<16>) i;
            hdr.h.count = 0;
            hdr.h.aux = hdr.h.aux + 1;
        }
    }

    // mode 4: sum of the valid stack elements; aux counts them
    action stack_sum() {
        hdr.h.sum = 0;
        for (e_t e in hdr.s) {
            if (e.isValid()) {
                hdr.h.sum = hdr.h.sum + (bit<16>) e.v;
                hdr.h.aux = hdr.h.aux + 1;
                e.v = 0xee;
            }
        }
    }

    // mode 5: count rows of min(a, 3) each; aux counts the rows
    action rows() {
        hdr.h.sum = 0;
        for (bit<8> i = 0; i < hdr.h.count; i = i + 1) {
            for (bit<8> j = 0; j < hdr.h.a; j = j + 1) {
                if (j == 3) {
                    break;
                }
                hdr.h.sum = hdr.h.sum + 1;
            }
            hdr.h.aux = hdr.h.aux + 1;
        }
    }

    table modes {
        key = { hdr.h.mode: exact; }
        actions = { sum_to; odd_until; range_sum; stack_sum; rows; NoAction; }
        const entries = {
            1: sum_to();
            2: odd_until();
            3: range_sum();
            4: stack_sum();
            5: rows();
        }
        default_action = NoAction();
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.h.mode == 6) {
            // always true: left by exit when i reaches count, by return at 100
            bit<8> i = 0;
            for (; true; ) {
                i = i + 1;
                if (i == hdr.h.count) {
                    hdr.h.sum = (bit<16>) i;
                    standard_metadata.egress_spec = 2;
                    exit;
                }
                if (i == 100) {
                    return;
                }
            }
        }
        if (hdr.h.mode == 7) {
            for (bit<8> i in 0 .. 9) {
                switch (i) {
                    2: { hdr.h.aux = hdr.h.aux + 1; }
                    5: { break; }
                    default: { hdr.h.sum = hdr.h.sum + 1; }
                }
            }
        }
        if (hdr.h.mode == 8) {
            hdr.h.aux = lowest_set(hdr.h.sum);
        }
        if (hdr.h.mode == 9) {
            // the three-clause form over a variable declared before it: it keeps its
            // value after the loop
            bit<8> j = 0xff;
            for (j = hdr.h.a; j <= hdr.h.count; j = j + 1) {
                hdr.h.sum = hdr.h.sum + (bit<16>) j;
            }
            hdr.h.aux = j;
        }
        modes.apply();
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
