// table_initial_entries.p4 -- P4-16 1.2.4 initial entries: `entries` without `const` (the
// control plane may add to them), `const` on single entries, `priority=N:`, and the table
// properties `largest_priority_wins` and `priority_delta` (P4-16 "Entry priorities").
//
// Covers: a ternary table with largest_priority_wins = false and priority_delta = 10 whose
// entries are, in order: priority=10, (20), (30), priority=5, (15) -- the values in
// parentheses computed from the previous entry; the smallest value wins. An exact table with
// mutable initial entries to which the STF file adds one more.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> r;  // entry of t_prio that won (FF: default)
    bit<8> s;  // action data of t_mut's entry (00: default)
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

    action set_s(bit<8> v) {
        hdr.h.s = v;
    }

    table t_prio {
        key = { hdr.h.k: ternary; }
        actions = { set_r; }
        default_action = set_r(0xFF);
        largest_priority_wins = false;
        priority_delta = 10;
        entries = {
            const priority=10: 0x10 &&& 0xF0 : set_r(1);
                               0x11 &&& 0xFF : set_r(2);
                               0x12 &&& 0xFE : set_r(3);
                  priority=5:  0x03 &&& 0x0F : set_r(4);
                               0x20 &&& 0xF0 : set_r(5);
        }
    }

    table t_mut {
        key = { hdr.h.k: exact; }
        actions = { set_s; NoAction; }
        default_action = NoAction();
        entries = {
                  0x11 : set_s(0xA1);
            const 0x12 : set_s(0xA2);
        }
    }

    apply {
        sm.egress_spec = 1;
        t_prio.apply();
        t_mut.apply();
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;
