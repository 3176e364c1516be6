// table_entry_priority.p4 -- `@priority(n)` on `const entries` (p4c's annotation, written after
// the action; BMv2 lets the smallest number win) next to entries without one (p4c gives those
// their 1-based position as BMv2 priority).
//
// Covers: a ternary table whose const entries are, in program order: 0x11 &&& 0x0F with
// @priority(3), 0x31 (all bits, position 2), 0x21 &&& 0xF0 with @priority(1). A packet
// matching the first and third entries takes the third; one matching the first and second
// takes the second (position 2 beats @priority(3)); one matching only the first takes it; one
// matching none takes the default action.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> r;
}

struct headers_t {
    h_t h;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set_r(bit<8> v) {
        hdr.h.r = v;
    }

    table t {
        key = { hdr.h.k: ternary; }
        actions = { set_r; }
        default_action = set_r(0xFF);
        const entries = {
            0x11 &&& 0x0F : set_r(1) @priority(3);
            0x31          : set_r(2);
            0x21 &&& 0xF0 : set_r(3) @priority(1);
        }
    }

    apply {
        sm.egress_spec = 1;
        t.apply();
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;
