// header_validity.p4 -- isValid/setValid/setInvalid, emit of invalid headers,
// header assignment, structs.
//
// Covers: a header extracted conditionally; setInvalid() removes a parsed header
// from the output; setValid() inserts a header that was not in the packet;
// emit() skips invalid headers; assigning a valid header copies its contents
// and validity, assigning an invalid header makes the destination invalid;
// isValid() cast to bit<1>; a struct inside the metadata initialised with a
// struct expression {..} and copied into a local struct variable.
// Header a.tag selects the case; a.flags reports b/c/c2 validity at the end
// of ingress (MSB first, low 5 bits zero).
#include <core.p4>
#include <v1model.p4>

header a_t {
    bit<8> tag;
    bit<8> flags;
}

header b_t {
    bit<16> v;
}

header c_t {
    bit<8> v;
}

struct pair_t {
    bit<8> first;
    bit<8> second;
}

struct headers_t {
    a_t a;
    b_t b;
    c_t c;
    c_t c2;
}

struct metadata_t {
    pair_t p;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.a);
        transition select(hdr.a.tag) {
            1: parse_b;
            default: accept;
        }
    }
    state parse_b {
        pkt.extract(hdr.b);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        meta.p = { hdr.a.tag, 8w0x0F };
        pair_t q = meta.p;
        if (hdr.a.tag == 1) {
            hdr.b.setInvalid();
        } else if (hdr.a.tag == 2) {
            hdr.b.setValid();
            hdr.b.v = 16w0xBEEF;
            hdr.c.setValid();
            hdr.c.v = q.second;
        } else if (hdr.a.tag == 3) {
            hdr.c.setValid();
            hdr.c.v = 8w0x30 | q.first;
            hdr.c2 = hdr.c;
        } else if (hdr.a.tag == 4) {
            hdr.c2.setValid();
            hdr.c2.v = 8w0x44;
            hdr.c2 = hdr.c;
        }
        hdr.a.flags = ((bit<1>)hdr.b.isValid()) ++ ((bit<1>)hdr.c.isValid())
                      ++ ((bit<1>)hdr.c2.isValid()) ++ 5w0;
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
        pkt.emit(hdr.a);
        pkt.emit(hdr.b);
        pkt.emit(hdr.c);
        pkt.emit(hdr.c2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
