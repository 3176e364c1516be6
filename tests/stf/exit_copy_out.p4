// exit_copy_out.p4 -- `exit` still copies out/inout arguments back (P4-16 "Exit statement":
// the copy-out of the enclosing action or control, and of all its callers, is performed).
//
// Covers: an action with an inout scalar argument that executes `exit` (called directly and
// from a table whose actions list binds the argument); an action that calls such an action
// and exits through it (both copy-outs, innermost first); a nested control with an inout
// scalar and an inout header that exits from its apply block; a function with an inout
// argument called by an action that then exits. Statements after the call never run when it
// exits: `tail` stays as received.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> sel;  // which case runs
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> tail; // set to 0xFF at the end of ingress (only when nothing exits)
}

header g_t {
    bit<8> e;
    bit<8> f;
}

struct headers_t {
    h_t h;
    g_t g;
}

struct meta_t { }

bit<8> incr(inout bit<8> v) {
    v = v + 1;
    return v;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.g);
        transition accept;
    }
}

control Child(inout bit<8> x, inout g_t gg) {
    apply {
        x = x + 1;
        gg.e = 0xEE;
        if (x == 0x11) {
            exit;
        }
        x = 0x77;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    Child() child;

    action set_and_exit(inout bit<8> v) {
        v = 0xA1;
        exit;
    }

    action outer(inout bit<8> v) {
        v = 0xB0;
        set_and_exit(v);
        v = 0xBF;
    }

    action count_and_exit(inout bit<8> v) {
        bit<8> r = incr(v);
        hdr.g.f = r;
        exit;
    }

    table t {
        key = { hdr.h.sel: exact; }
        actions = { set_and_exit(hdr.h.c); NoAction; }
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        if (hdr.h.sel == 1) {
            set_and_exit(hdr.h.a);
        } else if (hdr.h.sel == 2) {
            outer(hdr.h.b);
        } else if (hdr.h.sel == 3) {
            t.apply();
        } else if (hdr.h.sel == 4) {
            child.apply(hdr.h.d, hdr.g);
        } else if (hdr.h.sel == 5) {
            count_and_exit(hdr.h.a);
        }
        hdr.h.tail = 0xFF;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.g); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;
