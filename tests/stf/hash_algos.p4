// hash_algos.p4 -- the v1model hash() extern with several algorithms.
//
// Covers: hash(result, algo, base, {fields}, max) with HashAlgorithm.crc16,
// crc32, identity and csum16; result = base + (H % max) truncated to the result
// width, where H is computed over the concatenated bytes of the data fields.
// Expected values (see the .stf) were computed with Python:
//   crc16    = CRC-16/ARC (poly 0x8005 reflected, init 0, xorout 0), which is
//              what BMv2's "crc16" computes (check value 0xBB3D for "123456789")
//   crc32    = zlib.crc32 (CRC-32/ISO-HDLC)
//   identity = the data bytes read as a big-endian number (first 8 bytes)
//   csum16   = RFC 1071 ones'-complement checksum (complemented sum)
// max = 2^16 (or 2^32 as a bit<64> constant) leaves H unchanged; the last call
// uses base 100 and max 1000.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> a;
    bit<32> b;
    bit<8>  c;
    bit<8>  pad;
    bit<16> r_crc16;
    bit<32> r_crc32;
    bit<32> r_ident;
    bit<16> r_csum;
    bit<16> r_mod;
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
    apply {
        hash(hdr.h.r_crc16, HashAlgorithm.crc16, 16w0,
             { hdr.h.a, hdr.h.b }, 32w65536);
        hash(hdr.h.r_crc32, HashAlgorithm.crc32, 32w0,
             { hdr.h.a, hdr.h.b }, 64w4294967296);
        hash(hdr.h.r_ident, HashAlgorithm.identity, 32w0,
             { hdr.h.c, hdr.h.a }, 64w4294967296);
        hash(hdr.h.r_csum, HashAlgorithm.csum16, 16w0,
             { hdr.h.a, hdr.h.b }, 32w65536);
        hash(hdr.h.r_mod, HashAlgorithm.crc16, 16w100,
             { hdr.h.a, hdr.h.b }, 32w1000);
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
