// table_action_run.p4 -- switch on action_run, directional action parameters,
// exit and return.
//
// Covers: `switch (t.apply().action_run)` with action labels, a label that
// ends with `return` and a `default` label; an action with a directional
// parameter (inout bit<8> f) bound in the table's actions list and a
// directionless parameter supplied as action data; an action with an `in`
// parameter bound to a field; `exit` inside an action (ends ingress at once,
// egress still runs); `return` inside an action (leaves only the action);
// `return` in the control's apply block.
// h.r = which switch case ran; h.tail = 0x77 unless return/exit skipped it;
// egress always sets h.eg = 0x99.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> x;
    bit<8> r;
    bit<8> tail;
    bit<8> eg;
}

struct headers_t { h_t h; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action act_a() {
        hdr.h.x = hdr.h.x + 1;
    }
    action act_b() {
        hdr.h.x = hdr.h.x + 2;
    }
    action act_exit() {
        hdr.h.r = 0xE1;
        exit;
    }
    action set_f(inout bit<8> f, bit<8> v) {
        f = v;
    }
    action add_in(in bit<8> base, bit<8> v) {
        hdr.h.x = base + v;
    }
    action set_nz(bit<8> v) {
        if (v == 0) {
            return;
        }
        hdr.h.x = v;
    }

    table tbl_sw {
        key = {
            hdr.h.k: exact;
        }
        actions = {
            act_a;
            act_b;
            act_exit;
            set_f(hdr.h.x);
            add_in(hdr.h.k);
            set_nz;
            NoAction;
        }
        default_action = NoAction();
    }

    apply {
        standard_metadata.egress_spec = 1;
        switch (tbl_sw.apply().action_run) {
            act_a: {
                hdr.h.r = 0xA0;
            }
            act_b: {
                hdr.h.r = 0xB0;
                return;
            }
            default: {
                hdr.h.r = 0xDD;
            }
        }
        hdr.h.tail = 0x77;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.eg = 0x99;
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
