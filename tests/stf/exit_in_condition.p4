// exit_in_condition.p4 -- `exit` inside an expression stops its evaluation there.
//
// P4-16 ("Exit statement"): exit terminates the execution of the top-level control at once;
// with left-to-right, short-circuit evaluation of `&&`, `||` and `+` operands, a table applied
// after the one whose action exits never runs, and the statement holding the expression has
// no further effect. Covers: `t1.apply().hit && t2.apply().hit` in an if condition;
// `t1.apply().miss || t2.apply().hit`; table results added in an assignment. t2's action
// bumps `y` and counts in counter `seen`, so an apply that should not happen shows in the
// packet and in the counter; `tail` is set after the condition (only when nothing exits).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> sel;  // high nibble: which case; table keys
    bit<8> x;    // 0xE1 when t1's action exits
    bit<8> y;    // +1 per t2 apply that ran its action
    bit<8> z;    // value of the assignment case
    bit<8> tail; // 0xAA/0xBB from the branches, |0x0F at the end
}

struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control Ing(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    counter(4, CounterType.packets) seen;

    action stop() {
        hdr.h.x = 0xE1;
        exit;
    }
    action go() {
        hdr.h.x = 0x60;
    }
    action mark() {
        hdr.h.y = hdr.h.y + 1;
        seen.count((bit<32>)hdr.h.sel[5:4]);
    }

    table t1 {
        key = { hdr.h.sel: exact; }
        actions = { stop; go; NoAction; }
        const entries = {
            0x01: stop();
            0x02: go();
            0x11: stop();
            0x12: go();
            0x21: stop();
            0x23: go();
        }
        default_action = NoAction();
    }

    table t2 {
        key = { hdr.h.sel: exact; }
        actions = { mark; NoAction; }
        const entries = {
            0x01: mark();
            0x02: mark();
            0x11: mark();
            0x12: mark();
            0x21: mark();
            0x22: mark();
            0x23: mark();
        }
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        if (hdr.h.sel[7:4] == 0) {
            if (t1.apply().hit && t2.apply().hit) {
                hdr.h.tail = 0xAA;
            } else {
                hdr.h.tail = 0xBB;
            }
        } else if (hdr.h.sel[7:4] == 1) {
            hdr.h.z = (t1.apply().hit ? 8w0x10 : 8w0x20) + (t2.apply().hit ? 8w1 : 8w2);
        } else {
            if (t1.apply().miss || t2.apply().hit) {
                hdr.h.tail = 0xAA;
            } else {
                hdr.h.tail = 0xBB;
            }
        }
        hdr.h.tail = hdr.h.tail | 0x0F;
    }
}

control Eg(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
