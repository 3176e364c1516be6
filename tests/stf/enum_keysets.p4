// enum_keysets.p4 -- masks and ranges on keys of a serializable enum type.
//
// Covers: `const entries` of a table with a ternary key of type `enum bit<16>`
// using `member &&& mask` (the mask a plain number or another member), `_`; a
// range key of the enum type with members as bounds; a parser select on an
// enum field with `&&&` and `..`. (`v &&& m` and `lo .. hi` take the type of
// their left side, as in p4c.)
// The match is on the bits of the values: a value that is no member of the
// enum (0x0207) matches the entries whose masked bits agree.
#include <core.p4>
#include <v1model.p4>

enum bit<16> Kind {
    IPV4 = 0x0800,
    ARP  = 0x0806,
    VLAN = 0x8100,
    LOW  = 0x0200,
    HIGH = 0x02ff
}

header h_t {
    Kind   kind;
    Kind   kind2;
    bit<8> tag;
    bit<8> out;
}

struct headers_t {
    h_t h;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.kind2) {
            Kind.IPV4 &&& 0xff00: tag_08;   // 0x08xx
            Kind.LOW .. Kind.HIGH: tag_02;  // 0x0200 .. 0x02ff
            default: accept;
        }
    }
    state tag_08 {
        hdr.h.tag = 0x08;
        transition accept;
    }
    state tag_02 {
        hdr.h.tag = 0x02;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action set_out(bit<8> v) {
        hdr.h.out = v;
    }

    table by_mask {
        key = { hdr.h.kind: ternary; }
        actions = { set_out; }
        const entries = {
            Kind.IPV4 &&& 0xffff: set_out(1);       // exactly 0x0800
            Kind.ARP &&& Kind.VLAN: set_out(2);     // mask 0x8100: 0x0000 .. with bit 8 set
            Kind.VLAN &&& 0xff00: set_out(3);       // 0x81xx
            _: set_out(9);
        }
        default_action = set_out(0);
    }

    table by_range {
        key = { hdr.h.kind: range; }
        actions = { set_out; }
        const entries = {
            Kind.LOW .. Kind.HIGH: set_out(0x20);   // 0x0200 .. 0x02ff
            Kind.IPV4 .. Kind.ARP: set_out(0x21);   // 0x0800 .. 0x0806
        }
        default_action = set_out(0x2f);
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.h.tag == 0) {
            by_mask.apply();
        } else {
            by_range.apply();
        }
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
