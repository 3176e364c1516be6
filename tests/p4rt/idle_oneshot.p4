// idle_oneshot.p4 -- one-shot action selector programming and table idle timeouts.
//
// t_idle (exact, direct actions) and t_sel (an action selector) support idle
// timeouts; t_selm's selector counts members, not weights; t_prof uses an
// action profile without a selector and t_plain is a direct table without
// idle timeouts. Each table writes hdr.h.out when it hits,
// in that order, so a packet's out byte says which entry (or selector member)
// a lookup picked.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  kind;
    bit<16> sel;
    bit<8>  out;
}

struct headers_t {
    h_t h;
}

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
    @max_group_size(8)
    action_selector(HashAlgorithm.crc16, 32, 16) ecmp;
    @max_group_size(3)
    @selector_size_semantics("sum_of_members")
    @max_member_weight(5)
    action_selector(HashAlgorithm.crc16, 32, 16) ecmp_m;
    action_profile(16) prof;

    action set_out(bit<8> v) {
        hdr.h.out = v;
    }
    action set_out_port(bit<8> v, bit<9> port) {
        hdr.h.out = v;
        standard_metadata.egress_spec = port;
    }

    table t_idle {
        key = { hdr.h.kind: exact; }
        actions = { set_out; NoAction; }
        default_action = NoAction();
        support_timeout = true;
    }
    table t_sel {
        key = {
            hdr.h.kind: exact;
            hdr.h.sel: selector;
        }
        actions = { set_out; set_out_port; NoAction; }
        implementation = ecmp;
        support_timeout = true;
    }
    table t_selm {
        key = {
            hdr.h.kind: exact;
            hdr.h.sel: selector;
        }
        actions = { set_out; NoAction; }
        implementation = ecmp_m;
    }
    table t_prof {
        key = { hdr.h.kind: exact; }
        actions = { set_out; NoAction; }
        implementation = prof;
    }
    table t_plain {
        key = { hdr.h.kind: exact; }
        actions = { set_out; NoAction; }
        default_action = NoAction();
    }

    apply {
        standard_metadata.egress_spec = 1;
        t_idle.apply();
        t_sel.apply();
        t_selm.apply();
        t_prof.apply();
        t_plain.apply();
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
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
