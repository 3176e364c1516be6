// stack_parse.p4 -- parsing a header stack with extract(s.next) in a loop.
//
// Covers: a parser loop over a state that extracts hdr.s.next and selects on
// hdr.s.last.bos; hdr.s.lastIndex and hdr.s.last.val in the parser; constant
// indices s[0..2] and isValid() in the control; error.StackOutOfBounds when a
// fourth element is extracted into a 3-element stack, and error.PacketTooShort
// when an element is cut short. In both error cases BMv2 still runs ingress,
// with the elements extracted so far valid; the bytes not extracted stay in the
// packet as payload.
// An info header is added in front of the stack: count of valid elements,
// lastIndex and last.val recorded in the final parser state (0xFF when the
// parser ended with an error), err (0 none, 1 StackOutOfBounds,
// 2 PacketTooShort, 3 other) and the sum of the valid elements' val fields.
#include <core.p4>
#include <v1model.p4>

header elem_t {
    bit<8> bos;
    bit<8> val;
}

header info_t {
    bit<8> count;
    bit<8> last_idx;
    bit<8> last_val;
    bit<8> err;
    bit<8> sum;
}

struct headers_t {
    info_t    info;
    elem_t[3] s;
}

struct metadata_t {
    bit<8> last_idx;
    bit<8> last_val;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition parse_elem;
    }
    state parse_elem {
        pkt.extract(hdr.s.next);
        transition select(hdr.s.last.bos) {
            0: parse_elem;
            default: done;
        }
    }
    state done {
        meta.last_idx = (bit<8>)hdr.s.lastIndex;
        meta.last_val = hdr.s.last.val;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.info.setValid();
        hdr.info.count = 0;
        hdr.info.sum = 0;
        if (hdr.s[0].isValid()) {
            hdr.info.count = hdr.info.count + 1;
            hdr.info.sum = hdr.info.sum + hdr.s[0].val;
        }
        if (hdr.s[1].isValid()) {
            hdr.info.count = hdr.info.count + 1;
            hdr.info.sum = hdr.info.sum + hdr.s[1].val;
        }
        if (hdr.s[2].isValid()) {
            hdr.info.count = hdr.info.count + 1;
            hdr.info.sum = hdr.info.sum + hdr.s[2].val;
        }
        if (standard_metadata.parser_error == error.NoError) {
            hdr.info.err = 0;
            hdr.info.last_idx = meta.last_idx;
            hdr.info.last_val = meta.last_val;
        } else {
            hdr.info.last_idx = 0xFF;
            hdr.info.last_val = 0xFF;
            if (standard_metadata.parser_error == error.StackOutOfBounds) {
                hdr.info.err = 1;
            } else if (standard_metadata.parser_error == error.PacketTooShort) {
                hdr.info.err = 2;
            } else {
                hdr.info.err = 3;
            }
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
        pkt.emit(hdr.info);
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
