// stack_ops.p4 -- header stack operations in a control.
//
// Covers: push_front(1) followed by setValid() of the new s[0]; pop_front(1);
// push_front(3) on a 4-element stack holding 2 elements (elements shifted past
// the end are lost, s[0..2] become invalid); writing and reading an element
// through a run-time index s[idx]; the compile-time stack size; emit() of a
// stack emits its valid elements in index order.
// The parser always extracts exactly two items; ctl.op selects the operation.
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> op;
    bit<8> idx;
    bit<8> val;
    bit<8> size;
}

header item_t {
    bit<8> v;
}

struct headers_t {
    ctl_t     ctl;
    item_t[4] s;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ctl);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.ctl.size = (bit<8>)hdr.s.size;
        if (hdr.ctl.op == 1) {
            hdr.s.push_front(1);
            hdr.s[0].setValid();
            hdr.s[0].v = hdr.ctl.val;
        } else if (hdr.ctl.op == 2) {
            hdr.s.pop_front(1);
        } else if (hdr.ctl.op == 3) {
            hdr.s[hdr.ctl.idx].v = hdr.ctl.val;
        } else if (hdr.ctl.op == 4) {
            hdr.ctl.val = hdr.s[hdr.ctl.idx].v;
        } else if (hdr.ctl.op == 5) {
            hdr.s.push_front(3);
        }
        standard_metadata.egress_spec = 1;
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
        pkt.emit(hdr.ctl);
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
