// table_const_entries.p4 -- tables with `const entries`, range and optional
// keys, `const default_action`.
//
// Covers: const entries on an exact key with a const default_action; const
// entries on a ternary + exact key (masks with &&&, _ as a wildcard), where
// entries are tried in program order (an earlier entry wins over a later one
// that also matches); a range key (lo .. hi, bounds inclusive, overlapping
// ranges resolved by program order, a one-value range); an optional key (a
// value or _) combined with an exact key. No STF `add` is needed.
// Each table writes its own result byte r1..r4 (0x?F means "default action").
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> r1;
    bit<8> r2;
    bit<8> r3;
    bit<8> r4;
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
    action w1(bit<8> v) { hdr.h.r1 = v; }
    action w2(bit<8> v) { hdr.h.r2 = v; }
    action w3(bit<8> v) { hdr.h.r3 = v; }
    action w4(bit<8> v) { hdr.h.r4 = v; }

    table tbl_cexact {
        key = { hdr.h.a: exact; }
        actions = { w1; NoAction; }
        const entries = {
            8w0x01: w1(8w0x11);
            8w0x02: w1(8w0x12);
        }
        const default_action = w1(8w0x1F);
    }

    table tbl_cternary {
        key = {
            hdr.h.a: ternary;
            hdr.h.b: exact;
        }
        actions = { w2; }
        const entries = {
            (8w0x10 &&& 8w0xF0, 8w0x01): w2(8w0x21);
            (8w0x12, 8w0x01): w2(8w0x22);
            (_, 8w0x01): w2(8w0x23);
            (8w0x12, 8w0x02): w2(8w0x24);
        }
        default_action = w2(8w0x2F);
    }

    table tbl_crange {
        key = { hdr.h.c: range; }
        actions = { w3; }
        const entries = {
            8w0x00 .. 8w0x0F: w3(8w0x31);
            8w0x05 .. 8w0x20: w3(8w0x32);
            8w0x30 .. 8w0x30: w3(8w0x33);
        }
        default_action = w3(8w0x3F);
    }

    table tbl_coptional {
        key = {
            hdr.h.a: optional;
            hdr.h.c: exact;
        }
        actions = { w4; }
        const entries = {
            (8w0x01, 8w0x05): w4(8w0x41);
            (_, 8w0x05): w4(8w0x42);
        }
        default_action = w4(8w0x4F);
    }

    apply {
        tbl_cexact.apply();
        tbl_cternary.apply();
        tbl_crange.apply();
        tbl_coptional.apply();
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
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
